"""Never fitted: the shipped model against published training runs that no calibration sees.

    .venv/bin/python benchmarks/make_runs.py --validation   # writes benchmarks/validation/*.gcl
    .venv/bin/python benchmarks/validation.py [--json]

The rows of `benchmarks/data/validation_runs.csv` (same columns as public_runs.csv, plus their
measured figure and its derivation) are runs that `calibrate.py` and `accuracy.py` never read:
no efficiency or constant of the physics was fitted on them. The 80 % band's constants are
(`band_refit.py` pools their residuals with the calibration's cross-validated ones), so the
band80 printed here is in sample for the band; the out-of-sample figure is band_refit.py's,
each group judged by the band fitted without it. Each design in
`benchmarks/validation/` goes through the same path as accuracy.py (check_file -> train_job ->
pinned_config -> estimate) with the shipped model; its prediction is compared with the measured
steady-state tokens/s per accelerator, and the measurement is checked against the 80 % band a plan
would print for that design (model/calibration.py: the shipped scale, quantiles and the factors of
the design's reasons for doubt). Where the source publishes the peak memory (the row's
`other_measured`, 'peak memory N GiB'), the model's memory per GPU is printed beside it: a run that
ran but that the model says does not fit is a miss of the memory model. Rows the generator could not
express are listed with the reason.
The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package
sys.path.insert(0, str(HERE))

from accuracy import _abs_pct, _finite, _pct, evaluate_case, percentile, unexpressible  # noqa: E402
from crossval import conditions  # noqa: E402

VALIDATION_CSV = HERE / "data" / "validation_runs.csv"
VALIDATION_DIR = HERE / "validation"
CALIBRATION_CSVS = (HERE / "data" / "public_runs.csv", HERE / "data" / "public_runs_measured.csv")


@dataclass
class Check:
    run_id: str
    group: str
    measured: float | None
    confidence: str
    predicted: float | None = None
    error: float | None = None          # predicted / measured - 1
    band: tuple[float, float] | None = None   # 80 % band on tokens/s per accelerator
    in_band: bool | None = None
    reasons: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()          # crossval.conditions, and the stack
    fits: bool | None = None
    memory_gib: float | None = None           # the model's memory per GPU
    measured_memory_gib: float | None = None  # the source's peak, where published
    config: str = ""
    failure: str | None = None


def read_rows(path: Path = VALIDATION_CSV) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def calibration_ids() -> set[str]:
    """Every run_id the calibration reads (public_runs.csv and its measured figures)."""
    ids: set[str] = set()
    for path in CALIBRATION_CSVS:
        with open(path, newline="") as f:
            ids |= {r["run_id"] for r in csv.DictReader(f)}
    return ids


def check_run(path: Path, measured: dict[str, dict]) -> Check:
    """The shipped model's prediction of one validation design and the band a plan would print."""
    from gclc.model.calibration import power_capped, ratio_band, reasons

    result, case = evaluate_case(path, measured)
    row = measured.get(path.stem, {})
    out = Check(result.run_id, result.group, result.measured, row.get("confidence", ""), result.predicted,
                result.error, fits=result.fits, config=result.config, failure=result.failure)
    peak = re.search(r"peak memory ([0-9.]+) GiB", row.get("other_measured", ""))
    out.measured_memory_gib = float(peak.group(1)) if peak else None
    if case is None or result.predicted is None:
        return out
    from gclc.model.train.step import estimate
    out.memory_gib = estimate(case.job.shape, case.cfg, case.job.partition).memory.total / 2**30
    why = reasons(case.chip, case.cfg.precision, case.job.shape.is_moe, case.cfg.cp, case.cfg.gpus,
                  case.job.stack_stated, stack=case.cfg.stack,
                  power_capped=power_capped(case.job.partition.node.accelerator))
    low, high = ratio_band(why)
    out.band = (result.predicted * low, result.predicted * high)
    out.in_band = low <= case.measured / result.predicted <= high
    out.reasons = tuple(r.key for r in why)
    out.conditions = conditions(case) + (f"stack {case.cfg.stack}",)
    return out


def stats(checks: list[Check]) -> dict:
    errs = [abs(c.error) for c in checks if c.error is not None]
    signed = [c.error for c in checks if c.error is not None]
    inside = [c.in_band for c in checks if c.in_band is not None]
    widths = [(c.band[1] - c.band[0]) / 2 / c.predicted for c in checks if c.band and c.predicted]
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median": statistics.median(errs), "p90": percentile(errs, 0.9), "max": max(errs),
            "ran_but_does_not_fit": sum(1 for c in checks if c.fits is False),
            "bias": statistics.fmean(signed), "within_10pct": sum(e <= 0.10 for e in errs),
            "within_25pct": sum(e <= 0.25 for e in errs),
            "band80": sum(inside) / len(inside) if inside else math.nan,
            "band_median_half_width": statistics.median(widths) if widths else math.nan}


def report(checks: list[Check], missing: list[dict], rows: list[dict], overlap: set[str]) -> str:
    w = max([len(c.run_id) for c in checks] + [6])
    out = ["Never fitted: published runs outside the calibration set (benchmarks/data/validation_runs.csv), "
           "predicted by the shipped model", "",
           f"{'run':<{w}}  {'predicted':>9} {'measured':>9} {'error':>8}  {'80 % band':>17} in   fits  "
           f"{'GiB model/run':>13}  conf    reasons / config"]
    for c in checks:
        pred = f"{c.predicted:9.1f}" if c.predicted is not None else f"{'ERROR':>9}"
        band = f"{c.band[0]:8.1f}-{c.band[1]:<8.1f}" if c.band else f"{'-':>17}"
        inside = {True: "yes", False: "NO ", None: " - "}[c.in_band]
        fits = {True: "yes ", False: "NO  ", None: "  - "}[c.fits]
        memory = (f"{c.memory_gib:5.1f}/" if c.memory_gib is not None else "    -/") + (
            f"{c.measured_memory_gib:<5.1f}" if c.measured_memory_gib is not None else "-    ")
        line = (f"{c.run_id:<{w}}  {pred} {c.measured or math.nan:9.1f} {_pct(c.error):>8}  {band} {inside}  {fits}  "
                f"{memory:>13}  {c.confidence:7} [{', '.join(c.reasons) or '-'}] {c.config}")
        out.append(line + (f"  !! {c.failure}" if c.failure else ""))
    groups: dict[str, list[Check]] = {}
    by_condition: dict[str, list[Check]] = {}
    for c in checks:
        groups.setdefault(c.group, []).append(c)
        for k in c.conditions:
            by_condition.setdefault(k, []).append(c)
    for title, table in (("Per group:", groups), ("Per condition:", dict(sorted(by_condition.items())))):
        out += ["", title, f"  {'':<52} {'n':>3} {'median':>7} {'p90':>7} {'max':>7} {'bias':>7} {'band80':>7}"]
        for g, cs in table.items():
            s = stats(cs)
            if s["n"]:
                out.append(f"  {g[:52]:<52} {s['n']:>3} {_abs_pct(s['median']):>7} {_abs_pct(s['p90']):>7} "
                           f"{_abs_pct(s['max']):>7} {_pct(s['bias']):>7} {s['band80']:>7.0%}")
    worst = sorted((c for c in checks if c.error is not None), key=lambda c: -abs(c.error))[:8]
    out += ["", "Largest misses:"] + [f"  {c.run_id:<{w}} {c.error:+7.1%}  in band: {'yes' if c.in_band else 'no '}  "
                                      f"{c.group}" for c in worst]
    by_id = {r["run_id"]: r for r in rows}
    out += ["", f"UNEXPRESSIBLE ({len(missing)} of {len(rows)} rows; not predicted, not counted above):"]
    out += [f"  {m['run_id']} [{m['group']}]: {m['reason']}" + (f" (row notes: {by_id[m['run_id']]['notes']})"
                                                                if by_id.get(m["run_id"], {}).get("notes") else "")
            for m in missing]
    s = stats(checks)
    out += ["", "Overall (never fitted):"]
    if s["n"]:
        out.append(f"  |error| median {s['median']:.1%}, 90th percentile {s['p90']:.1%}, max {s['max']:.1%}; within 10 %: "
                   f"{s['within_10pct']}, within 25 %: {s['within_25pct']} of {s['n']}; mean signed {s['bias']:+.1%}")
        out.append(f"  80 % band (shipped, model/calibration.py, fitted with these runs: benchmarks/band_refit.py "
                   f"gives the left-out figure): {s['band80']:.0%} of the measurements inside; "
                   f"median half width {s['band_median_half_width']:.1%}")
        out.append(f"  published runs the model says do not fit in memory: {s['ran_but_does_not_fit']}")
    out.append(f"  run ids also in the calibration set: {len(overlap)}" + (f" ({', '.join(sorted(overlap))})" if overlap else ""))
    return "\n".join(out)


def summary_line(checks: list[Check], missing: list[dict], rows: list[dict]) -> str:
    s = stats(checks)
    if not s["n"]:
        return f"never fitted: n=0 | unexpressible {len(missing)} of {len(rows)}"
    return (f"never fitted: n={s['n']} median={s['median']:.1%} p90={s['p90']:.1%} band80={s['band80']:.0%} in sample "
            f"for the band (median ±{s['band_median_half_width']:.1%}) bias={s['bias']:+.1%} | unexpressible "
            f"{len(missing)} of {len(rows)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(VALIDATION_DIR), help="folder of the validation designs")
    parser.add_argument("--json", action="store_true", help="print the rows and summaries as JSON")
    args = parser.parse_args(argv)
    runs_dir = Path(args.runs)
    rows = read_rows()
    measured = {r["run_id"]: r for r in rows}
    order = {rid: i for i, rid in enumerate(measured)}
    paths = sorted(runs_dir.glob("*.gcl"), key=lambda p: (order.get(p.stem, len(order)), p.stem))
    checks = [check_run(p, measured) for p in paths]
    missing = unexpressible(runs_dir, measured, {c.run_id for c in checks})
    overlap = set(measured) & calibration_ids()
    if args.json:
        payload = {"runs": [asdict(c) for c in checks], "overall": stats(checks), "unexpressible": missing,
                   "in_calibration_set": sorted(overlap)}
        payload["summary"] = summary_line(checks, missing, rows)
        print(json.dumps(_finite(payload), indent=1, allow_nan=False))
    else:
        print(report(checks, missing, rows, overlap))
        print(summary_line(checks, missing, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
