"""A split on exactly the GPUs pinned (solver/serve/demand_search.py confirm_split_exactly):
of the splits n x prefill + m x decode = gpus, the plan is the one of least power that meets
the SLOs. Laws: along the splits the power never rises with n (the prefill pool draws for the
work its rate brings whatever its count; a decode pool of more replicas holds requests on
more GPUs), and the split chosen draws what the least-power split meeting the SLOs does when
every split is simulated (brute force over small pinned GPU counts)."""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.solver.serve.confirm import run_simulation
from gclc.solver.serve.demand_search import DemandSearch, _exact_splits, _needed
from gclc.solver.serve.outcome import missed_by
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.solver.serve.screen import Side
from gclc.testing import load_profile

from .test_exact_sizes import job as exact_job
from .test_search_laws import ROOT, job

load_profile()
PATH = str(ROOT / "tests" / "data" / "serve_exact.gcl")
CHECKED = 3     # splits confirmed per plan that the brute force re-simulates split by split
BRUTE = max(6, settings.default.max_examples // 40)    # plans the brute force checks (6 in CI, 50 deep)


class Recording(DemandSearch):
    """The real search, recording each split it confirms on the GPUs pinned and what it chose."""

    made: list["Recording"] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.splits: list[tuple] = []
        Recording.made.append(self)

    def confirm_split_exactly(self, sides):
        found = super().confirm_split_exactly(sides)
        self.splits.append((sides, found))
        return found


def pinned(rate: float, ttft_ms: int, tpot_ms: int, gpus: int, prompt: int):
    """The law design (Llama 3.1 8B on two DGX H100), disaggregated on exactly `gpus` GPUs."""
    text = job(rate, f"ttft.p99 <= {ttft_ms} ms", f"tpot.p90 <= {tpot_ms} ms", "disaggregated", False, 16, prompt,
               requests=30)
    return planned(text.replace("subject to { gpus <= 16 }", f"gpus = {gpus}"))


def planned(text: str):
    """The plan and the (recording) search that made it."""
    result = check_text(text, PATH)
    assert result.design is not None, result.diagnostics
    Recording.made.clear()
    with mock.patch("gclc.solver.serve.plan.DemandSearch", Recording):
        plan = plan_serve(serve_entity(result.design))
    (search,) = Recording.made
    return plan, search


def every_split(search, sides) -> list[list[Side]]:
    (p, pe, n0), (d, de, m0) = sides
    return [[Side(p, pe, n), Side(d, de, m)] for n, m in _exact_splits(p.gpus, n0, d.gpus, m0, search.limits.gpus)]


def least_meeting(search, sides) -> float | None:
    """Every split simulated: the least power of those within the limit that meet the SLOs."""
    meeting = [search.power(b, search.demand.rate) for b in every_split(search, sides)
               if search.power(b, search.demand.rate) <= search.limits.power
               and not missed_by(run_simulation(search, b), search.limits.slo)]
    return min(meeting, default=None)


SEARCH = pinned(20.0, 500, 30, 16, 1000)[1]


@settings(max_examples=BRUTE, deadline=None)
@given(st.floats(2, 40), st.integers(150, 2000), st.integers(10, 60), st.integers(3, 10),
       st.sampled_from([400, 1000, 3000]))
def test_the_split_chosen_is_the_least_power_split_that_meets_the_slos(rate, ttft_ms, tpot_ms, gpus, prompt):
    plan, search = pinned(round(rate, 1), ttft_ms, tpot_ms, gpus, prompt)
    for sides, found in search.splits[:CHECKED]:
        least = least_meeting(search, sides)
        assert (found is None) == (least is None), (sides, found, least)
        if found is not None:
            assert found.power == least


@settings(max_examples=max(30, settings.default.max_examples // 4), deadline=None)
@given(st.floats(0.5, 60), st.integers(2, 16), st.integers(0, 40), st.integers(0, 40))
def test_the_power_never_rises_as_gpus_move_from_decode_to_prefill(rate, gpus, p, d):
    """What lets the bisection stop at the top end of the serving run: over the splits of
    exactly `gpus` GPUs, each pool at least its capacity's count, more prefill replicas (so fewer
    decode replicas) never draw more."""
    search = SEARCH
    (rp, ep), (rd, ed) = search.prefills[p % len(search.prefills)], search.decodes[d % len(search.decodes)]
    sides = [(rp, ep, _needed(rate, ep)), (rd, ed, _needed(rate, ed))]
    (_, _, n0), (_, _, m0) = sides
    powers = [search.power([Side(rp, ep, n), Side(rd, ed, m)], rate)
              for n, m in _exact_splits(rp.gpus, n0, rd.gpus, m0, gpus)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(powers, powers[1:])), powers


def test_a_light_demand_on_eight_gpus_holds_its_requests_on_the_fewest_decode_gpus():
    """Found when the bisection stopped at the first split meeting the SLOs (2026-12-06, with
    the held-request power): 2 requests/s on exactly 8 GPUs (tests/solver/serve/test_exact_sizes.py's
    design) met them at 4 prefill + 4 decode replicas of 1 GPU, 2,923 W, while 7 + 1 meets them
    too and draws less (one decode GPU streams while requests are held, not four)."""
    plan, search = planned(exact_job(8, demand="prompt = 1000  output = 200  rate = 2 req/s",
                                     slo="ttft.p99 <= 2 s  tpot.p99 <= 100 ms"))
    assert plan.mode == "disaggregated" and plan.used_gpus == 8
    assert (plan.prefill.count, plan.decode.count) == (7, 1)
    old = [Side(plan.prefill.replica, plan.prefill.estimate, 4), Side(plan.decode.replica, plan.decode.estimate, 4)]
    assert search.power(old, search.demand.rate) > plan.power_w

