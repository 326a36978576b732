"""A serve job's request trace: a CSV of `arrival_s,prompt,output` rows below the design's
folder, read through the one bounded reader (`compiler/table.py`) and the one number parser
(`dsl/plain_number.py`). A bad file or row is a diagnostic at its line and column in the CSV
(in `gclc check`), never a traceback in the planner.
"""

from __future__ import annotations


from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from ..dsl.numbers import number
from ..dsl.plain_number import PlainNumberError, parse_plain
from ..dsl.source import Span
from .table import Row, Table, read_table
from .trace import MAX_SECONDS, MAX_SECONDS_TEXT
from ..dsl.records import frozen

MAX_ROWS = 100_000
# Requests a plan simulates at `rate` when the job states no `requests` and the rate is light
# (solver/serve/demand.py `_enough`): enough for a stable P99 (6 requests beyond it).
MIN_REQUESTS = 600
# The simulated arrivals span at most what a schedule does: the simulator keeps absolute
# seconds in floats, and past ~1e11 s their last bits are coarser than a decode step
# (a request at 1e15 s measured a TTFT and TPOT of 0 s). Ten years keeps 60 ns.
MAX_ARRIVAL_S = MAX_SECONDS
COLUMNS = ("arrival_s", "prompt", "output")
_NEEDS = (f"a time in seconds from 0 to {MAX_SECONDS_TEXT}", "a whole number of tokens >= 1",
          "a whole number of tokens >= 1")


@frozen
class Request:
    arrival: float      # seconds from the start of the trace
    prompt: int         # tokens
    output: int         # tokens


class TraceError(ValueError):
    """The trace cannot be read: `.diagnostics` say where and why."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.summary for d in diagnostics))
        self.diagnostics = diagnostics


def read_requests(at: Span, name: str) -> tuple[tuple[Request, ...] | None, list[Diagnostic]]:
    """The requests of the trace `name` written at `at`, or None and the located errors."""
    table, problems = read_table(at, name, "request trace", MAX_ROWS)
    if table is None:
        return None, problems
    header = table.header
    if header is None or tuple(c.strip() for c in header.cells) != COLUMNS:
        span = table.span(header) if header is not None else table.source.span(0, 0)
        return None, [codes.TRACE_ROW.make(span, what=f"the first row must be the header `{','.join(COLUMNS)}`")]
    requests, problems = [], []
    for row in table.rows:
        request = _request(table, row, requests[-1] if requests else None)
        if isinstance(request, Diagnostic):
            problems.append(request)
            if len(problems) >= 20:  # enough to show the pattern of a broken file
                break
        else:
            requests.append(request)
    if not requests and not problems:
        problems.append(codes.TRACE_ROW.make(table.span(header), what="no requests after the header"))
    return (tuple(requests) if not problems else None), problems


def load_trace(at: Span, name: str) -> tuple[Request, ...]:
    """The requests of a checked trace; TraceError when it cannot be read (it changed since)."""
    requests, problems = read_requests(at, name)
    if requests is None:
        raise TraceError(problems)
    return requests


def _request(table: Table, row: Row, before: Request | None) -> Request | Diagnostic:
    if len(row.cells) != len(COLUMNS):
        return codes.TRACE_ROW.make(table.span(row), what=f"expected {len(COLUMNS)} values ({','.join(COLUMNS)}), "
                                    f"found {len(row.cells)}")
    values = []
    for i, (cell, need) in enumerate(zip(row.cells, _NEEDS)):
        try:
            values.append(parse_plain(cell, whole=i > 0, low=0 if i == 0 else 1,
                                      high=MAX_ARRIVAL_S if i == 0 else None, what=f"`{COLUMNS[i]}`"))
        except PlainNumberError as error:
            return codes.TRACE_ROW.make(table.span(row, i), what=str(error),
                                        notes=[f"help: `{COLUMNS[i]}` is {need}"])
    request = Request(*values)
    if before is not None and request.arrival < before.arrival:
        return codes.TRACE_ROW.make(table.span(row, 0), what=f"arrivals must not go back in time "
                                    f"({row.cells[0].strip()} s after {number(before.arrival)} s)",
                                    notes=["help: sort the rows by `arrival_s`"])
    return request
