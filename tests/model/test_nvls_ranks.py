"""What an NVLS all-reduce inside one NVLink domain costs by its ranks (model/network/nccl.py
nvls_loop_seconds, nvls_fill_seconds): the pipeline's fill and drain over every rank's chunk, and the
laws of ranks in one domain, against NCCL's source and the published tables."""

import csv
import importlib.util
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.model.network import nccl
from gclc.model.network.nccl import Communicator
from gclc.testing.profiles import scaled_examples

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def _benchmark():
    spec = importlib.util.spec_from_file_location("nccl_curves", ROOT / "benchmarks" / "nccl_curves.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(case: str) -> dict:
    return next(r for r in csv.DictReader((ROOT / "benchmarks" / "data" / "nccl_tests.csv").open(encoding="utf-8"))
                if r["case"] == case)


def _rack(ranks: int, channels: int = 24, generation: str = "blackwell") -> Communicator:
    """`ranks` GPUs of one NVLink domain: Blackwell's NVL72 rack (NVLink 5, 18 NVLinkSwitch5 chips at 450 GFLOPS,
    their share by the ranks) or Hopper's HGX node (NVLink 4's ring rate 365.6 GB/s, 16 NVLS channels, 4 NVSwitch3
    chips at 400 GFLOPS; at most 8 GPUs)."""
    if generation == "hopper":
        assert ranks <= 8
        return Communicator(ranks, 1, 365.6e9, nvls=True, nvls_channels=16, generation="hopper",
                            nvls_share=nccl.nvls_share("hopper"), reduce_rate=4 * 400e9)
    return Communicator(ranks, 1, 682.2e9, nvls=True, nvls_channels=channels, generation=generation,
                        nvls_share=nccl.nvls_share(generation), reduce_rate=18 * 450e9 * min(1.0, ranks / 72))


def _bytes_bound(size: float, c: Communicator) -> bool:
    loops, heads = nccl.nvls_loops(size, c)
    moving = size / nccl._nvls_through("all_reduce", c)
    return moving + nccl.nvls_fill_seconds(size, moving, c) > loops * heads * nccl.NVLS_HEAD_STEP_S


def _chunk(size: float, c: Communicator) -> int:
    return nccl._nvls_chunk(size / c.nvls_channels, nccl.nvls_loops(size, c)[1])


def _fill(size: float, c: Communicator) -> float:
    return nccl.nvls_fill_seconds(size, size / nccl._nvls_through("all_reduce", c), c)


@settings(max_examples=scaled_examples(60), deadline=None)
@given(st.sampled_from([(8, 24), (64, 24), (72, 24), (72, 32), (4, 24), (16, 24)]), st.floats(0.0, 1.0),
       st.floats(0.0, 1.0))
def test_a_calls_fill_is_the_same_within_a_chunk_regime_and_doubles_with_the_chunk(shape, a, b):
    # all_reduce.h runNvls: the first loop is scattered before any head reduces and the last gathered after the
    # last reduce; a loop is heads x chunk, so at a channel's fixed rate the fill takes the same time for every
    # call NCCL runs with one chunk (a whole loop or more a channel), and twice that where it runs twice the chunk
    ranks, channels = shape
    c = _rack(ranks, channels)
    heads = nccl.nvls_loops(GIB, c)[1]
    low = channels * 8 * heads * 65536                # the first call NCCL runs with 64 KiB chunks
    high = channels * 64 * heads * 131072             # the first with 128 KiB
    inside = [low * (1 + 7.99 * a), low * (1 + 7.99 * b)]
    assert {_chunk(s, c) for s in inside} == {65536}
    assert _fill(inside[0], c) == pytest.approx(_fill(inside[1], c), rel=1e-9)
    above = [high * (1 + 3 * a), high * (1 + 3 * b)]
    assert {_chunk(s, c) for s in above} == {131072}
    assert _fill(above[0], c) == pytest.approx(_fill(above[1], c), rel=1e-9)
    assert _fill(above[0], c) == pytest.approx(2 * _fill(inside[0], c), rel=1e-9)


def test_a_call_bound_by_its_bytes_pays_its_bytes_and_the_fill_after_nccls_latency():
    for ranks in (8, 64, 72):
        c = _rack(ranks)
        for size in (GIB, 4 * GIB, 16 * GIB):
            moving = size / nccl._nvls_through("all_reduce", c)
            assert _bytes_bound(size, c)
            assert nccl.choose("all_reduce", size, c, only="nvls").seconds == pytest.approx(
                25e-6 + moving + nccl.nvls_fill_seconds(size, moving, c))


def test_registered_buffers_pay_no_fill():
    # all_reduce.h v2.28.7 runNvls: `nelem = work->regUsed ? 0 : ...` for the scatter and the gather, so a call
    # whose buffers NCCL registered is its bytes (or its head steps) after NCCL's latency
    for ranks in (8, 64, 72):
        c = _rack(ranks)
        registered = attrs.evolve(c, registered=True)
        for size in (GIB, 4 * GIB):
            moving = size / nccl._nvls_through("all_reduce", c)
            assert nccl.nvls_fill_seconds(size, moving, registered) == 0.0 < nccl.nvls_fill_seconds(size, moving, c)
            assert nccl.choose("all_reduce", size, registered, only="nvls").seconds == pytest.approx(25e-6 + moving)


def test_where_the_head_steps_bind_the_fill_hides_in_them():
    # a 4 MiB call on 64 GPUs is one loop of 32 heads' steps (76 us), longer than its bytes and fill
    c = _rack(64)
    moving = 4 * 2**20 / nccl._nvls_through("all_reduce", c)
    assert moving + nccl.nvls_fill_seconds(4 * 2**20, moving, c) < 32 * nccl.NVLS_HEAD_STEP_S
    assert nccl.choose("all_reduce", 4 * 2**20, c, only="nvls").seconds == pytest.approx(
        25e-6 + 32 * nccl.NVLS_HEAD_STEP_S)


MISSES_128_KIB = pytest.mark.xfail(strict=True, reason=(
    "at 128 KiB chunks on 64-72 ranks the model's per-call constant is 0.9-1.0 ms against the published 1.3-1.5 "
    "(x0.68-0.69: the fill of 2 x ranks / heads loops is 4-4.5 loops, the tables read 5.6 net of NCCL's latency at "
    "72 ranks), where the model's rate (the switch chips', 456 GB/s) is also below the published slopes (485-491)"))


@pytest.mark.parametrize("run, case, chunk", [
    ("coreweave_gb200_72", "gb200_nvl72", 65536), ("verda_gb300_72", "gb300_nvl72", 65536),
    ("oci_gb300_64", "gb300_64", 65536), ("oci_gb300_8", "gb300_8", 65536), ("oci_gb300_8", "gb300_8", 131072),
    pytest.param("oci_gb300_64", "gb300_64", 131072, marks=MISSES_128_KIB),
    pytest.param("verda_gb300_72", "gb300_nvl72", 131072, marks=MISSES_128_KIB)])
def test_the_model_carries_the_published_per_call_constant(run, case, chunk):
    # per NVLS chunk regime from 256 MiB, the line t = constant + bytes / rate through the model's times has the
    # published table's constant within 15 % (benchmarks/nccl_curves.py regime_lines): 0.47-0.69 ms at 64-72 ranks
    # with 64 KiB chunks (published 0.50-0.73), 0.08-0.13 ms at 8. All in sample: the fill's 2 loops and rank factor
    # were chosen with every one of these tables in; held out table by table (benchmarks/nvls_rank_holdout.py) the
    # 64 KiB constants are x0.73 (CoreWeave), x0.87 (8 GPUs), x0.94 (64), x0.96 (Verda), 128 KiB x1.05 (8 GPUs)
    bench = _benchmark()
    data, c = bench.rack_curves()[run], bench.communicator(_row(case))
    model = dict(data, out_of_place={s: nccl.choose("all_reduce", s, c).seconds * 1e6 for s in data["out_of_place"]})
    published = {k: constant for k, _, constant, _ in bench.regime_lines(data, "out_of_place")}
    priced = {k: constant for k, _, constant, _ in bench.regime_lines(model, "out_of_place")}
    assert priced[chunk] == pytest.approx(published[chunk], rel=0.15)


@settings(max_examples=scaled_examples(60), deadline=None)
@given(st.data(), st.sampled_from(["hopper", "blackwell"]), st.sampled_from([16, 24]), st.integers(3, 35),
       st.floats(1.0, 1.99), st.booleans(), st.floats(0.0, 1.0))
def test_more_ranks_in_one_domain_never_speed_a_ring_nor_an_nvls_call_bound_by_its_bytes(data, generation, channels,
                                                                                         log_size, mantissa,
                                                                                         largest, where):
    # the same buffer over one more GPU of the domain: a ring takes 2(n - 1) / n of it through each port and more
    # steps; NVLS takes the whole buffer through each port, its switches add one more operand an element and its
    # fill one more rank's chunks. (Not where NCCL's table moves the call from a ring to NVLS: the published 8 GB300
    # run NVLS and take 17.9 ms at 8 GiB where 4 GB300 run rings in 18.9; nor where head steps bind, below; nor where
    # one more head moves calcCollChunking's cut past the call, which then runs a chunk half as large and fills less:
    # 768 MiB on 24 channels is 128 KiB chunks on 4 GPUs, 64 KiB on 5.) NVLS sizes are drawn where both run NCCL's
    # 64 or 128 KiB chunks, bound by their bytes.
    ranks = data.draw(st.integers(2, 7 if generation == "hopper" else 71))
    c, more = _rack(ranks, channels, generation), _rack(ranks + 1, channels, generation)
    size = mantissa * 2.0**log_size
    assert nccl.choose("all_reduce", size, more, only="ring").seconds >= \
        nccl.choose("all_reduce", size, c, only="ring").seconds * (1 - 1e-12)
    heads, most = nccl.nvls_loops(GIB, c)[1], nccl.nvls_loops(GIB, more)[1]
    low, high = (64 * most * 131072, 256 * most * 131072) if largest else (8 * most * 65536, 64 * heads * 131072)
    size = c.nvls_channels * (low + where * (high - low) * (1 - 1e-9))
    if _bytes_bound(size, c) and _bytes_bound(size, more) and _chunk(size, c) == _chunk(size, more):
        assert nccl.choose("all_reduce", size, more, only="nvls").seconds >= \
            nccl.choose("all_reduce", size, c, only="nvls").seconds * (1 - 1e-12)


def test_nccls_chunking_can_run_a_call_of_more_ranks_in_fewer_loops():
    # calcCollChunking cuts the chunk on a channel's bytes against heads x chunk: an 8 MiB call on 24 channels
    # (341 KiB a channel) runs 21 heads in 2 loops of 16 KiB chunks (336 KiB a loop) and 22 heads in 1, so where head
    # steps bind, 22 GPUs of a rack finish it sooner than 21 (78 us, its bytes and fill, against 125, 42 head steps)
    bench = _benchmark()
    size = 8 * 2**20
    assert [bench.nvls_chunk(size, 24, n) for n in (21, 22)] == [16384, 16384]
    assert [nccl.nvls_loops(size, _rack(n))[0] for n in (21, 22)] == [2, 1]
    seconds = [nccl.choose("all_reduce", size, _rack(n), only="nvls").seconds for n in (21, 22)]
    assert seconds[1] < seconds[0]
    moving = size / nccl._nvls_through("all_reduce", _rack(22))
    one_loop = max(22 * nccl.NVLS_HEAD_STEP_S, moving + nccl.nvls_fill_seconds(size, moving, _rack(22)))
    assert seconds == pytest.approx([25e-6 + 2 * 21 * nccl.NVLS_HEAD_STEP_S, 25e-6 + one_loop])


def test_the_published_8_gpu_nvls_run_beats_the_4_gpu_rings_on_large_calls():
    # why the law above leaves NCCL's pick out: the same rack, NCCL and command (Oracle's GB300 quick start) take
    # 17.93 / 35.72 ms on 8 ranks (NVLS) and 18.92 / 37.61 on 4 (rings) at 8 / 16 GiB; the model runs the same
    # algorithms there
    bench = _benchmark()
    runs = bench.rack_curves()
    for size in (8 * GIB, 16 * GIB):
        assert runs["oci_gb300_8"]["out_of_place"][size] < runs["oci_gb300_4"]["out_of_place"][size]
    assert bench.choice(dict(_row("gb300_8"), bytes=str(8 * GIB))).algorithm == "nvls"
    assert bench.choice(dict(_row("gb300_4"), bytes=str(8 * GIB))).algorithm == "ring"


def test_blackwells_nvls_rate_is_the_8_gpu_tables_128_kib_slope():
    # NVLS_BLACKWELL_SHARE: the slope of Oracle's 8-GPU table through the sizes NCCL runs with 128 KiB chunks
    # (2-16 GiB), over NVLink 5's ring rate; a slope carries no per-call cost
    bench = _benchmark()
    slopes = {chunk: rate for chunk, _, _, rate in bench.regime_lines(bench.rack_curves()["oci_gb300_8"], "out_of_place")}
    assert nccl.nvls_share("blackwell") * 682.2e9 == pytest.approx(slopes[131072], rel=0.005)
    c = attrs.evolve(_rack(8), reduce_rate=18 * 450e9)   # all of a rack's chips
    assert nccl._nvls_through("all_reduce", c) == pytest.approx(slopes[131072], rel=0.005)
