"""Reading a measurement file within bounds, and the located errors every reader gives:
`file:line:col: error[measurement]: what is wrong`, with how to fix it."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...dsl.source import SourceFile, Span
from ..files import MAX_DATA_BYTES, read_data

# A number as the tools print it: 1,234.5 (torchtitan's thousands), 1.2E+03, inf.
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+|inf|nan)"


def read_source(path: str, diagnostics: list[Diagnostic]) -> SourceFile | None:
    """The file as text (through the one bounded reader of data files, compiler/files.py:
    a regular file of at most MAX_DATA_BYTES; no line limit, since a saved benchmark result
    may hold every request's numbers on one line), or None after adding the reason it
    cannot be read."""
    source, problems = read_data(path, Path(path), None, what="measurement file", line_chars=MAX_DATA_BYTES)
    diagnostics += [p if p.subject is not None else attrs.evolve(p, file=path) for p in problems]
    return source


class Problems:
    """Located errors about one file, collected rather than raised."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.found: list[Diagnostic] = []

    def at(self, line: int, column: int, width: int, what: str, fix: str = "") -> None:
        """An error on `width` characters from 1-based (`line`, `column`)."""
        start = self.source.line_start(line) + column - 1
        self.found.append(codes.MEASUREMENT.make(self.source.span(start, start + max(1, width)), what=what,
                                                 notes=[f"help: {fix}"] if fix else []))

    def on_match(self, line: int, match: re.Match, group: int | str, what: str, fix: str = "") -> None:
        """An error on a regex group of `line`'s text."""
        self.at(line, match.start(group) + 1, match.end(group) - match.start(group), what, fix)

    def on_line(self, line: int, what: str, fix: str = "") -> None:
        """An error on a whole line's text (its indentation left out)."""
        text = self.source.line_text(line)
        indent = len(text) - len(text.lstrip())
        self.at(line, indent + 1, len(text.strip()), what, fix)

    def whole_file(self, what: str, fix: str = "") -> None:
        self.at(1, 1, len(self.source.line_text(1)) or 1, what, fix)

    def warn(self, span: Span, what: str) -> None:
        self.found.append(codes.MEASUREMENT_UNUSED.make(span, what=what))


def line_span(source: SourceFile, line: int) -> Span:
    """The span of a whole line (the provenance of a record)."""
    start = source.line_start(line)
    return source.span(start, start + max(1, len(source.line_text(line))))


def number(text: str) -> float:
    """A number as the tools print it (thousands separators dropped); ValueError otherwise."""
    return float(text.replace(",", ""))
