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
    return Communicator(ranks, 1, 682.2e9, nvls=True, nvls_channels=channels, generation=generation,
                        nvls_share=nccl.nvls_share(generation), reduce_rate=18 * 450e9 * min(1.0, ranks / 72))


def test_a_call_bound_by_its_bytes_pays_two_chunks_from_every_rank_at_a_channels_rate():
    # all_reduce.h runNvls: scatter, reduce and multicast, gather; the first loop is scattered before any head
    # reduces and the last gathered after the last reduce: NVLS_FILL_LOOPS (2) x ranks / heads loops of a channel
    # (heads x chunk, the chunk as the benchmark reads calcCollChunking apart from the model), at its rate
    bench = _benchmark()
    assert nccl.NVLS_FILL_LOOPS == 2
    for ranks in (8, 64, 72):
        c = _rack(ranks)
        for size in (GIB, 4 * GIB, 16 * GIB):
            moving = size / nccl._nvls_through("all_reduce", c)
            chunk = bench.nvls_chunk(size, 24, ranks)
            fill = 2 * ranks * chunk / (size / 24 / moving)
            assert nccl.nvls_fill_seconds(size, moving, c) == pytest.approx(fill)
            loops, heads = nccl.nvls_loops(size, c)
            assert moving + fill > loops * heads * nccl.NVLS_HEAD_STEP_S   # bound by its bytes here
            assert nccl.choose("all_reduce", size, c, only="nvls").seconds == pytest.approx(25e-6 + moving + fill)


def test_where_the_head_steps_bind_the_fill_hides_in_them():
    # a 4 MiB call on 64 GPUs is one loop of 32 heads' steps (76 us), longer than its bytes and fill
    c = _rack(64)
    moving = 4 * 2**20 / nccl._nvls_through("all_reduce", c)
    assert moving + nccl.nvls_fill_seconds(4 * 2**20, moving, c) < 32 * nccl.NVLS_HEAD_STEP_S
    assert nccl.choose("all_reduce", 4 * 2**20, c, only="nvls").seconds == pytest.approx(
        25e-6 + 32 * nccl.NVLS_HEAD_STEP_S)


@pytest.mark.parametrize("run, case, chunk, within", [
    ("coreweave_gb200_72", "gb200_nvl72", 65536, 0.15), ("verda_gb300_72", "gb300_nvl72", 65536, 0.15),
    ("oci_gb300_64", "gb300_64", 65536, 0.15), ("oci_gb300_8", "gb300_8", 65536, 0.15),
    ("oci_gb300_8", "gb300_8", 131072, 0.15), ("oci_gb300_64", "gb300_64", 131072, 0.35),
    ("verda_gb300_72", "gb300_nvl72", 131072, 0.35)])
def test_the_model_carries_the_published_per_call_constant(run, case, chunk, within):
    # per NVLS chunk regime from 256 MiB, the line t = constant + bytes / rate through the model's times has the
    # published table's constant (benchmarks/nccl_curves.py regime_lines): 0.47-0.69 ms at 64-72 ranks with 64 KiB
    # chunks (published 0.50-0.73), 0.08-0.13 ms at 8; at 128 KiB on 64-72 ranks 0.9-1.0 ms against 1.3-1.5,
    # where the model's rate (the switch chips', 456 GB/s) is below the published slopes (485-491)
    bench = _benchmark()
    data, c = bench.rack_curves()[run], bench.communicator(_row(case))
    model = dict(data, out_of_place={s: nccl.choose("all_reduce", s, c).seconds * 1e6 for s in data["out_of_place"]})
    published = {k: constant for k, _, constant, _ in bench.regime_lines(data, "out_of_place")}
    priced = {k: constant for k, _, constant, _ in bench.regime_lines(model, "out_of_place")}
    assert priced[chunk] == pytest.approx(published[chunk], rel=within)


@settings(max_examples=scaled_examples(60), deadline=None)
@given(st.sampled_from(["hopper", "blackwell"]), st.sampled_from([16, 24]), st.integers(2, 71),
       st.integers(3, 35), st.floats(1.0, 1.99))
def test_more_ranks_in_one_domain_never_speed_a_ring_nor_an_nvls_call_bound_by_its_bytes(generation, channels, ranks,
                                                                                         log_size, mantissa):
    # the same buffer over one more GPU of the domain: a ring takes 2(n - 1) / n of it through each port and more
    # steps; NVLS takes the whole buffer through each port, its switches add one more operand an element and its
    # fill one more rank's chunks. (Not where NCCL's table moves the call from a ring to NVLS: the published 8 GB300
    # run NVLS and take 17.9 ms at 8 GiB where 4 GB300 run rings in 18.9; nor where head steps bind, below; nor where
    # one more head moves calcCollChunking's cut past the call, which then runs a chunk half as large and fills less:
    # 768 MiB on 24 channels is 128 KiB chunks on 4 GPUs, 64 KiB on 5.)
    size = mantissa * 2.0**log_size
    c, more = _rack(ranks, channels, generation), _rack(ranks + 1, channels, generation)
    assert nccl.choose("all_reduce", size, more, only="ring").seconds >= \
        nccl.choose("all_reduce", size, c, only="ring").seconds * (1 - 1e-12)

    def bound_by_bytes(x):
        loops, heads = nccl.nvls_loops(size, x)
        moving = size / nccl._nvls_through("all_reduce", x)
        return moving + nccl.nvls_fill_seconds(size, moving, x) > loops * heads * nccl.NVLS_HEAD_STEP_S
    def chunk(x):
        return nccl._nvls_chunk(size / x.nvls_channels, nccl.nvls_loops(size, x)[1])
    if bound_by_bytes(c) and bound_by_bytes(more) and chunk(c) == chunk(more):
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
