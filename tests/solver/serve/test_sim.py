"""The continuous-batching simulation: its percentiles, the latency knee of a rate sweep,
and physical laws (higher rate never lowers latency, more bandwidth or HBM never lowers
goodput, P99 >= P90 >= P50)."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.serve.inference import Engine, ServeConfig, estimate, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.compiler.serve_trace import Request
from gclc.solver.serve.plan import serve_entity
from gclc.solver.serve.demand import demand_of
from gclc.solver.serve.bound import loaded_step, tpot_replicas
from gclc.solver.serve.sim import Pool, simulate
from gclc.testing.profiles import scaled_examples

ROOT = Path(__file__).resolve().parents[3]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
GRAPH, PARTITION = placement(ENTITY)
SHAPE = ModelShape.from_entity(ENTITY.get("model"))
DEMAND = demand_of(ENTITY, 160)
CONFIG = ServeConfig(8, 256, "fp8", ep=2, pp=1)
SLO = {"ttft.p99": 2.0, "tpot.p90": 0.05}
PROMPT = sum(q.prompt for q in DEMAND.requests) / len(DEMAND.requests)   # the sample's means
OUTPUT = sum(q.output for q in DEMAND.requests) / len(DEMAND.requests)


def pool(partition=PARTITION, count=1, hbm_share=0.9, batch=256):
    r = replica(SHAPE, attrs.evolve(CONFIG, batch=batch), partition, Engine(block=64))
    return Pool(r, count, batch, r.kv_capacity_tokens(hbm_share * r.hbm))


def capacity(batch=256):
    """Requests per second one replica carries at full batch (the analytic bound)."""
    p = pool(batch=batch)
    return estimate(p.replica, PROMPT, OUTPUT).requests_per_s


def run(rate, partition=PARTITION, hbm_share=0.9, batch=256):
    return simulate(DEMAND.at_rate(rate).requests, pool(partition, hbm_share=hbm_share, batch=batch), slo=SLO)


def scaled(partition, hbm_bw=1.0, hbm_cap=1.0, link=1.0):
    chip = partition.node.accelerator
    node = attrs.evolve(partition.node, accelerator=attrs.evolve(
        chip, hbm_bandwidth=chip.hbm_bandwidth * hbm_bw, hbm_capacity=chip.hbm_capacity * hbm_cap))
    tiers = tuple(attrs.evolve(t, bandwidth=t.bandwidth * link) for t in partition.tiers)
    return attrs.evolve(partition, node=node, tiers=tiers)


def test_every_request_is_served_once_and_latencies_add_up():
    out = run(0.5 * capacity())
    assert len(out.ttft) == len(DEMAND.requests) - len(DEMAND.requests) // 10  # after the warm-up tenth
    assert all(t > 0 for t in out.ttft) and all(e >= t for e, t in zip(out.e2e, out.ttft))
    assert out.percentile("e2e", 50) >= out.percentile("ttft", 50)


def test_the_analytic_capacity_bounds_the_simulation():
    bound = capacity()
    out = run(2 * bound)  # offered twice what it can carry
    assert out.tokens_per_s / OUTPUT <= bound * 1.05


def test_a_rate_sweep_shows_the_latency_knee():
    bound = capacity(batch=32)
    light, busy, over = (run(f * bound, batch=32) for f in (0.3, 0.7, 1.5))
    assert light.percentile("ttft", 99) <= busy.percentile("ttft", 99) * 1.05
    # past the capacity the batch is full and the queue grows: the tail explodes, not creeps
    assert over.percentile("ttft", 99) > 5 * busy.percentile("ttft", 99)
    assert over.tokens_per_s / DEMAND.output <= bound * 1.05  # and no more is served than it can carry


@settings(max_examples=scaled_examples(5), deadline=None)
@given(st.floats(0.1, 1.2), st.floats(1.3, 2.0))
def test_a_higher_rate_never_lowers_latency(fraction, factor):
    """The same requests arriving faster: the mean and median wait and finish no sooner. (A
    single request's fate is not monotone in the rate: the far tail of E2E is one long answer
    that meets different neighbours, so the law is on the central statistics; 3 % allows for
    where a finite sample's arrivals fall against iteration boundaries.)"""
    bound = capacity()
    low, high = run(fraction * bound), run(fraction * factor * bound)
    for metric, p in (("ttft", -1), ("ttft", 50), ("e2e", -1), ("e2e", 50), ("tpot", -1)):
        assert high.percentile(metric, p) >= low.percentile(metric, p) * 0.97, (metric, p)


@settings(max_examples=scaled_examples(5), deadline=None)
@given(st.floats(0.2, 1.5))
def test_percentiles_are_ordered(fraction):
    out = run(fraction * capacity())
    for metric in ("ttft", "tpot", "e2e"):
        assert out.percentile(metric, 50) <= out.percentile(metric, 90) <= out.percentile(metric, 99)


@settings(max_examples=scaled_examples(6), deadline=None)
@given(st.floats(0.3, 1.5), st.floats(1.0, 2.0), st.sampled_from(["hbm_bw", "hbm_cap", "link"]))
def test_more_bandwidth_or_hbm_never_lowers_goodput(fraction, factor, what):
    rate = fraction * capacity()
    better = scaled(PARTITION, **{what: factor})
    assert run(rate, better).goodput >= run(rate).goodput * 0.98


def test_a_tight_cache_preempts_and_recomputes():
    requests = tuple(Request(0.01 * i, 4000, 800) for i in range(40))
    tight = attrs.evolve(pool(), kv_tokens=40_000.0)
    out = simulate(requests, tight, slo=SLO)
    assert out.preemptions > 0 and all(e < float("inf") for e in out.e2e)


def test_a_prompt_that_can_never_fit_is_never_served():
    requests = (Request(0.0, 100, 10), Request(0.1, 50_000, 10))
    out = simulate(requests, attrs.evolve(pool(), kv_tokens=10_000.0))
    assert out.percentile("ttft", 100) == float("inf") and out.percentile("ttft", 50) < 1


def test_disaggregated_pools_hand_the_cache_over():
    prefill = Pool(replica(SHAPE, ServeConfig(8, 1, "fp8", ep=2), PARTITION), 1, 1, 0.0)
    requests = demand_of(ENTITY, 60).at_rate(5).requests
    slow = simulate(requests, pool(), prefill, lambda prompt: 0.5)
    fast = simulate(requests, pool(), prefill, lambda prompt: 0.0)
    assert slow.percentile("ttft", 50) == pytest.approx(fast.percentile("ttft", 50))  # TTFT ends at the prefill
    assert slow.percentile("e2e", 50) > fast.percentile("e2e", 50) + 0.4              # the transfer delays the rest


@pytest.mark.parametrize("steps", [1, 4])
def test_a_prefilled_sequence_reaching_an_idle_decode_replica_is_decoded(steps):
    """Regression: an idle decode replica admitted a handed-over sequence but ran no
    iteration for it (nothing was decoding before the admission, and it brings no prompt
    chunk), so it waited for the next hand-over, and the last ones were never served. Alone,
    a request decodes at once: its end-to-end latency is its TTFT, the transfer and its
    decode steps on the otherwise idle replica."""
    r = replica(SHAPE, CONFIG, PARTITION, Engine(block=64, scheduler_steps=steps))
    prefill = Pool(replica(SHAPE, attrs.evolve(CONFIG, batch=1), PARTITION), 1, 1, 0.0)
    out = simulate((Request(0.0, 1000, 50),), Pool(r, 1, 256, r.kv_capacity_tokens(0.9 * r.hbm)), prefill,
                   lambda prompt: 0.01)
    ttft, e2e = out.percentile("ttft", 100), out.percentile("e2e", 100)
    assert 0 < ttft < 1     # served (a request never served counts as infinitely late)
    least = sum(r.iteration(1, 1000 + m, layer_mean=True) for m in range(1, 50))  # 49 steps, one sequence
    assert ttft + 0.01 + least * (1 - 1e-9) <= e2e <= ttft + 0.01 + least * (1 + 1e-9)


def test_multi_step_scheduling_delays_first_tokens_not_decoding():
    """vLLM's multi-step scheduling (engine.scheduler_steps): prompts join only every k-th
    iteration, so a prompt arriving into a decoding replica waits for the round to end.
    By hand: one sequence decodes alone; a second arrives just after the first's prompt; with
    k = 4 its prompt starts only after the round's remaining decode-only iterations."""
    def first_tokens(steps):
        r = replica(SHAPE, CONFIG, PARTITION, Engine(block=64, scheduler_steps=steps))
        p = Pool(r, 1, 256, r.kv_capacity_tokens(0.9 * r.hbm))
        step = r.iteration(1, 1000)
        requests = (Request(0.0, 1000, 200), Request(1e-9, 1000, 200))
        return simulate(requests, p), step
    one, _ = first_tokens(1)
    four, step = first_tokens(4)
    assert max(four.ttft) > max(one.ttft) + 2 * step      # the second prompt waited for the round
    assert min(four.ttft) == min(one.ttft)                # the first found the replica idle
    assert sorted(four.tpot)[0] <= sorted(one.tpot)[-1] * 1.5  # decoding itself is not slowed


@settings(max_examples=scaled_examples(5), deadline=None)
@given(st.integers(1, 12))
def test_longer_scheduling_rounds_never_lower_time_to_first_token_at_load(steps):
    base = replica(SHAPE, CONFIG, PARTITION, Engine(block=64))
    longer = replica(SHAPE, CONFIG, PARTITION, Engine(block=64, scheduler_steps=steps + 1))
    requests = DEMAND.at_rate(0.5 * capacity()).requests[:80]
    a = simulate(requests, Pool(base, 1, 256, base.kv_capacity_tokens(0.9 * base.hbm)))
    b = simulate(requests, Pool(longer, 1, 256, longer.kv_capacity_tokens(0.9 * longer.hbm)))
    assert b.percentile("ttft", 50) >= a.percentile("ttft", 50)


@settings(max_examples=scaled_examples(4), deadline=None)
@given(st.floats(0.05, 0.95))
def test_the_tpot_floor_is_below_the_simulated_tpot(fraction):
    """solver/serve/bound.py: the decode-only fixed point of Little's law never exceeds the
    simulated median or mean TPOT (the planner skips replica counts it rules out)."""
    p = pool()
    rate = fraction * capacity()
    out = run(rate)
    floor = loaded_step(p.replica, rate, PROMPT, OUTPUT) / p.replica.engine.tokens_per_step
    assert floor <= out.percentile("tpot", 50) and floor <= out.percentile("tpot", -1)


def test_the_tpot_floor_by_hand_at_low_load():
    """A rate so low that under one sequence decodes on average: the floor is the lone step."""
    p = pool()
    step = p.replica.iteration(1, PROMPT + OUTPUT / 2)
    assert loaded_step(p.replica, 1e-6, PROMPT, OUTPUT) == step
    assert tpot_replicas(p.replica, 1e-6, 1, 4, step / p.replica.engine.tokens_per_step, PROMPT, OUTPUT) == 1
    assert tpot_replicas(p.replica, 1e-6, 1, 4, 0.5 * step, PROMPT, OUTPUT) == 5   # none can: most + 1
