"""A serve job's request trace: a small CSV of `arrival_s,prompt,output` rows.

The path is relative to the design file and stays below its folder (like imports: no
reading elsewhere). Rows are checked here so that a bad file is a located error in
`gclc check`, never a traceback in the planner.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import attrs

MAX_ROWS = 100_000
COLUMNS = ("arrival_s", "prompt", "output")


@attrs.frozen
class Request:
    arrival: float      # seconds from the start of the trace
    prompt: int         # tokens
    output: int         # tokens


class TraceError(ValueError):
    """What is wrong with the trace, with its line when there is one."""


def trace_path(design_file: str, text: str) -> Path:
    base = Path(design_file).resolve().parent
    path = (base / text).resolve()
    if base != path and base not in path.parents:
        raise TraceError("the trace must be in the design's folder or below it")
    return path


def load_trace(design_file: str, text: str) -> tuple[Request, ...]:
    path = trace_path(design_file, text)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"cannot read it ({getattr(error, 'strerror', None) or error})") from None
    rows = [(n, line) for n, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]
    if not rows or tuple(c.strip() for c in rows[0][1].split(",")) != COLUMNS:
        raise TraceError(f"line {rows[0][0] if rows else 1}: the first row must be the header `{','.join(COLUMNS)}`")
    if len(rows) - 1 > MAX_ROWS:
        raise TraceError(f"{len(rows) - 1:,} requests; a trace holds at most {MAX_ROWS:,}")
    requests = [_request(n, cells) for (n, _), cells in zip(rows[1:], csv.reader(line for _, line in rows[1:]))]
    if not requests:
        raise TraceError("no requests after the header")
    for (n, _), before, after in zip(rows[2:], requests, requests[1:]):
        if after.arrival < before.arrival:
            raise TraceError(f"line {n}: arrivals must not go back in time ({after.arrival} s after {before.arrival} s)")
    return tuple(requests)


def _request(line: int, cells: list[str]) -> Request:
    if len(cells) != 3:
        raise TraceError(f"line {line}: expected 3 values ({','.join(COLUMNS)}), found {len(cells)}")
    try:
        arrival, prompt, output = float(cells[0]), int(cells[1]), int(cells[2])
    except ValueError:
        raise TraceError(f"line {line}: `{','.join(cells)}` is not a time in seconds and two whole token counts") from None
    if not math.isfinite(arrival) or arrival < 0 or prompt < 1 or output < 1:
        raise TraceError(f"line {line}: arrival must be >= 0 s and both lengths at least 1 token")
    return Request(arrival, prompt, output)
