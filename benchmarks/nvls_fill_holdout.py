"""A candidate NVLS per-call term held out table by table (an evaluation, not part of the model).

Written for the model before the NVLS pipeline's fill landed (2026-12-07, model/network/nccl.py NVLS_FILL_LOOPS,
with Blackwell's NVLS rates read again): on this tree its candidates add to that fill, so the figures
docs/network.md quotes from it are the earlier model's; benchmarks/nvls_rank_holdout.py evaluates on that
earlier model explicitly.

    .venv/bin/python benchmarks/nvls_fill_holdout.py

The published NVLS all-reduce tables carry a per-call constant that reads as 2-3 chunks from every
rank at one channel's rate in 9 of 11 chunk regimes >= 256 MiB (docs/network.md, "Is the constant the
measurement's?"). This script adds that reading to the model's one-domain NVLS all-reduce
(model/network/nccl.py nvls_loop_seconds), only inside this process, as

    fill = k x ranks / heads x loop / channel rate

(loop: a channel's heads x chunk bytes, or the channel's whole share where the call is smaller;
channel rate: the model's NVLS algorithm bandwidth / NVLS channels; for calls of a loop or more it is
k x ranks x chunk / channel rate), and the variant with the whole loop at every size ("every loop full").
k is fitted on all the one-domain all-reduce tables of benchmarks/data/nccl_tests.csv but one (least
mean over tables of each table's mean |busbw error|, sets_std rows out), and the held-out table is
priced with it. Joint: k with a scale on the Blackwell switch chips' reduction rate (the model's
NVLink5 switch rate is an ESTIMATE) and, last, with NVLS_HEAD_STEP_S as well. Then the 16 fabric bands
of benchmarks/nccl_curves.py at each variant's all-table fit, beside the model's.
"""

from __future__ import annotations

import csv
import itertools
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
MODEL_STEP = nccl.NVLS_HEAD_STEP_S


def fill_seconds(k: float, nbytes: float, moving: float, c, every_loop_full: bool) -> float:
    heads = max(1, min(nccl.NVLS_MAX_HEADS, c.per_node))
    per_channel = nbytes / c.nvls_channels
    loop = heads * nccl._nvls_chunk(per_channel, heads)
    first = loop if every_loop_full else min(loop, per_channel)
    return k * c.per_node / heads * first * c.nvls_channels * moving / nbytes


def priced(k: float, scale: float, step: float, every_loop_full: bool):
    """Set the candidate in this process: fill k, Blackwell switch rate x scale, head step."""
    nccl.NVLS_HEAD_STEP_S = step

    def loops_and_fill(nbytes, moving, c):
        return MODEL_LOOPS(nbytes, moving, c) + fill_seconds(k, nbytes, moving, c, every_loop_full)

    nccl.nvls_loop_seconds = loops_and_fill
    return scale


COMMUNICATORS: dict = {}


def communicator(row: dict, scale: float = 1.0):
    import attrs

    key = (row["node"], row["scaleout"], row["nodes"], row["ranks"], row["nvls"], row["collnet"], row.get("nccl", ""))
    if key not in COMMUNICATORS:
        COMMUNICATORS[key] = bench.communicator(row)
    c = COMMUNICATORS[key]
    return attrs.evolve(c, reduce_rate=c.reduce_rate * scale) if c.generation == "blackwell" and scale != 1 else c


def error(row: dict, scale: float) -> float:
    c = communicator(row, scale)
    picked = nccl.choose(row["collective"], float(row["bytes"]), c, only=row.get("algorithm") or None)
    return nccl.bus_bandwidth(row["collective"], float(row["bytes"]), picked.seconds, c.ranks) / 1e9 \
        / bench.measured_busbw(row) - 1


def main() -> None:
    start, cpu = time.perf_counter(), time.process_time()
    rows = [r for r in csv.DictReader(bench.DATA.open(encoding="utf-8")) if r["sets_std"] != "1"]
    tables = sorted({r["case"] for r in rows if r["collective"] == "all_reduce" and not r.get("algorithm")
                     and communicator(r).nvls and communicator(r).nodes == 1})
    by_table = {t: [r for r in rows if r["case"] == t] for t in tables}
    ks = [i * 0.25 for i in range(0, 17)]
    scales = [1 + i * 0.05 for i in range(0, 7)]
    steps = [MODEL_STEP * f for f in (0.6, 0.7, 0.8, 0.9, 1.0)]
    variants = [("k", False, [(k, 1.0, MODEL_STEP) for k in ks]),
                ("k, every loop full", True, [(k, 1.0, MODEL_STEP) for k in ks]),
                ("k + switch rate", False, [(k, s, MODEL_STEP) for k in ks for s in scales]),
                ("k + switch rate + head step", False, list(itertools.product(ks, scales, steps)))]
    fitted = {}
    for name, full, grid in variants:
        table_errors = {}
        for g in grid:
            scale = priced(g[0], g[1], g[2], full)
            table_errors[g] = {t: [abs(error(r, scale)) for r in by_table[t]] for t in tables}
        mean = lambda g, ts: statistics.mean(statistics.mean(table_errors[g][t]) for t in ts)  # noqa: E731
        model = (0.0, 1.0, MODEL_STEP)
        best = min(grid, key=lambda g: mean(g, tables))
        held_out = {}
        print(f"\n{name}: all tables k={best[0]:.2f} switch x{best[1]:.2f} head step {best[2] * 1e6:.2f} us; "
              "held out, |busbw error| median / max / mean, the model's -> the candidate's:")
        better = worse = 0
        for t in tables:
            g = held_out[t] = min(grid, key=lambda g: mean(g, [o for o in tables if o != t]))
            now, held = table_errors[model][t], table_errors[g][t]
            delta = statistics.mean(held) - statistics.mean(now)
            better, worse = better + (delta < -1e-4), worse + (delta > 1e-4)
            print(f"  {t:14} n={len(now):2} k={g[0]:.2f} x{g[1]:.2f} {g[2] * 1e6:.2f} us  "
                  f"{statistics.median(now):6.1%} {max(now):6.1%} {statistics.mean(now):6.1%} -> "
                  f"{statistics.median(held):6.1%} {max(held):6.1%} {statistics.mean(held):6.1%}")
        fitted[name] = (best, held_out, full)
        print(f"  held-out mean better on {better}, worse on {worse}, unchanged on {len(tables) - better - worse} "
              f"of {len(tables)} tables")
    print("\n16 fabric bands (benchmarks/nccl_curves.py's |busbw error| median / max), the model and each variant, "
          "a table's rows priced with the fit that left that table out (the others' with the all-table fit; the "
          "candidate changes only one-domain NVLS all-reduce):")
    model = (0.0, 1.0, MODEL_STEP)
    candidates = [("model", model, {}, False)] + [(n, g, held, f) for n, (g, held, f) in fitted.items()]
    bands: dict = {}
    for name, best, held_out, full in candidates:
        for r in rows:
            scale = priced(*held_out.get(r["case"], best), full)
            band = "1MB-8GB" if float(r["bytes"]) >= bench.MB else "<1MB"
            bands.setdefault((r["case"], band), {}).setdefault(name, []).append(abs(error(r, scale)))
    print(f"  {'case':20} {'band':8}" + "".join(f"{n[:22]:>24}" for n, *_ in candidates))
    within = {n: 0 for n, *_ in candidates}
    for (case, band), found in sorted(bands.items()):
        goal = 0.10 if band == "1MB-8GB" else 0.25
        cells = ""
        for n, *_ in candidates:
            e = found[n]
            within[n] += max(e) <= goal
            cells += f"{statistics.median(e):>11.1%} {max(e):>6.1%}      "
        print(f"  {case:20} {band:8}{cells}")
    print("  bands within goal: " + ", ".join(f"{n} {v}/{len(bands)}" for n, v in within.items()))
    priced(0.0, 1.0, MODEL_STEP, False)
    print(f"wall {time.perf_counter() - start:.1f} s, cpu {time.process_time() - cpu:.1f} s")


if __name__ == "__main__":
    main()
