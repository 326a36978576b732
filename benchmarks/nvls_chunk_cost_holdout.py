"""A per-chunk cost added to an NVLS loop's bytes, held out table by table (an evaluation, not the model).

Written for the model before the NVLS pipeline's fill landed (2026-12-07, model/network/nccl.py NVLS_FILL_LOOPS,
with Blackwell's NVLS rates read again): on this tree its candidates add to that fill, so the figures
docs/network.md quotes from it are the earlier model's; benchmarks/nvls_rank_holdout.py evaluates on that
earlier model explicitly.

    .venv/bin/python benchmarks/nvls_chunk_cost_holdout.py

The reading under test (issue #33): the published 64-GPU GB300 table's marginal time per byte between
neighbouring sizes is ~310-370 GB/s algbw with NCCL's 32 KiB-or-smaller NVLS chunks, ~463 GB/s with 64 KiB and
~491 GB/s with 128 KiB, as if each chunk paid a fixed cost on top of its bytes. The model prices a loop as the
longer of heads x NVLS_HEAD_STEP_S and its bytes at the port's NVLS rate (model/network/nccl.py
nvls_loop_seconds, a MAX); the candidates price it as their SUM, only inside this process:

    call = 25 us + loops x heads x a + bytes / (f x the model's NVLS rate)

(loops and heads as NCCL runs them, nccl.nvls_loops; the call never cheaper than the largest call below each
chunk cut, as the model's law asks). Parameters, fitted on every one-domain NVLS all-reduce table but the one
held out (least mean over tables of each table's mean |busbw error|): `a` one for all GPUs, or one per GPU
generation; `f` a scale on the Blackwell NVLS rate (the switch chips' reduction rate and the port share: both
ESTIMATES in the model), 1 or fitted. Tables: every one-domain all-reduce case of benchmarks/data/nccl_tests.csv
(sets_std rows out, as benchmarks/nccl_curves.py counts them) and Bitdeer's 8 x H100 NVLS table
(tests/data/measurements/nccl/bitdeer_h100_1node_all_reduce.txt, out-of-place). Printed: each table's median /
max |busbw error|, the model's and each candidate's held out, and the fabric bands at the held-out fits
(benchmarks/nccl_curves.py's 16 and Bitdeer's table); first, each rack table's own fit of the form, in sample.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import nccl_curves as bench  # noqa: E402

from gclc.model.network import nccl  # noqa: E402

MODEL_LOOPS = nccl.nvls_loop_seconds
BITDEER = HERE.parent / "tests" / "data" / "measurements" / "nccl" / "bitdeer_h100_1node_all_reduce.txt"
LATENCY = nccl.STEP_LATENCY_US["nvlink"]["nvls"][nccl.PROTOCOLS.index("Simple")] * 1e-6


def bitdeer_rows() -> list[dict]:
    """Bitdeer's one-node 8 x H100 all-reduce (NVLS by NCCL's pick), out-of-place busbw, as nccl_tests.csv rows."""
    rows = []
    for line in BITDEER.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) >= 13 and fields[0].isdigit():
            rows.append({"case": "h100_bitdeer_1node", "node": "DGX_H100", "scaleout": "", "ranks": "8", "nodes": "1",
                         "nvls": "1", "collnet": "0", "collective": "all_reduce", "bytes": fields[0],
                         "busbw_GBps": fields[7], "time_us": "", "sets_std": "0", "algorithm": "", "nccl": ""})
    return rows


def summed(a: dict[str, float], f: float):
    """The candidate's nvls_loop_seconds: a loop's head costs plus its bytes, never cheaper than below a cut."""

    def price(per_channel: float, moving_per_byte: float, c) -> float:
        heads = max(1, min(nccl.NVLS_MAX_HEADS, c.per_node))
        loops = max(1, math.ceil(per_channel / (heads * nccl._nvls_chunk(per_channel, heads))))
        return loops * heads * a[c.generation] + per_channel * c.nvls_channels * moving_per_byte

    def loop_seconds(nbytes: float, moving: float, c) -> float:
        per_byte = moving / nbytes / (f if c.generation == "blackwell" else 1.0)
        per_channel = nbytes / c.nvls_channels
        heads = max(1, min(nccl.NVLS_MAX_HEADS, c.per_node))
        seconds, chunk = price(per_channel, per_byte, c), nccl.NVLS_CHUNK_BYTES
        for cut_loops, smaller in nccl.NVLS_CHUNK_CUTS:   # the largest call below each cut it passes
            cut = cut_loops * heads * chunk
            if cut <= per_channel:
                seconds = max(seconds, price(cut * (1 - 1e-9), per_byte, c))
            chunk = smaller
        return LATENCY + seconds

    return loop_seconds


COMMUNICATORS: dict = {}


def communicator(row: dict):
    key = (row["node"], row["scaleout"], row["nodes"], row["ranks"], row["nvls"], row["collnet"], row.get("nccl", ""))
    if key not in COMMUNICATORS:
        COMMUNICATORS[key] = bench.communicator(row)
    return COMMUNICATORS[key]


def error(row: dict) -> float:
    c = communicator(row)
    picked = nccl.choose(row["collective"], float(row["bytes"]), c, only=row.get("algorithm") or None)
    return nccl.bus_bandwidth(row["collective"], float(row["bytes"]), picked.seconds, c.ranks) / 1e9 \
        / bench.measured_busbw(row) - 1


def use(candidate) -> None:
    nccl.nvls_loop_seconds = candidate if candidate is not None else MODEL_LOOPS
    nccl._options.cache_clear()


def alone() -> None:
    """Each rack table's own least-squares SUM (25 us + loops x heads x a + bytes / R, out-of-place, every size
    from 1 MiB NCCL runs as NVLS by the benchmark's own chunk reading): the best the form does in sample."""
    print("each rack table fitted alone (in sample), busbw error by size from the smallest NVLS size:")
    for name, run in bench.rack_curves().items():
        channels, heads = run["channels"] or 24, min(nccl.NVLS_MAX_HEADS, run["ranks"])
        sizes = sorted(s for s in run["out_of_place"] if s >= (4 * bench.MB if run["ranks"] <= 8 else bench.MB))
        if run["ranks"] < 8:   # NCCL runs rings on 4 GPUs of a rack (nccl.predicted)
            continue
        loops = [max(1, math.ceil(s / channels / (heads * bench.nvls_chunk(s, channels, run["ranks"])))) for s in sizes]
        times = [run["out_of_place"][s] * 1e-6 - LATENCY for s in sizes]
        # normal equations of t = x1 x loops x heads + x2 x bytes
        u, v = [n * heads for n in loops], [float(s) for s in sizes]
        uu, uv, vv = sum(x * x for x in u), sum(x * y for x, y in zip(u, v)), sum(y * y for y in v)
        ut, vt = sum(x * t for x, t in zip(u, times)), sum(y * t for y, t in zip(v, times))
        det = uu * vv - uv * uv
        a, per_byte = (ut * vv - vt * uv) / det, (uu * vt - uv * ut) / det
        errors = [(t + LATENCY) / (LATENCY + a * x + per_byte * y) - 1 for t, x, y in zip(times, u, v)]
        print(f"  {name:20} a = {a * 1e6:.2f} us a head a loop, R = {1 / per_byte / 1e9:.0f} GB/s algbw, "
              f"{sizes[0] // bench.MB}-{sizes[-1] // bench.MB} MiB: " + " ".join(f"{e:+.0%}" for e in errors))


def main() -> None:
    alone()
    start, cpu = time.perf_counter(), time.process_time()
    rows = [r for r in csv.DictReader(bench.DATA.open(encoding="utf-8")) if r["sets_std"] != "1"] + bitdeer_rows()
    tables = sorted({r["case"] for r in rows if r["collective"] == "all_reduce" and not r.get("algorithm")
                     and communicator(r).nvls and communicator(r).nodes == 1})
    by_table = {t: [r for r in rows if r["case"] == t] for t in tables}
    a_grid = [i * 0.1e-6 for i in range(0, 31)]
    f_grid = [1 + i * 0.04 for i in range(-2, 21)]
    variants = {
        "sum: one a": [(("one", a, a), 1.0) for a in a_grid],
        "sum: one a, Blackwell rate x f": [(("one", a, a), f) for a in a_grid for f in f_grid],
        "sum: a per generation, x f": [(("gen", ah, ab), f) for ah in a_grid[:13:2] for ab in a_grid for f in f_grid],
    }
    model_errors = {t: [error(r) for r in by_table[t]] for t in tables}
    cache: dict = {}

    def errors(g):
        if g not in cache:
            (_, ah, ab), f = g
            use(summed({"hopper": ah, "blackwell": ab, "ampere": ab}, f))
            cache[g] = {t: [error(r) for r in by_table[t]] for t in tables}
        return cache[g]

    def mean(g, ts):
        return statistics.mean(statistics.mean(map(abs, errors(g)[t])) for t in ts)

    held: dict = {}
    for name, grid in variants.items():
        best = min(grid, key=lambda g: mean(g, tables))
        print(f"\n{name}: all tables a = {best[0][1] * 1e6:.2f} us Hopper, {best[0][2] * 1e6:.2f} us Blackwell a head "
              f"a loop, Blackwell rate x {best[1]:.2f}; held out, |busbw error| median / max, the model -> the candidate:")
        for t in tables:
            g = min(grid, key=lambda g: mean(g, [o for o in tables if o != t]))
            held[(name, t)] = g
            now, then = list(map(abs, model_errors[t])), list(map(abs, errors(g)[t]))
            print(f"  {t:20} n={len(now):2} a={g[0][1] * 1e6:.2f}/{g[0][2] * 1e6:.2f} us f={g[1]:.2f}  "
                  f"{statistics.median(now):6.1%} {max(now):6.1%} -> {statistics.median(then):6.1%} {max(then):6.1%}")
        if name == list(variants)[-1]:
            for t in ("gb300_64", "gb300_8", "gb200_nvl72", "gb300_nvl72", "h100_bitdeer_1node"):
                print(f"    in sample {t}: " + " ".join(f"{e:+.0%}" for e in errors(best)[t]))
        delta = [statistics.mean(map(abs, errors(held[(name, t)])[t])) - statistics.mean(map(abs, model_errors[t]))
                 for t in tables]
        print(f"  held-out mean |error| better on {sum(d < -1e-4 for d in delta)}, worse on "
              f"{sum(d > 1e-4 for d in delta)} of {len(tables)} tables")
    print("\nfabric bands (benchmarks/nccl_curves.py's rows, |busbw error| max), each NVLS table priced with the fit "
          "that left it out:")
    bands: dict = {}
    for name in [None, *variants]:
        for r in rows:
            if name is not None and (name, r["case"]) in held:
                (_, ah, ab), f = held[(name, r["case"])]
                use(summed({"hopper": ah, "blackwell": ab, "ampere": ab}, f))
            else:
                use(None)
            band = "1MB-8GB" if float(r["bytes"]) >= bench.MB else "<1MB"
            bands.setdefault((r["case"], band), {}).setdefault(name or "model", []).append(abs(error(r)))
    names = ["model", *variants]
    print(f"  {'case':20} {'band':8}" + "".join(f"{n[:30]:>32}" for n in names))
    within = dict.fromkeys(names, 0)
    for (case, band), found in sorted(bands.items()):
        goal = 0.10 if band == "1MB-8GB" else 0.25
        cells = "".join(f"{max(found[n]):>32.1%}" for n in names)
        for n in names:
            within[n] += max(found[n]) <= goal
        print(f"  {case:20} {band:8}{cells}")
    use(None)
    print("nvls chunk cost held out, bands within goal: " + ", ".join(f"{n} {v}/{len(bands)}" for n, v in within.items())
          + f" | wall {time.perf_counter() - start:.1f} s, cpu {time.process_time() - cpu:.1f} s")


if __name__ == "__main__":
    main()
