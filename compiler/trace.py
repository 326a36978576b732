"""Jobs of a `workload` block: inline `job name { ... }` rows and a CSV trace below the
design, read with the columns of public cluster traces (seconds, one job per row):

    submit    submit, submit_time, submitted_time, arrival        (default 0)
    duration  duration, runtime, run_time                          (required, > 0)
    gpus      gpus, gpu_num, num_gpus, gpu_count                   (required, whole, >= 1)
    type      gpu_type, type, gpu_model                            (a partition or chip name)
    priority  priority                                             (a class or a whole number)
    time_limit  time_limit, timelimit, time_req, requested_time, wallclock_limit
                                                                   (seconds > 0; the time asked for)
    tenant    tenant, account, vc, queue                           (the tenant charged; Helios' and
                                                                    Philly's virtual cluster `vc`)

A bad row is a diagnostic at its line and column in the CSV, never an exception.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import attrs

from ..dsl.source import SourceFile, Span
from ..dsl import codes
from .design import Entity, Symbol
from ..dsl.diagnostics import Diagnostic

COLUMNS = {
    "submit": ("submit", "submit_time", "submitted_time", "arrival"),
    "duration": ("duration", "runtime", "run_time"),
    "gpus": ("gpus", "gpu_num", "num_gpus", "gpu_count"),
    "type": ("gpu_type", "type", "gpu_model"),
    "priority": ("priority",),
    "time_limit": ("time_limit", "timelimit", "time_req", "requested_time", "wallclock_limit"),
    "tenant": ("tenant", "account", "vc", "queue"),
}
PRIORITY_CLASSES = {"low": 1, "normal": 2, "high": 4, "critical": 8}
MAX_ROWS = 1_000_000


@attrs.frozen
class TraceJob:
    name: str
    submit: float
    duration: float
    gpus: int
    type: str | None
    priority: int
    label: str                        # the priority as written
    span: Span = attrs.field(eq=False, repr=False)
    time_limit: float = math.inf      # seconds a run may last (the time the job asked for)
    tenant: str = ""                  # the tenant charged ("": the workload's, else none)


def priority_value(value: object) -> tuple[int, str]:
    """(weight, label) of a checked priority: a class word or a whole number."""
    if isinstance(value, Symbol):
        return PRIORITY_CLASSES[value.name], value.name
    if value is None:
        return PRIORITY_CLASSES["normal"], "normal"
    return int(value), str(int(value))


def workload_jobs(workload: Entity) -> tuple[tuple[TraceJob, ...], list[Diagnostic], SourceFile | None]:
    """The rows of `workload` (inline first, then the CSV), the problems found, and the
    CSV's text (to quote it in diagnostics)."""
    default, label = priority_value(workload.get("priority"))
    limit = workload.get("time_limit")
    limit = float(limit.value) if limit is not None else math.inf
    tenant = getattr(workload.get("tenant"), "name", "")
    rows, problems, invalid = [], [], False
    jobs = workload.get("job")
    for item in getattr(jobs, "items", ()):
        r = item.value
        if r.get("duration") is None or r.get("gpus") is None:  # missing or invalid: reported where it is
            invalid = True
            continue
        submit = r.get("submit")
        weight, name = priority_value(r.get("priority")) if r.get("priority") is not None else (default, label)
        kind = r.get("type")
        own = r.get("time_limit")
        rows.append(TraceJob(f"{workload.name}.{item.name}", float(submit.value) if submit is not None else 0.0,
                             float(r.get("duration").value), r.get("gpus"), kind, weight, name, item.span,
                             float(own.value) if own is not None else limit,
                             getattr(r.get("tenant"), "name", tenant)))
    source = None
    path = workload.get("trace")
    if path is not None:
        source, found, problems = read_csv(workload, path, default, label, limit, tenant)
        rows += found
    if not rows and not problems and not invalid:
        problems.append(codes.TRACE_ROW.make(workload.span, what=f"workload `{workload.name}` has no jobs",
                                             notes=["help: add `job name { duration = 2 h  gpus = 8 }` rows or "
                                                    "`trace = \"file.csv\"`"]))
    return tuple(rows), problems, source


def read_csv(workload: Entity, path: str, default: int, label: str, limit: float = math.inf, tenant: str = ""):
    at = workload.span_of("trace")
    base = Path(at.path).resolve().parent
    target = (base / path).resolve()
    if Path(path).is_absolute() or not target.is_relative_to(base):
        return None, [], [codes.TRACE_PATH.make(at, path=path, why="leaves the design's folder",
                                                notes=["help: put the trace in the design's folder or below it"])]
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return None, [], [codes.IO_ERROR.make(at, path=path, reason=getattr(error, "strerror", None) or str(error))]
    source = SourceFile(str(target), text)
    rows, problems = _rows(workload.name, source, default, label, limit, tenant)
    return source, rows, problems


def _rows(name: str, source: SourceFile, default: int, label: str,
          limit: float = math.inf, tenant: str = "") -> tuple[list[TraceJob], list[Diagnostic]]:
    lines = source.text.splitlines()
    reader = csv.reader(io.StringIO(source.text))
    header = next(reader, None)
    if header is None:
        return [], [codes.TRACE_ROW.make(source.span(0, 0), what="the trace is empty",
                                         notes=["help: a header line first: submit,duration,gpus,gpu_type"])]
    names = [h.strip().lower() for h in header]
    index = {key: next((names.index(a) for a in aliases if a in names), None) for key, aliases in COLUMNS.items()}
    missing = [key for key in ("duration", "gpus") if index[key] is None]
    if missing:
        return [], [codes.TRACE_ROW.make(source.span(0, len(lines[0]) if lines else 0),
                                         what=f"the trace has no `{missing[0]}` column",
                                         notes=[f"help: name it one of {', '.join(COLUMNS[missing[0]])}"])]
    rows, problems = [], []
    for number, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(rows) + len(problems) >= MAX_ROWS:
            problems.append(codes.TRACE_ROW.make(_cell(source, number, 0, cells), what=f"more than {MAX_ROWS:,} rows"))
            break
        row = _row(name, source, number, cells, index, default, label, limit, tenant)
        (problems if isinstance(row, Diagnostic) else rows).append(row)
    return rows, problems


def _cell(source: SourceFile, line: int, column: int, cells: list[str]) -> Span:
    """The span of cell `column` on `line` (commas counted naively: good enough to point)."""
    text = source.line_text(line)
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == ","]
    begin = starts[min(column, len(starts) - 1)]
    end = text.find(",", begin)
    end = len(text) if end < 0 else end
    offset = source.line_start(line)
    return source.span(offset + begin, offset + max(end, begin + 1))


def _row(name, source, number, cells, index, default, label, limit=math.inf, tenant=""):
    def cell(key):
        i = index[key]
        return (cells[i].strip() if i is not None and i < len(cells) else ""), i

    values = {}
    for key, integer, low in (("submit", False, 0.0), ("duration", False, None), ("gpus", True, 1),
                              ("time_limit", False, None)):
        text, i = cell(key)
        if not text and key in ("submit", "time_limit"):
            values[key] = 0.0 if key == "submit" else limit
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        bad = (not math.isfinite(value) or (integer and value != int(value))
               or (value <= 0 if low is None else value < low))
        if bad:
            need = {"submit": "a time in seconds >= 0", "duration": "a time in seconds > 0",
                    "gpus": "a whole number >= 1", "time_limit": "a time in seconds > 0"}[key]
            return codes.TRACE_ROW.make(_cell(source, number, i or 0, cells),
                                        what=f"`{key}` must be {need}; it is `{text or 'empty'}`",
                                        notes=[f"row {number - 1} of the trace"])
        values[key] = int(value) if integer else value
    kind = cell("type")[0] or None
    text, i = cell("priority")
    weight, shown = default, label
    if text:
        if text.lower() in PRIORITY_CLASSES:
            weight, shown = PRIORITY_CLASSES[text.lower()], text.lower()
        elif text.isdigit() and int(text) >= 1:
            weight, shown = int(text), text
        else:
            return codes.TRACE_ROW.make(_cell(source, number, i, cells), what=f"`priority` `{text}` is neither a class "
                                        f"({', '.join(PRIORITY_CLASSES)}) nor a whole number >= 1")
    return TraceJob(f"{name}[{number - 1}]", values["submit"], values["duration"], values["gpus"], kind,
                    weight, shown, _cell(source, number, 0, cells), values["time_limit"], cell("tenant")[0] or tenant)
