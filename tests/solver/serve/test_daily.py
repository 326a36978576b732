"""A serve plan over a day: each stretch keeps ceil(replicas x share) per pool, so it never
needs more GPUs or power than the peak plan, never fewer than a stretch of lower load, and
the peak stretch is the plan itself."""

from pathlib import Path

from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.solver.serve.daily import daily, summary
from gclc.solver.serve.plan import plan_serve
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[3]
TEXT = (ROOT / "tests" / "data" / "serve_cost.gcl").read_text().replace(
    "  prompt = 1000\n  output = 200\n", "  prompt = 1000\n  output = 200\n  rate = 80 req/s\n  requests = 400\n")
PLAN = plan_serve(check_text(TEXT, str(ROOT / "tests" / "data" / "day.gcl")).design["chat"])


def test_the_peak_stretch_is_the_plan_and_a_day_sums_its_stretches():
    day = daily(PLAN, (0.5, 1.0))
    assert day[1].gpus == PLAN.used_gpus and day[1].replicas[0] == PLAN.decode.count
    assert summary(day)["gpu_hours"] == (day[0].gpus + day[1].gpus) * 12


@given(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=24))
def test_a_lower_share_never_needs_more_gpus_or_power(shares):
    day = daily(PLAN, tuple(shares))
    ordered = sorted(day, key=lambda s: s.share)
    assert all(a.gpus <= b.gpus and a.power_w <= b.power_w + 1e-9 for a, b in zip(ordered, ordered[1:]))
    assert all(s.gpus <= PLAN.used_gpus and s.replicas[0] >= 1 for s in day)
    # every replica carries at most the load the plan confirmed at the peak
    assert all(s.rate / s.replicas[0] <= PLAN.demand.rate / PLAN.decode.count * (1 + 1e-12) for s in day)
