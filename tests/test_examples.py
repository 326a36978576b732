"""Examples keep their word: a measurement an example cites lies inside its plan's band, and
every size a sweepable param's comment names plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gclc.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
A100_PEAK_BF16 = 312e12   # NVIDIA A100 data sheet, dense BF16 (std/nvidia.gcl A100_SXM)
SC21_175B_MEASURED = 149e12  # Narayanan et al. SC21 Table 2, 175B on 768 A100: hardware FLOP/s per GPU


def plan(cli_once, example: str, *sets: str) -> tuple[int, dict]:
    """`gclc plan EXAMPLE --json [--set S]...`, run once per test run (tests/conftest.py)."""
    args = ["plan", str(ROOT / "examples" / example), "--json"]
    for s in sets:
        args += ["--set", s]
    code, out, _ = cli_once(*args)
    return code, json.loads(out)


def test_the_a100_example_lands_sc21s_measurement_inside_its_band(cli_once):
    code, data = plan(cli_once, "a100_cluster.gcl")
    assert code == 0 and data["gpus"] == 768
    predicted = data["hfu"] * A100_PEAK_BF16
    low, high = (bound / data["tokens_per_s"] for bound in data["error_band"]["tokens_per_s"])
    assert low * predicted <= SC21_175B_MEASURED <= high * predicted, (predicted, low, high)


@pytest.mark.parametrize("gpus", ["384", "768"])
def test_the_a100_example_plans_at_the_sizes_its_comment_names(cli_once, gpus):
    code, data = plan(cli_once, "a100_cluster.gcl", f"job_gpus={gpus}")
    assert code == 0 and data["gpus"] == int(gpus)


@pytest.mark.parametrize("racks", ["4", "1400"])
def test_the_gb200_campus_plans_across_its_named_range(cli_once, racks):
    code, data = plan(cli_once, "gb200_nvl72_100k.gcl", f"racks={racks}")
    assert code == 0 and data["status"] == "optimal"


def test_the_flagship_plan_is_one_an_architect_would_show(capsys, cli_once):
    """Issue 27: the GB200 campus planned at 6.6 % MFU with a 51 % bubble and an
    uneven-pipeline warning on every command. Its plan now uses every GPU, keeps the
    bubble small, warns of nothing, and its power budget binds (what it is built to study)."""
    assert main(["check", str(ROOT / "examples" / "gb200_nvl72_100k.gcl")]) == 0
    assert "warning" not in capsys.readouterr().err
    code, data = plan(cli_once, "gb200_nvl72_100k.gcl")
    assert code == 0 and data["warnings"] == []
    assert data["gpus"] == 1400 * 72 and data["mfu"] > 0.3
    assert data["step_breakdown_s"]["bubble"] < 0.15 * data["step_time_s"]
    assert "power" in data["power_budget"]["binds"] and data["status"] == "optimal"


SHIPPED = sorted((ROOT / "examples").glob("*.gcl")) + sorted((ROOT / "dsl" / "std").glob("*.gcl"))


@pytest.mark.parametrize("path", SHIPPED, ids=[f"{p.parent.name}/{p.name}" for p in SHIPPED])
def test_every_shipped_file_is_in_canonical_form(capsys, path):
    """`gclc fmt --check` on every example and standard-library file (issue 30): what the
    project ships is what `gclc fmt` writes, so a user's `fmt --check` of a copy passes."""
    code = main(["fmt", "--check", str(path)])
    assert code == 0, capsys.readouterr().out
    assert len(SHIPPED) >= 14  # eight examples, six std files: a moved folder must not make this vacuous
