"""Reading a measurement file within bounds, and the located errors every reader gives:
`file:line:col: error[measurement]: what is wrong`, with how to fix it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import attrs

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...dsl.plain_number import PlainNumberError, parse_plain
from ...dsl.source import SourceFile, Span
from ..files import MAX_DATA_BYTES, read_data

# A number as the tools print it: 1,234.5 (torchtitan's thousands), 1.2E+03, inf. What it
# finds is read by `number` (the one plain-number parser), which refuses what is no number.
NUMBER = r"[-+]?(?:[0-9][0-9,]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+|inf|nan)"
# JSON nests a few levels in every format gclc reads; deeper is no benchmark result (and
# Python's decoder would recurse past its limit).
MAX_JSON_DEPTH = 64
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


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


def number(text: str, *, whole: bool = False, positive: bool = False, what: str = "a number") -> float:
    """A number as the tools print it, through the one plain-number parser (dsl/plain_number.py:
    ASCII digits, GCL's range and significant digits; thousands separators in groups of
    three): an int when `whole`; above zero when `positive`. PlainNumberError (a ValueError)
    says what is wrong otherwise."""
    return parse_plain(text, whole=whole, low=0 if positive else None, low_open=positive, grouped=True, what=what)


def json_number(value, *, whole: bool = False, positive: bool = False, what: str = "a number"):
    """A JSON value as a number under the same rules as `number` (booleans are no numbers);
    None when it is not a number at all; PlainNumberError when it is one out of range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise PlainNumberError(f"`{value}` is out of range: {what} must be a finite number")
    return number(repr(value), whole=whole, positive=positive, what=what)


def decode_json(text: str, at: int):
    """(value, end) of the JSON document starting at `at`, its numbers read by the plain-number
    parser's limits (a 5,000-digit integer is refused, not converted); ValueError with `.pos`
    (where) for anything that is not JSON, nests deeper than MAX_JSON_DEPTH or holds such a number."""
    depth = _depth_problem(text, at)
    if depth is not None:
        raise JsonProblem(f"nested more than {MAX_JSON_DEPTH} levels deep", depth)
    decoder = json.JSONDecoder(parse_int=_json_literal(int), parse_float=_json_literal(float))
    try:
        return decoder.raw_decode(text, at)
    except json.JSONDecodeError as error:
        raise JsonProblem(error.msg, error.pos) from None
    except _Number as error:
        found = re.compile(r'(?<![\w."])' + re.escape(error.literal) + r'(?![\w.])').search(text, at)
        raise JsonProblem(str(error.problem), found.start() if found else at, syntax=False) from None


class JsonProblem(ValueError):
    """Where (`pos`) and what (`msg`) is wrong with a JSON document; `shown`: the message
    (a number out of range is JSON, so it does not say `not JSON`)."""

    def __init__(self, msg: str, pos: int, syntax: bool = True):
        super().__init__(msg)
        self.msg, self.pos = msg, max(0, pos)
        self.shown = f"not JSON: {msg}" if syntax else msg


class _Number(Exception):
    def __init__(self, literal: str, problem: PlainNumberError):
        super().__init__(literal)
        self.literal, self.problem = literal, problem


def _json_literal(kind):
    def read(literal: str):
        try:
            parse_plain(literal)
        except PlainNumberError as problem:
            raise _Number(literal, problem) from None
        return kind(literal)
    return read


def _depth_problem(text: str, at: int) -> int | None:
    """Where the document from `at` first nests deeper than MAX_JSON_DEPTH, or None; strings
    are skipped by one regular expression, so it is linear in the text and runs at C speed."""
    depth = 0
    for token in _BRACKETS.finditer(text, at):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return token.start()
        elif ch in "]}":
            depth -= 1
            if depth <= 0:
                return None
    return None
