"""The chip as the model sees it, checked on hand calculations: peaks and HBM derived from
the microarchitecture, the DVFS curve shared by the step model and the power GP, the
two-level (L2) roofline, torus axes, hosts and DPUs, and no precision fallback."""

from __future__ import annotations

import math

import attrs
import pytest

from gclc.compiler import topology
from gclc.compiler.driver import check_text
from gclc.compiler.ir import Accelerator, Tier
from gclc.compiler.lower import lower
from gclc.model import cache, comms, dvfs
from gclc.model.train import host
from gclc.model.chip_metrics import chip_metrics
from gclc.model.compute import UnsupportedPrecision, op_time, peak
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.model.train.workload import Op
from gclc.solver.power.program import PowerInputs

CHIP = """
chip Dsa {{
  clock = {clock}
  cores = {cores}
  systolic {{ rows = 64  cols = 64 }}
  ops_per_clock {{ fp8 = 16384 }}
  {peak}
  hbm {{ stacks = {stacks}  stack_capacity = 24 GB  stack_bandwidth = 900 GB/s }}
  power {{ tdp = 600 W  idle = 100 W {cap} }}
}}
fabric Up {{ kind = ethernet  topology = switched  bandwidth = 400 GB/s }}
node Box {{ gpus = 8 x Dsa  scaleup = Up }}
cluster C {{ units = 1 x Box }}
model M {{ arch = dense  layers = 2  hidden = 1024  heads = 8  ffn = 4096  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = 16  precision = {precision} }}
"""


def design(clock="1.6 GHz", cores=64, peak="", stacks=6, cap="", precision="bf16"):
    return check_text(CHIP.format(clock=clock, cores=cores, peak=peak, stacks=stacks, cap=cap, precision=precision),
                      "chip.gcl")


def chip_of(result) -> Accelerator:
    return lower(result.design).partitions[0].node.accelerator


# ----------------------------------------------------------------- peaks and HBM


def test_peaks_and_hbm_are_derived_from_the_microarchitecture():
    result = design()
    assert result.ok, [str(d) for d in result.diagnostics]
    chip = chip_of(result)
    assert chip.peak_of("bf16") == pytest.approx(64 * 1.6e9 * 2 * 64 * 64)  # 838.9 TFLOPS
    assert chip.peak_of("fp8") == pytest.approx(64 * 1.6e9 * 16384)
    assert chip.formats == ("bf16", "fp8")
    assert chip.hbm_capacity == pytest.approx(6 * 24e9) and chip.hbm_bandwidth == pytest.approx(6 * 900e9)


def test_a_stated_peak_more_than_5_percent_off_warns_with_both_numbers():
    close = design(peak="peak { bf16 = 850 TFLOPS }")  # 1.3 % above 838.9
    assert close.ok and not close.diagnostics
    far = design(peak="peak { bf16 = 989 TFLOPS }")
    warning = next(d for d in far.diagnostics if d.code == "derived-mismatch")
    text = str(warning)
    assert "989 TFLOPS" in text and "839 TFLOPS" in text and "64 cores x 1.6 GHz" in text
    assert warning.subject.line == 7  # the stated peak's line (the template starts with a newline)
    assert chip_of(far).peak_of("bf16") == pytest.approx(989e12)  # the data sheet wins


def test_explain_shows_each_derivation_with_its_formula():
    rows = {m.key: m for m in chip_metrics(lower(design().design))}
    assert rows["chip.Dsa.peak.bf16"].formula == "64 cores x 1.6 GHz x 8,192 ops/clock"
    assert rows["chip.Dsa.hbm.capacity"].formula.startswith("6 stacks x 24 GB")


def test_a_precision_the_chip_lacks_is_a_located_error_listing_its_formats():
    result = design(precision="fp4")
    error = next(d for d in result.diagnostics if d.code == "unsupported-precision")
    assert "fp4" in error.summary and "bf16, fp8" in error.summary
    assert error.subject.line == 15  # `precision = fp4` in the train block
    with pytest.raises(UnsupportedPrecision):
        peak(chip_of(design()), "fp4")


# ----------------------------------------------------------------- DVFS


def test_the_dvfs_curve_inverts_and_a_cap_slows_compute_by_its_clock():
    assert dvfs.clock_at(100, 600, 350, 3) == pytest.approx(0.5 ** (1 / 3))  # (350-100)/(600-100) = 1/2
    assert dvfs.power(100, 600, 0.5 ** (1 / 3), 3) == pytest.approx(350)
    free, capped = design(), design(cap="cap = 350 W")
    assert chip_of(capped).power_cap == 350
    gemm = Op("g", "gemm", 2.0 * 8192**3, 0.0, 8192, 8192, 8192)
    ratio = op_time(gemm, chip_of(capped), "bf16") / op_time(gemm, chip_of(free), "bf16")
    assert ratio == pytest.approx(0.5 ** (-1 / 3), rel=1e-3)  # kernel overhead aside


def test_the_power_gp_uses_the_chips_curve():
    job = train_job(check_text(CHIP.format(clock="1.6 GHz", cores=64, peak="", stacks=6, precision="bf16",
                                           cap="dvfs_exponent = 2.5  min_clock = 1.2 GHz"), "c.gcl").design)
    best = estimate(job.shape, pinned_config(job), job.partition)
    inputs = PowerInputs.from_plan(job, best)
    assert inputs.exponent == 2.5 and inputs.f_min == pytest.approx(0.75)
    assert inputs.gpu_watts(0.8) == pytest.approx(dvfs.power(inputs.p_idle, inputs.p_full, 0.8, 2.5))


# ----------------------------------------------------------------- the L2 level


def _chip(**changes) -> Accelerator:
    base = Accelerator("X", "", (("bf16", 1e15),), (), 80e9, 3e12, 700, 70, 1.8e9, span=None)
    return attrs.evolve(base, **changes)


def test_gemm_traffic_follows_the_tiles_the_l2_holds():
    m = n = k = 4096
    assert cache.gemm_bytes(m, n, k, 1, 2, _chip()) == 2 * 3 * 4096**2  # no L2 declared: compulsory
    l2 = 3 * 1024**2 * 2  # holds three 1024 x 1024 bf16 tiles
    tiled = cache.gemm_bytes(m, n, k, 1, 2, _chip(l2=l2))
    assert tiled == pytest.approx(2 * (4096**2 * 4 + 4096**2 * 4 + 4096**2))  # A and B read 4 times each
    assert cache.gemm_bytes(m, n, k, 1, 2, _chip(l2=4 * l2)) < tiled


def test_elementwise_chains_hit_in_the_l2_when_their_tensors_fit():
    chip = _chip(l2=10e6, l2_bandwidth=20e12)
    assert cache.elementwise_hbm_bytes(100e6, 10e6, chip) == pytest.approx(75e6)  # half fits: 1/4 of traffic hits
    assert cache.elementwise_hbm_bytes(100e6, 1e6, chip) == pytest.approx(50e6)   # fits: every reuse hits
    assert cache.elementwise_hbm_bytes(100e6, 1e6, _chip(l2=10e6)) == 100e6      # no L2 bandwidth: one level
    slow_l2 = _chip(l2=10e6, l2_bandwidth=1e9)  # the second ceiling binds
    op = Op("e", "elementwise", 0.0, 100e6, tensor=1e6)
    assert op_time(op, slow_l2, "bf16") == pytest.approx(100e6 / 1e9 + 4e-6)


def test_decode_reads_the_kv_that_fits_from_sram():
    chip = _chip(l2=256e6, l2_bandwidth=30e12)
    assert cache.decode_bytes(1e9, 100e6, chip) == pytest.approx(1e9)           # 100 MB of KV stays on chip
    assert cache.decode_bytes(1e9, 300e6, chip) == pytest.approx(1e9 + 172e6)   # 128 MB of it does


# ----------------------------------------------------------------- torus


def test_torus_axes_split_the_chips_links():
    axes = topology.torus_axes((4, 4, 4), 300e9)
    assert [a.group for a in axes] == [4, 16, 64]
    assert all(a.ring_bandwidth == pytest.approx(100e9) for a in axes)  # 6 links of 50 GB/s, 2 per ring
    assert topology.torus_axes((64,), 100e9, wraparound=False)[0].ring_bandwidth == pytest.approx(50e9)


def _axis(level, group, ring, rate=1e11):
    return Tier(level, f"T{level}", "T", "ici", "node", group, rate, 0.0, 1.0, False, 1.0, ring=ring, wraparound=True,
                span=None)


def test_an_all_reduce_over_two_torus_axes_uses_both_at_once():
    s = 1e9
    torus = comms.place(16, 1, (_axis(0, 4, 4), _axis(1, 16, 4)))
    ring = comms.place(16, 1, (_axis(0, 16, 16),))
    # two axes: (2 x 3/4 x S + 2 x 3/4 x S/4) / r / 2; one ring of 16: 2 x 15/16 x S / r
    assert comms.all_reduce(s, torus) == pytest.approx((1.5 + 0.375) * s / 1e11 / 2)
    assert comms.all_reduce(s, ring) == pytest.approx(1.875 * s / 1e11)


def test_the_dsa_example_reports_its_torus_bisection():
    from gclc.compiler.driver import check_file

    rows = {m.key: m for m in chip_metrics(lower(check_file("examples/custom_dsa.gcl").design))}
    bisection = rows["torus.bisection"]
    assert bisection.value == pytest.approx(32 * 50e9)  # 16 columns x 2 wrap links, 50 GB/s each


# ----------------------------------------------------------------- hosts and DPUs

HOSTS = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
cpu Cpu {{ cores = 8 }}
dpu Dpu {{ bandwidth = 400 Gb/s  cores = 16 }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
node Box {{ gpus = 8 x G  cpus = 2 x Cpu  scaleup = Up  nvme_bandwidth = 10 GB/s {dpus} }}
cluster C {{ units = 1 x Box }}
model M {{ arch = dense  layers = 2  hidden = 1024  heads = 8  ffn = 4096  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = 16  sample_bytes = 1 GB  checkpoint_every = 1 h }}
"""


def test_host_paths_by_hand():
    job = train_job(check_text(HOSTS.format(dpus=""), "h.gcl").design)
    node, cfg = job.partition.node, pinned_config(job)
    assert host.input_rate(node) == pytest.approx(10e9)  # min(16 cores x 1 GB/s, NVMe 10 GB/s)
    assert host.data_time(cfg, job.partition) == pytest.approx(16 * 1e9 / 10e9)
    with_dpu = train_job(check_text(HOSTS.format(dpus="dpus = 1 x Dpu"), "h.gcl").design)
    assert host.input_rate(with_dpu.partition.node) == pytest.approx(10e9 + 16e9)  # + min(50 GB/s, 16 cores)
    assert host.checkpoint_rate(with_dpu.partition.node) == pytest.approx(10e9 + 50e9)  # DPU at line rate
    e = estimate(job.shape, cfg, job.partition)
    assert e.breakdown.data > 0 and e.breakdown.checkpoint > 0
    assert estimate(job.shape, cfg, with_dpu.partition).step_time < e.step_time
    assert not math.isinf(host.checkpoint_time(job.shape, cfg, job.partition))


def test_clocks_and_caps_must_be_ordered():
    bad = check_text("chip X { peak { bf16 = 100 TFLOPS }  hbm { capacity = 80 GB  bandwidth = 1 TB/s }\n"
                     "  power { tdp = 700 W  idle = 70 W  min_cap = 300 W  cap = 200 W }\n"
                     "  clock = 1 GHz  base_clock = 2 GHz }\n", "x.gcl")
    found = sorted((d.code, d.subject.line) for d in bad.diagnostics)
    assert found == [("order", 2), ("order", 3)]  # cap below min_cap; base above boost


def test_an_l2_without_its_bandwidth_says_which_it_took(monkeypatch):
    """`l2` without `l2_bandwidth` (issue 35): the generation's measured L2 bandwidth
    (PMC10448217 Table 3) is taken only where `cache.USE_GENERATION_L2` says so, and the
    explained figure names its origin either way."""
    ampere = _chip(vendor="NVIDIA", l2=40e6)                                     # bf16, no fp8
    hopper = _chip(vendor="NVIDIA", l2=50e6, peak=(("bf16", 1e15), ("fp8", 2e15)))
    stated = _chip(vendor="NVIDIA", l2=40e6, l2_bandwidth=5e12)
    other = _chip(vendor="AMD", l2=32e6)
    assert cache.l2_bandwidth(stated) == 5e12 and cache.l2_source(stated) == "stated"
    monkeypatch.setattr(cache, "USE_GENERATION_L2", True)
    assert (cache.l2_bandwidth(ampere), cache.l2_bandwidth(hopper)) == (7219e9, 8986e9)
    assert cache.l2_bandwidth(other) is None and "one memory level" in cache.l2_source(other)
    assert "ampere generation's" in cache.l2_source(ampere)
    monkeypatch.setattr(cache, "USE_GENERATION_L2", False)
    assert cache.l2_bandwidth(ampere) is None and not cache.two_level(ampere)
    assert "one memory level" in cache.l2_source(ampere) and "7.219 TB/s" in cache.l2_source(ampere)
