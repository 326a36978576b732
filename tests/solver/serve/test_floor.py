"""The screen's floors (solver/serve/floor.py) never exceed what the simulation measures: no
request's TTFT, TPOT or end-to-end latency beats its floor, on dense, sliding-window and MoE
(MLA) replicas, pipelined or not, with speculative decoding and a shared prefix, aggregated
or split into prefill and decode pools; so a configuration the screen discards breaks its SLO
in every simulation, and the search (which confirms only what the screen admits) loses no
plan by it."""

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import Engine, ServeConfig, kv_transfer_time, replica
from gclc.model.job import placement, serve_entity
from gclc.model.shape import ModelShape
from gclc.solver.serve.floor import Floors, first_token_floor, step_floor
from gclc.solver.serve.outcome import first_measured, slo_percentile
from gclc.solver.serve.sim import Pool, simulate

DATA = Path(__file__).resolve().parents[2] / "data"
RUNS = max(10, settings.default.max_examples // 4)
SERVE = "\nserve floors {{\n  model = {model}\n  on = {on}\n  prompt = 1000\n  output = 100\n}}\n"


def _design(file: str, model: str, on: str, settings_: dict | None = None):
    text = (DATA / file).read_text() + SERVE.format(model=model, on=on)
    result = check_text(text, str(DATA / file), settings_)
    assert result.design is not None, result.diagnostics
    entity = serve_entity(result.design, "floors")
    return ModelShape.from_entity(entity.get("model")), placement(entity)[1]


MODELS = {"dense": _design("serve_cost.gcl", "Llama8B", "Box"),
          "window": _design("dense_variants.gcl", "Mistral7B", "Pod"),
          "moe": _design("moe.gcl", "SmallV3", "Pod", {"nodes": "4"})}
SLO = {f"{m}{which}": 0.0 for m in ("ttft", "tpot", "e2e") for which in ("", ".p50", ".p90", ".p99")}


def pool(r, count: int) -> Pool:
    return Pool(r, count, r.config.batch, r.kv_capacity_tokens(0.9 * r.hbm))


def below(floors, measured) -> None:
    """Each sorted floor is at most the simulated value of the same rank (what every request
    at least its own floor implies, and what percentiles and means need)."""
    assert len(floors) == len(measured)
    for floor, value in zip(sorted(floors), measured):
        assert value >= floor * (1 - 1e-9), (floor, value)


@settings(max_examples=RUNS, deadline=None)
@given(st.sampled_from(sorted(MODELS)), st.sampled_from([1, 2, 4]), st.sampled_from([1, 4]), st.sampled_from([1, 2]),
       st.sampled_from([1, 4, 32]), st.integers(1, 3), st.booleans(), st.sampled_from([0, 2]),
       st.sampled_from([0.0, 0.5]),
       st.lists(st.tuples(st.floats(0.0, 0.05), st.integers(1, 6000), st.integers(1, 300)), min_size=3, max_size=40),
       st.sampled_from([1, 1, 4, 1000]))
def test_no_simulated_request_beats_its_floors(model, tp, ep, pp, batch, count, split, draft, share, drawn, steps):
    """Also under multi-step scheduling (`steps` decode steps per round): the wait for the
    next round only adds to a request's latencies, so the floors, which leave it out (a
    request that finds its replica idle or with nothing decoding does not wait), still hold."""
    shape, partition = MODELS[model]
    ep = ep if shape.is_moe else 1     # expert parallelism splits the routed experts (and the attention groups)
    engine = Engine(draft=draft, acceptance=0.7 if draft else 0.0, prefix_share=share, scheduler_steps=steps)
    cfg = ServeConfig(tp, batch, "fp8", ep=ep, pp=pp)
    r = replica(shape, cfg, partition, engine)
    if r.kv_capacity_tokens(0.9 * r.hbm) <= 0:
        return  # the weights alone fill the HBM: nothing to serve
    arrivals, requests = 0.0, []
    for gap, prompt, output in drawn:
        arrivals += gap
        requests.append(Request(arrivals, prompt, output))
    requests = tuple(requests)
    measured = requests[first_measured(requests, None):]
    if split:
        pre = replica(shape, ServeConfig(tp, 1, "fp8", ep=ep, pp=pp), partition, engine)
        out = simulate(requests, pool(r, count), pool(pre, 1), lambda p: kv_transfer_time(pre, r, p))
        first, roles = pre, {"prefill": pre, "decode": r}
    else:
        out = simulate(requests, pool(r, count))
        first, roles = r, {"both": r}
    below([first_token_floor(first, q.prompt) for q in measured], out.ttft)
    below([step_floor(r, q.prompt) if q.output > 1 else 0.0 for q in measured], out.tpot)
    if not split:
        below([first_token_floor(r, q.prompt) + (q.output - 1) * step_floor(r, q.prompt) for q in measured], out.e2e)
    # the screen's percentiles and means of them: never above the simulated ones
    floors = Floors(requests, None, SLO)
    for role, replica_ in roles.items():
        for key, floor in floors.broken(replica_, role).items():
            assert out.percentile(*slo_percentile(key)) >= floor * (1 - 1e-9), (key, role)


def test_a_percentiles_floor_reads_the_prompt_of_its_rank():
    """Ten measured requests (a warm-up of 0 s), prompts 100 ... 1,000 tokens: the P90 TTFT
    floor is the floor of the 9th prompt (nearest rank), the mean's lies between the least
    and the greatest prompt's, and a TPOT floor skips single-token requests."""
    shape, partition = MODELS["dense"]
    r = replica(shape, ServeConfig(1, 8, "fp8"), partition)
    requests = tuple(Request(0.1 * i, 100 * (i + 1), 1 if i == 9 else 50) for i in range(10))
    broken = Floors(requests, 0.0, {"ttft.p90": 0.0, "ttft": 0.0, "tpot.p99": 0.0}).broken(r, "both")
    assert broken["ttft.p90"] == first_token_floor(r, 900)
    assert first_token_floor(r, 100) < broken["ttft"] < first_token_floor(r, 1000)
    assert broken["tpot.p99"] == step_floor(r, 900)   # the 1,000-token prompt makes one token: no TPOT


@pytest.mark.parametrize("role, metrics",
                         [("prefill", {"ttft"}), ("decode", {"tpot"}), ("both", {"ttft", "tpot", "e2e"})])
def test_each_role_is_held_to_its_own_latencies(role, metrics):
    shape, partition = MODELS["dense"]
    r = replica(shape, ServeConfig(1, 8, "fp8"), partition)
    requests = tuple(Request(0.1 * i, 2000, 100) for i in range(10))
    broken = Floors(requests, 0.0, {"ttft.p50": 0.0, "tpot.p50": 0.0, "e2e.p50": 0.0}).broken(r, role)
    assert {k.split(".")[0] for k in broken} == metrics


@pytest.mark.parametrize("steps", [1, 1000])
def test_a_request_finding_its_replica_idle_meets_its_floor_whatever_the_scheduling_rounds(steps):
    """Why the TTFT floor leaves out the wait for the next multi-step round: a request that
    finds its replica idle (or with nothing decoding) starts at once, and its TTFT is the
    floor exactly, under 1000-step rounds as under every-step scheduling; a floor with any
    of the wait added would discard a configuration that can meet the SLO."""
    shape, partition = MODELS["dense"]
    r = replica(shape, ServeConfig(1, 8, "fp8"), partition, Engine(scheduler_steps=steps))
    requests = (Request(0.0, 3000, 400), Request(60.0, 3000, 400))   # the second arrives long after the first left
    out = simulate(requests, pool(r, 1))
    assert max(out.ttft) == pytest.approx(first_token_floor(r, 3000), rel=1e-12)
