"""benchmarks/stack_factor.py: the `stack` band factor measured as model/calibration.py says, the
default stack's whole behaviour row against each run's own, its overlaps' share shown apart."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import stack_factor  # noqa: E402


def test_the_default_stacks_row_moves_its_overlaps_and_the_runs_own_hold_them():
    import calibrate

    # Korthikanti et al.'s Megatron-LM runs at TP 8 (no TP overlap in 2022's Megatron-LM; the default
    # stack, Megatron-Core, overlaps TP): the row's overlap moves the error, the runs' own hold it
    keep = {"kort_t5_1", "kort_t5_2"}
    cases = calibrate.load(BENCH / "runs", BENCH / "data" / "public_runs_measured.csv", keep=keep.__contains__)
    assert {c.cfg.stack for c in cases} == {"megatron"}
    r = stack_factor.measure(cases, "megatron_core")
    assert r["n"] == 2 and r["moved"] != pytest.approx(r["held"])
    assert r["factor"] == pytest.approx(r["moved"] / r["own"])
