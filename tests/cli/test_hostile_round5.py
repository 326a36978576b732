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


# ------------------------------------------------------------------ an rl engine's memory above the job's bound


def _rl_with(fields: dict[str, str]):
    from gclc.compiler.driver import check_file
    from gclc.testing.edit import edit_source

    path = ROOT / "examples/rl_grpo_70b.gcl"
    text, _ = edit_source(path.read_text(encoding="utf-8"), str(path), {}, fields)
    return text, [d for d in check_file(str(path), text=text).diagnostics if d.is_error]


@pytest.mark.parametrize("share", ["95%", "100%"])
def test_an_rl_engine_memory_above_the_job_bound_is_refused(share):
    """Was accepted and changed nothing: the planner holds each pool to the job's `memory <= 90%`
    (solver/rl/search.py gen_limit), so plan --json came out byte-identical (fuzz, fields)."""
    text, errors = _rl_with({"grpo_70b.generate.engine.memory": share})
    assert [e.code for e in errors] == ["rl-job"]
    line = next(i for i, t in enumerate(text.split("\n"), 1) if f"memory = {share}" in t)
    assert errors[0].subject.line == line and "memory <= 90%" in errors[0].summary
    assert errors[0].labels[0].span.line == next(i for i, t in enumerate(text.split("\n"), 1) if "memory <= 90%" in t)


@pytest.mark.parametrize("fields", [{"grpo_70b.generate.engine.memory": "90%"},
                                    {"grpo_70b.generate.engine.memory": "50%"}])
def test_an_rl_engine_memory_within_the_bound_checks(fields):
    assert _rl_with(fields)[1] == []


# ------------------------------------------------------------------ an nccl-tests row's in-place time

NCCL = ROOT / "tests/data/measurements/nccl/a3mega_h100_2node_all_reduce.txt"


@pytest.mark.parametrize("token", ["1e400", "-1", "0", "x", "nan"])
def test_an_unreadable_in_place_time_is_refused_where_it_stands(token):
    """Was read as `no in-place time` without a word (only `N/A` means that), so the row
    calibrated on its out-of-place time alone (fuzz, formats: 6737.4 -> 1e400)."""
    text = NCCL.read_text(encoding="utf-8")
    row = next(line for line in text.split("\n") if line.lstrip().startswith("1073741824 "))
    cells = list(re.finditer(r"\S+", row))
    in_place = cells[9]                       # size count type redop root | time algbw busbw #wrong | time ...
    edited = row[:in_place.start()] + token + row[in_place.end():]
    _, problems = read_file(SourceFile(str(NCCL), text.replace(row, edited)))
    errors = [d for d in problems if d.is_error]
    line = text.split("\n").index(row) + 1
    assert [(e.subject.line, e.subject.column) for e in errors] == [(line, in_place.start() + 1)]
    assert "in-place time" in errors[0].summary


def test_an_in_place_time_of_n_a_still_reads_as_none():
    text = NCCL.read_text(encoding="utf-8")
    row = next(line for line in text.split("\n") if line.lstrip().startswith("1073741824 "))
    in_place = list(re.finditer(r"\S+", row))[9]
    runs, problems = read_file(SourceFile(str(NCCL), text.replace(row, row[:in_place.start()] + "N/A"
                                                                  + row[in_place.end():])))
    assert not [d for d in problems if d.is_error]
    point = next(p for p in runs[0].points if p.size == 1073741824)
    assert point.in_time is None and point.time > 0


# ------------------------------------------------------------------ a trace of a step of 1e30 sequences


def _pod_with_batch(tmp_path, batch: str) -> Path:
    text = (ROOT / "tests/data/calibrate/h100_pod.gcl").read_text(encoding="utf-8")
    design = tmp_path / "pod.gcl"
    design.write_text(re.sub(r"(?m)^(\s*batch\s*=\s*)64\b", rf"\g<1>{batch}", text, count=1), encoding="utf-8")
    return design


@pytest.mark.parametrize("target", ["trace", "chakra"])
def test_a_trace_of_too_many_micro_batches_is_refused_before_it_is_drawn(cli, tmp_path, target):
    """Was: `batch = 1e30` planned (1.25e29 micro-batches a rank) and the exporters drew them
    one by one, past 10 s of CPU and on (fuzz, designs: h100_pod.gcl batch 64 -> 1e30)."""
    import time

    started = time.process_time()
    code, out = cli(["export", str(_pod_with_batch(tmp_path, "1e30")), "--to", target, "-o", str(tmp_path / "out")])
    assert code == 1 and "draws each micro-batch of the step" in out and "plan a smaller batch" in out
    assert time.process_time() - started < 5
    assert not (tmp_path / "out").exists()


def test_a_chakra_trace_is_bounded_over_all_ranks_too(cli, tmp_path, monkeypatch):
    from gclc.views.export import target

    monkeypatch.setattr(target, "MAX_TRACED_RANK_MICROBATCHES", 16)   # the pod: 16 ranks, several micro-batches each
    code, out = cli(["export", str(_pod_with_batch(tmp_path, "64")), "--to", "chakra", "-o", str(tmp_path / "out")])
    assert code == 1 and "16 over all ranks" in out


# ------------------------------------------------------------------ a packaging on board memory

BOARD_CHIP = """chip L40S {{
  vendor = "NVIDIA"
  peak {{ bf16 = 362 TFLOPS  fp8 = 733 TFLOPS }}
  hbm {{ capacity = 48 GB  bandwidth = 864 GB/s  type = "{kind}"  packaging = {packaging} }}
  power {{ tdp = 350 W }}
}}
"""


@pytest.mark.parametrize("kind", ["GDDR6", "gddr6x"])
@pytest.mark.parametrize("packaging", ["stacked", "interposer"])
def test_a_packaging_on_gddr_is_refused_where_it_stands(cli, tmp_path, kind, packaging):
    """Was: accepted; `stacked` then took the interposer link's 0.25 pJ/bit off board memory's energy
    and 2 ns off every kernel (compiler/hbm.py), physics GDDR on the board never had."""
    design, text = tmp_path / "board.gcl", BOARD_CHIP.format(kind=kind, packaging=packaging)
    design.write_text(text, encoding="utf-8")
    code, out = cli(["check", str(design)])
    column = text.splitlines()[3].index("packaging") + 1
    assert code == 1 and "Traceback" not in out
    assert f"{design}:4:{column}: error[bad-choice]: `{packaging}` is not a valid `hbm.packaging`" in out
    assert "help: remove `packaging`" in out


def test_a_design_with_no_job_says_every_kind_plans(tmp_path, cli):
    """`gclc plan` on a design of parts alone said "the design has no `train` job", as if a
    serve or rl job would not do."""
    design = tmp_path / "parts.gcl"
    design.write_text('import "std/nvidia"\nimport "std/network"\n'
                      "cluster C { units = 2 x DGX_H100  scaleout = NDR_FatTree }\n", encoding="utf-8")
    code, out = cli(["plan", str(design)])
    assert code == 1 and "no job to plan: declare a `train`, `serve` or `rl` job" in out
