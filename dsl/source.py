"""Source files and spans: where every AST node, IR element and diagnostic points."""

from __future__ import annotations

import bisect
import re

import attrs
from .records import frozen


@frozen
class Span:
    """A half-open range of text: 1-based line and column, 0-based offsets."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    start: int = 0
    end: int = 0

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@frozen
class SourceFile:
    """A file's text with a line index, for locating offsets and quoting lines."""

    path: str
    text: str
    _line_starts: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        starts, find, at = [0], self.text.find, self.text.find("\n")
        while at >= 0:  # str.find runs in C: a sweep builds this index for every file at every point
            starts.append(at + 1)
            at = find("\n", at + 1)
        object.__setattr__(self, "_line_starts", tuple(starts))

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a 0-based character offset."""
        offset = max(0, min(offset, len(self.text)))
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def span(self, start: int, end: int) -> Span:
        line, column = self.position(start)
        end_line, end_column = self.position(end)
        return Span(self.path, line, column, end_line, end_column, start, end)

    def line_start(self, line: int) -> int:
        """The 0-based offset where 1-based `line` begins."""
        return self._line_starts[max(0, min(line, len(self._line_starts)) - 1)]

    def line_text(self, line: int) -> str:
        if not 1 <= line <= len(self._line_starts):
            return ""
        begin = self._line_starts[line - 1]
        finish = self.text.find("\n", begin)
        return self.text[begin : finish if finish >= 0 else len(self.text)]


_LONE_CR = re.compile(r"\r(?!\n)")


def source_text(text: str) -> str:
    """Text as the parser reads it: a leading BOM dropped, and a lone CR (classic Mac line
    ends) made a line end, as a reader of the file sees it. One character for one, so
    offsets into the file stay right."""
    text = text.removeprefix("\ufeff")
    return _LONE_CR.sub("\n", text) if "\r" in text else text


def no_span(path: str = "<generated>") -> Span:
    """A placeholder for nodes built in code (hypothesis, the Python API)."""
    return Span(path, 1, 1, 1, 1)
