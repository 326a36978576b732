"""NVIDIA genai-perf and aiperf exports: the JSON of metrics, each an object of `unit`
and statistics (`avg`, `p50`, `p90`, `p99`, ...), with the run's `input_config`
(`profile_export_genai_perf.json`, `profile_export_aiperf.json`), and the CSV of the same
metrics (`Metric,avg,min,max,p1,...` rows, then `Metric,Value` summary rows). Latencies
carry their unit (`ms`, `s`/`sec`, `us`, `ns`)."""

from __future__ import annotations

import csv
import io
import json
import re

from ...dsl.plain_number import PlainNumberError
from ...dsl.source import SourceFile
from .records import ServeRun
from .text import JsonProblem, Problems, decode_json, json_number, line_span, number

SECONDS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "ns": 1e-9}
STATISTICS = {"avg": "mean", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}
# JSON metric -> (record field); inter-token latency is genai-perf's per-request
# (latency - TTFT) / (output tokens - 1), which is what vLLM and SGLang call TPOT.
LATENCIES = {"time_to_first_token": ("ttft",), "inter_token_latency": ("tpot", "itl"), "request_latency": ("e2e",)}
# CSV row names (lower case, unit stripped) -> JSON metric names
CSV_NAMES = {"time to first token": "time_to_first_token", "inter token latency": "inter_token_latency",
             "request latency": "request_latency", "output sequence length": "output_sequence_length",
             "input sequence length": "input_sequence_length", "request throughput": "request_throughput",
             "output token throughput": "output_token_throughput", "request count": "request_count",
             "benchmark duration": "benchmark_duration"}


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith("{") and '"time_to_first_token"' in text and '"unit"' in text


def looks_like_csv(text: str) -> bool:
    return text.lstrip().startswith("Metric,") and "Time to First Token" in text


def read_json(source: SourceFile) -> tuple[list[ServeRun], Problems]:
    problems = Problems(source)
    try:
        value, end = decode_json(source.text, 0)
        rest = source.text[end:]
        if rest.strip():
            raise JsonProblem("extra data after the export's object", end + len(rest) - len(rest.lstrip()))
    except JsonProblem as error:
        line, column = source.position(error.pos)
        problems.at(line, column, 1, error.shown, "keep the export as the tool wrote it")
        return [], problems
    if not isinstance(value, dict):
        problems.whole_file("a genai-perf/aiperf export is a JSON object of metrics")
        return [], problems
    metrics = {k: v for k, v in value.items() if isinstance(v, dict) and "unit" in v}
    config = value.get("input_config") if isinstance(value.get("input_config"), dict) else {}
    run = _run(source, metrics, config, problems)
    return ([run] if run else []), problems


def read_csv(source: SourceFile) -> tuple[list[ServeRun], Problems]:
    problems, metrics = Problems(source), {}
    header: list[str] = []
    for line, row in enumerate(csv.reader(io.StringIO(source.text)), 1):
        if not row or not any(c.strip() for c in row):
            continue
        if row[0] == "Metric":
            header = [c.strip() for c in row]
            continue
        name = re.sub(r"\s*\(([^)]*)\)\s*$", "", row[0]).strip().lower()
        unit = re.search(r"\(([^)]*)\)\s*$", row[0])
        if name not in CSV_NAMES or len(row) != len(header):
            continue
        try:
            values = {h if h != "Value" else "avg": number(c, what=f"`{h}`") for h, c in zip(header[1:], row[1:])}
        except PlainNumberError as problem:
            problems.at(line, 1, len(source.line_text(line)), f"a row of `{row[0]}` with a cell that is not a number: {problem}")
            continue
        metrics[CSV_NAMES[name]] = {"unit": unit.group(1) if unit else "", **values}
    run = _run(source, metrics, {}, problems)
    return ([run] if run else []), problems


def _run(source: SourceFile, metrics: dict, config: dict, problems: Problems) -> ServeRun | None:
    try:
        return _checked_run(source, metrics, config, problems)
    except PlainNumberError as problem:
        problems.whole_file(str(problem), "keep the whole export genai-perf or aiperf wrote")
        return None


def _checked_run(source: SourceFile, metrics: dict, config: dict, problems: Problems) -> ServeRun | None:
    def avg(name: str) -> float | None:
        metric = metrics.get(name, {})
        found = json_number(metric.get("avg") if isinstance(metric, dict) else None, what=f"`{name}`")
        if found is not None and found < 0:
            raise PlainNumberError(f"`{name}` is negative: {found}")
        return found

    count = avg("request_count")
    throughput = avg("request_throughput")
    duration = avg("benchmark_duration")
    output = avg("output_sequence_length") or (avg("total_osl") / count if avg("total_osl") and count else None)
    prompt = avg("input_sequence_length") or (avg("total_isl") / count if avg("total_isl") and count else None)
    if not throughput or "time_to_first_token" not in metrics:
        problems.whole_file("this export has no `request_throughput` or no `time_to_first_token`",
                            "keep the whole export genai-perf or aiperf wrote")
        return None
    tokens = avg("output_token_throughput") or (avg("total_osl") / duration if avg("total_osl") and duration else None)
    latencies = {"ttft": [], "tpot": [], "itl": [], "e2e": []}
    for name, fields in LATENCIES.items():
        metric = metrics.get(name, {})
        scale = SECONDS.get(str(metric.get("unit", "ms")).lower())
        if metric and scale is None:
            problems.whole_file(f"`{name}` in `{metric.get('unit')}`: gclc reads ms, s, us or ns")
            return None
        for statistic, value in metric.items():
            seconds = json_number(value, what=f"`{name}`'s {statistic}") if statistic in STATISTICS else None
            if seconds is not None:
                latencies.update({field: latencies[field] + [(STATISTICS[statistic], seconds * scale)] for field in fields})
    loadgen = config.get("loadgen", config)   # aiperf nests the load under `loadgen`, genai-perf does not
    rate = json_number(loadgen.get("request_rate"), positive=True, what="the request rate") if isinstance(loadgen, dict) else None
    concurrency = loadgen.get("concurrency") if isinstance(loadgen, dict) else None
    concurrency = json_number(concurrency, whole=True, positive=True, what="the concurrency") if isinstance(concurrency, int) else None
    names = config.get("endpoint", {}).get("model_names") if isinstance(config.get("endpoint"), dict) else None
    model = names[0] if names else config.get("model_names", [""])[0] if config.get("model_names") else ""
    tool = "aiperf" if "aiperf" in json.dumps(config) or "total_isl" in metrics else "genai-perf/aiperf"
    requests = count or throughput * (duration or 0)
    return ServeRun(tool, rate, concurrency, number(repr(round(requests)), whole=True, what="the request count"),
                    prompt, output or 0.0, throughput, tokens or 0.0,
                    *(tuple(sorted(latencies[m])) for m in ("ttft", "tpot", "itl", "e2e")), str(model),
                    line_span(source, 1))
