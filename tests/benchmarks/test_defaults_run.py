"""The "defaults" run (benchmarks/defaults.py): a published run's design with every field its
source did not publish left unstated, planned as a new user plans it. Checked on two real
designs: what is dropped is exactly the fill-ins, and the plan's band names the guesses."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from gclc.compiler.driver import check_text
from gclc.model.job import train_job

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import defaults  # noqa: E402


def _fields(text: str) -> dict[str, str]:
    block = text[text.index("\ntrain "):]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\s*(\w+)\s*=.*$", block, re.MULTILINE)}


def test_only_the_rows_own_fields_stay():
    full = (BENCH / "runs" / "mb2511_27.gcl").read_text()
    kept = _fields(defaults.published_only(full))
    every = _fields(full)
    dropped = set(every) - set(kept)
    assert dropped == {"fp8_params", "recompute", "ep_overlap", "dispatcher"}    # a recipe's, not the row's
    assert all("# row" in every[f] or "#" not in every[f] for f in kept if f not in defaults._ALWAYS)
    assert {"vp", "schedule", "batch", "gpus", "seq"} <= set(kept)
    # a design whose row states no vp loses the interleaved schedule with it
    assert "schedule" not in defaults.published_only(full.replace("vp = 24  # row", "vp = 24  # recipe"))


def test_the_defaults_design_plans_and_its_band_names_what_was_guessed():
    from gclc.solver.train.plan import plan

    # Llama 3 8B FP8 with FSDP on 8 H100s (Megatron-Bridge 25.11): the row states the layout, the
    # micro-batch and ZeRO, not the recipe's recompute, whose other modes move the step by more
    # than the band (Qwen3-30B-A3B on GB200, mb2509_5, was the example until its MoE band, refit
    # on 2026-12-07, grew wider than its recompute's spread)
    full = (BENCH / "runs" / "mb2511_23.gcl").read_text()
    p = plan(train_job(check_text(defaults.published_only(full), "mb2511_23.gcl").design))
    stated = plan(train_job(check_text(full, "mb2511_23.gcl").design))
    assert p.best is not None and (p.best.config.dp, p.best.config.microbatch, p.best.config.zero) == (8, 1, 3)
    assert "recompute" in {r.text.split()[0] for r in p.band_reasons if r.key == "unstated"}
    assert not [r for r in stated.band_reasons if r.text.startswith("recompute")]
    assert p.error_band["tokens_per_s"][0] < stated.error_band["tokens_per_s"][0]


def test_a_field_left_out_alone_moves_the_prediction_to_the_side_its_band_widens():
    # Llama 3 8B FP8 on 8 H100s states ZeRO-3 and fp8 weights: without the ZeRO stage the search
    # takes a faster stage (the run is then slower than predicted: the low side, by exactly the
    # stated stage's move); without fp8 weights the stack's default keeps the bf16 copy, slower
    # than the run (the high side, by the stated weights' move)
    rows = {r["field"]: r for r in defaults.field_rows(BENCH / "runs" / "mb2511_23.gcl")}
    zero, fp8 = rows["zero"], rows["fp8_params"]
    assert zero["move"] > 0 and zero["faster"] == 0 and zero["slower"] == pytest.approx(zero["move"], rel=1e-9)
    assert fp8["move"] < 0 and fp8["slower"] == 0 and fp8["faster"] == pytest.approx(-fp8["move"], rel=1e-9)
    lines, totals = defaults.fields_table(list(rows.values()))
    assert totals["moved"] == totals["on_side"] == totals["within"] == 2


def test_without_the_stack_the_band_carries_the_stacks_reason_not_its_overlaps():
    from gclc.solver.train.plan import plan

    # GPT-3 175B-class layers at TP 8 on one DGX A100 (Korthikanti et al. Table 5), Megatron-LM: with
    # the stack unstated too, the default stack's TP overlap would move the step by more than the
    # band, but the `stack` reason already holds that doubt (model/train/guessed.py STACK_FIELDS)
    full = (BENCH / "runs" / "kort_t5_1.gcl").read_text()
    text = defaults.published_only(full, stack=False)
    assert "software" in _fields(defaults.published_only(full)) and "software" not in _fields(text)
    p = plan(train_job(check_text(text, "kort_t5_1.gcl").design))
    keys = {r.text.split()[0] if r.key == "unstated" else r.key for r in p.band_reasons}
    assert "stack" in keys and not keys & {"tp_overlap", "dp_overlap", "ep_overlap"}
