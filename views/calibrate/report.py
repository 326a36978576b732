"""The report of a calibration: each measurement's prediction before and after (predicted /
measured - 1), end-to-end runs also held out; the constants that moved and by how much; the
outliers left out; the band; what to measure next; what was read but not used. As text and
as JSON (the same numbers)."""

from __future__ import annotations

import math
import os

from ...dsl.numbers import duration, number, percent, quantity
from ...solver.calibrate.advice import Advice
from ...solver.calibrate.calibrate import Calibration, Row
from ...solver.calibrate.step_overhead import measured
from .overrides import SAME


def _error(log_ratio: float | None) -> str:
    """predicted / measured - 1, signed."""
    if log_ratio is None:
        return "-"
    if not math.isfinite(log_ratio):
        return "no prediction"
    share = math.exp(log_ratio) - 1
    return ("+" if share >= 0 else "") + percent(share)


def _measured(row: Row) -> str:
    obs = row.obs
    return duration(obs.measured) if obs.unit == "s" else quantity(obs.measured, "tokens/s")


def _where(row: Row) -> str:
    span = row.obs.span
    try:
        path = os.path.relpath(span.path)
    except ValueError:
        path = span.path
    return f"{path}:{span.line}"


def report_text(calibration: Calibration, advice: tuple[Advice, ...], design: str) -> str:
    rows = calibration.rows
    files = len({r.obs.span.path for r in rows})
    lines = [f"calibrate {calibration.partition_cluster} ({design}) on {len(rows)} measurements from {files} files",
             "  error = predicted / measured - 1, before (the design's constants) and after the fit"]
    width = max((len(r.obs.what) for r in rows), default=20)
    for row in rows:
        held = f"   held out {_error(row.held_out)}" if row.held_out is not None else ""
        flag = "   OUTLIER: no setting of its constants explains it; left out of the fit" if row.outlier else ""
        lines.append(f"  {row.obs.what:<{width}}  measured {_measured(row):>12}  before {_error(row.before):>8}  "
                     f"after {_error(row.after):>8}{held}{flag}   {_where(row)}")
    lines.append("moved")
    moved = calibration.moved()
    if not moved:
        lines.append("  nothing: no measurement informs a constant of the design's parts")
    for param, value, groups in moved:
        if param.key[0] == "node":
            lines.append(_overhead_line(calibration, param, value, groups))
            continue
        change = value / param.prior - 1
        words = "confirmed" if abs(change) <= SAME else ("+" if change > 0 else "") + percent(change)
        edge = "; at the edge of its physical range: the model's form, not this constant, is off" \
            if not param.low * 1.0001 < value < param.high * 0.9999 else ""
        lines.append(f"  {param.label:<34} {_value(param, param.prior):>9} -> {_value(param, value):>9}  ({words}; "
                     f"{len(groups)} run{'s' if len(groups) != 1 else ''}{edge})")
    lines += _offset_lines(calibration)
    lines += _band_lines(calibration)
    if advice:
        lines.append("measure next")
        lines += [f"  {a.what}: {a.why}" for a in advice]
    for title, items in (("not used", calibration.skipped), ("assumed", calibration.notes)):
        if items:
            lines.append(title)
            lines += [f"  {item}" for item in items]
    return "\n".join(lines)


def _overhead_line(calibration: Calibration, param, value: float, groups: tuple[str, ...]) -> str:
    """A node's fitted per-step host time: the design's value, the fit, the runs it came from, the
    prior it moved from, how much the runs narrowed it and how far, in its deviations (seconds), the
    fit is from the design's value (step_overhead.py fits it only at Z or more)."""
    design = calibration.stated_overhead(param.key[1])
    spread = calibration.spread_of(param.key)
    width = f", posterior width e^±{number(spread, 2)} against the prior's e^±{number(param.spread, 2)}: " \
        f"{measured(value, spread, design)}" if spread is not None else ""
    edge = "; at the edge of its physical range" if not param.low * 1.0001 < value < param.high * 0.9999 else ""
    runs = ", ".join(_short_group(g) for g in groups)
    return (f"  {param.label:<34} {_design_value(design):>9} -> {_value(param, value):>9}  (fitted from runs {runs}: "
            f"prior {_value(param, param.prior)} -> {_value(param, value)}{width}{edge})")


def _design_value(seconds: float) -> str:
    return duration(seconds) if seconds > 0 else "0 s (unstated)"


def _offset_lines(calibration: Calibration) -> list[str]:
    """Each model's offset: what its runs miss by beyond the cluster's constants, with the runs."""
    offsets = calibration.offsets()
    if not offsets:
        return []
    lines = [f"model offsets (step time x; prior ±{percent(calibration.model_spread)}): each model's own miss, kept "
             "out of the cluster's constants; not written: plans of the calibrated design carry none"]
    for param, value, groups in offsets:
        runs = ", ".join(_short_group(g) for g in groups)
        lines.append(f"  {param.key[1]}: x{number(value, 3)} ({len(groups)} run{'s' if len(groups) != 1 else ''}: "
                     f"{runs})")
    return lines


def _short_group(group: str) -> str:
    path, _, line = group.rpartition(":")
    if not line.isdigit():
        return group
    try:
        path = os.path.relpath(path)
    except ValueError:
        pass
    return f"{path}:{line}"


def _value(param, value: float) -> str:
    return duration(value) if param.key[2] in ("latency", "host_step", "step_overhead") else percent(value, 4)


def _band_lines(calibration: Calibration) -> list[str]:
    band, serve = calibration.band, calibration.serve_band
    lines = ["band"]
    if band is None and serve is None:
        return lines + ["  unchanged: no end-to-end run (a training log or a serving benchmark) to hold out; "
                        "plans keep the shipped band"]
    if band is not None:
        widening = band.widening or (1.0,) * len(band.residuals)
        held = ", ".join(_error(-r) + (f" ÷{number(w)}" if w > 1 else "") for r, w in zip(band.residuals, widening))
        why = ("; ÷: counted divided by the factors of what that run had that the others had not (a precision, "
               "MoE layers, more GPUs), as a plan there is widened by them") if any(w > 1 for w in widening) else ""
        lines.append(f"  calibrated on {number(band.runs)} of your runs: ±{percent(band.half_width)} "
                     f"(80 %: measured / predicted {percent(band.low)} to {percent(band.high)}); each run held out: {held}{why}")
    if serve is not None:
        lines.append(f"  serving: calibrated on {number(serve.runs)} of your serving runs: ±{percent(serve.half_width)} "
                     f"(80 %: measured / predicted {percent(serve.low)} to {percent(serve.high)} of throughput, TTFT "
                     "and TPOT, each run held out)")
    return lines


def _band_json(band) -> dict | None:
    if band is None:
        return None
    return {"runs": band.runs, "low": band.low, "high": band.high, "half_width": band.half_width,
            "held_out": [r if math.isfinite(r) else None for r in band.residuals],
            "widening": list(band.widening or (1.0,) * len(band.residuals))}


def report_json(calibration: Calibration, advice: tuple[Advice, ...]) -> dict:
    return {
        "format": "gclc-calibration", "version": 1, "cluster": calibration.partition_cluster,
        "measurements": [{"what": r.obs.what, "kind": r.obs.kind, "where": f"{r.obs.span.path}:{r.obs.span.line}",
                          "measured": r.obs.measured, "unit": r.obs.unit, "error_before": _share(r.before),
                          "error_after": _share(r.after), "error_held_out": _share(r.held_out), "outlier": r.outlier}
                         for r in calibration.rows],
        "moved": [{"constant": "/".join(p.key), "before": _before(calibration, p), "prior": p.prior, "after": v,
                   "runs": list(g), "at_edge": not p.low * 1.0001 < v < p.high * 0.9999,
                   **({"posterior_width": calibration.spread_of(p.key)} if p.key[0] == "node" else {})}
                  for p, v, g in calibration.moved()],
        "model_offsets": [{"model": p.key[1], "factor": v, "runs": list(g)} for p, v, g in calibration.offsets()],
        "band": _band_json(calibration.band), "serve_band": _band_json(calibration.serve_band),
        "measure_next": [{"what": a.what, "why": a.why} for a in advice],
        "not_used": list(calibration.skipped), "assumed": list(calibration.notes),
    }


def _before(calibration: Calibration, param) -> float:
    """A constant's value in the design as written: its prior, but a node's stated per-step host time."""
    return calibration.stated_overhead(param.key[1]) if param.key[0] == "node" else param.prior


def _share(log_ratio: float | None) -> float | None:
    return math.exp(log_ratio) - 1 if log_ratio is not None and math.isfinite(log_ratio) else None
