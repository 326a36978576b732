"""A sweep as text (the summary and the Pareto front) and as one self-contained HTML page."""

from __future__ import annotations

import html
import json

from ...dsl.numbers import duration, number, percent, quantity

from ...solver.sweep.pareto import OBJECTIVES
from ...solver.sweep.point import column
from ...solver.sweep.study import missing_reasons
from .plots import axis

# tp x pp x dp x cp is the GPU count shown (expert groups fold over the tp x cp x dp ranks: ep multiplies nothing)
_SHOWN = ("gpus", "tp", "pp", "dp", "cp", "ep", "tokens_per_s", "goodput_share", "mfu", "time_to_train_s",
          "facility_power_w", "capex_usd", "tco_usd", "cost_per_token_usd")


def _fmt(column: str, value) -> str:
    """A Pareto cell as the one number formatter writes it (`dsl/numbers.py`)."""
    if value is None:
        return "-"
    if column.endswith("_s") and "_per_" not in column:   # a time, not a rate (`tokens_per_s`)
        return duration(value)
    if column == "cost_per_token_usd":
        return f"{number(value * 1e6)} USD per M tokens"
    if column.endswith("_usd"):
        return quantity(value, "USD")
    if column.endswith("_w"):
        return quantity(value, "W")
    if column in ("mfu", "goodput_share"):
        return percent(value)
    if isinstance(value, float):
        return number(value)
    return str(value)


def front_table(rows: list[dict], swept: tuple[str, ...]) -> list[list[str]]:
    header = [*swept, *_SHOWN]
    return [header] + [[_text(r.get(column(n))) for n in swept] + [_fmt(c, r.get(c)) for c in _SHOWN] for r in rows]


def summary_text(collected, total: int, objectives: tuple[str, ...], files: list[str], interrupted: bool) -> str:
    s = collected.statuses
    lines = [f"{'interrupted: ' if interrupted else ''}{sum(s.values())} of {total} points: {s['ok']} feasible, "
             f"{s['infeasible']} infeasible, {s['invalid']} invalid"
             + (f" ({collected.resumed} resumed from the earlier table)" if collected.resumed else "")]
    for reason, n in collected.reasons.most_common(5):
        lines.append(f"  {n} x {reason}")
    rows = collected.front_rows()
    lines.append(f"Pareto front over {', '.join(objectives)}: {len(rows)} points")
    lines += [f"  {why}" for why in missing_reasons(collected)]
    table = front_table(rows, collected.labels)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in table]
    lines += [f"wrote {f}" for f in files]
    return "\n".join(lines)


def summary_json(collected, total: int, objectives: tuple[str, ...], files: list[str], interrupted: bool) -> str:
    """`gclc sweep --json`: the counts, the reasons, the Pareto front's rows and the files written."""
    s = collected.statuses
    return json.dumps({"points": total, "interrupted": interrupted, "feasible": s["ok"], "infeasible": s["infeasible"],
                       "invalid": s["invalid"], "resumed": collected.resumed,
                       "reasons": dict(collected.reasons.most_common()), "objectives": list(objectives),
                       "pareto": collected.front_rows(), "off_front": missing_reasons(collected), "files": files},
                      indent=2, default=str, allow_nan=False)


def tornado_text(bars: list[tuple[str, float, float, float, float]], name: str, delta: float) -> str:
    """The sensitivity of `name` to each param moved by -delta and +delta, largest swing
    first; a whole-number param that could not move by exactly delta says how far it moved."""
    lines = [f"sensitivity of {name} to +-{percent(delta)}:"]
    for param, low, high, down, up in sorted(bars, key=lambda b: -max(abs(b[1]), abs(b[2]))):
        exact = abs(down + delta) < 1e-9 and abs(up - delta) < 1e-9
        moved = "" if exact else f"  (rounded: moved {_signed(down)} / {_signed(up)})"
        lines.append(f"  {param:24} {_signed(low):>8} {_signed(high):>8}{moved}")
    return "\n".join(lines)


def _signed(share: float) -> str:
    return ("+" if share >= 0 else "-") + percent(abs(share))


def progress_line(p) -> str:
    """A running sweep's points done, infeasible and its ETA (the line is redrawn in place)."""
    eta = "" if p.eta is None else f"  ETA {int(p.eta) // 60}m{int(p.eta) % 60:02d}s"
    return f"  {p.done}/{p.total} points  {p.infeasible} infeasible{eta}   "


def report_html(path: str, collected, total: int, objectives: tuple[str, ...], svg: str | None,
                axes: dict[str, tuple[str, ...]]) -> str:
    s = collected.statuses
    e = html.escape
    table = front_table(collected.front_rows(), collected.labels)
    head = "".join(f"<th>{e(c)}</th>" for c in table[0])
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in table[1:])
    reasons = "".join(f"<li>{n} x {e(r)}</li>" for r, n in collected.reasons.most_common(10))
    swept = "".join(f"<li><code>{e(n)}</code>: {e(', '.join(v[:12]))}{' ...' if len(v) > 12 else ''} "
                    f"({len(v)} values)</li>" for n, v in axes.items())
    senses = ", ".join(f"{o} ({'min' if OBJECTIVES[o][1] > 0 else 'max'}: {axis(o)[1]})" for o in objectives)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gclc sweep: {e(path)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:72em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right;font-size:90%}}</style></head><body>
<h1>Sweep of <code>{e(path)}</code></h1>
<p>{sum(s.values())} of {total} points: {s['ok']} feasible, {s['infeasible']} infeasible, {s['invalid']} invalid.</p>
<h2>Axes</h2><ul>{swept}</ul>
<h2>Pareto front</h2><p>Objectives: {e(senses)}.</p>
{svg or '<p>(no chart: fewer than two objectives or no feasible point)</p>'}
<table><tr>{head}</tr>{body}</table>{''.join(f"<p>{e(why)}</p>" for why in missing_reasons(collected))}
<h2>Why points failed</h2><ul>{reasons or '<li>none</li>'}</ul>
</body></html>
"""


def _text(value) -> str:
    return "-" if value is None else str(value)
