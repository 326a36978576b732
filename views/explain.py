"""`gclc explain`: a cluster's derived numbers with their formulas, as a table or JSON."""

from __future__ import annotations

import json


def explain_json(name: str, metrics) -> str:
    rows = [{"key": m.key, "label": m.label, "value": m.value, "unit": m.unit, "text": m.text,
             "formula": m.formula} for m in metrics]
    return json.dumps({"cluster": name, "metrics": rows}, indent=2, ensure_ascii=False, allow_nan=False)


def explain_text(name: str, metrics) -> str:
    width = max(len(m.label) for m in metrics)
    value_width = max(len(m.text) for m in metrics)
    lines = [f"cluster {name}", ""]
    lines += [f"  {m.label:<{width}}  {m.text:>{value_width}}  = {m.formula}" for m in metrics]
    return "\n".join(lines)
