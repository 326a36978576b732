"""Attention rates from kernel physics (model/compute.py ATTENTION_KERNELS): the published
kernels' forward and backward rates of each tensor-core generation, combined as a training
step runs them, times one in-training share; chips without kernel data keep a fitted value."""

import attrs
from hypothesis import given
from hypothesis import strategies as st
import pytest

from gclc.compiler.driver import check_text
from gclc.compiler import formats
from gclc.model import compute
from gclc.model.ops import Op

_DESIGN = check_text('import "std/nvidia"\nimport "std/google"\n', "chips.gcl").design


def _accelerator(name: str):
    from gclc.compiler.lower import accelerator

    return accelerator(_DESIGN[name])


def test_the_kernels_combine_as_a_step_runs_them_by_hand():
    # one forward and a backward of 2.5x its FLOPs: 3.5 / (1/595 + 2.5/516) of the H100's 989
    assert compute.ATTENTION_KERNELS["hopper"] == (595.0, 516.0, 989.0)
    hopper = 3.5 / (1 / 595 + 2.5 / 516) / 989
    assert hopper == pytest.approx(0.5423, abs=1e-4)
    # Blackwell: FlashAttention-4's 1613 TFLOP/s forward is up to 1.3x cuDNN 9.13's
    forward = 1613 / 1.3
    blackwell = 3.5 / (1 / forward + 2.5 / (forward * 516 / 595)) / 2250
    assert blackwell == pytest.approx(0.4971, abs=1e-4)
    assert compute.kernel_efficiency(_accelerator("B200")) == pytest.approx(blackwell)
    assert compute.kernel_efficiency(_accelerator("H100_SXM")) == pytest.approx(hopper)


@pytest.mark.parametrize("name, generation", [("H100_SXM", "hopper"), ("H200_SXM", "hopper"), ("H800", "hopper"),
                                              ("B200", "blackwell"), ("GB200", "blackwell"), ("GB300", "blackwell"),
                                              ("A100_SXM_80GB", None), ("TPU_v5p", None)])
def test_each_std_chip_takes_its_generations_kernels_or_its_fitted_value(name, generation):
    chip = _accelerator(name)
    assert compute.kernel_efficiency(chip) is None if generation is None else \
        compute.kernel_efficiency(chip) == compute.generation_efficiency(generation)
    if generation is None:     # a fitted value, declared in std
        assert compute.attention_efficiency(chip) == chip.efficiency_of("attention")
    else:                      # nothing declared: the kernels' share times the in-training share
        assert chip.efficiency_of("attention") is None
        assert compute.attention_efficiency(chip) == pytest.approx(
            compute.kernel_efficiency(chip) * compute.training_share(generation))


def test_a_declared_attention_efficiency_is_a_measurement_and_wins():
    chip = _accelerator("B200")
    measured = attrs.evolve(chip, efficiency=(*chip.efficiency, ("attention", 0.33)))
    assert compute.attention_efficiency(measured) == 0.33


def test_blackwell_runs_attention_faster_than_hopper_in_time_not_in_share():
    # a long-sequence attention call, same FLOPs: the B200 at 2.25x the H100's peak is faster, at a
    # lower share of its peak (its exponential units and shared memory did not scale, and its runs
    # fit a lower in-training share: model/compute.py ATTENTION_TRAINING_SHARES)
    h100, b200 = _accelerator("H100_SXM"), _accelerator("B200")
    op = Op("attention", "attention", 1e17, 0.0, 0, 65536, 128)   # ~100 s: a launch cost is 1e-8 of it
    t_h100, t_b200 = compute.op_time(op, h100, "bf16"), compute.op_time(op, b200, "bf16")
    shares = compute.training_share("blackwell") / compute.training_share("hopper")
    kernels = compute.kernel_efficiency(b200) / compute.kernel_efficiency(h100)
    peaks = b200.peak_of("bf16") / h100.peak_of("bf16")
    clocks = compute.clock(b200, "attention") / compute.clock(h100, "attention")
    assert t_h100 / t_b200 == pytest.approx(peaks * kernels * shares * clocks, rel=1e-6)
    assert t_b200 < t_h100 / 1.5
    assert compute.kernel_efficiency(b200) < compute.kernel_efficiency(h100)


def test_the_kernel_parts_shares_are_the_std_chips_declared_ones():
    """The generation's kernels were measured on H100 SXM and B200: the table holds those chips'
    declared bf16 GEMM shares, so every other part of the generation is scaled against them."""
    assert compute.KERNEL_PART_SHARE["hopper"] == _accelerator("H100_SXM").efficiency_of("bf16")
    assert compute.KERNEL_PART_SHARE["blackwell"] == pytest.approx(_accelerator("B200").efficiency_of("bf16"))


def test_gb200_runs_blackwells_mla_decode_at_its_measured_not_its_quoted_clock():
    """GB200 is B200 silicon whose 2.5 PF bf16 peak is quoted 11 % above B200's, but its measured
    GEMMs (MAMF 1822 vs 1745 TFLOP/s) run 4.4 % faster: FlashMLA's B200 decode rate moves to it at
    the measured ratio. The fused attention keeps the peaks' ratio: its in-training share is fitted
    on every part's runs."""
    b200, gb200 = _accelerator("B200"), _accelerator("GB200")
    assert compute.attention_peak(gb200) / compute.attention_peak(b200) == pytest.approx(2500 / 2250)
    measured = (2500 * 0.729) / (2250 * 0.776)
    assert compute.mla_decode_rate(gb200) / compute.mla_decode_rate(b200) == pytest.approx(measured, rel=1e-9)
    assert compute.attention_rate(gb200) / compute.attention_rate(b200) == pytest.approx(2500 / 2250)
    # parts whose bf16 share is their reference's keep the peaks' ratio: H200 and H800 are H100's
    for name in ("H200_SXM", "H800"):
        assert compute.mla_decode_rate(_accelerator(name)) == compute.mla_decode_rate(_accelerator("H100_SXM"))


def test_a_part_without_a_measured_bf16_share_scales_by_its_peak():
    chip = _accelerator("GB200")
    unmeasured = attrs.evolve(chip, efficiency=tuple((k, v) for k, v in chip.efficiency if k != "bf16"))
    assert compute.part_share(unmeasured, "blackwell") == 1.0
    assert compute.part_share(chip, "blackwell") < 1.0


@pytest.mark.parametrize("ratio, generation", [(2.0, "blackwell"), (2.05, "blackwell"), (2.45, "blackwell"),
                                               (2.55, "blackwell_ultra"), (3.0, "blackwell_ultra")])
def test_a_blackwell_part_reads_as_ultra_by_its_fp4_over_fp8_midway(ratio, generation):
    # review: the test was fp4 > 2 x fp8, on which B200 and GB200 sit exactly (9 / 4.5, 10 / 5 PFLOPS): a data
    # sheet rounded up (fp4 = 2.05 x fp8) turned a B200-like part into Blackwell Ultra; Ultra's parts are ~3x
    chip = _accelerator("B200")
    fp8 = dict(chip.peak)["fp8"]
    rated = attrs.evolve(chip, peak=tuple((k, fp8 * ratio if k == "fp4" else v) for k, v in chip.peak))
    assert compute.exp_generation(rated) == generation


@pytest.mark.parametrize("name, generation, scale", [("H100_SXM", "hopper", 1), ("B200", "blackwell", 2),
                                                     ("GB200", "blackwell", 2), ("B300", "blackwell_ultra", 1),
                                                     ("GB300", "blackwell_ultra", 1)])
def test_narrow_heads_pay_for_the_exponentials_their_generation_lacks(name, generation, scale):
    # per score: 4d tensor FLOPs against one exponential. Blackwell doubled its tensor cores per SM
    # and clock, not its 16 MUFU.EX2 per clock (FlashAttention-4): d0 doubles; Blackwell Ultra
    # doubled the SFUs back (NVIDIA, "Making Softmax More Efficient with NVIDIA Blackwell Ultra").
    # Hopper's d0 by direction from cuDNN at head dim 64 against 128: forward 413 / 595, backward 433 / 516.
    chip = _accelerator(name)
    assert compute.exp_generation(chip) == generation

    def half(r):     # (64 / (64 + h)) / (128 / (128 + h)) = r, solved for h
        return 8192 * (1 - r) / (128 * r - 64)

    def share(d, h):
        return (d / (d + h)) / (128 / (128 + h))

    fwd, bwd, _ = compute.ATTENTION_KERNELS[formats.generation(chip)]
    f, b = share(64, half(413 / 595) * scale), share(64, half(433 / 516) * scale)
    expected = (1 / fwd + 2.5 / bwd) / (1 / (fwd * f) + 2.5 / (bwd * b))
    assert compute.attention_head_factor(64, chip) == pytest.approx(expected, rel=1e-9)
    assert compute.attention_head_factor(128, chip) == compute.attention_head_factor(256, chip) == 1.0
    # the same head-dim-64 call takes longer by that factor
    op = Op("attention", "attention", 1e15, 0.0, 0, 65536, 64)
    wide = Op("attention", "attention", 1e15, 0.0, 0, 65536, 128)
    ratio = compute.op_time(op, chip, "bf16") / compute.op_time(wide, chip, "bf16")
    assert ratio == pytest.approx(1 / expected, rel=1e-6)


def test_blackwell_narrow_heads_lose_more_than_hopper_s():
    b200, h100, gb300 = _accelerator("B200"), _accelerator("H100_SXM"), _accelerator("GB300")
    for d in (32, 64, 96):
        assert compute.attention_head_factor(d, b200) < compute.attention_head_factor(d, h100)
        assert compute.attention_head_factor(d, gb300) == pytest.approx(compute.attention_head_factor(d, h100))


@given(d=st.integers(min_value=1, max_value=126))
def test_the_head_factor_rises_with_the_width_and_blackwell_never_beats_hopper(d):
    b200, h100 = _accelerator("B200"), _accelerator("H100_SXM")
    for chip in (b200, h100):
        assert 0.0 < compute.attention_head_factor(d, chip) <= compute.attention_head_factor(d + 1, chip) <= 1.0
    assert compute.attention_head_factor(d, b200) <= compute.attention_head_factor(d, h100)
