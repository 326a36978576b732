"""A comparison of two designs as text (one line per change) and as JSON."""

from __future__ import annotations

import json

from ..dsl.numbers import number, percent, quantity

from ..solver.compare import Comparison

_SECTIONS = {"params": "params", "parts": "parts", "bom": "bill of materials", "plan": "plan, power and cost"}


# plan metrics by the suffix of their key: the unit the one formatter writes them in
_UNITS = (("_usd", "USD"), (": cost", "USD"), ("_bytes", "B"), ("_w", "W"), ("_j", "J"), ("_s", "s"))


def _show(key: str, value) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if key == "mfu":
            return percent(value)
        unit = next((u for suffix, u in _UNITS if key.endswith(suffix)), "")
        if unit == "s" and "_per_" in key:   # a rate (`tokens_per_s`), not a time
            unit = ""
        if key.endswith("per_token_usd"):   # as the report's headline says it
            return f"{number(value * 1e6)} USD per M tokens"
        if unit == "USD":   # money in full dollars (cents below one): a budget reads every digit
            return f"{number(value if abs(value) < 1 else round(value))} USD"
        if unit:
            return quantity(value, unit, 4)
        return number(value, 4)
    return str(value)


def _ratio(a, b) -> str:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and a:
        return f"  ({'+' if b >= a else '-'}{percent(abs(b / a - 1))})"
    return ""


def diff_text(c: Comparison) -> str:
    lines = [f"--- {c.a}  ({c.status[0]}{': ' + c.reasons[0] if c.reasons[0] else ''})",
             f"+++ {c.b}  ({c.status[1]}{': ' + c.reasons[1] if c.reasons[1] else ''})"]
    if not c.changes:
        return "\n".join(lines + ["no differences"])
    for section, title in _SECTIONS.items():
        rows = [x for x in c.changes if x.section == section]
        if not rows:
            continue
        lines.append(f"\n{title}:")
        width = max(len(x.key) for x in rows)
        for x in rows:
            lines.append(f"  {x.key:<{width}}  {_show(x.key, x.a):>18} -> {_show(x.key, x.b):<18}{_ratio(x.a, x.b)}")
    return "\n".join(lines)


def diff_json(c: Comparison) -> str:
    data = {"a": c.a, "b": c.b, "status": {"a": c.status[0], "b": c.status[1]},
            "reasons": {"a": c.reasons[0], "b": c.reasons[1]},
            "changes": [{"section": x.section, "key": x.key, "a": x.a, "b": x.b} for x in c.changes]}
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
