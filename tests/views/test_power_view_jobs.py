"""The power view at the operating point of every job kind, TDP for reference: a
heterogeneous plan's partitions each at the watts the split runs them at, a serve plan's
GPUs at the draw its facility power implies; `gclc render --view power` and the report draw
them (a heterogeneous design had exited 1, a serve design was drawn at full load)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.compiler.metrics import power_breakdown
from gclc.dsl.numbers import quantity
from gclc.model.power import gpu_power, job_power
from gclc.views import render
from gclc.views.report import page as report
from gclc.views.power_view import draws, operating_point

DATA = Path(__file__).resolve().parents[1] / "data"


def _accelerators(graph, point) -> float:
    return next(m.value for m in power_breakdown(graph, point) if m.key == "power.accelerators")


def test_a_split_draws_each_partition_at_its_own_watts(hetero):
    design, plan = hetero
    graph = plan.plans[0].job.graph
    name, drawn = draws(plan)
    parts = {p.name: p for p in graph.partitions}
    assert name == "mixed" and [d.partition for d in drawn] == ["h100", "a100"]
    for d in drawn:
        chip = parts[d.partition].node.accelerator
        assert chip.idle < d.watts <= chip.tdp * (1 + 1e-9)       # between idle and TDP
        assert gpu_power(parts[d.partition], 0.0) <= d.watts <= gpu_power(parts[d.partition], 1.0) * (1 + 1e-9)
    assert drawn[0].watts != drawn[1].watts                       # two chips, two draws
    point = operating_point(graph, plan)
    expected = sum(d.gpus * d.watts + (parts[d.partition].gpus - d.gpus) * parts[d.partition].node.accelerator.idle
                   for d in drawn)
    assert _accelerators(graph, point) == pytest.approx(expected, rel=1e-12)
    assert _accelerators(graph, point) < _accelerators(graph, None)   # below the full-load figure
    title = render.power(graph, plan).graph_attr["label"]
    for d in drawn:
        assert f"{d.partition}: {d.gpus:,} GPUs at {quantity(d.watts, 'W')} each" in title


def test_a_serve_plan_draws_its_gpus_at_the_plans_power(serve):
    design, plan = serve
    (d,) = draws(plan)[1]
    assert d.gpus == plan.used_gpus
    part = plan.partition
    # the facility power the plan states is what its GPUs' draw composes to (model/power.job_power)
    busy = next(b / 1000 for b in range(1001) if gpu_power(part, b / 1000) >= d.watts - 1e-9)
    assert job_power(plan.graph, part, d.gpus, busy).total == pytest.approx(plan.power_w, rel=2e-3)
    assert part.node.accelerator.idle < d.watts <= part.node.accelerator.tdp * (1 + 1e-9)
    title = render.power(plan.graph, plan).graph_attr["label"]
    assert "at plan chat's operating point" in title and f"at {quantity(d.watts, 'W')} each" in title


def test_the_cli_and_the_report_draw_power_at_the_operating_point(hetero, tmp_path, capsys):
    out = tmp_path / "p.dot"
    assert main(["render", str(DATA / "hetero_cost.gcl"), "--view", "power", "-o", str(out)]) == 0
    assert "at plan mixed's operating point" in out.read_text() and "at TDP:" in out.read_text()
    assert main(["render", str(DATA / "serve_cost.gcl"), "--view", "power", "-o", str(out)]) == 0
    assert "at plan chat's operating point" in out.read_text()
    text = report.report_html(hetero[0])
    assert re.search(r"<figcaption>power: Where the watts go at the plan&#x27;s operating point", text)


def test_the_title_meets_the_plans_own_power(hetero, serve):
    """One answer: the view draws the whole cluster (idle GPUs at their idle draw), the plan
    states its job's power with idle GPUs counted off (docs/power.md); the title gives the
    plan's figure and what the idle rest adds, which sum to the facility drawn (the examples'
    power views read 884 kW beside a plan of 740 kW, with nothing saying why)."""
    from gclc.views.power_view import plan_power

    plans = [(hetero[1].plans[0].job.graph, hetero[1]), (serve[1].graph, serve[1])]
    plans += [(plan.job.graph, plan) for plan in hetero[1].plans if plan.best is not None]   # train plans
    for graph, plan in plans:
        facility = next(m.value for m in power_breakdown(graph, operating_point(graph, plan))
                        if m.key == "power.facility")
        job = plan_power(plan)
        title = render.power(graph, plan).graph_attr["label"]
        assert 0 < job <= facility * (1 + 1e-9)
        if facility - job > 1e-3 * facility:
            assert (f"the plan's power {quantity(job, 'W')}" in title
                    and f"the idle rest of the cluster adds {quantity(facility - job, 'W')}" in title)
        else:
            assert f"facility {quantity(facility, 'W')}: the plan's power" in title


def test_the_reports_headline_gives_the_gpus_own_draw(hetero, serve):
    """One answer: a serve or split plan's report headline gave the facility power over the GPUs
    as "W per GPU" (742 W for H100s the power view draws at 294 W; 1.38 kW per 700 W H100 in the
    RL example), where a train plan's headline gives the GPU's own draw."""
    from gclc.views.report.page import _outcome_headline

    for plan in (hetero[1], serve[1]):
        _, drawn = draws(plan)
        watts = sum(d.gpus * d.watts for d in drawn) / sum(d.gpus for d in drawn)
        head = _outcome_headline(plan)
        assert f"<span>{quantity(watts, 'W')} per GPU</span>" in head
        assert "per GPU at the facility" not in head


def test_an_rl_design_is_drawn_at_its_plan_without_job(tmp_path):
    """`--view placement` and the report draw an rl design's plan by default; `--view power`
    drew it at full load unless `--job` named it (two operating points for one design)."""
    out = tmp_path / "p.dot"
    assert main(["render", str(Path(__file__).resolve().parents[2] / "examples" / "rl_grpo_70b.gcl"),
                 "--view", "power", "-o", str(out)]) == 0
    assert "at plan grpo_70b's operating point" in out.read_text()
