"""Diagnostics: one value type for every problem any stage finds, and its rendering.

Stages collect diagnostics and keep going; only the driver turns them into exit codes.
"""

from __future__ import annotations

import enum
import json
import unicodedata
from typing import TYPE_CHECKING, Iterable, Mapping

from .records import frozen

if TYPE_CHECKING:  # annotations only: importing `dsl` here would be circular (dsl -> codes -> diagnostics)
    from .source import SourceFile, Span


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@frozen
class Label:
    """A secondary mark on the source: the other operand, the constraint, the first definition."""

    span: Span
    message: str


@frozen
class Diagnostic:
    severity: Severity
    code: str
    summary: str
    subject: Span | None = None
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    subject_label: str = ""
    json_path: str | None = None  # `$.cluster.units[0]` where no source span exists
    file: str | None = None       # the file it is about, where no span exists (a file that cannot be read)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple:
        s = self.subject
        return (s.path, s.line, s.column, self.code) if s else ("", 0, 0, self.code)

    def to_json(self) -> dict:
        def span_json(span: Span | None) -> dict | None:
            if span is None:
                return None
            return {"path": span.path, "line": span.line, "column": span.column,
                    "end_line": span.end_line, "end_column": span.end_column}

        return {
            "severity": self.severity.value,
            "code": self.code,
            "summary": self.summary,
            "subject": span_json(self.subject),
            "subject_label": self.subject_label,
            "labels": [{"span": span_json(l.span), "message": l.message} for l in self.labels],
            "notes": list(self.notes),
            "json_path": self.json_path,
            "file": self.file,
        }


def sort_unique(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """Sorted by position, duplicates removed (the same fact found by two routes)."""
    seen: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        key = (d.code, d.summary, d.subject)
        seen.setdefault(key, d)
    return tuple(sorted(seen.values(), key=Diagnostic.sort_key))


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


# ----------------------------------------------------------------- rendering

_MAX_QUOTE = 160  # characters of a source line shown; longer lines are cut around the mark


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (ESC, BEL, NUL, CR), lone surrogates and
    other unprintable characters from the input are shown escaped (`\\x1b`), never sent raw."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\n" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def render(diagnostic: Diagnostic, sources: Mapping[str, SourceFile]) -> str:
    """`path:line:col: error[code]: summary`, the line with an underline, labels, notes.
    Everything the input supplied passes through `printable`."""
    return printable(_render(diagnostic, sources))


def _render(diagnostic: Diagnostic, sources: Mapping[str, SourceFile]) -> str:
    d = diagnostic
    head = f"{d.severity.value}[{d.code}]: {d.summary}"
    if d.subject is not None:
        head = f"{d.subject}: {head}"
    elif d.file:
        head = f"{d.file}: {head}"
    elif d.json_path:
        head = f"{d.json_path}: {head}"
    lines = [head]
    marks = ([(d.subject, d.subject_label, "^")] if d.subject else []) + [
        (l.span, l.message, "-") for l in d.labels
    ]
    width = max((len(str(span.line)) for span, _, _ in marks), default=1)  # one gutter for all quotes
    previous: Span | None = None
    for span, message, char in marks:
        source = sources.get(span.path)
        if (previous is not None and source is not None and (span.path, span.line) == (previous.path, previous.line)
                and len(source.line_text(span.line)) <= _MAX_QUOTE):
            lines.append(_quote(span, message, char, source, width)[2])  # same line: one more underline under it
        else:
            lines.extend(_quote(span, message, char, source, width))
        previous = span
    lines.extend(f"{' ' * width} = {note}" for note in d.notes)  # `=` under the gutter's `|`
    return "\n".join(lines)


def _quote(span: Span, message: str, char: str, source: SourceFile | None, gutter_width: int = 0) -> list[str]:
    if source is None:
        return [f"  --> {span}" + (f": {message}" if message else "")]
    text = source.line_text(span.line).removesuffix("\r").replace("\t", " ")  # CRLF files end lines in \r
    end_col = span.end_column if span.end_line == span.line else len(text) + 1
    width = max(1, end_col - span.column)
    start = span.column - 1
    if len(text) > _MAX_QUOTE:  # keep the mark visible on very long lines (minified input)
        cut = max(0, start - 40)
        tail = cut + _MAX_QUOTE < len(text)
        text = ("…" if cut else "") + text[cut : cut + _MAX_QUOTE] + ("…" if tail else "")
        start = start - cut + (1 if cut else 0)
        width = min(width, len(text) - start - tail)  # not under the closing `…`
    text = "".join(ch if ch.isprintable() else "\N{REPLACEMENT CHARACTER}" for ch in text)
    number = str(span.line).rjust(gutter_width)
    gutter = " " * len(number)
    lead, marked = _columns(text[:start]), max(1, _columns(text[start : start + width]))
    underline = " " * lead + char * marked + (f" {message}" if message else "")
    return [f"{gutter} --> {span}" if char == "-" else f"{gutter} |",
            f"{number} | {text}", f"{gutter} | {underline}"]


def _columns(text: str) -> int:
    """Terminal columns of `text`: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def render_all(diagnostics: Iterable[Diagnostic], sources: Mapping[str, SourceFile]) -> str:
    diagnostics = tuple(diagnostics)
    body = "\n\n".join(render(d, sources) for d in diagnostics)
    errors = sum(d.is_error for d in diagnostics)
    warnings = sum(d.severity is Severity.WARNING for d in diagnostics)
    if not diagnostics:
        return ""
    return f"{body}\n\n{_count(errors, 'error')}, {_count(warnings, 'warning')}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def to_json(diagnostics: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2, ensure_ascii=False)
