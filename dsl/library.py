"""The standard library as a catalogue: every part of `std/` with its kind, file, line,
`source` and text, for `gclc std`, for "add `import "std/amd"`" hints and for editors."""

from __future__ import annotations

import functools
from pathlib import Path

import attrs

from . import ast
from .source import SourceFile, Span
from .syntax import ParseError, parse_source
from .records import frozen

STD_ROOT = Path(__file__).resolve().parent / "std"


@frozen
class StdPart:
    kind: str
    name: str
    library: str  # `std/nvidia`, as written in an import
    source: str  # the part's `source = "..."`, or ""
    parent: str | None
    span: Span = attrs.field(eq=False, repr=False)


@frozen
class StdFile:
    library: str
    summary: str  # the file's first comment line
    parts: tuple[StdPart, ...]
    source: SourceFile = attrs.field(eq=False, repr=False)


@functools.cache
def std_files() -> tuple[StdFile, ...]:
    out = []
    for path in sorted(STD_ROOT.glob("*.gcl")):
        source = SourceFile(f"std/{path.name}", path.read_text(encoding="utf-8"))
        try:
            module = parse_source(source)
        except ParseError:
            continue  # the tests keep std/ clean; a broken file only drops out of the catalogue
        parts = tuple(StdPart(d.kind.text, d.name.text, f"std/{path.stem}", _source_of(d),
                              d.parent.text if d.parent else None, d.span)
                      for d in module.items if isinstance(d, ast.Declaration))
        out.append(StdFile(f"std/{path.stem}", _summary(source.text), parts, source))
    return tuple(out)


def std_parts() -> tuple[StdPart, ...]:
    return tuple(part for file in std_files() for part in file.parts)


def find_part(name: str) -> StdPart | None:
    return next((p for p in std_parts() if p.name == name), None)


def part_text(part: StdPart) -> str:
    """The declaration as written, with the comment lines just above it."""
    source = next(f.source for f in std_files() if f.library == part.library)
    first = part.span.line
    while first > 1 and source.line_text(first - 1).lstrip().startswith("#") and source.line_text(first - 1).strip() != "#":
        first -= 1
    return "\n".join(source.line_text(n) for n in range(first, part.span.end_line + 1))


def _source_of(decl: ast.Declaration) -> str:
    for member in decl.members:
        if isinstance(member, ast.Field) and member.target.text == "source" and isinstance(member.value, ast.String):
            return member.value.value
    return ""


def _summary(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first.lstrip("#").strip().split(" — ", 1)[-1]
