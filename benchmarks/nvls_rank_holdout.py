"""What grows with the ranks in an NVLS all-reduce, read from the published tables and held out
(an evaluation, not the model).

    .venv/bin/python benchmarks/nvls_rank_holdout.py

Issue #33: the published one-domain NVLS all-reduce tables carry a per-call cost (0.5-0.7 ms at 64-72
ranks with 64 KiB chunks, 0.09 ms at 8) that the model (model/network/nccl.py nvls_loop_seconds) lacks.
NCCL's source (tags v2.25.1-1, v2.28.7-1) shows no stage that costs a call more per rank beyond the heads
(docs/network.md, "What grows with the ranks"). Two parts:

1. Readings of the data, not a model: for each rack table and each NVLS chunk NCCL runs (enqueue.cc
   calcCollChunking, as nccl.nvls_loops counts the loops), the line t = intercept + loops x slope through
   the sizes of that chunk, the slope against the loop's bytes at the channel's rate, the intercept in
   loops (and net of NCCL's 25 us NVLS latency, which the model charges apart from the fill).
2. Candidates for a term linear in the ranks, each set in this process only on the model as it was before
   the fill landed (2026-12-07: no fill, nccl.NVLS_FILL_LOOPS = 0; Blackwell's NVLS share Hopper's 275/370
   scaled by NCCL's nvlsEfficiency ratio, 0.647; the NVLink 5 switch chips at 400 GFLOPS), fitted on every one-domain
   NVLS all-reduce table of benchmarks/data/nccl_tests.csv but the one priced (least mean over tables of
   each table's mean |busbw error|, sets_std rows out) and the held-out table priced with that fit:
   - `ranks x chunk`: a cost a call of k x ranks x chunk (us per rank and KiB of NCCL's chunk);
   - `ranks x chunks`: a cost a call of k x ranks x the chunks a channel runs (loops x heads);
   - `heads with data`: no parameter; the last, partial loop pays a head step only for the heads its
     data reaches (all_reduce.h lastChunkSize, rounded up to 16 KiB a head; prims_simple.h
     ScatterGatherOp skips a head whose share is empty);
   - `fill k x ranks/heads`: the three-stage pipeline's fill and drain (all_reduce.h runNvls: scatter,
     reduce and multicast, gather), k x ranks / heads loops of the channel's bytes inside the bytes
     branch of the loop's max, with Blackwell's NVLS rate (the port share and the switch chips' rate, both
     ESTIMATES) scaled by f;
   - `fill k loops`: the same without ranks / heads.
   The landed model is `fill k x ranks/heads` at k = 2 with those rates re-read (share 0.707 from the 8-GPU
   table's 128 KiB slope, x1.09; switch chips 450 GFLOPS, x1.125), printed beside as `landed`.
   Printed: each table's max |busbw error|, the model's and the held-out fit's; for the fills, each rack
   table's per-call constant by chunk regime over the published, at the held-out fit; the fabric bands of
   benchmarks/nccl_curves.py at the held-out fits; and for the fills, the largest fall of bus bandwidth
   as the size doubles (8 B-64 GiB) on 8, 64 and 72 Blackwell ranks (the model's law that it
   never falls: tests/model/test_nccl_model.py).
"""

from __future__ import annotations

import csv
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import nccl_curves as bench  # noqa: E402

import attrs  # noqa: E402

from gclc.model.network import nccl  # noqa: E402

MODEL = nccl.nvls_loop_seconds
LATENCY = 25e-6      # NCCL's NVLS latency (tuning.cc hwLatencies), as the model charges it
LAST_CHUNK_ALIGN = 16384   # all_reduce.h: lastChunkSize = alignUp(divUp(remCount, nHeads), 16384 / sizeof(T))
# The rack tables of benchmarks/data/nccl_rack_curves.csv as cases of nccl_tests.csv (the communicator)
RACK_CASES = {"oci_gb300_64": "gb300_64", "oci_gb300_8": "gb300_8", "coreweave_gb200_72": "gb200_nvl72",
              "verda_gb300_72": "gb300_nvl72"}


def rows() -> list[dict]:
    return [r for r in csv.DictReader(bench.DATA.open(encoding="utf-8")) if r["sets_std"] != "1"]


COMMUNICATORS: dict = {}
BEFORE_SHARE = nccl.NVLS_EFFICIENCY * 0.74 / 0.85   # Hopper's share x NCCL's nvlsEfficiency ratio (tuning.cc)
BEFORE_SWITCH = 400e9 / 450e9                       # NVLinkSwitch5's reduction before, over now


def before(c):
    """The communicator as the model priced it before the fill landed (Blackwell's two NVLS rates)."""
    if c.generation != "blackwell":
        return c
    return attrs.evolve(c, nvls_share=BEFORE_SHARE, reduce_rate=c.reduce_rate * BEFORE_SWITCH)


def communicator(row: dict, landed: bool = False):
    if row["case"] not in COMMUNICATORS:
        COMMUNICATORS[row["case"]] = bench.communicator(row)
    return COMMUNICATORS[row["case"]] if landed else before(COMMUNICATORS[row["case"]])


def loop_shape(nbytes: float, c) -> tuple[int, int, int, float]:
    """(loops, heads, chunk, a channel's bytes) of an NVLS all-reduce inside one domain, as NCCL runs it."""
    loops, heads = nccl.nvls_loops(nbytes, c)
    per_channel = nbytes / c.nvls_channels
    return loops, heads, nccl._nvls_chunk(per_channel, heads), per_channel


def print_readings() -> None:
    print("Per chunk regime (sizes NCCL runs as NVLS with one chunk; t = intercept + loops x slope):")
    by_case = {r["case"]: r for r in rows()}
    for run_name, case in RACK_CASES.items():
        run, c = bench.rack_curves()[run_name], communicator(by_case[case], landed=True)
        kept = bench.nvls_sizes(run_name)
        groups: dict[int, list[tuple[int, float]]] = {}
        for size, us in sorted(run["out_of_place"].items()):
            if kept is not None and size not in kept:
                continue
            loops, heads, chunk, _ = loop_shape(size, c)
            groups.setdefault(chunk, []).append((loops, us))
        rate = nccl._nvls_through("all_reduce", c) / c.nvls_channels
        for chunk, points in sorted(groups.items()):
            if len({n for n, _ in points}) < 2:
                continue
            fit = statistics.linear_regression([float(n) for n, _ in points], [t for _, t in points])
            loop_us = heads * chunk / rate * 1e6
            print(f"  {run_name:19} {c.ranks:2} ranks {heads:2} heads {chunk // 1024:3} KiB  loops "
                  f"{points[0][0]:3}-{points[-1][0]:3}: slope {fit.slope:6.1f} us a loop ({heads * chunk / fit.slope / 1e3:4.1f} "
                  f"GB/s a channel; heads x {fit.slope / heads:4.2f} us), intercept {fit.intercept:7.1f} us = "
                  f"{fit.intercept / fit.slope:4.1f} slopes, {fit.intercept / loop_us:4.1f} loops at the model's channel rate, "
                  f"{(fit.intercept - LATENCY * 1e6) / loop_us:4.1f} net of NCCL's NVLS latency")


def heads_with_data(nbytes: float, c) -> float:
    """Head steps a call pays where its last, partial loop steps only for the heads its data reaches."""
    loops, heads, chunk, per_channel = loop_shape(nbytes, c)
    full = math.floor(per_channel / (heads * chunk))
    rest = per_channel - full * heads * chunk
    if rest <= 0:
        return full * heads
    last = math.ceil(math.ceil(rest / heads) / LAST_CHUNK_ALIGN) * LAST_CHUNK_ALIGN
    return full * heads + min(heads, math.ceil(rest / last))


def fill_body(per_channel: float, heads: int, ranks: int, rate: float, k: float, by_ranks: bool) -> float:
    chunk = nccl._nvls_chunk(per_channel, heads)
    loops = max(1, math.ceil(per_channel / (heads * chunk)))
    fill = k * (ranks / heads if by_ranks else 1.0) * min(heads * chunk, per_channel) / rate
    return max(loops * heads * nccl.NVLS_HEAD_STEP_S, per_channel / rate + fill)


def candidate(name: str, params: tuple):
    """The candidate's one-domain NVLS all-reduce price, in place of nccl.nvls_loop_seconds."""
    def seconds(nbytes: float, moving: float, c) -> float:
        loops, heads, chunk, per_channel = loop_shape(nbytes, c)
        if name == "model":
            return MODEL(nbytes, moving, c)
        if name == "ranks x chunk":
            return MODEL(nbytes, moving, c) + params[0] * 1e-6 * c.per_node * chunk / 1024
        if name == "ranks x chunks":
            return MODEL(nbytes, moving, c) + params[0] * 1e-9 * c.per_node * loops * heads
        if name == "heads with data":
            return LATENCY + max(heads_with_data(nbytes, c) * nccl.NVLS_HEAD_STEP_S, moving)
        k, f = params
        by_ranks = name == "fill k x ranks/heads"
        rate = nbytes / moving * (f if c.generation == "blackwell" else 1.0) / c.nvls_channels
        body = fill_body(per_channel, heads, c.per_node, rate, k, by_ranks)
        cut_chunk = nccl.NVLS_CHUNK_BYTES
        for cut_loops, smaller in nccl.NVLS_CHUNK_CUTS:   # no cheaper than the largest call below a cut
            cut = cut_loops * heads * cut_chunk
            if cut <= per_channel:
                body = max(body, fill_body(cut * (1 - 1e-9), heads, c.per_node, rate, k, by_ranks))
            cut_chunk = smaller
        return LATENCY + body
    return seconds


GRIDS = {"ranks x chunk": [(k * 0.02,) for k in range(16)],
         "ranks x chunks": [(k,) for k in (0, 1, 2, 5, 10, 20, 50, 100, 200)],
         "heads with data": [()],
         "fill k x ranks/heads": list(itertools.product((1.0, 1.5, 2.0, 2.5, 3.0), (1.0, 1.05, 1.1, 1.15, 1.2))),
         "fill k loops": list(itertools.product((1.0, 2.0, 3.0, 4.0, 5.0), (1.0, 1.05, 1.1, 1.15, 1.2)))}


def errors(name: str, params: tuple, priced: list[dict]) -> list[float]:
    """Busbw errors of `priced` rows under a candidate on the model before the fill, or `landed` (the model)."""
    landed, fill = name == "landed", nccl.NVLS_FILL_LOOPS
    nccl.nvls_loop_seconds = MODEL if landed else candidate(name, params)
    nccl.NVLS_FILL_LOOPS = fill if landed else 0
    try:
        found = []
        for r in priced:
            c = communicator(r, landed)
            picked = nccl.choose(r["collective"], float(r["bytes"]), c, only=r.get("algorithm") or None)
            found.append(nccl.bus_bandwidth(r["collective"], float(r["bytes"]), picked.seconds, c.ranks) / 1e9
                         / bench.measured_busbw(r) - 1)
        return found
    finally:
        nccl.nvls_loop_seconds, nccl.NVLS_FILL_LOOPS = MODEL, fill


def busbw_fall(name: str, params: tuple, ranks: int, channels: int) -> tuple[float, float]:
    """The largest fall of bus bandwidth from one power of two to the next, 8 B to 64 GiB (and where): the sizes the
    model's law samples (tests/model/test_nccl_model.py; between them NCCL's loop counts step)."""
    c = nccl.Communicator(ranks, 1, 682.2e9, nvls=True, nvls_channels=channels, generation="blackwell",
                          nvls_share=BEFORE_SHARE, reduce_rate=18 * 4e11 * min(1.0, ranks / 72))
    nccl.nvls_loop_seconds, fill, nccl.NVLS_FILL_LOOPS = candidate(name, params), nccl.NVLS_FILL_LOOPS, 0
    try:
        worst, at, size, before = 0.0, 0.0, 8.0, None
        while size < 2**36:
            rate = size / nccl.choose("all_reduce", size, c, only="nvls").seconds
            if before and before / rate - 1 > worst:
                worst, at = before / rate - 1, size
            before, size = rate, size * 2
        return worst, at
    finally:
        nccl.nvls_loop_seconds, nccl.NVLS_FILL_LOOPS = MODEL, fill


def constants(name: str, params: tuple, run: str) -> dict[int, float]:
    """The rack table `run` priced under a candidate (or `landed`): its per-call constant by NVLS chunk regime over
    the published one (benchmarks/nccl_curves.py regime_lines, as tests/model/test_nvls_ranks.py reads them)."""
    landed, fill = name == "landed", nccl.NVLS_FILL_LOOPS
    nccl.nvls_loop_seconds = MODEL if landed else candidate(name, params)
    nccl.NVLS_FILL_LOOPS = fill if landed else 0
    try:
        data = bench.rack_curves()[run]
        c = communicator(next(r for r in rows() if r["case"] == RACK_CASES[run]), landed)
        model = dict(data, out_of_place={s: nccl.choose("all_reduce", s, c).seconds * 1e6 for s in data["out_of_place"]})
        published = {k: v for k, _, v, _ in bench.regime_lines(data, "out_of_place")}
        return {k: v / published[k] for k, _, v, _ in bench.regime_lines(model, "out_of_place") if k in published}
    finally:
        nccl.nvls_loop_seconds, nccl.NVLS_FILL_LOOPS = MODEL, fill


def print_constants(fits: dict[str, dict[str, tuple]]) -> None:
    print("\nPer-call constant by chunk regime over the published (each rack table priced with the fit that left it out):")
    for run, case in RACK_CASES.items():
        line = ["landed " + " ".join(f"{k // 1024} KiB x{v:.2f}" for k, v in constants("landed", (), run).items())]
        for name in ("fill k x ranks/heads", "fill k loops"):
            line.append(f"{name} " + " ".join(f"{k // 1024} KiB x{v:.2f}"
                                              for k, v in constants(name, fits[name][case], run).items()))
        print(f"  {run:19} " + "; ".join(line))


def main() -> None:
    start, cpu = time.perf_counter(), time.process_time()
    print_readings()
    every = rows()
    tables = sorted({r["case"] for r in every if r["collective"] == "all_reduce" and not r.get("algorithm")
                     and communicator(r).nvls and communicator(r).nodes == 1})
    by_table = {t: [r for r in every if r["case"] == t] for t in tables}
    model = {t: errors("model", (), by_table[t]) for t in tables}
    landed = {t: errors("landed", (), by_table[t]) for t in tables}
    print("\nlanded (the model now), max |busbw error| before -> now: " + ", ".join(
        f"{t} {max(map(abs, model[t])):.1%} -> {max(map(abs, landed[t])):.1%}" for t in tables))
    fits: dict[str, dict[str, tuple]] = {}
    for name, grid in GRIDS.items():
        table_errors = {p: {t: errors(name, p, by_table[t]) for t in tables} for p in grid}

        def mean(p, ts):
            return statistics.mean(statistics.mean(map(abs, table_errors[p][t])) for t in ts)
        fits[name] = {t: min(grid, key=lambda p: mean(p, [o for o in tables if o != t])) for t in tables}
        print(f"\n{name}: held out, max |busbw error| the model's -> the candidate's (its fit):")
        for t in tables:
            held = table_errors[fits[name][t]][t]
            print(f"  {t:14} {max(map(abs, model[t])):6.1%} -> {max(map(abs, held)):6.1%}  {fits[name][t]}")
        if name.startswith("fill"):
            best = min(grid, key=lambda p: mean(p, tables))
            falls = [(ranks, *busbw_fall(name, best, ranks, channels)) for ranks, channels in ((8, 24), (64, 24), (72, 32))]
            print(f"  all tables {best}: largest busbw fall as the size doubles " + ", ".join(
                f"{ranks} ranks " + (f"{fall:.1%} at {at / 2**20:.0f} MiB" if fall else "none") for ranks, fall, at in falls))
    print_constants(fits)
    print("\nFabric bands (benchmarks/nccl_curves.py), each NVLS table priced with the fit that left it out:")
    within = {}
    for name in ["model", "landed", *GRIDS]:
        bands: dict = {}
        for r in every:
            if name in ("model", "landed") or r["case"] not in fits[name]:
                name_used, params = (name if name == "landed" else "model"), ()
            else:
                name_used, params = name, fits[name][r["case"]]
            band = "1MB-8GB" if float(r["bytes"]) >= bench.MB else "<1MB"
            bands.setdefault((r["case"], band), []).extend(map(abs, errors(name_used, params, [r])))
        within[name] = sum(max(e) <= (0.10 if band == "1MB-8GB" else 0.25) for (_, band), e in bands.items())
        print(f"  {name:22} {within[name]}/{len(bands)} bands within goal")
    print(f"wall {time.perf_counter() - start:.1f} s, cpu {time.process_time() - cpu:.1f} s")


if __name__ == "__main__":
    main()
