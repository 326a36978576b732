"""Memory accuracy of gclc's training model against published peak memory per GPU, and the law
that every published configuration that ran fits in its accelerator's memory.

    .venv/bin/python benchmarks/memory_accuracy.py [--csv MEMORY_CSV] [--json]

Each row of MEMORY_CSV (default benchmarks/data/memory_runs.csv) names a design, the memory a
framework reported for it, and what that figure counts:
- `reserved`: the caching allocator's peak (torch.cuda.max_memory_reserved; torchtitan's log),
  compared with the model's `Memory.reserved` (all but the CUDA context and NCCL buffers);
- `allocated`: the tensors' own peak (torch.cuda.max_memory_allocated; Megatron-LM's
  mem-max-allocated-bytes), compared with `Memory.allocated` (less the allocator's slack too).
Nothing in the memory model is fitted to these rows: its constants carry their own sources
(model/train/peak.py), so every figure here is out of sample. Signed error = predicted /
measured - 1.

Then every design of a published run that ran (benchmarks/runs, benchmarks/validation,
benchmarks/memory) is planned at its pinned configuration: the model must not need more than
the accelerator has. The refusals are listed.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT.parent))  # the folder holding the `gclc` package

DEFAULT_CSV = HERE / "data" / "memory_runs.csv"
RAN = ("runs", "validation", "memory")   # folders of designs of runs that ran
GIB = 2 ** 30


@dataclass
class Row:
    run_id: str
    group: str
    measure: str
    measured_gib: float
    predicted_gib: float | None = None
    error: float | None = None      # signed, predicted / measured - 1
    breakdown: dict | None = None
    failure: str | None = None


def planned(path: Path):
    """(memory at the pinned configuration, the accelerator's capacity) of one design."""
    from gclc.compiler.driver import check_file
    from gclc.model.job import pinned_config, train_job
    from gclc.model.train.memory import memory

    checked = check_file(str(path))
    if not checked.ok or checked.design is None:
        raise ValueError("gclc check: " + "; ".join(d.summary for d in checked.diagnostics if d.is_error))
    job = train_job(checked.design)
    chip = job.partition.node.accelerator
    return memory(job.shape, pinned_config(job), chip), chip.hbm_capacity


def evaluate(row: dict) -> Row:
    out = Row(row["run_id"], row["group"], row["measure"], float(row["measured_gib"]))
    try:
        held, _ = planned(ROOT / row["design"])
        value = {"reserved": held.reserved, "allocated": held.allocated}[row["measure"]]
        out.predicted_gib = value / GIB
        out.error = out.predicted_gib / out.measured_gib - 1
        out.breakdown = {k: round(v / GIB, 2) for k, v in held.rows()}
    except Exception as exc:  # noqa: BLE001 - a broken row is reported, not a crash
        out.failure = f"{type(exc).__name__}: {exc}"
    return out


@functools.lru_cache(maxsize=1)
def refusals() -> tuple[int, tuple[str, ...]]:
    """(designs planned, the ones whose pinned configuration the model says does not fit)."""
    count, refused = 0, []
    for folder in RAN:
        for path in sorted((HERE / folder).glob("*.gcl")):
            try:
                held, hbm = planned(path)
            except Exception as exc:  # noqa: BLE001
                refused.append(f"{folder}/{path.name}: not planned ({type(exc).__name__}: {exc})")
                continue
            count += 1
            if held.total > hbm:
                refused.append(f"{folder}/{path.name}: needs {held.total / GIB:.1f} GiB of {hbm / GIB:.1f} GiB")
    return count, tuple(refused)


def stats(rows: list[Row]) -> dict:
    errs = [abs(r.error) for r in rows if r.error is not None]
    signed = [r.error for r in rows if r.error is not None]
    worst = max(signed, key=abs) if signed else math.nan
    return {"n": len(errs), "median": statistics.median(errs) if errs else math.nan,
            "p90": _percentile(errs, 0.9), "worst": worst,
            "bias": statistics.fmean(signed) if signed else math.nan,
            "within_10pct": sum(e <= 0.10 for e in errs)}


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def report(rows: list[Row], planned_count: int, refused: tuple[str, ...]) -> str:
    out = [f"{'run':<18} {'measure':<9} {'measured':>9} {'predicted':>9} {'error':>7}  breakdown (GiB)"]
    for r in rows:
        if r.failure:
            out.append(f"{r.run_id:<18} {r.measure:<9} {r.measured_gib:9.2f} {'ERROR':>9}  !! {r.failure}")
            continue
        parts = ", ".join(f"{k} {v}" for k, v in r.breakdown.items() if v)
        out.append(f"{r.run_id:<18} {r.measure:<9} {r.measured_gib:9.2f} {r.predicted_gib:9.2f} {r.error:+7.1%}  {parts}")
    out += ["", "Per group (|error| of the predicted peak):"]
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    for g, rs in groups.items():
        s = stats(rs)
        out.append(f"  {g:<42} n={s['n']:<3} median {s['median']:.1%}  worst {s['worst']:+.1%}  bias {s['bias']:+.1%}")
    s = stats(rows)
    out += ["", f"Overall: n={s['n']} median |error| {s['median']:.1%}, 90th percentile {s['p90']:.1%}, "
                f"worst {s['worst']:+.1%}, mean signed {s['bias']:+.1%}, within 10 %: {s['within_10pct']}",
            "", f"Published configurations that ran: {planned_count} planned at their pinned layout, "
                f"{len(refused)} refused (the model needs more than the accelerator has)"]
    out += [f"  {line}" for line in refused]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", default=str(DEFAULT_CSV), help="published peak memory per GPU (memory_runs.csv columns)")
    parser.add_argument("--json", action="store_true", help="print the rows and summaries as JSON")
    args = parser.parse_args(argv)
    wall, cpu = time.perf_counter(), time.process_time()
    with open(args.csv, newline="") as f:
        rows = [evaluate(r) for r in csv.DictReader(f)]
    planned_count, refused = refusals()
    s = stats(rows)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "overall": s, "planned": planned_count,
                          "refused": list(refused)}, indent=1, default=lambda x: None))
    else:
        print(report(rows, planned_count, refused))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"memory: n={s['n']} median={s['median']:.1%} p90={s['p90']:.1%} worst={s['worst']:+.1%} | "
          f"ran and fit: {planned_count - len(refused)}/{planned_count} | {wall:.1f} s wall, {cpu:.1f} s CPU",
          file=sys.stdout if not args.json else sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
