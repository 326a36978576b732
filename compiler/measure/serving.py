"""Serving benchmarks: vLLM's and SGLang's `bench serve` results, as the JSON they save
(`--save-result`, SGLang's `--output-file` appends one object per line) or as the summary
block they print (`============ Serving Benchmark Result ============`). Latencies are
milliseconds there (`median_ttft_ms`, `Median TTFT (ms)`); a request rate of `inf` (JSON
`Infinity`) means every request at once."""

from __future__ import annotations

import json
import math
import re

from ...dsl.source import SourceFile
from .records import ServeRun
from .text import NUMBER, Problems, line_span, number

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
STAT_LINE = re.compile(r"^(Mean|Median|P90|P95|P99)\s+(TTFT|TPOT|ITL|E2EL|E2E Latency)\s+\(ms\):\s*(" + NUMBER + r")")


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith("{") and "request_throughput" in text and "_ttft_ms" in text


def looks_like_block(text: str) -> bool:
    return BLOCK in text


def read_json(source: SourceFile) -> tuple[list[ServeRun], Problems]:
    """Every result object of the file (one, or one per line)."""
    problems, runs = Problems(source), []
    decoder, text, at = json.JSONDecoder(), source.text, 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as error:
            line, column = source.position(error.pos)
            problems.at(line, column, 1, f"not JSON: {error.msg}", "keep the file as the benchmark saved it")
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


def _from_json(source: SourceFile, value: dict, start: int, end: int, problems: Problems) -> ServeRun | None:
    missing = [k for k in REQUIRED if not isinstance(value.get(k), (int, float)) or isinstance(value.get(k), bool)]
    line, column = source.position(start)
    if missing:
        problems.at(line, column, 1, f"this result has no number `{missing[0]}`",
                    "a `bench serve` result saved by vLLM (--save-result) or SGLang (--output-file) has it")
        return None
    completed = value["completed"]
    if completed <= 0 or value["request_throughput"] <= 0:
        problems.at(line, column, 1, "no request completed in this run")
        return None
    latencies = {m: [] for m in set(METRICS.values())}
    for key, number_ in value.items():
        parts = key.rsplit("_ms", 1)[0].split("_", 1) if key.endswith("_ms") else ()
        if len(parts) == 2 and parts[0] in STATISTICS and parts[1] in METRICS and isinstance(number_, (int, float)):
            latencies[METRICS[parts[1]]].append((STATISTICS[parts[0]], number_ / 1e3))
    rate = value.get("request_rate")
    return ServeRun(str(value.get("backend", "vllm")), _rate(rate), value.get("max_concurrency"), int(completed),
                    value["total_input_tokens"] / completed, value["total_output_tokens"] / completed,
                    value["request_throughput"], value["output_throughput"],
                    *(tuple(sorted(latencies[m])) for m in ("ttft", "tpot", "itl", "e2e")),
                    str(value.get("model_id") or value.get("model") or ""), source.span(start, end))


def _rate(value) -> float | None:
    if isinstance(value, str):
        value = float(value) if value.replace(".", "", 1).isdigit() else math.inf
    return None if value is None or not math.isfinite(float(value)) else float(value)


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
    latencies = {m: [] for m in ("ttft", "tpot", "itl", "e2e")}
    for line in range(first + 1, end):
        stat = STAT_LINE.match(lines[line - 1].lstrip("# "))
        if stat:
            metric = "e2e" if stat.group(2).startswith("E2E") else stat.group(2).lower()
            statistic = {"Median": "p50", "Mean": "mean"}.get(stat.group(1), stat.group(1).lower())
            latencies[metric].append((statistic, number(stat.group(3)) / 1e3))
    values = {}
    for key in REQUIRED:
        if key not in found:
            problems.at(first, 1, len(lines[first - 1]), f"this summary has no `{LINES[key].replace(chr(92), '')}` line",
                        "keep the whole block the benchmark printed")
            return None
        cell, line, column = found[key]
        try:
            values[key] = number(cell)
        except ValueError:
            problems.at(line, column, len(cell), f"`{cell}` is not a number")
            return None
    if values["completed"] <= 0:
        problems.at(found["completed"][1], found["completed"][2], 1, "no request completed in this run")
        return None
    concurrency = found.get("concurrency", ("",))[0]
    completed = values["completed"]
    return ServeRun(found.get("backend", ("vllm",))[0], _rate(found.get("rate", ("inf",))[0]),
                    int(concurrency) if concurrency.isdigit() else None, int(completed),
                    values["total_input_tokens"] / completed, values["total_output_tokens"] / completed,
                    values["request_throughput"], values["output_throughput"],
                    *(tuple(sorted(latencies[m])) for m in ("ttft", "tpot", "itl", "e2e")), "", line_span(source, first))
