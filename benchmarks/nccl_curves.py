"""The collective model against published nccl-tests results: for each measured point of
benchmarks/data/nccl_tests.csv (with its source), the bus bandwidth gclc's model predicts
(model/network/nccl.py: NCCL's algorithm and protocol choice on the tiers of std parts), and
the error per fabric over 1 MB-8 GB (goal: within 10 %) and below 1 MB (goal: within 25 %); beside
it, the training step's price of the same call (model/collectives.py) and its error.

    .venv/bin/python benchmarks/nccl_curves.py

Each case is a cluster of `nodes` std nodes or racks (DGX_H100, HGX_H200, DGX_B200,
GB200_NVL72) on a std scale-out fabric (NDR_FatTree, SpectrumX_RoCE), lowered by gclc: the
scale-up tier's rate (bandwidth x efficiency) is the NVLink rate, the first scale-out tier's
the NIC rate per GPU, the outermost crossed tier's latency the wire. Points marked `sets_std` are the ones a std efficiency was read from: printed,
left out of the error figures. Points marked `held out` are rows of a table one of the model's read constants
came from (the NVLS head step, the NVLink 5 LL step): they are priced, and their bands judged, with that
constant as the other tables read it (`held_out_constants`). Points with an `algorithm` ran with NCCL_ALGO forcing it: the model
prices that algorithm, and the step model (which prices NCCL's own choice) is left out for them.
After the table: both columns (out-of-place, in-place) of the GB200 NVL72 run read as a line
t = constant + bytes / rate (a reading of the source's data, not a fit used by the model).
The last line is a one-line summary.
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

DATA = HERE / "data" / "nccl_tests.csv"
MB = 2**20


def case_tiers(row: dict):
    from gclc.compiler.driver import check_text
    from gclc.compiler.lower import lower

    scaleout = f"scaleout = {row['scaleout']}" if row["scaleout"] else ""
    text = f'import "std/nvidia"\nimport "std/network"\ncluster C {{ units = {row["nodes"]} x {row["node"]}  {scaleout} }}\n'
    result = check_text(text, str(HERE / "nccl_case.gcl"))
    assert result.ok, [str(d) for d in result.diagnostics]
    return lower(result.design).partitions[0].tiers


def step_model_seconds(row: dict) -> float:
    """The training step's price of the same call (model/collectives.py: NCCL's choice on the
    tiers' bandwidth), where the row's switches may reduce as the row says."""
    import attrs

    from gclc.model import collectives, comms

    allowed = {"node": row["nvls"] == "1", "supernode": row["nvls"] == "1", "scaleout": row["collnet"] == "1"}
    tiers = tuple(attrs.evolve(t, in_network_reduction=t.in_network_reduction and allowed[t.scope])
                  for t in case_tiers(row))
    return getattr(collectives, row["collective"])(float(row["bytes"]), comms.place(int(row["ranks"]), 1, tiers))


def communicator(row: dict):
    """The group as NCCL sees it on the case's tiers (model/collectives.py: a node, or a
    multi-node NVLink rack, MNNVL, is one scale-up domain), its switches reducing only where
    the row says they did, with the NVLS channels of the NCCL version the row ran (nvls.cc; the
    newest where the source does not state it)."""
    import attrs

    from gclc.model import collectives, comms
    from gclc.model.network import nccl

    stages = comms.place(int(row["ranks"]), 1, case_tiers(row))
    c = collectives.communicator(tuple(getattr(stages, "options", (stages,))[0]))
    return attrs.evolve(c, nvls=c.nvls and row["nvls"] == "1", collnet=c.collnet and row["collnet"] == "1",
                        nvls_channels=nccl.nvls_channels(c.generation, row.get("nccl", "")))


def choice(row: dict):
    """The model's (algorithm, protocol, seconds) for the row's call: NCCL's pick, or the
    algorithm the row forced."""
    from gclc.model.network import nccl

    return nccl.choose(row["collective"], float(row["bytes"]), communicator(row), only=row.get("algorithm") or None)


def measured_busbw(row: dict) -> float:
    from gclc.model.network.nccl import bus_bandwidth

    if row["busbw_GBps"]:
        return float(row["busbw_GBps"])
    return bus_bandwidth(row["collective"], float(row["bytes"]), float(row["time_us"]) * 1e-6, int(row["ranks"])) / 1e9


CURVES = HERE / "data" / "nccl_rack_curves.csv"


def per_call_constant(times_us: dict[int, float]) -> tuple[float, float, list[float]]:
    """A reading of the source's data, not a model: the line t = constant + bytes / rate through
    one column of a published table, as (constant s, rate B/s, each size's left-one-out error
    of that line). A fixed cost per call shows as a positive constant that every size carries."""
    sizes = sorted(times_us)

    def line(keep):
        fit = statistics.linear_regression([float(s) for s in keep], [times_us[s] * 1e-6 for s in keep])
        return fit.intercept, 1 / fit.slope

    left_out = []
    for s in sizes:
        constant, rate = line([k for k in sizes if k != s])
        left_out.append((constant + s / rate) / (times_us[s] * 1e-6) - 1)
    return (*line(sizes), left_out)


def chunk_regime(times_us: dict[int, float]) -> tuple[float, float, float]:
    """A reading of the source's data, not a model: NCCL 2.25.1 cuts the run's NVLS chunk to
    64 KiB for 512 MiB-4 GiB and keeps 128 KiB at 8 GiB (enqueue.cc calcCollChunking: a channel's
    bytes, 1/32 of the call, against 64 x 32 heads x 128 KiB). The line through the 64 KiB sizes,
    as (constant s, rate B/s, seconds the 8 GiB call takes beyond that line)."""
    sizes = sorted(times_us)
    small = [s for s in sizes if s < 2**33]
    fit = statistics.linear_regression([float(s) for s in small], [times_us[s] * 1e-6 for s in small])
    return fit.intercept, 1 / fit.slope, times_us[2**33] * 1e-6 - (fit.intercept + fit.slope * 2**33)


def rack_curves() -> dict[str, dict]:
    """Every published NVLink-rack all-reduce table (benchmarks/data/nccl_rack_curves.csv), by run:
    its GPU, ranks, NCCL version and NVLS channels (empty where the source does not state the
    version) and both columns as {bytes: us}."""
    runs: dict[str, dict] = {}
    for r in csv.DictReader(CURVES.open(encoding="utf-8")):
        run = runs.setdefault(r["run"], {"gpu": r["gpu"], "ranks": int(r["ranks"]), "nccl": r["nccl"],
                                         "channels": int(r["nvls_channels"]) if r["nvls_channels"] else None,
                                         "out_of_place": {}, "in_place": {}})
        run["out_of_place"][int(r["bytes"])] = float(r["out_of_place_us"])
        run["in_place"][int(r["bytes"])] = float(r["in_place_us"])
    return runs


def nvl72_columns() -> dict[str, dict[int, float]]:
    """The CoreWeave GB200 NVL72 table (coreweave/nccl-tests#43, NCCL 2.25.1), both columns."""
    run = rack_curves()["coreweave_gb200_72"]
    return {column: run[column] for column in ("out_of_place", "in_place")}


def nvls_chunk(nbytes: int, channels: int, ranks: int) -> int:
    """NCCL's NVLS all-reduce chunk (enqueue.cc calcCollChunking, unchanged from 2.25.1 to 2.28.7):
    128 KiB (NCCL_NVLS_CHUNKSIZE), halved below 64, 8 and 2 concurrent ops' worth of chunks, where
    the concurrent ops are channels x heads, and heads = min(32, ranks) (search.cc: the NVLS graph
    has min(NCCL_MAX_NVLS_ARITY, GPUs) channels, one head each)."""
    ops, chunk = channels * min(32, ranks), 128 * 1024
    for factor, floor in ((64, 65536), (8, 32768), (2, 16384)):
        if nbytes < factor * ops * chunk and chunk > floor:
            chunk = floor
    return chunk


def regime_lines(run: dict, column: str, smallest: int = 2**28) -> list[tuple[int, list[int], float, float]]:
    """A reading of the source's data, not a model: per NVLS chunk size, the line t = constant +
    bytes / rate through the sizes (from `smallest` up) that NCCL runs with that chunk, as
    (chunk, sizes, constant s, rate B/s), where at least two sizes share it."""
    times, groups = run[column], {}
    for s in sorted(times):
        if s >= smallest:
            groups.setdefault(nvls_chunk(s, run["channels"] or 24, run["ranks"]), []).append(s)
    lines = []
    for chunk, sizes in sorted(groups.items()):
        if len(sizes) >= 2:
            fit = statistics.linear_regression([float(s) for s in sizes], [times[s] * 1e-6 for s in sizes])
            lines.append((chunk, sizes, fit.intercept, 1 / fit.slope))
    return lines


def loops(constant: float, rate: float, chunk: int, channels: int, ranks: int) -> float:
    """The constant in NVLS loops: one loop moves channels x heads x chunk bytes a GPU (all_reduce.h
    runNvls: loopSize = nHeads x chunkSize per channel) at the line's rate."""
    return constant * rate / (channels * min(32, ranks) * chunk)


def print_rack_curves() -> None:
    """Per published rack table: the per-call constant in each NVLS chunk regime, in ms and in loops."""
    print("\nNVLink-rack all-reduce tables, per NVLS chunk regime (>= 256 MiB; t = constant + bytes / rate; "
          "loops = constant x rate / (channels x heads x chunk)):")
    for name, run in rack_curves().items():
        for chunk, sizes, constant, rate in regime_lines(run, "out_of_place"):
            span = f"{sizes[0] // MB}-{sizes[-1] // MB} MiB"
            looped = (f"{loops(constant, rate, chunk, run['channels'], run['ranks']):4.1f} loops"
                      if run["channels"] else "loops n/a (NCCL version not stated)")
            print(f"  {name:19} {run['ranks']:2} ranks NCCL {run['nccl'] or '?':6} {chunk // 1024:3} KiB chunks "
                  f"{span:17} constant {constant * 1e3:5.2f} ms, rate {rate / 1e9:3.0f} GB/s algbw; {looped}")


def print_nvl72_columns() -> None:
    """Both columns of the NVL72 table (coreweave/nccl-tests#43): the per-call constant in each."""
    columns = nvl72_columns()
    out, inp = columns["out_of_place"], columns["in_place"]
    print("\nGB200 NVL72 all-reduce, both columns of the published table (t = constant + bytes / rate):")
    print("  in-place vs out-of-place: " + "  ".join(f"{s // MB} MiB {inp[s] / out[s] - 1:+.1%}" for s in sorted(out)))
    for column, times in columns.items():
        constant, rate, left_out = per_call_constant(times)
        print(f"  {column:13} constant {constant * 1e3:.3f} ms, rate {rate / 1e9:.0f} GB/s algbw "
              f"({nccl_bus(rate):.0f} busbw), left-one-out " + " ".join(f"{e:+.1%}" for e in left_out)
              + "; the constant's share: " + " ".join(f"{constant / (times[s] * 1e-6):.0%}" for s in sorted(times)))
    for column, times in columns.items():
        constant, rate, beyond = chunk_regime(times)
        print(f"  {column:13} 64 KiB chunks (512 MiB-4 GiB): constant {constant * 1e3:.3f} ms, rate {rate / 1e9:.0f} GB/s "
              f"algbw ({nccl_bus(rate):.0f} busbw); 8 GiB (128 KiB chunks) {beyond * 1e3:+.2f} ms beyond that line")


# the published rack runs that are also rows of nccl_tests.csv, by the row's case
RUN_CASE = {"oci_gb300_64": "gb300_64", "oci_gb300_8": "gb300_8", "oci_gb300_4": "gb300_4"}


def nvls_sizes(name: str) -> set[int] | None:
    """The sizes of a rack run that NCCL runs as NVLS, as its own tables pick (model/network/nccl.py `predicted`:
    NCCL runs no NVLS on 4 GB300, and rings with LL up to 2 MiB on 8); None where the run is no row of
    nccl_tests.csv (then every size)."""
    if name not in RUN_CASE:
        return None
    return {int(r["bytes"]) for r in csv.DictReader(DATA.open(encoding="utf-8"))
            if r["case"] == RUN_CASE[name] and choice(r).algorithm == "nvls"}


def head_step_reading(run: dict, name: str = "") -> float | None:
    """A reading of the source's data: seconds one NVLS head adds to a loop (model/network/nccl.py
    NVLS_HEAD_STEP_S), as the slope of time over NCCL's loop count through the sizes of the smallest
    chunk (enqueue.cc calcCollChunking) that NCCL runs as NVLS (`nvls_sizes`), divided by the heads; None
    where those loops are bound by their bytes (their bytes at the model's NVLS rate take over half the
    slope) or no such size runs more than one loop."""
    from gclc.model.network import nccl

    c = nccl.Communicator(run["ranks"], 1, 682e9, nvls=True, nvls_channels=run["channels"] or 24)
    groups: dict[int, list[tuple[int, float]]] = {}
    kept = nvls_sizes(name)
    for s, t in sorted(run["out_of_place"].items()):
        if kept is not None and s not in kept:
            continue
        loops, heads = nccl.nvls_loops(s, c)
        groups.setdefault(nvls_chunk(s, c.nvls_channels, run["ranks"]), []).append((loops, t * 1e-6))
    if not groups:
        return None
    chunk, points = min(groups.items())
    if len({n for n, _ in points}) < 2:
        return None
    slope = statistics.linear_regression([float(n) for n, _ in points], [t for _, t in points]).slope
    moving = c.nvls_channels * heads * chunk / nccl._nvls_through("all_reduce", c)
    return slope / heads if moving < slope / 2 else None


def head_step_errors(case: str, step: float) -> float:
    """The case's largest busbw error (its rows of nccl_tests.csv) with NVLS_HEAD_STEP_S = `step`."""
    from gclc.model.network import nccl

    kept, nccl.NVLS_HEAD_STEP_S = nccl.NVLS_HEAD_STEP_S, step
    try:
        rows = [r for r in csv.DictReader(DATA.open(encoding="utf-8")) if r["case"] == case]
        return max(abs(nccl.bus_bandwidth("all_reduce", float(r["bytes"]), choice(r).seconds, int(r["ranks"]))
                       / 1e9 / measured_busbw(r) - 1) for r in rows)
    finally:
        nccl.NVLS_HEAD_STEP_S = kept


def print_head_steps() -> None:
    """Per rack run: the head step its latency-bound loops read, and (cross-validated) its rows'
    largest error with the step the other runs read."""
    from gclc.model.network import nccl

    readings = {name: r for name, run in rack_curves().items() if (r := head_step_reading(run, name)) is not None}
    print(f"\nNVLS head step (a loop takes heads x step where its bytes do not take longer; model "
          f"{nccl.NVLS_HEAD_STEP_S * 1e6:.2f} us, the mean of the readings {statistics.mean(readings.values()) * 1e6:.2f} us):")
    for name, step in readings.items():
        others = statistics.mean(v for k, v in readings.items() if k != name)
        held = (f"; its rows' max error with the others' {others * 1e6:.2f} us: {head_step_errors(RUN_CASE[name], others):.1%}"
                if name in RUN_CASE and len(readings) > 1 else "")
        print(f"  {name:19} reads {step * 1e6:.2f} us a head{held}")


# The published Blackwell rows whose smallest call runs a ring with LL, and what NCCL 2.28.7's own table
# (src/graph/tuning.cc, tag v2.28.7-1) prices them at. NCCL treats a multi-node NVLink rack as one node
# (init.cc: nodes are told apart by the ring graph's first rank, and MNNVL fuses the trays' topologies
# into one), so a ring of 8 GB300 over two trays steps over NVLink: base 6.6 us + 2(n-1) x 0.6 us
# (hwLatencies NVLink, ring and tree LL alike) + the bytes at half the bus rate, at most llMaxBws
# "Blackwell-N1" 282 GB/s. The model keeps NCCL's cap and reads its own step (nccl.NVLINK5_LL_STEP_US).
LL_STEP_CASES = ("gb300_4", "gb300_8")
LL_STEP_BYTES = 2 * MB       # the rows up to here run ring/LL: their errors test an LL step
TABLE_LL_STEP_US = 0.6       # tuning.cc hwLatencies, NVLink, ring and tree LL
HOPPER_LL_CAP_GBPS = 141.0   # tuning.cc llMaxBws "Hopper-N1", which the model gave every generation before


def ll_priced(step_us: float, cap_gbps: float):
    """A context: the model with an NVLink 5 LL step of `step_us` (ring and tree) and a one-node Blackwell
    LL cap of `cap_gbps`, as the readings below try them (the model's constants restored on leaving)."""
    import contextlib

    from gclc.model.network import nccl

    @contextlib.contextmanager
    def priced():
        step, cap = nccl.NVLINK5_LL_STEP_US, nccl.LL_MAX_BUS_GBPS["blackwell"]
        nccl.NVLINK5_LL_STEP_US, nccl.LL_MAX_BUS_GBPS["blackwell"] = step_us, (cap_gbps,) + cap[1:]
        nccl._options.cache_clear()
        try:
            yield
        finally:
            nccl.NVLINK5_LL_STEP_US, nccl.LL_MAX_BUS_GBPS["blackwell"] = step, cap
            nccl._options.cache_clear()
    return priced()


def case_rows(case: str, largest: float = float("inf")) -> list[dict]:
    return [r for r in csv.DictReader(DATA.open(encoding="utf-8")) if r["case"] == case and float(r["bytes"]) <= largest]


def ll_step_reading(case: str) -> float:
    """A reading of the source's data: microseconds an LL step over NVLink takes in the case's smallest
    call, with NCCL's ring LL base latency and its Blackwell LL cap (time = base + 2(n-1) steps + bytes / rate)."""
    from gclc.model.network import nccl

    row = min(case_rows(case), key=lambda r: float(r["bytes"]))
    nbytes, ranks = float(row["bytes"]), int(row["ranks"])
    seconds = nbytes * 2 * (ranks - 1) / ranks / (measured_busbw(row) * 1e9)
    moving = nbytes / nccl._bandwidth("all_reduce", "ring", "LL", communicator(row))
    return (seconds - moving) * 1e6 / (2 * (ranks - 1)) - nccl.BASE_LATENCY_US["ring"][0] / (2 * (ranks - 1))


def ll_step_errors(case: str, step_us: float, cap_gbps: float) -> float:
    """The case's largest busbw error over its rows up to LL_STEP_BYTES, priced with `ll_priced` as the
    ring the step was read from (NCCL_ALGO=Ring: the model may pick NVLS for some of them)."""
    from gclc.model.network import nccl

    with ll_priced(step_us, cap_gbps):
        return max(abs(nccl.bus_bandwidth("all_reduce", float(r["bytes"]),
                                          nccl.choose("all_reduce", float(r["bytes"]), communicator(r), only="ring").seconds,
                                          int(r["ranks"])) / 1e9 / measured_busbw(r) - 1) for r in case_rows(case, LL_STEP_BYTES))


def print_ll_steps() -> None:
    """Per Blackwell case: its rows' error, priced as a ring, with NCCL's table step and Hopper's cap (the
    model before), with NCCL's own table (0.6 us steps, 282 GB/s), with the model's step, and
    (cross-validated) with the LL step the other case reads."""
    from gclc.model.network import nccl

    cap = nccl.LL_MAX_BUS_GBPS["blackwell"][0]
    readings = {case: ll_step_reading(case) for case in LL_STEP_CASES}
    print(f"\nNVLink LL step on GB300 (NCCL 2.28.7's table {TABLE_LL_STEP_US:.2f} us, the model {nccl.NVLINK5_LL_STEP_US:.2f} us; "
          f"the published rows <= {LL_STEP_BYTES // MB} MiB as a ring, max error):")
    for case, step in readings.items():
        others = statistics.mean(v for k, v in readings.items() if k != case)
        print(f"  {case:9} Hopper's cap {ll_step_errors(case, TABLE_LL_STEP_US, HOPPER_LL_CAP_GBPS):6.1%}; NCCL's own table "
              f"{ll_step_errors(case, TABLE_LL_STEP_US, cap):6.1%}; model {ll_step_errors(case, nccl.NVLINK5_LL_STEP_US, cap):6.1%}; "
              f"reads {step:.2f} us a step, with the other case's {others:.2f} us {ll_step_errors(case, others, cap):6.1%}")


def nccl_bus(rate: float, ranks: int = 72) -> float:
    return rate * 2 * (ranks - 1) / ranks / 1e9


def held_out(readings: dict[str, float], case: str) -> float | None:
    """The mean of the readings of the tables other than `case` (None where `case` read none)."""
    others = [v for k, v in readings.items() if k != case]
    return statistics.mean(others) if case in readings and others else None


def held_out_constants():
    """Per case whose table one of the model's read constants came from (NVLS_HEAD_STEP_S from the rack runs'
    one-loop calls, NVLINK5_LL_STEP_US from the smallest ring calls): a context that prices its rows with the
    constant read from the other tables instead, so no band is judged on the rows that set its constant."""
    import contextlib

    from gclc.model.network import nccl

    heads = {RUN_CASE[name]: r for name, run in rack_curves().items()
             if name in RUN_CASE and (r := head_step_reading(run, name)) is not None}
    ll = {case: ll_step_reading(case) for case in LL_STEP_CASES}
    contexts = {}
    for case in set(heads) | set(ll):
        head, step = held_out(heads, case), held_out(ll, case)

        @contextlib.contextmanager
        def priced(head=head, step=step):
            kept = nccl.NVLS_HEAD_STEP_S, nccl.NVLINK5_LL_STEP_US
            nccl.NVLS_HEAD_STEP_S = head if head is not None else kept[0]
            nccl.NVLINK5_LL_STEP_US = step if step is not None else kept[1]
            nccl._options.cache_clear()
            try:
                yield
            finally:
                nccl.NVLS_HEAD_STEP_S, nccl.NVLINK5_LL_STEP_US = kept
                nccl._options.cache_clear()
        contexts[case] = priced
    return contexts


def main() -> None:
    import contextlib

    from gclc.model.network import nccl

    start, cpu = time.perf_counter(), time.process_time()
    rows = list(csv.DictReader(DATA.open(encoding="utf-8")))
    errors: dict[tuple[str, str], list[float]] = {}
    step_errors: dict[tuple[str, str], list[float]] = {}
    held = held_out_constants()
    print(f"{'case':18} {'collective':15} {'bytes':>12} {'measured':>9} {'model':>9} {'error':>7} "
          f"{'step':>9} {'error':>7}  choice")
    for row in rows:
        c = communicator(row)
        nbytes = float(row["bytes"])
        with held.get(row["case"], contextlib.nullcontext)():
            picked, stepped = choice(row), step_model_seconds(row)
        model = nccl.bus_bandwidth(row["collective"], nbytes, picked.seconds, c.ranks) / 1e9
        measured = measured_busbw(row)
        error = model / measured - 1
        forced = bool(row.get("algorithm"))
        step = nccl.bus_bandwidth(row["collective"], nbytes, stepped, c.ranks) / 1e9
        step_error = step / measured - 1
        band = "1MB-8GB" if nbytes >= MB else "<1MB"
        mark = ("  (sets std)" if row["sets_std"] == "1" else "  (NCCL_ALGO forced)" if forced
                else "  (held out)" if row["case"] in held else "")
        if row["sets_std"] != "1":
            errors.setdefault((row["case"], band), []).append(abs(error))
            if not forced:
                step_errors.setdefault((row["case"], band), []).append(abs(step_error))
        steps = f"{'-':>9} {'-':>7}" if forced else f"{step:9.3g} {step_error:+7.1%}"
        print(f"{row['case']:18} {row['collective']:15} {int(nbytes):>12} {measured:9.3g} {model:9.3g} "
              f"{error:+7.1%} {steps}  {picked.algorithm}/{picked.protocol}{mark}")
    print()
    summary = []
    for (case, band), found in sorted(errors.items()):
        goal = 0.10 if band == "1MB-8GB" else 0.25
        worst = max(found)
        steps = step_errors.get((case, band))
        stepped = (f"median {statistics.median(steps):6.1%}  max {max(steps):6.1%}" if steps
                   else "none (NCCL_ALGO forced)")
        print(f"{case:18} {band:8} n={len(found):2}  median {statistics.median(found):6.1%}  max {worst:6.1%}  "
              f"goal {goal:.0%}: {'met' if worst <= goal else 'MISSED'}   step model: {stepped}")
        summary.append(f"{case} {band} max {worst:.1%}")
    print_nvl72_columns()
    print_rack_curves()
    print_head_steps()
    print_ll_steps()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    met = sum(1 for (case, band), found in errors.items() if max(found) <= (0.10 if band == "1MB-8GB" else 0.25))
    step_median = statistics.median(e for found in step_errors.values() for e in found)
    print(f"nccl-tests: {len(rows)} points, {met}/{len(errors)} fabric bands within goal; " + "; ".join(summary)
          + f" | step model median {step_median:.1%} | NVL72 per-call constant " + "/".join(
              f"{per_call_constant(t)[0] * 1e3:.2f}" for t in nvl72_columns().values()) + " ms (out-/in-place)"
          + f" | wall {seconds:.1f} s, cpu {cpu:.1f} s")


if __name__ == "__main__":
    main()
