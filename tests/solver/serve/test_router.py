"""The router above the replicas (`router = least_requests | round_robin | random |
power_of_two`, solver/serve/sim.py): how a request picks its replica changes the simulated
latencies, and in the right direction. Laws: one replica makes every router the same; on two,
the lighter of two drawn is the lighter of both; a burst of identical requests is spread
evenly by counting or taking turns, and random picks never finish it sooner."""

from pathlib import Path

import attrs
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.serve_trace import Request
from gclc.model.job import placement
from gclc.model.serve.inference import Engine, ServeConfig, replica
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.solver.serve.sim import ROUTERS, Pool, simulate
from gclc.views.serve import serve_json, serve_text

ROOT = Path(__file__).resolve().parents[3]
RUNS = max(5, settings.default.max_examples // 4)     # 15 in CI; the deep profile runs 500
# Llama 3.1 8B on 2 DGX H100 (tests/data/serve_cost.gcl), its serve job replaced below
CLUSTER = (ROOT / "tests" / "data" / "serve_cost.gcl").read_text().split("serve chat")[0]


def job(router: str) -> str:
    return CLUSTER + f"""
serve chat {{
  model = Llama8B  on = Box  precision = fp8  gpus = 8
  prompt = uniform(low = 500, high = 1500)  output = exponential(mean = 200)
  rate = 40 req/s  requests = 400  engine = vllm_0_6
  parallelism {{ tp = 1 }}
  {router}
}}
"""


def entity(router: str = ""):
    result = check_text(job(router), str(ROOT / "tests" / "data" / "serve_router.gcl"))
    assert result.design is not None, result.diagnostics
    return serve_entity(result.design)


_, PARTITION = placement(entity())
SHAPE = ModelShape.from_entity(entity().get("model"))
REPLICA = replica(SHAPE, ServeConfig(1, 64, "fp8"), PARTITION, Engine())


def pool(count: int, router: str) -> Pool:
    return Pool(REPLICA, count, 64, REPLICA.kv_capacity_tokens(0.9 * REPLICA.hbm), router)


def latencies(out):
    return out.ttft, out.tpot, out.e2e


traces = st.lists(st.tuples(st.floats(0, 2), st.integers(1, 3000), st.integers(1, 300)), min_size=1, max_size=40)


def requests_of(rows):
    return tuple(Request(a, p, o) for a, p, o in sorted(rows))


@settings(max_examples=RUNS, deadline=None)
@given(traces, st.sampled_from(ROUTERS))
def test_one_replica_makes_every_router_the_same(rows, router):
    requests = requests_of(rows)
    assert latencies(simulate(requests, pool(1, router))) == latencies(simulate(requests, pool(1, "least_requests")))


@settings(max_examples=RUNS, deadline=None)
@given(traces)
def test_the_lighter_of_two_drawn_from_two_is_the_lighter_of_both(rows):
    requests = requests_of(rows)
    assert latencies(simulate(requests, pool(2, "power_of_two"))) == latencies(simulate(requests, pool(2, "least_requests")))


@settings(max_examples=RUNS, deadline=None)
@given(st.integers(2, 6), st.integers(1, 6), st.integers(16, 2000), st.integers(1, 200))
def test_a_burst_of_identical_requests_is_served_no_sooner_by_random_picks(replicas, each, prompt, output):
    """replicas x each requests at once: counting and taking turns give every replica `each`;
    random picks give some replica at least that many, and its last request waits the longest."""
    burst = tuple(Request(0.0, prompt, output) for _ in range(replicas * each))
    even = simulate(burst, pool(replicas, "round_robin"), warmup_s=-1.0)
    assert latencies(even) == latencies(simulate(burst, pool(replicas, "least_requests"), warmup_s=-1.0))
    for router in ("random", "power_of_two"):
        picked = simulate(burst, pool(replicas, router), warmup_s=-1.0)
        assert picked.ttft[-1] >= even.ttft[-1] * (1 - 1e-9) and picked.e2e[-1] >= even.e2e[-1] * (1 - 1e-9)


def test_the_plan_states_its_router_and_random_picks_queue_longer():
    """The same eight replicas under the same Poisson demand: random picks leave some replica
    a longer queue now and then, so the TTFT's tail grows (the plan's pools are pinned alike)."""
    default, picked = plan_serve(entity()), plan_serve(entity("router = random"))
    assert (default.decode.count, default.decode.replica.config) == (picked.decode.count, picked.decode.replica.config)
    assert serve_json(default)["router"] == "least_requests" and serve_json(picked)["router"] == "random"
    assert "requests routed at random" in serve_text(picked) and "routed" not in serve_text(default)
    assert picked.outcome.percentile("ttft", 99) > default.outcome.percentile("ttft", 99)


def test_an_unknown_router_is_a_located_error():
    text = job("router = nearest")
    result = check_text(text, "serve_router.gcl")
    [d] = [d for d in result.diagnostics if d.severity.name == "ERROR"]
    line = text.splitlines().index("  router = nearest") + 1
    assert "`router`" in d.summary and (d.subject.line, d.subject.column) == (line, 12)
    assert any("round_robin" in note for note in d.notes)   # how to fix it: the routers there are
