"""The never-fitted validation set (benchmarks/data/validation_runs.csv -> benchmarks/validation/):
every row is sourced and outside the calibration set, every design is current, checks and
estimates, and the hardware a row states beyond the std parts reaches the design."""

from __future__ import annotations

import contextlib
import csv
import io
import math
import re
import sys
from pathlib import Path

import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
VALIDATION = BENCH / "validation"


sys.path.insert(0, str(BENCH))   # the benchmark scripts import each other by name
import make_runs  # noqa: E402
import run_variants  # noqa: E402
import validation  # noqa: E402

ROWS = validation.read_rows()
BY_ID = {r["run_id"]: r for r in ROWS}
DESIGNS = sorted(VALIDATION.glob("*.gcl"))


def _ids(path: Path) -> set[str]:
    with open(path, newline="") as f:
        return {r["run_id"] for r in csv.DictReader(f)}


def test_every_row_carries_a_source_a_locator_and_a_derived_measurement():
    assert 20 <= len(ROWS) <= 40
    for row in ROWS:
        for column in ("source", "source_locator", "derivation", "confidence"):
            assert row[column].strip(), f"{row['run_id']}: empty {column}"
        value = float(row["meas_tokens_per_s_per_gpu"])
        assert math.isfinite(value) and value > 0, row["run_id"]
        assert row["kind"] == "steady_state", row["run_id"]


def test_the_validation_csv_has_the_calibration_columns_and_the_measured_ones():
    with open(BENCH / "data" / "public_runs.csv", newline="") as f:
        calibration_columns = next(csv.reader(f))
    columns = list(ROWS[0])
    assert columns[:len(calibration_columns)] == calibration_columns
    assert {"meas_tokens_per_s_per_gpu", "kind", "confidence", "derivation"} <= set(columns)


def test_no_validation_run_is_in_the_calibration_set():
    calibration = _ids(BENCH / "data" / "public_runs.csv") | _ids(BENCH / "data" / "public_runs_measured.csv")
    calibration |= {p.stem for p in (BENCH / "runs").glob("*.gcl")}
    assert not set(BY_ID) & calibration
    assert validation.calibration_ids() >= _ids(BENCH / "data" / "public_runs.csv")


def test_every_row_is_a_design_or_listed_unexpressible_with_a_reason():
    listed = {m["run_id"]: m["reason"] for m in validation.unexpressible(VALIDATION, BY_ID, {p.stem for p in DESIGNS})}
    assert {p.stem for p in DESIGNS} | set(listed) == set(BY_ID)
    assert not {p.stem for p in DESIGNS} & set(listed)
    assert all(reason and reason != "no design file in the runs folder" for reason in listed.values())


def test_the_committed_designs_are_what_the_generator_writes(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        make_runs.main(["--validation", "--out", str(tmp_path), "--no-check"])
    fresh = {p.name: p.read_text() for p in tmp_path.glob("*.gcl")}
    assert fresh == {p.name: p.read_text() for p in DESIGNS}
    assert (tmp_path / "UNEXPRESSIBLE.md").read_text() == (VALIDATION / "UNEXPRESSIBLE.md").read_text()


@pytest.mark.parametrize("path", DESIGNS, ids=lambda p: p.stem)
def test_every_design_checks_and_estimates(path):
    result = check_file(str(path))
    assert result.ok, [d.summary for d in result.diagnostics if d.is_error]
    job = train_job(result.design)
    est = estimate(job.shape, pinned_config(job), job.partition)
    assert math.isfinite(est.tokens_per_s_per_gpu) and est.tokens_per_s_per_gpu > 0


def _job(run_id: str):
    text = make_runs.render(BY_ID[run_id], BY_ID[run_id], "benchmarks/data/validation_runs.csv")
    result = check_text(text, path=str(VALIDATION / f"{run_id}.gcl"))
    assert result.ok, [d.summary for d in result.diagnostics if d.is_error]
    return train_job(result.design), text


def test_torchtitan_h100_is_the_96_gb_part_capped_at_500_w():
    job, _ = _job("tt_h100_t1_1")
    chip = job.partition.node.accelerator
    assert chip.power_cap == pytest.approx(500) and chip.tdp == pytest.approx(700)
    assert chip.hbm_capacity == pytest.approx(96e9, rel=0.08)   # 96 GB or GiB, not std's 80 GB


def test_the_power_cap_slows_the_estimate():
    job, text = _job("tt_h100_t1_1")
    capped = estimate(job.shape, pinned_config(job), job.partition).tokens_per_s_per_gpu
    uncapped_text = text.replace("  power.cap = 500 W", "")
    assert uncapped_text != text
    result = check_text(uncapped_text, path=str(VALIDATION / "uncapped.gcl"))
    assert result.ok
    free = train_job(result.design)
    assert estimate(free.shape, pinned_config(free), free.partition).tokens_per_s_per_gpu > capped


def test_a_row_naming_the_std_h100_gets_no_variant():
    assert run_variants.h100_variant(BY_ID["llama3_405b_1"]) is None    # 80 GB HBM3 at 700 W: std's H100_SXM
    assert run_variants.h100_variant(BY_ID["tt_h100_t1_1"]) is not None


def test_bloom_runs_over_the_omni_path_ports_the_row_states():
    job, _ = _job("bloom_176b")
    scaleout = [t for t in job.partition.tiers if t.scope == "scaleout"]
    assert scaleout[0].bandwidth * 8 / 1e9 == pytest.approx(4 * 100 / 8)   # 4 x 100 Gb/s per 8-GPU node


def test_the_report_ends_with_a_summary_of_every_design():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        validation.main([])
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith(f"never fitted: n={len(DESIGNS)} ")
    assert f"unexpressible {len(ROWS) - len(DESIGNS)} of {len(ROWS)}" in last


# ----------------------------------------------------------------- torchtitan: compile and op-level AC


def _pins(run_id: str) -> dict[str, str]:
    text = (VALIDATION / f"{run_id}.gcl").read_text()
    return {k: v.strip() for k, v in re.findall(r"^\s*(software|recompute|recompute_modules|optimizer_state|"
                                                  r"master_weights|zero)\s*=\s*([^#\n]+)", text, re.M)}


def test_torchtitan_rows_get_the_compiled_stack_only_when_they_name_torch_compile():
    import run_stacks
    for row in ROWS:
        if "torchtitan" not in row["framework"]:
            continue
        compiled = "torch.compile" in row["framework"]
        assert run_stacks.software_of(row) == ("fsdp_compiled" if compiled else "fsdp"), row["run_id"]
        assert _pins(row["run_id"])["software"] == run_stacks.software_of(row)


def test_op_level_activation_checkpointing_maps_to_the_op_level_policy():
    for row in ROWS:
        if "selective op" in row["recompute"].lower():
            pins = _pins(row["run_id"])
            assert (pins["recompute"], pins["recompute_modules"]) == ("selective", "[op_level]"), row["run_id"]


# ----------------------------------------------------------------- NeMo 24.11's Adam state


def test_nemo_2411_nemotron_runs_keep_the_recipes_bf16_adam_state():
    """nemotron4-340b-synth.yaml (dgxc-benchmarking 143b90dd): Apex's distributed Adam (ZeRO-2) with
    optim.dtype bf16; no master beside bf16 weights, a bf16 master beside fp8 parameters."""
    rows = [r for r in ROWS if "nemo 24.11" in r["group"].lower()]
    assert len(rows) == 6
    for row in rows:
        pins = _pins(row["run_id"])
        fp8 = "fp8" in row["precision"].lower()
        assert (pins["optimizer_state"], pins["master_weights"]) == ("bf16", "bf16" if fp8 else "none"), row["run_id"]
        assert (pins["zero"], pins["recompute"]) == ("2", "selective"), row["run_id"]
    others = [r for r in ROWS if "nemo 24.11" not in r["group"].lower() and r["run_id"] in {p.stem for p in DESIGNS}]
    assert others and all("optimizer_state" not in _pins(r["run_id"]) for r in others)


def test_the_128_gpu_nemotron_runs_that_ran_fit():
    for run_id in ("dgxc2411_nemotron340b_bf16_128", "dgxc2411_nemotron340b_fp8_128"):
        job = train_job(check_file(str(VALIDATION / f"{run_id}.gcl")).design)
        cfg = pinned_config(job)
        need = estimate(job.shape, cfg, job.partition).memory.total
        assert need <= job.partition.node.accelerator.hbm_capacity, run_id
