"""Hover text: for a field, what it must be (its unit), its value as the compiler derives
it, and where that value was written with the comment that cites its source; for a
declaration, its kind, its `source`, and for a cluster the totals the compiler derives."""

from __future__ import annotations

from typing import Any

from ..compiler import metrics, schema as sc
from ..compiler.design import Record
from ..compiler.show import show_value
from ..compiler.evaluate import INVALID
from ..compiler.lower import lower_cluster
from ..dsl.units import EXAMPLE_UNITS
from ..dsl import ast
from .analysis import Analysis
from .locate import Spot, spot_at


def hover_text(analysis: Analysis, offset: int) -> str | None:
    """Markdown for the name at `offset`, or None when there is nothing to say."""
    if analysis.module is None:
        return None
    spot = spot_at(analysis.module, offset)
    if spot is None:
        return None
    if spot.kind in ("field", "constraint", "block"):
        return _field(analysis, spot)
    if spot.kind == "declaration":
        return _declaration(analysis, spot.path[0])
    if spot.kind == "ref":
        return _reference(analysis, spot)
    if spot.kind == "kind" and spot.decl is not None:
        block = sc.KINDS.get(spot.decl.kind.text)
        doc = f"{block.doc}; " if block and block.doc else ""
        return f"`{spot.decl.kind.text}`: {doc}fields {_list(block.fields)}" if block else None
    return None


def field_type(kind: str, path: tuple[str, ...]) -> sc.Block | sc.FieldType | None:
    """The schema entry for `path` inside a declaration of `kind` (labels are skipped)."""
    node: Any = sc.KINDS.get(kind)
    for part in path:
        if not isinstance(node, sc.Block):
            return None
        head, _, label = part.partition(" ")
        if label and head in node.labelled:
            node = node.labelled[head]
        else:
            node = node.fields.get(part) or node.blocks.get(part) or node.constraints.get(part)
    return node


def describe_type(ftype: sc.Block | sc.FieldType | None) -> str:
    if ftype is None:
        return "not a field here"
    if isinstance(ftype, sc.Block):
        return "a block" + (f": {ftype.doc}" if ftype.doc else "") + f"; fields {_list(ftype.fields or ftype.constraints)}"
    text = ftype.describe()
    if isinstance(ftype, sc.Qty) and not ftype.integer and EXAMPLE_UNITS.get(ftype.dim):
        text += f", in units such as `{EXAMPLE_UNITS[ftype.dim]}`"
    if isinstance(ftype, sc.Qty) and ftype.marker == "bidir":
        text += "; per direction unless marked `bidir`"
    if isinstance(ftype, sc.Qty) and ftype.marker == "sparse":
        text += "; dense unless marked `sparse`"
    return text


def _field(analysis: Analysis, spot: Spot) -> str | None:
    decl = spot.decl
    if decl is None:
        return None
    declaration = spot.override_of or decl.name.text
    kind = _kind_of(analysis, declaration) or decl.kind.text
    path = spot.path
    lines = [f"**{'.'.join(path)}** — {describe_type(field_type(kind, path))}"]
    if spot.override_of is None:
        value = analysis.value(declaration, ".".join(p.replace(" ", ".") for p in path))
        if value is not None and value is not INVALID and not isinstance(value, Record):
            lines.append(f"value: `{show_value(value)}`")
        lines += _where(analysis, declaration, path)
    return "\n\n".join(lines)


def _where(analysis: Analysis, declaration: str, path: tuple[str, ...]) -> list[str]:
    """Where the value was written: this file or a parent's, with its comment and source."""
    entry = analysis.entry(declaration, path)
    if entry is None or entry.span is None:
        return []
    span = entry.span
    out = []
    owner = analysis.owner(span.path, span.start)
    here = owner is not None and owner.name.text == declaration
    where = f"{span.path}:{span.line}"
    out.append(f"set at `{where}`" if here or owner is None else f"inherited from `{owner.name.text}` (`{where}`)")
    comment = analysis.comment_on(span.path, span.line)
    if comment:
        out.append(f"source: {comment}")
    cited = analysis.value(owner.name.text, "source") if owner is not None else None
    if isinstance(cited, str) and cited:
        out.append(f"`{owner.name.text}` cites: {cited}")
    return out


def _declaration(analysis: Analysis, name: str) -> str | None:
    decl = analysis.program.declarations.get(name)
    if decl is None:
        return None
    head = f"**{decl.kind.text} {name}**" + (f" extends `{decl.parent.text}`" if decl.parent else "")
    lines = [head, f"declared at `{decl.name.span.path}:{decl.name.span.line}`"]
    cited = analysis.value(name, "source")
    if isinstance(cited, str) and cited:
        entry = analysis.entry(name, ("source",))
        owner = analysis.owner(entry.span.path, entry.span.start) if entry is not None and entry.span else None
        whose = f" (inherited from `{owner.name.text}`)" if owner is not None and owner.name.text != name else ""
        lines.append(f"source{whose}: {cited}")
    lines += _derived(analysis, decl)
    return "\n\n".join(lines)


def _derived(analysis: Analysis, decl: ast.Declaration) -> list[str]:
    """The numbers the compiler derives: a cluster's totals; a chip's key figures."""
    entity = analysis.checker.entity(decl.name.text)
    if entity is None:
        return []
    if decl.kind.text == "cluster":
        try:
            graph = lower_cluster(entity)
        except Exception:  # noqa: BLE001 — a half-typed cluster has no totals yet; hover shows the rest
            return []
        shown = [m for m in metrics.totals(graph) + metrics.power_breakdown(graph) if m.key in _CLUSTER_TOTALS]
        return ["derived:\n" + "\n".join(f"- {m.label}: {m.text} ({m.formula})" for m in shown)]
    if decl.kind.text == "chip":
        keys = ("hbm.nominal", "hbm.capacity", "hbm.bandwidth", "peak.bf16", "peak.fp8", "power.tdp")
        found = [(k, entity.get(k)) for k in keys if entity.get(k) is not None]
        return ["\n".join(f"- {k}: {show_value(v)}" for k, v in found)] if found else []
    return []


_CLUSTER_TOTALS = ("gpus", "peak.bf16", "peak.fp8", "hbm.nominal", "hbm.capacity", "power.facility")


def _reference(analysis: Analysis, spot: Spot) -> str | None:
    first, *rest = spot.path
    if first in analysis.program.params and not rest:
        param = analysis.program.params[first]
        value = analysis.checker.param(first)
        return (f"**param {first}** = `{show_value(value)}`\n\ndeclared at `{param.name.span.path}:{param.name.span.line}`"
                "\n\noverride with `--set " + first + "=...`")
    if first not in analysis.program.declarations:
        return None
    if not rest:
        return _declaration(analysis, first)
    kind = analysis.program.declarations[first].kind.text
    lines = [f"**{first}.{'.'.join(rest)}** — {describe_type(field_type(kind, tuple(rest)))}"]
    value = analysis.value(first, ".".join(rest))
    if value is not None and value is not INVALID and not isinstance(value, Record):
        lines.append(f"value: `{show_value(value)}`")
    return "\n\n".join(lines + _where(analysis, first, tuple(rest)))


def _kind_of(analysis: Analysis, name: str) -> str | None:
    decl = analysis.program.declarations.get(name)
    return decl.kind.text if decl else None


def _list(names) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"
