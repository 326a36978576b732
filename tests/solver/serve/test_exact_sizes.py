"""Exact sizes on serve jobs: `gpus = N` is the count a plan uses (every search honours it),
`parallelism { replicas }` pins the serving pool's count, pinned widths and counts that cannot
make up the GPUs are located errors, and a plan prints where its replicas sit."""

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views.serve import layout, serve_json, serve_text

from .test_saturated_laws import CLUSTER, check_optimal, planned
from .test_search_laws import chosen, job as law_job
from gclc.testing.profiles import scaled_examples

ROOT = Path(__file__).resolve().parents[3]
PATH = str(ROOT / "tests" / "data" / "serve_exact.gcl")


def job(gpus: int, extra: str = "", demand: str = "", nodes: int = 2, slo: str = "tpot <= 60 ms") -> str:
    return CLUSTER.replace("2 x DGX_H100", f"{nodes} x DGX_H100") + f"""
serve chat {{
  model = Llama8B
  on = Box
  precision = fp8
  gpus = {gpus}
  {demand or "prompt = 1000  output = 200"}
  {extra}
  slo {{ {slo} }}
}}
"""


def plan_of(text: str):
    result = check_text(text, PATH)
    assert result.design is not None, [str(d) for d in result.diagnostics]
    return plan_serve(serve_entity(result.design))


def errors(text: str) -> list[str]:
    return [d.summary for d in check_text(text, PATH).diagnostics if d.is_error]


@settings(max_examples=scaled_examples(12), deadline=None)
@given(st.integers(1, 16), st.sampled_from(["auto", "aggregated", "disaggregated"]), st.booleans(),
       st.integers(8, 60))
def test_an_exact_gpu_count_is_the_brute_force_optimum_on_exactly_those_gpus(gpus, mode, energy, tpot_ms):
    text = job(gpus, f"engine {{ mode = {mode}  max_batch = 64 }}" + ("\n  minimize = energy" if energy else ""),
               slo=f"tpot <= {tpot_ms} ms")
    plan, search = planned(text)
    assert search.limits.exact and search.limits.gpus == gpus
    check_optimal(plan, search)
    if plan.decode is not None:
        assert plan.used_gpus == gpus


def test_an_odd_gpu_count_is_served_by_replicas_that_make_it_up():
    """7 GPUs: seven 1-GPU replicas, or a split of them; never 4 or 6 of them."""
    plan = plan_of(job(7))
    assert plan.used_gpus == 7
    assert "7 of 7 GPUs" in serve_text(plan)


def test_pinned_replicas_set_the_count_with_and_without_a_demand():
    saturated = plan_of(job(8, "parallelism { tp = 2  replicas = 4 }"))
    assert (saturated.mode, saturated.decode.count, saturated.decode.replica.config.tp) == ("aggregated", 4, 2)
    demand = plan_of(job(8, "parallelism { tp = 2  replicas = 4 }", "prompt = 1000  output = 200  rate = 4 req/s",
                         slo="ttft.p99 <= 2 s  tpot.p99 <= 200 ms"))
    assert demand.decode.count == 4 and demand.used_gpus == 8
    assert demand.binding == ("replicas: 4 replicas of 2 GPUs, as pinned",)


def test_a_demand_on_exactly_eight_gpus_uses_all_eight_where_fewer_would_do():
    """A light demand that one GPU carries: without `gpus` the plan takes the fewest GPUs; with
    `gpus = 8` it spreads over all eight, and its latencies can only improve."""
    demand = "prompt = 1000  output = 200  rate = 2 req/s"
    slo = "ttft.p99 <= 2 s  tpot.p99 <= 100 ms"
    free = plan_of(job(8, demand=demand, slo=slo).replace("  gpus = 8\n", ""))
    pinned = plan_of(job(8, demand=demand, slo=slo))
    assert free.used_gpus < 8 and pinned.used_gpus == 8
    assert pinned.outcome.percentile("tpot", 50) <= free.outcome.percentile("tpot", 50) * 1.02


def test_a_split_on_exactly_the_gpus_pinned():
    plan = plan_of(job(16, "engine { mode = disaggregated }", "prompt = 2000  output = 200  rate = 20 req/s",
                       slo="ttft.p99 <= 1 s  tpot.p99 <= 60 ms"))
    assert plan.mode == "disaggregated" and plan.used_gpus == 16


def test_more_gpus_than_the_partition_holds_is_no_plan_with_the_reason():
    text = job(24)
    plan = plan_of(text)
    assert plan.decode is None and plan.binding[0].startswith("gpus: `gpus = 24` asks for more than the 16 GPUs")
    # located at the pin, file:line:column, as training's infeasible plans are
    line = text.splitlines().index("  gpus = 24") + 1
    assert plan.binding[0].endswith(f"({PATH}:{line}:3)")


@pytest.mark.parametrize("extra, gpus, message", [
    ("parallelism { tp = 2 }", 7, "`gpus = 7` is not a whole number of replicas: each takes a multiple of tp = 2"),
    ("parallelism { tp = 2  pp = 1  replicas = 3 }", 8, "3 replicas of tp = 2 x ep = 1 x pp = 1 take 6 GPUs"),
    ("parallelism { tp = 2  replicas = 3 }", 8, "3 replicas of tp = 2 x ep = 1 take a multiple of 6 GPUs"),
    ("parallelism { replicas = 2 }\n  engine { mode = disaggregated }", 8, "`replicas` pins an aggregated pool"),
])
def test_pins_that_cannot_make_up_the_gpus_are_located_errors(extra, gpus, message):
    found = errors(job(gpus, extra))
    assert any(message in m for m in found), found


def test_the_layout_places_every_used_gpu_once_and_the_text_and_json_agree():
    plan = plan_of(job(16, "engine { mode = disaggregated }"))
    data = serve_json(plan)
    ranks = [r for pool in data["layout"].values() for a, b in pool["ranks"] for r in range(a, b + 1)]
    assert sorted(ranks) == list(range(plan.used_gpus))
    text = serve_text(plan)
    for role, pool in data["layout"].items():
        a, b = pool["ranks"][0]
        assert (f"GPUs {a}-{b}" if b > a else f"GPUs {a}") in text
    aggregated = plan_of(job(8, "parallelism { tp = 2  replicas = 4 }"))
    assert "4 per node on 1 node (GPUs 0-1, 2-3, 4-5, ..., 6-7); tp over NVLink4 (node)" in serve_text(aggregated)
    assert layout(aggregated.decode, 0, 8)["replicas_per_node"] == 4
    # a pool of fewer replicas than a node holds says how many it has there, not how many fit
    single = plan_of(job(1, "parallelism { tp = 1  replicas = 1 }"))
    assert "1 per node on 1 node (GPUs 0)" in serve_text(single)
    assert layout(single.decode, 0, 8)["replicas_per_node"] == 1


@settings(max_examples=scaled_examples(4), deadline=None)
@given(st.floats(1, 40), st.integers(100, 2000), st.integers(10, 60),
       st.sampled_from(["auto", "aggregated", "disaggregated"]), st.booleans(), st.integers(2, 12))
def test_with_exact_gpus_the_pruned_search_chooses_what_the_exhaustive_one_does(rate, ttft_ms, tpot_ms, mode, energy,
                                                                                 gpus):
    text = law_job(round(rate, 1), f"ttft.p99 <= {ttft_ms} ms", f"tpot.p90 <= {tpot_ms} ms", mode, energy, 16, 1000)
    e = serve_entity(check_text(text.replace("subject to { gpus <= 16 }", f"gpus = {gpus}"), PATH).design)
    pruned, exhaustive = plan_serve(e), plan_serve(e, exhaustive=True)
    assert chosen(pruned) == chosen(exhaustive)
    assert pruned.decode is None or pruned.used_gpus == gpus
