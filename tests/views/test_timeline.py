"""The report draws one step's timeline per pipeline stage from the step model (issue 27):
every stage's row tiles the step exactly (compute, each exposed communicator, its share of
the bubble, the synchronization and the optimizer), every stage waits the whole bubble,
the hidden gradient synchronization is the model's own (alone less exposed). That the
report carries the picture: tests/views/test_report.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.model.ranks import rank_partition
from gclc.model.train.dp_sync import unhidden
from gclc.solver.train.plan import plan
from gclc.views.report.timeline import MAX_ROWS, step_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def superpod():
    design = check_file(str(ROOT / "examples" / "dgx_h100_superpod.gcl")).design
    return design, plan(train_job(design))


def test_every_stage_tiles_the_step_and_waits_the_whole_bubble(superpod):
    _, chosen = superpod
    e = chosen.best
    rows = step_rows(chosen)
    assert e.config.pp > 1 and len(rows) == min(e.config.pp, MAX_ROWS)
    for row in rows:
        laid = [s for s in row.segments if s.kind != "overlap"]
        assert laid[0].start == 0 and all(math.isclose(a.start + a.length, b.start, abs_tol=1e-9)
                                          for a, b in zip(laid, laid[1:]))
        assert math.isclose(row.end, e.step_time, rel_tol=1e-9)
        assert math.isclose(sum(s.length for s in laid if s.kind == "bubble"), e.breakdown.bubble, rel_tol=1e-9)
        for kind in ("compute", "tp", "dp", "optimizer"):
            assert math.isclose(sum(s.length for s in laid if s.kind == kind), getattr(e.breakdown, kind),
                                rel_tol=1e-9), kind
    # stage 0 starts at once; the last stage waits its warm-up (p - 1 forward slots) first
    assert rows[0].segments[0].kind != "bubble" and rows[-1].segments[0].kind == "bubble"


def test_the_hidden_synchronization_is_the_models(superpod):
    _, chosen = superpod
    e, job = chosen.best, chosen.job
    alone = unhidden(job.shape, e.config, rank_partition(job.partition, e.config.gpus))
    hidden = [s for s in step_rows(chosen)[0].segments if s.kind == "overlap"]
    assert alone >= e.breakdown.dp and [round(s.length, 12) for s in hidden] == (
        [round(alone - e.breakdown.dp, 12)] if alone > e.breakdown.dp else [])

