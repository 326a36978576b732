"""CSV data files a design names (request traces, workload traces; calibration and measurement
tables to come), read through the one bounded reader (`compiler/files.py`) and split into rows
of cells. One physical line is one row (a quoted cell cannot run onto the next line), so every
row and cell has its line, a cell is never longer than a line, and a bad one is located at
`file:line:column`. Blank lines and lines starting with `#` are skipped."""

from __future__ import annotations

import csv
from typing import Iterator


from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from ..dsl.source import SourceFile, Span
from .files import MAX_LINE_CHARS, MAX_TRACE_BYTES, data_path, read_data
from ..dsl.records import frozen


@frozen
class Row:
    line: int                    # 1-based, in the file
    cells: tuple[str, ...]       # as written, unstripped


@frozen
class Table:
    source: SourceFile           # the file, named as the design names it
    header: Row | None           # the first row
    rows: tuple[Row, ...]        # the rows after it

    def span(self, row: Row, index: int | None = None) -> Span:
        """Where cell `index` of `row` is written (the whole line for None)."""
        text = self.source.line_text(row.line).rstrip("\r")
        offset = self.source.line_start(row.line)
        if index is None or not text:
            return self.source.span(offset, offset + max(1, len(text)))
        bounds = list(_cell_bounds(text))
        begin, end = bounds[min(index, len(bounds) - 1)]
        return self.source.span(offset + begin, offset + max(end, begin + 1))


def read_table(at: Span, name: str, what: str, max_rows: int,
               limit: int = MAX_TRACE_BYTES) -> tuple[Table | None, list[Diagnostic]]:
    """The CSV file `name` given at `at` in a design: its header and rows, or None and the
    located errors (a path outside the design's folder, an unreadable file, a line too long, a
    row past `max_rows`)."""
    where = data_path(at.path, name)
    if isinstance(where, str):
        return None, [codes.TRACE_PATH.make(at, path=name, why=where,
                                            notes=[f"help: put the {what} in the design's folder or below it"])]
    display, real = where
    source, problems = read_data(display, real, at, what=what, limit=limit, line_chars=MAX_LINE_CHARS)
    if source is None:
        return None, problems
    rows: list[Row] = []
    for row in _rows(source):
        if isinstance(row, Diagnostic):
            return None, [row]
        if len(rows) > max_rows:  # the header and max_rows rows
            line = source.line_start(row.line)
            return None, [codes.TRACE_ROW.make(source.span(line, line + 1), what=f"more than {max_rows:,} rows",
                                               notes=[f"help: a {what} holds at most {max_rows:,} rows; split it"])]
        rows.append(row)
    return Table(source, rows[0] if rows else None, tuple(rows[1:])), []


def _rows(source: SourceFile) -> Iterator[Row | Diagnostic]:
    for number, line in enumerate(source.text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            cells = next(csv.reader([line]))
        except csv.Error as error:  # whatever the csv module still refuses on one line
            start = source.line_start(number)
            yield codes.TRACE_ROW.make(source.span(start, start + len(line)), what=f"not a CSV row: {error}")
            return
        yield Row(number, tuple(cells))


def _cell_bounds(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each comma-separated cell of a line; commas inside quotes belong to
    their cell. Run only to point at a bad cell."""
    start, quoted = 0, False
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            yield start, i
            start = i + 1
    yield start, len(text)
