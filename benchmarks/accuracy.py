"""Accuracy of gclc's step-time model against published training runs: predicted vs measured
steady-state tokens/s per accelerator, one row per run, then per-group and overall error summaries.

    .venv/bin/python benchmarks/accuracy.py [--runs DIR] [--csv MEASURED_CSV] [--json]

Each `<run_id>.gcl` in DIR (default benchmarks/runs, written by make_runs.py) goes through
check_file -> train_job -> pinned_config -> estimate, and its prediction is compared with the
`meas_tokens_per_s_per_gpu` of MEASURED_CSV (default benchmarks/data/public_runs_measured.csv).
A run that fails at any stage is reported as an error row with the message; nothing stops the
benchmark. Rows of the CSV without a design are listed at the end with the reason recorded in
DIR/UNEXPRESSIBLE.md. Signed error = predicted / measured - 1.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package
sys.path.insert(0, str(HERE))                # calibrate, crossval, bands

from calibrate import Case, note_chip  # noqa: E402

DEFAULT_RUNS = HERE / "runs"
DEFAULT_MEASURED = HERE / "data" / "public_runs_measured.csv"
SUBSET_PREFIX = "kort_t5_"   # Korthikanti et al. Table 5: exact iteration times


@dataclass
class Result:
    run_id: str
    group: str
    measured: float | None
    confidence: str = ""
    predicted: float | None = None
    error: float | None = None      # signed, predicted / measured - 1
    fits: bool | None = None
    mfu: float | None = None
    step_time: float | None = None
    config: str = ""
    breakdown: dict = field(default_factory=dict)
    failure: str | None = None      # why no prediction


def evaluate(path: Path, measured: dict[str, dict]) -> Result:
    return evaluate_case(path, measured)[0]


def evaluate_case(path: Path, measured: dict[str, dict]) -> tuple[Result, Case | None]:
    """The shipped model's prediction of one run, and the run as a calibration case
    (None when it has no steady-state measurement or cannot be evaluated)."""
    run_id = path.stem
    case = None
    meas = measured.get(run_id, {})
    value = _float(meas.get("meas_tokens_per_s_per_gpu"))
    result = Result(run_id, meas.get("group", "(not in the measured CSV)"), value, meas.get("confidence", ""))
    try:
        from gclc.compiler.driver import check_file
        from gclc.model.job import pinned_config, train_job
        from gclc.model.train.step import estimate

        checked = check_file(str(path))
        if not checked.ok or checked.design is None:
            errors = [d.summary for d in checked.diagnostics if d.is_error]
            raise ValueError("gclc check: " + "; ".join(errors or ["no design"]))
        job = train_job(checked.design)
        cfg = pinned_config(job)
        est = estimate(job.shape, cfg, job.partition)
        result.predicted = float(est.tokens_per_s_per_gpu)
        result.fits = bool(est.fits)
        result.mfu = float(est.mfu)
        result.step_time = float(est.step_time)
        result.breakdown = {k: float(v) for k, v in est.breakdown.rows()}
        result.config = (f"tp{cfg.tp} pp{cfg.pp} dp{cfg.dp} cp{cfg.cp} ep{cfg.ep} vp{cfg.vp} mb{cfg.microbatch} "
                         f"{cfg.recompute} z{cfg.zero} {cfg.precision} {cfg.stack}")
        if not math.isfinite(result.predicted) or result.predicted <= 0:
            raise ValueError(f"non-positive or non-finite prediction {result.predicted}")
        if value:
            result.error = result.predicted / value - 1
            if meas.get("kind") == "steady_state":
                case = Case(run_id, result.group, job, cfg, value)
                note_chip(job.partition.node.accelerator)
    except Exception as exc:  # noqa: BLE001 - a broken run is a row, not a crash
        result.failure = f"{type(exc).__name__}: {exc}"
        result.error = None
    return result, case


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value > 0 else None


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method)."""
    s = sorted(values)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(results: list[Result]) -> dict:
    errs = [abs(r.error) for r in results if r.error is not None]
    signed = [r.error for r in results if r.error is not None]
    return {
        "runs": len(results), "predicted": len(errs),
        "median_abs_error": statistics.median(errs) if errs else math.nan,
        "p90_abs_error": percentile(errs, 0.9),
        "max_abs_error": max(errs) if errs else math.nan,
        "mean_abs_error": statistics.fmean(errs) if errs else math.nan,
        "mean_signed_error": statistics.fmean(signed) if signed else math.nan,
        "within_10pct": sum(e <= 0.10 for e in errs), "within_25pct": sum(e <= 0.25 for e in errs),
        "does_not_fit": sum(1 for r in results if r.fits is False),
    }


def unexpressible(runs_dir: Path, measured: dict[str, dict], have: set[str]) -> list[dict]:
    reasons: dict[str, str] = {}
    table = runs_dir / "UNEXPRESSIBLE.md"
    if table.exists():
        for line in table.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 4 and cells[0] not in ("run_id", "---"):
                reasons[cells[0]] = cells[3]
    return [{"run_id": rid, "group": m.get("group", ""), "kind": m.get("kind", ""),
             "reason": reasons.get(rid, "no design file in the runs folder")}
            for rid, m in measured.items() if rid not in have]


def _pct(x: float | None) -> str:
    return "   n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+6.1f}%"


def _abs_pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def report(results: list[Result], missing: list[dict], measured: dict[str, dict]) -> str:
    out = []
    w = max([len(r.run_id) for r in results] + [6])
    out.append(f"{'run':<{w}}  {'group':<42} {'predicted':>10} {'measured':>10} {'error':>8}  fits  config")
    for r in results:
        pred = f"{r.predicted:10.1f}" if r.predicted is not None else f"{'ERROR':>10}"
        meas = f"{r.measured:10.1f}" if r.measured is not None else f"{'n/a':>10}"
        fits = {True: "yes ", False: "NO  ", None: "  - "}[r.fits]
        line = f"{r.run_id:<{w}}  {r.group[:42]:<42} {pred} {meas} {_pct(r.error):>8}  {fits}  {r.config}"
        if r.failure:
            line += f"  !! {r.failure}"
        out.append(line)
    out.append("")
    out.append("Per group (|error| of predicted vs measured tokens/s per accelerator):")
    out.append(f"  {'group':<42} {'n':>4} {'median':>8} {'p90':>8} {'max':>8} {'bias':>8} {'!fit':>5}")
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(r.group, []).append(r)
    for g, rs in groups.items():
        s = summary(rs)
        out.append(f"  {g[:42]:<42} {s['predicted']:>4} {_abs_pct(s['median_abs_error']):>8} "
                   f"{_abs_pct(s['p90_abs_error']):>8} {_abs_pct(s['max_abs_error']):>8} "
                   f"{_pct(s['mean_signed_error']):>8} {s['does_not_fit']:>5}")
    s = summary(results)
    total = len(measured)
    steady = sum(1 for m in measured.values() if m.get("kind") == "steady_state")
    out.append("")
    out.append("Overall:")
    listed = [r for r in results if r.run_id in measured]
    listed_steady = sum(1 for r in listed if measured[r.run_id].get("kind") == "steady_state")
    extra = len(results) - len(listed)
    out.append(f"  expressed {len(listed)} / {total} rows ({listed_steady} / {steady} of the rows with a steady-state "
               f"figure); predicted {s['predicted']}, errors {sum(1 for r in results if r.failure)}"
               + (f"; {extra} design file(s) not in the measured CSV" if extra else ""))
    out.append(f"  |error| median {_abs_pct(s['median_abs_error'])}, 90th percentile {_abs_pct(s['p90_abs_error'])}, "
               f"max {_abs_pct(s['max_abs_error'])}, mean {_abs_pct(s['mean_abs_error'])}; "
               f"mean signed {_pct(s['mean_signed_error']).strip()}")
    out.append(f"  within 10 %: {s['within_10pct']}, within 25 %: {s['within_25pct']}; "
               f"configurations that do not fit in memory: {s['does_not_fit']}")
    sub = [r for r in results if r.run_id.startswith(SUBSET_PREFIX)]
    errs = [abs(r.error) for r in sub if r.error is not None]
    if errs:
        out.append(f"  Korthikanti Table 5 ({SUBSET_PREFIX}*, {len(errs)} runs): mean |error| "
                   f"{_abs_pct(statistics.fmean(errs))}, max |error| {_abs_pct(max(errs))}")
    if missing:
        out.append("")
        out.append(f"Not expressed ({len(missing)} rows):")
        for m in missing:
            out.append(f"  {m['run_id']} [{m['group']}; measured kind {m['kind'] or 'n/a'}]: {m['reason']}")
    return "\n".join(out)


def _finite(x):
    """JSON has no NaN: undefined statistics become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def cross_validated(cases: list[Case], in_sample: dict[str, float], workers: int) -> tuple[list[str], dict]:
    """Leave-one-group-out tables and the conformal band's out-of-sample coverage."""
    import bands
    import crossval

    preds = crossval.leave_one_group_out(cases, workers=workers)
    residuals, flagsets, groups = [p.residual for p in preds], [p.flags for p in preds], [p.case.group for p in preds]
    nested = bands.nested_coverage(residuals, flagsets, groups, known=bands.KNOWN)
    covered = {p.case.run_id: inside for p, (inside, _) in zip(preds, nested)}
    band = bands.fit_band(residuals, flagsets, known=bands.KNOWN)
    s = crossval.stats([p.error for p in preds])
    coverage = sum(covered.values()) / len(covered)
    width = statistics.median(w for _, w in nested)
    lines = ["", f"Cross-validated: leave one group out ({len(crossval.groups(cases))} groups; the physics refitted "
             "on the other groups, calibrate.fit), |error| of predicted vs measured tokens/s per accelerator;",
             "band80 = share inside the 80 % band fitted on the other groups' cross-validated residuals (bands.py)", ""]
    lines += crossval.table("Per group:", crossval.split(preds, lambda p: (p.case.group,)), in_sample, covered)
    lines.append("")
    lines += crossval.table("Per condition:", dict(sorted(crossval.split(preds, lambda p: crossval.conditions(p.case)).items())),
                            in_sample, covered)
    lines.append("")
    flagged = crossval.split(preds, lambda p: p.flags or ("(no flag)",))
    lines += crossval.table("Per reason for uncertainty (model/calibration.py):", dict(sorted(flagged.items())),
                            in_sample, covered)
    lines += [""] + crossval.refits(preds)
    worst = sorted(preds, key=lambda p: -abs(p.error))[:12]
    lines += ["", "Largest cross-validated misses:"] + [
        f"  {p.case.run_id:24} {p.error:+7.1%}  in band: {'yes' if covered[p.case.run_id] else 'no '}  "
        f"[{', '.join(p.flags) or '-'}]  {p.case.group}" for p in worst]
    lines += ["", "Overall (cross-validated):",
              f"  |error| median {s['median']:.1%}, 90th percentile {s['p90']:.1%}, max {s['max']:.1%}; "
              f"within 10 %: {s['within_10pct']}, within 25 %: {s['within_25pct']} of {s['n']}; "
              f"mean signed {s['bias']:+.1%}",
              f"  80 % band: {coverage:.0%} of the measurements inside the band fitted without their group; "
              f"median half width {width:.1%}",
              f"  band on all cross-validated residuals: base scale {band.base:.4f}, quantiles "
              f"{band.quantiles[0]:+.3f} / {band.quantiles[1]:+.3f}, factors "
              + ", ".join(f"{k} {v:.2f}" + ("" if k in band.carried else " (none carry it: the widest)")
                          for k, v in band.factors.items())]
    payload = {"runs": [{"run_id": p.case.run_id, "group": p.case.group, "predicted": p.predicted,
                         "measured": p.case.measured, "error": p.error, "flags": list(p.flags),
                         "in_band": covered[p.case.run_id]} for p in preds],
               "overall": s, "band_coverage": coverage, "band_median_half_width": width,
               "band": {"base": band.base, "quantiles": list(band.quantiles), "factors": band.factors}}
    return lines, payload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(DEFAULT_RUNS), help="folder of <run_id>.gcl designs")
    parser.add_argument("--csv", default=str(DEFAULT_MEASURED), help="measured CSV (public_runs_measured.csv columns)")
    parser.add_argument("--json", action="store_true", help="print the rows and summaries as JSON")
    parser.add_argument("--no-cv", action="store_true", help="in-sample figures only (skip the cross-validation)")
    parser.add_argument("--workers", type=int, default=2, help="processes for the cross-validation folds")
    args = parser.parse_args(argv)
    runs_dir = Path(args.runs)
    with open(args.csv, newline="") as f:
        measured = {r["run_id"]: r for r in csv.DictReader(f)}
    order = {rid: i for i, rid in enumerate(measured)}
    paths = sorted(runs_dir.glob("*.gcl"), key=lambda p: (order.get(p.stem, len(order)), p.stem))
    evaluated = [evaluate_case(p, measured) for p in paths]
    results = [r for r, _ in evaluated]
    cases = [c for _, c in evaluated if c is not None]
    missing = unexpressible(runs_dir, measured, {r.run_id for r in results})
    in_sample = {r.run_id: r.error for r in results if r.error is not None}
    cv_lines, cv = cross_validated(cases, in_sample, args.workers) if not args.no_cv and cases else ([], {})
    sub = [r for r in results if r.run_id.startswith(SUBSET_PREFIX)]
    if args.json:
        groups: dict[str, list[Result]] = {}
        for r in results:
            groups.setdefault(r.group, []).append(r)
        payload = {"runs": [asdict(r) for r in results], "groups": {g: summary(rs) for g, rs in groups.items()},
                   "overall": summary(results), "korthikanti_table5": summary(sub),
                   "rows_total": len(measured),
                   "rows_steady_state": sum(1 for m in measured.values() if m.get("kind") == "steady_state"),
                   "unexpressible": missing, "cross_validated": cv}
        print(json.dumps(_finite(payload), indent=1, allow_nan=False))
    else:
        print(report(results, missing, measured))
        print("\n".join(cv_lines))
        print(summary_line(results, sub, cv))
    return 0


def summary_line(results: list[Result], korthikanti: list[Result], cv: dict) -> str:
    s = summary(results)
    k = [abs(r.error) for r in korthikanti if r.error is not None]
    parts = []
    if cv:
        o = cv["overall"]
        parts.append(f"cv: n={o['n']} median={o['median']:.1%} p90={o['p90']:.1%} "
                     f"band80={cv['band_coverage']:.0%} (median ±{cv['band_median_half_width']:.1%})")
    parts.append(f"in-sample: n={s['predicted']} median={s['median_abs_error']:.1%} p90={s['p90_abs_error']:.1%}")
    if k:
        parts.append(f"korthikanti mean={statistics.fmean(k):.2%} max={max(k):.1%}")  # 2 decimals: the target is 2 %
    return " | ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
