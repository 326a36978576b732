"""Named number formats (compiler/formats.py): a chip lists the formats it runs, a job
asking for one it lacks is a located error listing them, std chips list theirs, and the
model runs a named format at its family's peak with its own byte width."""

from __future__ import annotations

import pytest

from gclc.compiler import formats
from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model.job import pinned_config, train_job
from gclc.model.serve.kv import value_bytes
from gclc.model.train.memory import model_state
from gclc.model.train.step import estimate

DESIGN = """import "std/nvidia"  import "std/amd"
chip X {{
  peak {{ bf16 = 1000 TFLOPS  fp8 = 2000 TFLOPS  fp4 = 4000 TFLOPS }}
  hbm {{ capacity = 192 GB  bandwidth = 8 TB/s }}
  power {{ tdp = 1000 W }}
  {formats}
}}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 900 GB/s }}
node Box {{ gpus = 8 x {chip}  scaleup = Up }}
cluster C {{ units = 1 x Box }}
model M {{ arch = dense  layers = 2  hidden = 1024  heads = 8  ffn = 4096  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = 16  precision = {precision} }}
"""


def check(formats_line="", precision="bf16", chip="X"):
    return check_text(DESIGN.format(formats=formats_line, precision=precision, chip=chip), "f.gcl")


def errors(result):
    return [d for d in result.diagnostics if d.severity.value == "error"]


def test_widths_carry_the_block_scales():
    assert formats.value_bytes("fp8_e4m3") == 1
    assert formats.value_bytes("mxfp8") == pytest.approx((8 + 8 / 32) / 8)   # E8M0 scale per 32 values
    assert formats.value_bytes("mxfp4") == pytest.approx(4.25 / 8)
    assert formats.value_bytes("nvfp4") == pytest.approx(4.5 / 8)            # E4M3 scale per 16 values
    assert formats.value_bytes("bf16") == 2 and formats.value_bytes("fp4") == pytest.approx(0.5 + 1 / 16)
    assert [formats.family(n) for n in ("nvfp4", "mxfp8", "fp8_e5m2fnuz", "bf16")] == ["fp4", "fp8", "fp8", "bf16"]


def test_a_listed_format_runs_and_a_family_name_runs_on_a_chip_listing_a_member():
    assert check("formats = [bf16, fp8_e4m3, nvfp4]", "nvfp4").ok
    assert check("formats = [bf16, fp8_e4m3, nvfp4]", "fp8").ok  # the generic fp8 recipe


def test_a_format_the_chip_lacks_is_a_located_error_listing_its_formats():
    result = check("formats = [bf16, fp8_e4m3, nvfp4]", "mxfp4")
    (error,) = errors(result)
    assert error.code == "unsupported-precision"
    assert "mxfp4" in error.summary and "bf16, fp8_e4m3, nvfp4" in error.summary
    assert error.subject.line == 12  # `precision = mxfp4` in the train block
    assert error.labels[0].span.line == 6  # the chip's `formats`
    assert any("add mxfp4 to `X`'s `formats`" in n for n in error.notes)


def test_a_chip_without_a_list_runs_the_families_its_peaks_imply_and_no_named_encoding():
    assert check("", "fp8").ok
    (error,) = errors(check("", "nvfp4"))
    assert "bf16, fp8, fp4" in error.summary
    assert any("formats = [..., nvfp4]" in n for n in error.notes)


def test_a_listed_format_needs_a_peak_of_its_family():
    (error,) = errors(check("formats = [bf16, mxfp6]", "bf16"))
    assert error.code == "format-without-peak" and "fp6" in error.summary and error.subject.line == 6


def test_std_chips_list_their_formats():
    result = check(chip="H100_SXM")
    h100 = lower(result.design).partitions[0].node.accelerator
    assert "fp8_e4m3" in h100.formats and "nvfp4" not in h100.formats and not h100.runs("mxfp8")
    (error,) = errors(check(chip="H100_SXM", precision="nvfp4"))
    assert "H100_SXM" in error.summary and "fp8_e4m3, fp8_e5m2" in error.summary
    assert check(chip="B200", precision="nvfp4").ok and check(chip="GB200", precision="mxfp8").ok
    assert errors(check(chip="A100_SXM_80GB", precision="fp8"))  # no FP8 on Ampere


def test_the_model_runs_a_named_format_at_its_familys_peak_with_its_width():
    listed = "formats = [bf16, fp8_e4m3, mxfp8, nvfp4, mxfp4, fp4]"
    jobs = {p: train_job(check(listed, p).design) for p in ("fp8_e4m3", "mxfp8", "nvfp4", "mxfp4", "fp4")}
    steps = {p: estimate(j.shape, pinned_config(j), j.partition) for p, j in jobs.items()}
    chip = jobs["nvfp4"].partition.node.accelerator
    assert chip.peak_of("nvfp4") == chip.peak_of("fp4") == 4000e12
    # the MFU denominator is the family's peak: fp4 formats run against 4000 TFLOPS
    assert steps["nvfp4"].mfu * 2 == pytest.approx(steps["nvfp4"].model_flops_per_gpu / 2000e12)
    # weights keep a copy in the GEMMs' format beside bf16: NVFP4's is wider than MXFP4's
    state = {p: model_state(j.shape, pinned_config(j))[0] for p, j in jobs.items()}
    assert state["nvfp4"] > state["mxfp4"] and state["mxfp8"] > state["fp8_e4m3"]
    assert state["nvfp4"] == pytest.approx(state["fp4"])
    assert value_bytes("nvfp4") > value_bytes("mxfp4")  # the KV cache too


def test_explain_lists_the_chips_formats_with_widths_and_peaks():
    from gclc.compiler.driver import check_file
    from gclc.model.chip_metrics import chip_metrics

    rows = {m.key: m for m in chip_metrics(lower(check_file("examples/custom_dsa.gcl").design))}
    row = rows["chip.Orca_DSA.formats"]
    assert "listed" in row.label and "nvfp4 (4.5 bits at peak fp4)" in row.formula and row.value == 7


@pytest.mark.parametrize("chip, fp6_peak", [("B200", 4500e12), ("GB200", 5000e12), ("B300", 4500e12),
                                           ("MI355X", 256 * 2.4e9 * 16384)])
def test_std_chips_that_run_mxfp6_run_it_at_their_listed_fp6_peak(chip, fp6_peak):
    result = check(chip=chip, precision="mxfp6")
    assert result.ok, [str(d) for d in result.diagnostics]
    j = train_job(result.design)
    accelerator = j.partition.node.accelerator
    assert accelerator.peak_of("mxfp6") == pytest.approx(fp6_peak)
    step = estimate(j.shape, pinned_config(j), j.partition)
    assert step.mfu == pytest.approx(step.model_flops_per_gpu / fp6_peak)  # the MFU's denominator
    # ... and one held at 6.25 bits (MXFP6) beside the bf16 master weights, less than an fp8 copy
    fp8 = train_job(check(chip=chip, precision="fp8").design)
    assert model_state(j.shape, pinned_config(j))[0] < model_state(fp8.shape, pinned_config(fp8))[0]


@pytest.mark.parametrize("chip", ["H100_SXM", "A100_SXM_80GB", "MI300X"])
def test_mxfp6_on_a_std_chip_without_it_is_a_located_error_listing_its_formats(chip):
    (error,) = errors(check(chip=chip, precision="mxfp6"))
    assert error.code == "unsupported-precision" and chip in error.summary and "bf16" in error.summary
    assert error.subject.line == 12 and error.subject.path == "f.gcl"
