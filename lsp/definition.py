"""Go to definition: a name to where it is declared, across imports and `std/`; a field
reference (`H100_SXM.hbm.capacity`) to where its value is written; a field that
overrides an inherited one to the parent's line; an import to its file."""

from __future__ import annotations

from pathlib import Path

from ..compiler.resolve import import_target
from ..dsl import ast
from ..dsl.source import Span
from .analysis import Analysis
from .locate import spot_at


def definition(analysis: Analysis, offset: int) -> Span | Path | None:
    """The span to jump to, or a whole file (an import), or None."""
    if analysis.module is None:
        return None
    spot = spot_at(analysis.module, offset)
    if spot is None:
        return None
    program = analysis.program
    if spot.kind == "import":
        return _import_file(analysis, spot.path[0])
    if spot.kind == "ref":
        first, *rest = spot.path
        if first in program.params and not rest:
            return program.params[first].name.span
        decl = program.declarations.get(first)
        if decl is None:
            return None
        if not rest:
            return decl.name.span
        entry = analysis.entry(first, tuple(rest))
        return entry.name.span if entry is not None else decl.name.span
    if spot.kind in ("field", "block") and spot.decl is not None and spot.override_of is None:
        return _inherited(analysis, spot.decl, spot.path)
    if spot.kind in ("field", "block") and spot.override_of is not None:
        entry = analysis.entry(spot.override_of, spot.path)
        return entry.name.span if entry is not None else None
    return None


def _inherited(analysis: Analysis, decl: ast.Declaration, path: tuple[str, ...]) -> Span | None:
    """The parent's setting of a field this declaration overrides."""
    if decl.parent is None or decl.parent.text not in analysis.program.declarations:
        return None
    entry = analysis.entry(decl.parent.text, path)
    return entry.name.span if entry is not None else None


def _import_file(analysis: Analysis, text: str) -> Path | None:
    found = import_target(ast.Import(text), Path(analysis.path), [])
    return found[1] if found else None
