"""The demand search's prefill verdict (solver/serve/demand_search.py DemandSearch.prefill_verdict):
a split's prefill pool run alone against the TTFT bounds. A request's first token leaves the
prefill pool whatever the decode pool does, so a verdict that breaks a TTFT bound is broken by
the full run of every decode pool beside it (law), the same verdict whichever decode pool asks,
and a full run that breaks a TTFT bound the verdict meets does so only by a sequence its decode
replica can never hold (served never)."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import placement
from gclc.model.serve.inference import ServeConfig, kv_transfer_time, replica
from gclc.model.shape import ModelShape
from gclc.solver.serve.demand import demand_of
from gclc.solver.serve.confirm import pool_of
from gclc.solver.serve.outcome import missed_by
from gclc.solver.serve.demand_search import DemandSearch
from gclc.solver.serve.plan import serve_entity
from gclc.solver.serve.screen import Side
from gclc.solver.serve.sim import simulate
from gclc.solver.serve.space import limits_of
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[3]
TEXT = (ROOT / "tests" / "data" / "serve_cost.gcl").read_text().replace(
    "  prompt = 1000\n  output = 200\n",
    "  prompt = uniform(low = 250, high = 5250)\n  output = exponential(mean = 150)\n  rate = 2 req/s\n"
    "  requests = 60\n  precision = fp8\n  engine { mode = disaggregated  max_batch = 8 }\n")
JOB = serve_entity(check_text(TEXT, str(ROOT / "tests" / "data" / "serve_law.gcl")).design)
GRAPH, PARTITION = placement(JOB)
SHAPE = ModelShape.from_entity(JOB.get("model"))
DEMAND = demand_of(JOB, 60)
LAYOUTS = [replica(SHAPE, ServeConfig(tp, b, "fp8", pp=pp), PARTITION) for tp in (1, 2) for pp in (1, 2) for b in (1, 4)]
RUNS = max(5, settings.default.max_examples // 6)


def search(rate: float, ttft: float, tpot: float) -> DemandSearch:
    """A search over every layout (screened against no SLO), judging runs by these bounds."""
    limits = attrs.evolve(limits_of(JOB, GRAPH, PARTITION), slo={})
    s = DemandSearch(GRAPH, PARTITION, limits, DEMAND.at_rate(rate), "disaggregated", LAYOUTS, DEMAND)
    s.limits = attrs.evolve(limits, slo={"ttft.p99": ttft, "ttft": ttft / 2, "tpot.p90": tpot})
    return s


@settings(max_examples=RUNS, deadline=None)
@given(st.floats(0.5, 40), st.floats(0.02, 0.5), st.floats(0.005, 0.05), st.integers(0, 7), st.integers(0, 7),
       st.integers(0, 7), st.integers(1, 4), st.integers(1, 3))
def test_a_prefill_verdict_is_every_decode_pools(rate, ttft, tpot, p, d, other, pre_count, dec_count):
    s = search(rate, ttft, tpot)
    (rp, ep), (rd, ed), (ro, eo) = (s.prefills[p % len(s.prefills)], s.decodes[d % len(s.decodes)],
                                    s.decodes[other % len(s.decodes)])
    pre = Side(rp, ep, pre_count)
    verdict = s.prefill_verdict([pre, Side(rd, ed, dec_count)])
    again = s.prefill_verdict([pre, Side(ro, eo, 1)])
    assert verdict == again     # whichever decode pool asks
    hbm = s.limits.memory_bytes(rd.hbm)
    full = simulate(s.demand.requests, pool_of(Side(rd, ed, dec_count), hbm), pool_of(pre, hbm),
                    lambda prompt: kv_transfer_time(rp, rd, prompt), s.limits.slo, s.warmup_s)
    missed = [m for m in missed_by(full, s.limits.slo) if m.startswith("ttft")]
    if verdict is not None:
        assert verdict.stopped and set(verdict.stopped) <= set(missed)
    elif missed:
        assert math.inf in full.ttft    # a sequence the decode replica can never hold: served never


def test_the_deep_profiles_design_needs_a_verdict_per_prefill_pool_not_per_pair():
    """The deep profile's counterexample design (tests/solver/serve/test_search_laws.py) split:
    its pipelined prefill pools break the TTFT P99 at every count; each pool's verdict is
    simulated once, not once per decode layout paired with it."""
    s = search(2.0, 0.06, 0.034)
    (rp, ep) = next((r, e) for r, e in s.prefills if r.config.pp == 2)
    before = s.simulated
    for rd, ed in s.decodes:
        outcome = s.simulate([Side(rp, ep, 1), Side(rd, ed, 1)])
        assert any(m.startswith("ttft") for m in outcome.stopped)
    assert s.simulated - before <= 2     # the first pair's run and its prefill pool's verdict
