"""The report's captions name the plan's own settings: the a100 example's interleaved plan
(vp 4) was captioned "the bubble where a stage waits in the 1F1B schedule"."""

from __future__ import annotations

from pathlib import Path

from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.solver.train.plan import plan
from gclc.views.report.page import _timeline_section

ROOT = Path(__file__).resolve().parents[2]


def test_the_timeline_caption_names_the_plans_schedule():
    design = check_file(str(ROOT / "examples" / "a100_cluster.gcl")).design
    chosen = plan(train_job(design))
    c = chosen.best.config
    assert c.pp > 1 and c.virtual_stages == 4    # the example's plan, as `gclc plan` prints it
    caption = _timeline_section(chosen)
    assert "waits in the interleaved schedule (4 virtual stages" in caption and "waits in the 1F1B schedule" not in caption
