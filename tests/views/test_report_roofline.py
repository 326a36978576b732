"""The report's Roofline section for every job kind, and the money in a heterogeneous plan.

- A heterogeneous plan: one roofline per partition taking part, its chip and the
  configuration the split gives it.
- A serve plan: its prefill and decode operating points, decode the lower in intensity.
- Every point lies under its chip's roofs: no operation runs faster than the peak or than
  HBM can feed it.
- A heterogeneous job on a priced cluster shows its cost in the headline, the plan text and
  the JSON, as a train job's (written by the one formatter, dsl/numbers.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.cost.tco import job_cluster, tco
from gclc.dsl.numbers import quantity
from gclc.model.compute import peak
from gclc.model.job import hetero_entity
from gclc.solver.split.plan import plan_hetero
from gclc.views.report import page as report
from gclc.views.plan_json import outcome_json
from gclc.views.plan_text import outcome_text
from gclc.views.report.roofline import hetero_rooflines, serve_roofline

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SCHEMA = jsonschema.Draft202012Validator(json.loads((ROOT / "views" / "plan.schema.json").read_text()))


def _under_the_roofs(figure) -> None:
    chip, top = figure.chip, peak(figure.chip, figure.precision)
    assert figure.points
    for point in figure.points:
        assert point.intensity > 0 and point.rate > 0, point
        assert point.rate <= top * (1 + 1e-9), point                                  # the compute roof
        assert point.rate <= chip.hbm_bandwidth * point.intensity * (1 + 1e-9), point  # the memory slope


def _roofline_section(text: str) -> str:
    return text[text.index("<h2>Roofline</h2>"):text.index("<h2>Diagrams</h2>")]


def test_a_heterogeneous_plan_gets_one_roofline_per_partition(hetero):
    design, plan = hetero
    figures = hetero_rooflines(plan)
    used = [s for s in plan.best.shares if s.items]
    assert [f.caption.split(":")[0] for f in figures] == [f"partition {s.partition}" for s in used]
    assert len({f.chip.name for f in figures}) == 2          # an H100 and an A100 partition: two chips
    for figure, share in zip(figures, used):
        assert figure.chip.name == share.chip and f"tp {share.config.tp}," in figure.caption
        _under_the_roofs(figure)
    section = _roofline_section(report.report_html(design))
    assert "no plan" not in section and section.count("<figure>") == 2
    assert 'id="roofline-h100-' in section and 'id="roofline-a100-' in section   # ids scoped per figure


def test_a_serve_plan_shows_its_prefill_and_decode_operating_points(serve):
    design, plan = serve
    figure = serve_roofline(plan)
    prefill, decode = figure.points
    assert prefill.label.startswith("prefill: a 1,000-token chunk") and decode.label.startswith("decode: a step of")
    # decode reads every weight for one token of each sequence: far less work per byte than a prompt chunk
    assert decode.intensity < prefill.intensity / 4
    _under_the_roofs(figure)
    section = _roofline_section(report.report_html(design))
    assert "no plan" not in section and "prefill: a 1,000-token chunk" in section and "decode: a step of" in section
    # the axes' decades as the one formatter writes them, not as powers of ten
    assert re.search(r">1 [TP]FLOPS<", section) and ">1,000<" in section and "mathdefault" not in section


def test_a_heterogeneous_plan_on_a_priced_cluster_states_its_cost(hetero):
    design, plan = hetero
    job = plan.plans[0].job
    t = tco(job_cluster(job.entity), job.graph)
    by_hand = t.total / (plan.best.tokens_per_s * t.lifetime_seconds) * job.tokens
    data = outcome_json(plan)
    assert not list(SCHEMA.iter_errors(data))
    assert data["cost"]["cost_to_train_usd"] == pytest.approx(by_hand, rel=1e-12)
    assert f"{quantity(by_hand, 'USD')} to train" in outcome_text(plan)
    text = report.report_html(design)
    head = text[text.index('id="headline"'):text.index("<h2>Design</h2>")]
    assert re.findall(r'data-figure="([^"]+)"', head)[-1] == "cost to train"
    assert f"<b>{quantity(by_hand, 'USD')}</b><span>TCO {quantity(t.total, 'USD')}</span>" in head


def test_a_serve_plan_on_a_priced_cluster_shows_its_cost_in_the_headline(serve):
    design, plan = serve
    text = report.report_html(design)
    head = text[text.index('id="headline"'):text.index("<h2>Design</h2>")]
    cost = outcome_json(plan)["cost"]
    assert re.findall(r'data-figure="([^"]+)"', head)[-1] == "cost per million output tokens"
    assert re.search(r"<b>[\d.]+ USD</b><span>TCO [\d.]+ kUSD \(\d+% of the cluster\)</span>", head), head
    assert f"TCO {quantity(cost['tco_usd'], 'USD')}" in head


def test_without_economics_no_cost_figure():
    design = check_file(str(ROOT / "examples" / "hetero_h100_a100.gcl")).design
    plan = plan_hetero(hetero_entity(design))
    assert "cost" not in outcome_json(plan) and "  cost " not in outcome_text(plan)


@pytest.mark.parametrize("generation, train", [("H20", "H100_SXM"), ("H100_SXM", "H20"), ("H100_SXM", "H100_SXM")])
def test_rl_rooflines_follow_the_pools_not_the_hash_seed(generation, train):
    """An RL plan's rooflines: the generation pool's chip, then the training pool's, each chip
    once. A set gave them in hash order, so two runs of `gclc report` on rl_grpo_70b.gcl drew
    the H20 and the H100 in either order. Stub: an RL outcome of two named partitions whose
    chips are hashable names (what `rooflines` reads of them)."""
    from collections import namedtuple
    from types import SimpleNamespace as Stub

    from gclc.views.report.roofline import rooflines

    chip = namedtuple("Chip", "name")
    chips = {"gen": chip(generation), "train": chip(train)}
    outcome = Stub(job_kind="rl", job=Stub(partition=lambda n: Stub(node=Stub(accelerator=chips[n]))),
                   best=Stub(generation=Stub(layout=Stub(partition="gen")), train=Stub(partition="train")))
    figures, note = rooflines(None, outcome, None)
    assert [f.name for f in figures] == [f"roofline-{n}" for n in dict.fromkeys((generation, train))]
    assert note == ""
