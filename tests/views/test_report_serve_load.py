"""The report's serve plan under load (views/report/serve_load.py): the latency CDF of the
planned operating point and latency against offered load, drawn from the simulation; the
point marked as the plan is the plan's own outcome (one answer), on the curve."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from gclc.compiler.driver import check_file
from gclc.solver.serve.knee import plan_run
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views.report import page
from gclc.views.report.serve_load import LOADS

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _plan():
    # a shorter demand than the example states (its rate, fewer requests): the same pictures, faster
    return plan_serve(serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design), requests=1200)


@functools.cache
def _section() -> str:
    return page._serve_load_section(_plan())[0]


def _group(svg: str, gid: str) -> str:
    start = svg.index(f'<g id="{gid}"')
    return svg[start:svg.index("</g>", start)]


def _markers(group: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r'<use [^>]*x="([-\d.]+)" y="([-\d.]+)"', group)]


def test_the_plan_rerun_at_its_rate_is_its_own_outcome():
    plan = _plan()
    again = plan_run(plan)(plan.demand.rate, {}, None)
    assert again.ttft == plan.outcome.ttft and again.tpot == plan.outcome.tpot


def test_the_cdf_steps_through_every_measured_request():
    svg = _section().split("<svg")[1]
    for metric in ("ttft", "tpot"):
        path = re.search(r'\sd="([^"]+)"', _group(svg, f"serve-cdf-cdf-{metric}")).group(1)
        assert path.count("L") >= 50                 # a curve through the requests (matplotlib merges collinear steps)
        assert len(_markers(_group(svg, f"serve-cdf-percentiles-{metric}"))) == 2     # P50 and P99 marked
    assert "SLO ttft.p99" in svg


def test_the_load_curve_marks_the_plan_on_the_curve_at_its_rate():
    plan = _plan()
    svg = _section().split("<svg")[2]
    rates = sorted([plan.demand.rate * s for s in LOADS] + [plan.demand.rate])
    at = rates.index(plan.demand.rate)
    for metric in ("ttft", "tpot"):
        for p in (50, 99):
            curve = _markers(_group(svg, f"serve-load-curve-{metric}-p{p}"))
            star = _markers(_group(svg, f"serve-load-plan-{metric}-p{p}"))
            assert len(curve) == len(rates) and len(star) == 1
            assert star[0] == curve[at]
    # past the knee the queue grows: P99 TTFT at the highest load is above the plan's (SVG y grows downwards)
    ttft = [y for _, y in _markers(_group(svg, "serve-load-curve-ttft-p99"))]
    assert ttft[-1] < ttft[at]
