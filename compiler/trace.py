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
    user      user, user_name, username                            (who submitted it: Slurm's
                                                                    per-user QOS limits count it)

A bad row is a diagnostic at its line and column in the CSV, never an exception.
"""

from __future__ import annotations

import math

import attrs

from ..dsl.source import SourceFile, Span
from ..dsl import codes
from ..dsl.plain_number import PlainNumberError, parse_plain
from .design import Entity, Symbol
from ..dsl.diagnostics import Diagnostic
from .table import Row, Table, read_table
from ..dsl.records import frozen

COLUMNS = {
    "submit": ("submit", "submit_time", "submitted_time", "arrival"),
    "duration": ("duration", "runtime", "run_time"),
    "gpus": ("gpus", "gpu_num", "num_gpus", "gpu_count"),
    "type": ("gpu_type", "type", "gpu_model"),
    "priority": ("priority",),
    "time_limit": ("time_limit", "timelimit", "time_req", "requested_time", "wallclock_limit"),
    "tenant": ("tenant", "account", "vc", "queue"),
    "user": ("user", "user_name", "username"),
}
PRIORITY_CLASSES = {"low": 1, "normal": 2, "high": 4, "critical": 8}
# What a schedule simulates in about a minute: 10,000 rows of a trace that overloads the
# shared-cluster example (a queue thousands long, failures on; benchmarks/schedule_queue.py)
# took 12.7 s of CPU under `priority` and 61 s under `slurm`, whose backfill plans up to
# bf_max_job_test = 500 waiting jobs every bf_interval (docs/hostile-input.md); the cost grows with the
# queue the simulation keeps, so the bound stays here until that pass is cheaper. A busy
# month of a realistic shape is cheaper per row (benchmarks/schedule_scale.py: 80,000
# jobs on 800,000 GPUs). Sample or split a longer public trace.
MAX_ROWS = 10_000
# Submit times and durations a schedule steps through: ten years is 20x the longest public
# cluster trace (Helios, 6 months; Philly, 75 days). The simulation's horizon is twice this
# (`solver/schedule/simulate.py`), so a lone job always ends within it without failures.
MAX_SECONDS = 10 * 365.25 * 86400
MAX_SECONDS_TEXT = "10 years (315,576,000 s)"


@frozen
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
    user: str = ""                    # who submitted it (Slurm's per-user QOS limits count it)


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
    tenant, user = getattr(workload.get("tenant"), "name", ""), workload.get("user") or ""
    rows, problems, invalid = [], [], False
    jobs = workload.get("job")
    for item in getattr(jobs, "items", ()):
        r = item.value
        if r.get("duration") is None or r.get("gpus") is None:  # missing or invalid: reported where it is
            invalid = True
            continue
        submit = r.get("submit")
        late = [f for f in ("submit", "duration") if r.get(f) is not None and float(r.get(f).value) > MAX_SECONDS]
        if late:
            problems.append(beyond_horizon(r.span_of(late[0]) or item.span, late[0], float(r.get(late[0]).value)))
            continue
        weight, name = priority_value(r.get("priority")) if r.get("priority") is not None else (default, label)
        kind = r.get("type")
        own = r.get("time_limit")
        rows.append(TraceJob(f"{workload.name}.{item.name}", float(submit.value) if submit is not None else 0.0,
                             float(r.get("duration").value), r.get("gpus"), kind, weight, name, item.span,
                             float(own.value) if own is not None else limit,
                             getattr(r.get("tenant"), "name", tenant), r.get("user") or user))
    source = None
    path = workload.get("trace")
    if path is not None:
        source, found, more = read_csv(workload, path, default, label, limit, tenant, user)
        rows += found
        problems += more
    if not rows and not problems and not invalid:
        problems.append(codes.TRACE_ROW.make(workload.span, what=f"workload `{workload.name}` has no jobs",
                                             notes=["help: add `job name { duration = 2 h  gpus = 8 }` rows or "
                                                    "`trace = \"file.csv\"`"]))
    return tuple(rows), problems, source


def beyond_horizon(span: Span, field: str, seconds: float) -> Diagnostic:
    """A submit time or duration past what a schedule simulates."""
    from ..dsl.numbers import duration

    return codes.OUT_OF_RANGE.make(span, field=field, bound=f"at most {MAX_SECONDS_TEXT}", value=duration(seconds),
                                   notes=["help: a schedule simulates 20 years at most; check the unit (s, h, d)"])


def read_csv(workload: Entity, path: str, default: int, label: str, limit: float = math.inf, tenant: str = "",
             user: str = ""):
    table, problems = read_table(workload.span_of("trace"), path, "workload trace", MAX_ROWS)
    if table is None:
        return None, [], problems
    rows, problems = _rows(workload.name, table, default, label, limit, tenant, user)
    return table.source, rows, problems


def _rows(name: str, table: Table, default: int, label: str, limit: float = math.inf,
          tenant: str = "", user: str = "") -> tuple[list[TraceJob], list[Diagnostic]]:
    if table.header is None:
        return [], [codes.TRACE_ROW.make(table.source.span(0, 0), what="the trace is empty",
                                         notes=["help: a header line first: submit,duration,gpus,gpu_type"])]
    names = [h.strip().lower() for h in table.header.cells]
    index = {key: next((names.index(a) for a in aliases if a in names), None) for key, aliases in COLUMNS.items()}
    missing = [key for key in ("duration", "gpus") if index[key] is None]
    if missing:
        return [], [codes.TRACE_ROW.make(table.span(table.header), what=f"the trace has no `{missing[0]}` column",
                                         notes=[f"help: name it one of {', '.join(COLUMNS[missing[0]])}"])]
    rows, problems = [], []
    for number, row in enumerate(table.rows, start=1):
        job = _row(name, table, number, row, index, default, label, limit, tenant, user)
        (problems if isinstance(job, Diagnostic) else rows).append(job)
        if len(problems) >= MAX_PROBLEMS:  # enough to show the pattern of a broken file
            break
    return rows, problems


MAX_PROBLEMS = 20
_NEEDS = {"submit": f"a time in seconds >= 0, at most {MAX_SECONDS_TEXT}",
          "duration": f"a time in seconds > 0, at most {MAX_SECONDS_TEXT}", "gpus": "a whole number >= 1",
          "time_limit": "a time in seconds > 0"}


def _row(name: str, table: Table, number: int, row: Row, index: dict, default: int, label: str,
         limit: float = math.inf, tenant: str = "", user: str = ""):
    def cell(key):
        i = index[key]
        return (row.cells[i].strip() if i is not None and i < len(row.cells) else ""), i

    values = {}
    for key in ("submit", "duration", "gpus", "time_limit"):
        text, i = cell(key)
        if not text and key in ("submit", "time_limit"):
            values[key] = 0.0 if key == "submit" else limit
            continue
        try:
            values[key] = parse_plain(text, whole=key == "gpus", low=0 if key == "submit" else 1 if key == "gpus" else 0,
                                      low_open=key in ("duration", "time_limit"),
                                      high=MAX_SECONDS if key in ("submit", "duration") else None, what=f"`{key}`")
        except PlainNumberError as error:
            return codes.TRACE_ROW.make(table.span(row, i or 0), what=str(error),
                                        notes=[f"row {number} of the trace; `{key}` is {_NEEDS[key]}"])
    kind = cell("type")[0] or None
    text, i = cell("priority")
    weight, shown = default, label
    if text.lower() in PRIORITY_CLASSES:
        weight, shown = PRIORITY_CLASSES[text.lower()], text.lower()
    elif text:
        try:
            weight = parse_plain(text, whole=True, low=1, what="`priority`")
            shown = str(weight)
        except PlainNumberError as error:
            return codes.TRACE_ROW.make(table.span(row, i), what=str(error), notes=[
                f"help: a class ({', '.join(PRIORITY_CLASSES)}) or a whole number >= 1"])
    return TraceJob(f"{name}[{number}]", values["submit"], values["duration"], values["gpus"], kind,
                    weight, shown, table.span(row, 0), float(values["time_limit"]), cell("tenant")[0] or tenant,
                    cell("user")[0] or user)
