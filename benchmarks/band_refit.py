"""The 80 % band refitted on every out-of-sample residual there is, and its coverage measured
out of sample: the calibration's cross-validated residuals (benchmarks/accuracy.py, each run
predicted by the physics fitted without its group) pooled with the never-fitted validation
set's (benchmarks/validation.py, predicted by the shipped model, which never saw them).

    .venv/bin/python benchmarks/accuracy.py --json > accuracy.json     # minutes: 19 refits
    .venv/bin/python benchmarks/band_refit.py accuracy.json [--json]

Why: fitted on the calibration's residuals alone, the band holds 80 % of them out of sample but
69 % of the validation runs (their misses are wider than the calibration's: old pipeline
engines, torchtitan's compiled FP8 under a power cap). A reason no fitted residual carries
(power_cap, when the one group with capped runs is left out) takes the widest fitted factor
(bands.Band.unseen), not 1: with 1 the band claimed the cap adds no doubt and held 72 % of the
validation runs (the six torchtitan misses, measured 13-39 % faster than predicted). Both sets are out-of-sample residuals of
the same model, so the band is fitted on both (bands.fit_band: a scale per reason for doubt and
split-conformal quantiles), and its coverage is measured by leaving out one source group at a
time, the band refitted on the rest (bands.nested_coverage): the figure to quote. Printed per
set (calibration, validation) and overall, with the band the calibration alone gives beside it,
and the constants for model/calibration.py. The physics is not refitted: the validation runs
still fit no efficiency. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package
sys.path.insert(0, str(HERE))

import bands  # noqa: E402


def calibration_rows(path: Path) -> list[tuple[float, tuple[str, ...], str, str]]:
    """(residual, flags, group, set) of each cross-validated calibration run in accuracy.py's JSON."""
    data = json.loads(path.read_text())
    if "cross_validated" not in data:
        raise SystemExit(f"{path}: no cross-validated runs (run accuracy.py --json without --no-cv)")
    runs = data["cross_validated"]["runs"]
    out = []
    for r in runs:
        if r.get("error") is None or "flags" not in r:
            continue
        out.append((-math.log1p(r["error"]), tuple(r["flags"]), r["group"], "calibration"))
    return out


def validation_rows() -> list[tuple[float, tuple[str, ...], str, str]]:
    """(residual, flags, group, set) of each never-fitted validation run, predicted now."""
    import validation

    rows = validation.read_rows()
    measured = {r["run_id"]: r for r in rows}
    out = []
    for path in sorted(validation.VALIDATION_DIR.glob("*.gcl")):
        c = validation.check_run(path, measured)
        if c.error is not None:
            out.append((-math.log1p(c.error), tuple(c.reasons), "validation: " + c.group, "validation"))
    return out


def coverage(rows, known) -> tuple[list[bool], list[float]]:
    residuals, flagsets, groups = ([r[i] for r in rows] for i in range(3))
    nested = bands.nested_coverage(residuals, flagsets, groups, known=known)
    return [c for c, _ in nested], [w for _, w in nested]


def share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("accuracy", help="benchmarks/accuracy.py --json output")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    wall, cpu = time.perf_counter(), time.process_time()
    calib, valid = calibration_rows(Path(args.accuracy)), validation_rows()
    pooled = calib + valid
    carried = {f for r in pooled for f in r[1]}
    known = tuple(k for k in bands.KNOWN if k not in carried)
    inside, widths = coverage(pooled, known)
    by_set = {name: [c for c, r in zip(inside, pooled) if r[3] == name] for name in ("calibration", "validation")}
    alone = bands.fit_band([r[0] for r in calib], [r[1] for r in calib], known=bands.KNOWN)
    alone_on_valid = [alone.covers(r[0], r[1]) for r in valid]
    band = bands.fit_band([r[0] for r in pooled], [r[1] for r in pooled], known=known)
    pooled_on_valid = [band.covers(r[0], r[1]) for r in valid]
    result = {
        "runs": {"calibration": len(calib), "validation": len(valid)},
        "groups": len({r[2] for r in pooled}),
        "nested_coverage": {"all": share(inside), **{k: share(v) for k, v in by_set.items()}},
        "nested_median_half_width": statistics.median(widths),
        "calibration_band_on_validation": share(alone_on_valid),
        "pooled_band_on_validation_in_sample": share(pooled_on_valid),
        "band": {"base": band.base, "quantiles": list(band.quantiles), "factors": band.factors},
    }
    seconds, cpu = time.perf_counter() - wall, time.process_time() - cpu
    summary = (f"band refit: pooled {len(pooled)} residuals in {result['groups']} groups; left-out-group coverage "
               f"{share(inside):.0%} (calibration {share(by_set['calibration']):.0%}, validation "
               f"{share(by_set['validation']):.0%}), median ±{statistics.median(widths):.1%}; the calibration-only "
               f"band holds {share(alone_on_valid):.0%} of the validation runs | wall {seconds:.1f} s, cpu {cpu:.1f} s")
    if args.json:
        print(json.dumps({**result, "summary": summary}, indent=1))
        return 0
    else:
        print(f"out-of-sample residuals: {len(calib)} calibration (cross-validated), {len(valid)} validation "
              f"(never fitted), {result['groups']} source groups")
        print(f"band fitted on the calibration alone, on the validation runs: {share(alone_on_valid):.0%} inside")
        print("pooled band, each group's coverage from the band fitted without it:")
        for name, flags in (("all", inside), *by_set.items()):
            print(f"  {name:<12} {share(flags):5.0%} of {len(flags)}")
        print(f"  median half width {statistics.median(widths):.1%}")
        print(f"the pooled band on the validation runs it was fitted on (in sample, not to quote): "
              f"{share(pooled_on_valid):.0%} inside")
        print("constants for model/calibration.py (the pooled band on all residuals):")
        print(f"  BAND_SCALE = {band.base:.4f}\n  QUANTILES = ({band.quantiles[0]:.3f}, {band.quantiles[1]:.3f})")
        for k, v in band.factors.items():
            print(f"  {k!r}: {v:.2f}" + ("" if k in band.carried else "   (no residual carries it: the widest fitted, "
                                                                     "bands.Band.unseen; model/calibration.py may set it)"))
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
