"""An NVLS loop that costs only the heads its data reaches, held out table by table (an evaluation, not the model).

    .venv/bin/python benchmarks/nvls_heads_with_data_holdout.py

Issue #33: the 64-GPU GB300 table's one-loop calls (512 KiB-4 MiB) take 66-75 us where the model charges NCCL's
25 us and 32 head steps (101 us), and the 8-GPU table's 32 MiB-1 GiB calls run slower than the model's bytes. NCCL
2.28.7 (tag v2.28.7-1) says what a loop does with a head that gets no data: the last loop's chunk is
`alignUp(divUp(remCount, nHeads), 16 KiB)` (src/device/all_reduce.h, RunWorkColl NVLS oneNode), and the scatter and
gather warps copy only to and from the heads whose share is not empty (src/device/prims_simple.h ScatterGatherOp:
`if (realPeerSize > 0 ...) reduceCopy`), one copy a head in turn, though they wait on and post to every head. So a
channel's work is H head-chunks (H: the full loops' heads plus the last loop's heads with data), each a copy call.

Two candidates, each fitted (grid, least mean over tables of each table's mean |busbw error|) on every one-domain
Blackwell NVLS all-reduce table of benchmarks/data/nccl_tests.csv (rows NCCL's own table runs as NVLS, sets_std
rows out) but the one priced, and that table priced with the fit:

- `sum`: L + H x a + a channel's bytes / r + the model's fill (k x ranks / heads loops at r): a fixed cost a
  head-chunk on top of its bytes;
- `max`: L + max(H x s, a channel's bytes / r + fill): the model's loop structure with only the heads that carry
  data stepping, and a free per-call latency L in place of NCCL's 25 us.

Both also take the switch chips' reduction time as a floor (model/network/nccl.py switch_reduction_seconds).
Printed: each table's held-out busbw errors and the fit that left it out, and one fit on all tables.
"""

from __future__ import annotations

import csv
import itertools
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import nccl_curves as bench  # noqa: E402

from gclc.model.network import nccl  # noqa: E402

LAST_CHUNK_ALIGN = 16384   # all_reduce.h: lastChunkSize = alignUp(divUp(remCount, nHeads), 16384 / sizeof(T))
FLOAT = 4                  # nccl-tests' default type (float)


def head_chunks(nbytes: int, c) -> tuple[int, float, int]:
    """(head-chunks a channel copies, its bytes, its chunk): full loops x heads plus the last loop's heads with data."""
    heads = max(1, min(nccl.NVLS_MAX_HEADS, c.per_node))
    per_channel = nbytes / c.nvls_channels
    chunk = nccl._nvls_chunk(per_channel, heads)
    full = int(per_channel // (heads * chunk))
    rest = per_channel - full * heads * chunk
    count = full * heads
    if rest > 0:
        last = math.ceil(math.ceil(rest / FLOAT / heads) * FLOAT / LAST_CHUNK_ALIGN) * LAST_CHUNK_ALIGN
        count += math.ceil(rest / last)
    return count, per_channel, chunk


def fill(per_channel: float, chunk: int, rate: float, k: float, c) -> float:
    heads = max(1, min(nccl.NVLS_MAX_HEADS, c.per_node))
    return k * nccl.nvls_fill_rank_factor(c) * min(heads * chunk, per_channel) / rate


def price_sum(nbytes: int, c, p: tuple) -> float:
    latency, a, rate, k = p
    count, per_channel, chunk = head_chunks(nbytes, c)
    work = count * a + per_channel / rate + fill(per_channel, chunk, rate, k, c)
    return latency + max(work, nccl.switch_reduction_seconds("all_reduce", nbytes, c))


def price_max(nbytes: int, c, p: tuple) -> float:
    latency, step, rate, k = p
    count, per_channel, chunk = head_chunks(nbytes, c)
    work = max(count * step, per_channel / rate + fill(per_channel, chunk, rate, k, c))
    return latency + max(work, nccl.switch_reduction_seconds("all_reduce", nbytes, c))


CANDIDATES = {
    "sum": (price_sum, list(itertools.product((25e-6, 35e-6, 45e-6, 55e-6), (0.0, 0.5e-6, 1.0e-6, 1.5e-6, 2.0e-6),
                                              (20e9, 22e9, 24e9, 26e9, 28e9), (0, 1, 2)))),
    "max": (price_max, list(itertools.product((25e-6, 35e-6, 45e-6, 55e-6), (1.5e-6, 2.0e-6, 2.4e-6, 2.8e-6, 3.2e-6),
                                              (20e9, 20.5e9, 21e9, 22e9), (1, 2, 3)))),
}


def tables() -> dict[str, list[tuple[int, float, object]]]:
    """{case: [(bytes, us, communicator)]} of the one-domain Blackwell all-reduce rows NCCL runs as NVLS."""
    found: dict[str, list] = {}
    for r in csv.DictReader(bench.DATA.open(encoding="utf-8")):
        if r["sets_std"] == "1" or r["collective"] != "all_reduce" or r["algorithm"]:
            continue
        c = bench.communicator(r)
        if c.nodes != 1 or not c.nvls or c.generation != "blackwell" or bench.choice(r).algorithm != "nvls":
            continue
        n, size = int(r["ranks"]), int(r["bytes"])
        us = float(r["time_us"]) if r["time_us"] else size / (float(r["busbw_GBps"]) * 1e9 * n / (2 * (n - 1))) * 1e6
        found.setdefault(r["case"], []).append((size, us, c))
    return found


def errors(rows: list, price, p: tuple) -> list[float]:
    """Busbw error (%) of each row: the published time over the priced one."""
    return [100 * (us / (price(size, c, p) * 1e6) - 1) for size, us, c in rows]


def score(data: dict, cases: list[str], price, p: tuple) -> float:
    return statistics.fmean(statistics.fmean(abs(e) for e in errors(data[case], price, p)) for case in cases)


def main() -> None:
    data = tables()
    model = {case: [100 * (us / (nccl.choose("all_reduce", size, c).seconds * 1e6) - 1) for size, us, c in rows]
             for case, rows in data.items()}
    for name, (price, grid) in CANDIDATES.items():
        print(f"{name}: held out table by table (max |busbw error|, the model's -> the candidate's; errors by size)")
        for held in data:
            others = [case for case in data if case != held]
            best = min(grid, key=lambda p: score(data, others, price, p))
            e = errors(data[held], price, best)
            print(f"  {held:13} L {best[0] * 1e6:3.0f} us, {best[1] * 1e6:3.1f} us, {best[2] / 1e9:4.1f} GB/s a channel, "
                  f"k {best[3]}: {max(map(abs, model[held])):5.1f} -> {max(map(abs, e)):5.1f} %   "
                  + " ".join(f"{x:+.0f}" for x in e))
        best = min(grid, key=lambda p: score(data, list(data), price, p))
        print(f"  in sample, one fit on all: L {best[0] * 1e6:.0f} us, {best[1] * 1e6:.1f} us, {best[2] / 1e9:.1f} GB/s, "
              f"k {best[3]}: " + "; ".join(f"{case} {max(map(abs, errors(rows, price, best))):.1f} %"
                                           for case, rows in data.items()))


if __name__ == "__main__":
    main()
