"""An rl job on a shared cluster: one gang holding both pools on one partition, its work its
steps; a job without steps is a located problem, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.solver.schedule.jobs import ScheduleError, build

DATA = Path(__file__).resolve().parents[2] / "data" / "rl_shared.gcl"


def test_an_rl_job_is_one_gang_with_an_option_per_partition():
    workload = build(check_file(str(DATA)).design)
    rl = next(j for j in workload.jobs if j.name == "grpo")
    assert rl.gang and rl.unit == "steps" and rl.work == 200 and rl.priority > 1
    assert {o.partition for o in rl.options} == {"h100", "a100"}
    rates = [o.rate for o in rl.options]
    assert rates == sorted(rates, reverse=True) and all(0 < o.gpus <= 16 for o in rl.options)
    assert rl.submit == 600.0


def test_an_rl_job_without_steps_says_so_where_it_is():
    text = DATA.read_text().replace("  steps = 200  priority = high", "  priority = high")
    with pytest.raises(ScheduleError) as raised:
        build(check_text(text, str(DATA)).design)
    problem = raised.value.diagnostics[0]
    assert problem.code == "no-size" and "`grpo`" in problem.summary and problem.subject.line == 13
