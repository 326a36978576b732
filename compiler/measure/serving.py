"""Serving benchmarks: vLLM's and SGLang's `bench serve` results, as the JSON they save
(`--save-result`, SGLang's `--output-file` appends one object per line) or as the summary
block they print (`============ Serving Benchmark Result ============`). Latencies are
milliseconds there (`median_ttft_ms`, `Median TTFT (ms)`); a request rate of `inf` (JSON
`Infinity`) means every request at once."""

from __future__ import annotations

import math
import re

from ...dsl.plain_number import PlainNumberError
from ...dsl.source import SourceFile
from .records import ServeRun
from .text import JsonProblem, Problems, decode_json, json_number, line_span, number

BLOCK = "Serving Benchmark Result"
# JSON keys: `{statistic}_{metric}_ms`, SGLang naming end-to-end latency `e2e_latency`, vLLM `e2el`.
METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e", "e2e_latency": "e2e"}
STATISTICS = {"mean": "mean", "median": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}
REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput")
# The summary block's lines, as both tools print them (SGLang 0.4 spelled `reqeuest`).
LINES = {
    "backend": r"Backend", "rate": r"Traffic request rate", "concurrency": r"Max(?:imum)? req(?:e)?uest concurrency",
    "completed": r"Successful requests", "duration": r"Benchmark duration \(s\)",
    "total_input_tokens": r"Total input tokens", "total_output_tokens": r"Total generated tokens",
    "request_throughput": r"Request throughput \(req/s\)", "output_throughput": r"Output token throughput \(tok/s\)",
}
STAT_LINE = re.compile(r"^(Mean|Median|P90|P95|P99)\s+(TTFT|TPOT|ITL|E2EL|E2E Latency)\s+\(ms\):\s*(\S+)")


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith("{") and "request_throughput" in text and "_ttft_ms" in text


def looks_like_block(text: str) -> bool:
    return BLOCK in text


def read_json(source: SourceFile) -> tuple[list[ServeRun], Problems]:
    """Every result object of the file (one, or one per line)."""
    problems, runs = Problems(source), []
    text, at = source.text, 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        try:
            value, end = decode_json(text, at)
        except JsonProblem as error:
            line, column = source.position(error.pos)
            problems.at(line, column, 1, error.shown, "keep the file as the benchmark saved it")
            break
        if not isinstance(value, dict):
            line, column = source.position(at)
            problems.at(line, column, 1, "a benchmark result is a JSON object")
        else:
            run = _from_json(source, value, at, end, problems)
            runs.append(run) if run is not None else None
        at = end
    if not runs and not problems.found:
        problems.whole_file("no benchmark result here")
    return runs, problems


# JSON fields read as numbers: (whole, above zero); the others may be zero, none negative
FIELDS = {"completed": (True, True), "total_input_tokens": (False, False), "total_output_tokens": (False, False),
          "request_throughput": (False, True), "output_throughput": (False, False), "max_concurrency": (True, True)}


def _from_json(source: SourceFile, value: dict, start: int, end: int, problems: Problems) -> ServeRun | None:
    missing = [k for k in REQUIRED if not isinstance(value.get(k), (int, float)) or isinstance(value.get(k), bool)]
    line, column = source.position(start)
    if missing:
        problems.at(line, column, 1, f"this result has no number `{missing[0]}`",
                    "a `bench serve` result saved by vLLM (--save-result) or SGLang (--output-file) has it")
        return None
    try:
        numbers = {key: _json_field(value, key, whole, positive) for key, (whole, positive) in FIELDS.items()}
        latencies = _json_latencies(value)
        rate = _rate(value.get("request_rate"), "request_rate")
    except FieldError as problem:
        at = source.text.find(f'"{problem.key}"', start, end)
        line, column = source.position(at if at >= 0 else start)
        problems.at(line, column, len(problem.key) + 2 if at >= 0 else 1, str(problem),
                    "keep the result as the benchmark saved it")
        return None
    completed = numbers["completed"]
    return ServeRun(str(value.get("backend", "vllm")), rate, numbers["max_concurrency"], completed,
                    numbers["total_input_tokens"] / completed, numbers["total_output_tokens"] / completed,
                    numbers["request_throughput"], numbers["output_throughput"],
                    *(tuple(sorted(latencies[m])) for m in ("ttft", "tpot", "itl", "e2e")),
                    str(value.get("model_id") or value.get("model") or ""), source.span(start, end))


def _json_latencies(value: dict) -> dict[str, list[tuple[str, float]]]:
    """metric -> [(statistic, seconds)] of the result's `{statistic}_{metric}_ms` keys."""
    latencies = {m: [] for m in set(METRICS.values())}
    for key in value:
        parts = key.rsplit("_ms", 1)[0].split("_", 1) if key.endswith("_ms") else ()
        if len(parts) == 2 and parts[0] in STATISTICS and parts[1] in METRICS:
            milliseconds = _json_field(value, key, False, False)
            if milliseconds is not None:
                latencies[METRICS[parts[1]]].append((STATISTICS[parts[0]], milliseconds / 1e3))
    return latencies


class FieldError(ValueError):
    """A JSON field's number refused; `key` names the field, to point at it."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


def _json_field(value: dict, key: str, whole: bool, positive: bool):
    """The number at `key` (None where absent or not a number), through the plain-number
    parser's limits; FieldError when it is out of range or negative."""
    try:
        found = json_number(value.get(key), whole=whole, positive=positive, what=f"`{key}`")
    except PlainNumberError as problem:
        raise FieldError(str(problem), key) from None
    if found is not None and found < 0:
        raise FieldError(f"`{key}` is negative: {value.get(key)}", key)
    return found


def _rate(value, key: str) -> float | None:
    """Requests per second offered; None for every request at once (`inf`, JSON `Infinity`)."""
    if value is None or value == math.inf:
        return None
    try:
        if isinstance(value, str):
            return None if value.strip().lower() in ("inf", "infinity") else number(
                value, positive=True, what="the request rate")
        found = json_number(value, positive=True, what="the request rate")
    except PlainNumberError as problem:
        raise FieldError(str(problem), key) from None
    if found is None:
        raise FieldError(f"the request rate `{value}` is not a number", key)
    return found


def read_block(source: SourceFile) -> tuple[list[ServeRun], Problems]:
    """Every summary block of the file (a sweep prints one per rate)."""
    problems, runs = Problems(source), []
    lines = source.text.split("\n")
    starts = [i for i, line in enumerate(lines, 1) if BLOCK in line]
    for previous, first, nxt in zip([1] + starts, starts, starts[1:] + [len(lines) + 1]):
        run = _block(source, lines, first, nxt, range(previous, first), problems)
        runs.append(run) if run is not None else None
    return runs, problems


def _found(lines: list[str], numbers: range, labels: dict[str, str]) -> dict[str, tuple[str, int, int]]:
    """label key -> (value text, line, column) of each `Label:  value` line in `numbers`."""
    found = {}
    for line in numbers:
        raw = lines[line - 1].rstrip()
        for key, label in labels.items():
            match = re.search(label + r":\s*(\S.*)$", raw)
            if match:
                found.setdefault(key, (match.group(1).strip(), line, match.start(1) + 1))
    return found


def _block(source: SourceFile, lines: list[str], first: int, nxt: int, before: range, problems: Problems):
    end = next((i for i in range(first + 1, nxt) if "=" * 10 in lines[i - 1]), nxt)
    found = _found(lines, range(first + 1, end), LINES)
    for key, (cell, line, column) in _found(lines, before, {"rate": r"Traffic request rate",
                                                             "concurrency": r"Maximum request concurrency"}).items():
        found.setdefault(key, (cell, line, column))  # vLLM prints these two above its block
    missing = [key for key in REQUIRED if key not in found]
    if missing:
        problems.at(first, 1, len(lines[first - 1]), f"this summary has no `{LINES[missing[0]].replace(chr(92), '')}` line",
                    "keep the whole block the benchmark printed")
        return None
    try:
        latencies = _block_latencies(lines, first, end)
        values = {key: _cell(found[key], *FIELDS[key]) for key in REQUIRED}
        concurrency = found.get("concurrency", ("None", 0, 0))
        limit = None if concurrency[0].lower() == "none" else _cell(concurrency, True, True)
        rate_cell, line, column = found.get("rate", ("inf", first, 1))
        try:
            rate = _rate(rate_cell, "rate")
        except FieldError as problem:
            raise CellError(str(problem), rate_cell, line, column) from None
    except CellError as problem:
        problems.at(problem.line, problem.column, len(problem.cell), str(problem))
        return None
    completed = values["completed"]
    return ServeRun(found.get("backend", ("vllm",))[0], rate, limit, completed,
                    values["total_input_tokens"] / completed, values["total_output_tokens"] / completed,
                    values["request_throughput"], values["output_throughput"],
                    *(tuple(sorted(latencies[m])) for m in ("ttft", "tpot", "itl", "e2e")), "", line_span(source, first))


def _block_latencies(lines: list[str], first: int, end: int) -> dict[str, list[tuple[str, float]]]:
    """metric -> [(statistic, seconds)] of the block's `Median TTFT (ms):` lines."""
    latencies = {m: [] for m in ("ttft", "tpot", "itl", "e2e")}
    for line in range(first + 1, end):
        text = lines[line - 1]
        stat = STAT_LINE.match(text.lstrip("# "))
        if stat:
            metric = "e2e" if stat.group(2).startswith("E2E") else stat.group(2).lower()
            statistic = {"Median": "p50", "Mean": "mean"}.get(stat.group(1), stat.group(1).lower())
            column = len(text) - len(text.lstrip("# ")) + stat.start(3) + 1
            latencies[metric].append((statistic, _cell((stat.group(3), line, column), False, False) / 1e3))
    return latencies


class CellError(ValueError):
    """A summary line's number refused, with where it is."""

    def __init__(self, message: str, cell: str, line: int, column: int):
        super().__init__(message)
        self.cell, self.line, self.column = cell, line, column


def _cell(found: tuple[str, int, int], whole: bool, positive: bool):
    """The number of a summary line's value (text, line, column), or CellError."""
    cell, line, column = found
    try:
        value = number(cell, whole=whole, positive=positive)
    except PlainNumberError as problem:
        raise CellError(str(problem), cell, line, column) from None
    if value < 0:
        raise CellError(f"`{cell}` is negative", cell, line, column)
    return value
