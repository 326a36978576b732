"""Hostile input, round 5 (benchmarks/fuzz_hostile.py `--only fields` and `--only formats`,
benchmarks/fuzz_surfaces.py): each finding on the last sessions' surfaces kept as a
regression: a located error with its fix where a traceback, an unlocated error or a silently
taken value was."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.measure.read import read_file
from gclc.dsl.source import SourceFile
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests/data/measurements/training"

# ------------------------------------------------------------------ a training log's iteration

# (log, the iteration token of its first step line as the framework printed it)
STEP_LINES = {"megatron_llama2_7b_tp2.log": re.compile(r"iteration\s+(5)/"),
              "nemo2_bionemo.log": re.compile(r"iteration (120)/"),
              "torchtitan_flex_debug.log": re.compile(r"step:\s+(3)\s+loss:")}


def _with_iteration(name: str, token: str) -> tuple[str, int, int]:
    """The log with its first step line's iteration replaced by `token`: (text, line, column)."""
    text = (LOGS / name).read_text(encoding="utf-8")
    match = STEP_LINES[name].search(text)
    line = text.count("\n", 0, match.start(1)) + 1
    column = match.start(1) - (text.rfind("\n", 0, match.start(1)) + 1) + 1
    return text[:match.start(1)] + token + text[match.end(1):], line, column


@pytest.mark.parametrize("name", sorted(STEP_LINES))
@pytest.mark.parametrize("token", ["1e400", "-1", "1.5", "x", "٣"])
def test_a_step_line_with_an_unreadable_iteration_is_refused_where_it_stands(name, token):
    """Was: the line no longer matched the step pattern (`[0-9]+`), so it was skipped without a
    word and the run calibrated on one step fewer (megatron `iteration 1e400/2000 |`)."""
    text, line, column = _with_iteration(name, token)
    _, problems = read_file(SourceFile(str(LOGS / name), text))
    errors = [d for d in problems if d.is_error]
    assert errors and (errors[0].subject.line, errors[0].subject.column) == (line, column)
    assert token in errors[0].summary   # what it read, quoted


@given(st.integers(0, 10**9))
def test_a_step_line_with_a_whole_iteration_still_reads(iteration):
    text, _, _ = _with_iteration("megatron_llama2_7b_tp2.log", str(iteration))
    runs, problems = read_file(SourceFile("m.log", text))
    assert not [d for d in problems if d.is_error]
    assert iteration in [s.iteration for s in runs[0].steps]
