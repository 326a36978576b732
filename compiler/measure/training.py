"""Training logs: Megatron-LM's iteration lines (`iteration N/M | ... | elapsed time per
iteration (ms): X | throughput per GPU (TFLOP/s/GPU): Y | ...`) with the argument dump it
prints at start (`  name ...... value`), torchtitan's metrics lines (`step: N  loss: L
memory: G GiB(P%)  tps: T  tflops: F  mfu: M%`, `wps` before 2025) with its mesh and batch
lines, and NeMo's (`Training epoch 0, iteration i/n | ... | train_step_timing in s: X`, or
NeMo 1's progress bar `train_step_timing=X`). Each line may carry a logger's prefix
(`[2024-04-06 03:02:12]`, `[rank0]:[titan] ... INFO -`)."""

from __future__ import annotations

import re

from ...dsl.plain_number import PlainNumberError
from ...dsl.source import SourceFile
from ...dsl.units import GIB
from .records import TrainRun, TrainStep
from .text import NUMBER, Problems, line_span, number

POSITIVE = ("seconds", "bar_seconds", "tokens_per_s", "batch")

# a step line's iteration is read as the whole token, so that `iteration 1e400/2000 |` is refused
# where it stands rather than skipped as no step line at all
MEGATRON_STEP = re.compile(r"\biteration\s+([^\s/|]+)\s*/\s*[^\s|]+\s*\|")
MEGATRON_FIELDS = {
    "seconds": re.compile(r"elapsed time per iteration \(ms\):\s*(\S+?)(?:/\S+)?\s*(?:\||$)"),
    "tflops": re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*(\S+?)(?:/\S+)?\s*(?:\||$)"),
    "tokens_per_s": re.compile(r"tokens per GPU \(tokens/s/GPU\):\s*(\S+?)(?:/\S+)?\s*(?:\||$)"),
    "batch": re.compile(r"global batch size:\s*(\S+?)\s*(?:\||$)"),
}
# Megatron's argument dump: `  tensor_model_parallel_size ...... 8` (Megatron-DeepSpeed adds
# `.......default`), and its summary line `using world size: 16, data-parallel size: 2, ...`.
ARGUMENT = re.compile(r"^\s*([a-z_][a-z0-9_]*) \.{2,} (.*?)(?:\.{3,}(?:default|updated))?\s*$")
WORLD = re.compile(r"using world size:\s*([0-9]+)")

TITAN_STEP = re.compile(r"\bstep:\s*([^\s\x1b]+)\s+loss:")
# Each field's value is the whole token up to its unit or the next space (`6²` is read whole,
# and refused, rather than as 6); a terminal's colour code ends it too.
TITAN_FIELDS = {
    "tokens_per_s": re.compile(r"\b(?:tps|wps):\s*(?=[-+.0-9])([^\s\x1b]+)"),
    "tflops": re.compile(r"\btflops:\s*(?=[-+.0-9])([^\s\x1b]+)"),
    "mfu": re.compile(r"\bmfu:\s*(?=[-+.0-9])([^\s\x1b]+?)%"),
    "memory": re.compile(r"\bmemory:\s*(?=[-+.0-9])([^\s\x1b]+?)\s*GiB"),
}
# torchtitan's start-up lines: the device mesh and the batch (train.py, parallel_dims.py)
TITAN_MESH = re.compile(r"Building ([0-9]+)-D device mesh with \[([^\]]*)\], \[([^\]]*)\]")
TITAN_BATCH = re.compile(r"local batch size ([0-9]+), global batch size ([0-9]+), (?:sequence length|seq_len) ([0-9]+)")

NEMO_STEP = re.compile(r"\biteration ([^\s/|]+)/[^\s|]+ \|")
NEMO_BAR = re.compile(r"\bglobal_step=(?=[-+.0-9])([^\s,\]]+)")
NEMO_FIELDS = {
    # NeMo 2's `train_step_timing in s: X`, NeMo 1's logged `train_step_timing=X`, else the
    # progress bar's own rate (`41.36s/it`)
    "seconds": re.compile(r"train_step_timing(?: in s:\s*|=)(?=[-+.0-9])([^\s,|\]]+)"),
    "bar_seconds": re.compile(r"[\s,](" + NUMBER + r")s/it\b"),
    "batch": re.compile(r"global_batch_size:\s*([0-9]+)"),
}


def looks_like(text: str) -> str | None:
    """The framework whose log `text` is (one of its step lines is there), or None."""
    for line in text.split("\n"):
        if MEGATRON_STEP.search(line) and MEGATRON_FIELDS["seconds"].search(line):
            return "megatron"
        if (NEMO_STEP.search(line) or NEMO_BAR.search(line)) and (
                NEMO_FIELDS["seconds"].search(line) or NEMO_FIELDS["bar_seconds"].search(line)):
            return "nemo"
        if TITAN_STEP.search(line) and TITAN_FIELDS["tokens_per_s"].search(line):
            return "torchtitan"
    return None


def read(source: SourceFile, framework: str) -> tuple[list[TrainRun], Problems]:
    problems = Problems(source)
    marker, fields = {"megatron": (MEGATRON_STEP, MEGATRON_FIELDS), "torchtitan": (TITAN_STEP, TITAN_FIELDS),
                      "nemo": (NEMO_STEP, NEMO_FIELDS)}[framework]
    steps, settings, first = [], {}, 0
    for line, text in enumerate(source.text.split("\n"), 1):
        step = marker.search(text) or (NEMO_BAR.search(text) if framework == "nemo" else None)
        if step and any(f.search(text) for f in fields.values()):
            try:
                iteration = number(step.group(1), whole=True, what="an iteration")
                if iteration < 0:
                    raise PlainNumberError(f"an iteration of {step.group(1)}: iterations count from 0")
            except PlainNumberError as problem:
                problems.on_match(line, step, 1, str(problem), "keep the line as the framework printed it")
                continue
            parsed = _step(line, text, iteration, fields, problems, settings)
            if parsed is not None:
                steps.append(parsed)
                first = first or line
        else:
            _setting(text, settings)
    if not steps:
        problems.whole_file(f"no {framework} step lines with a step time or throughput here",
                            "keep the log's iteration lines (docs/calibration.md shows one of each framework)")
        return [], problems
    return [TrainRun(framework, tuple(steps), tuple(sorted(settings.items())), line_span(source, first))], problems


def _step(line: int, text: str, iteration: int, fields: dict, problems: Problems, settings: dict) -> TrainStep | None:
    values = {}
    for name, pattern in fields.items():
        match = pattern.search(text)
        if match is None:
            continue
        what = name.replace("_", " ")
        try:
            value = number(match.group(1), whole=name == "batch", what=f"a {what}")
            if not value > 0 and name in POSITIVE:
                raise PlainNumberError(f"a {what} of {match.group(1)}: it must be positive")
            if value < 0:
                raise PlainNumberError(f"a {what} of {match.group(1)}: it cannot be negative")
        except PlainNumberError as problem:
            problems.on_match(line, match, 1, f"{problem} ({what})", "keep the line as the framework printed it")
            return None
        values[name] = value
    if "bar_seconds" in values:
        values.setdefault("seconds", values.pop("bar_seconds"))
    if "batch" in values:
        settings["global_batch_size"] = str(values.pop("batch"))
    if "seconds" in values and "elapsed time per iteration (ms)" in text:
        values["seconds"] /= 1e3
    if "memory" in values:
        values["memory"] *= GIB
    if "mfu" in values:
        values["mfu"] /= 100
    if "seconds" not in values and "tokens_per_s" not in values:
        return None
    return TrainStep(iteration, values.get("seconds"), values.get("tflops"), values.get("tokens_per_s"),
                     values.get("mfu"), values.get("memory"), line_span(problems.source, line))


def _setting(text: str, settings: dict) -> None:
    """Remember a configuration the log states: an argument of Megatron's dump, its world
    size, torchtitan's mesh and batch."""
    argument = ARGUMENT.match(text)
    if argument:
        settings[argument.group(1)] = argument.group(2).strip()
        return
    world = WORLD.search(text)
    if world:
        settings.setdefault("world_size", world.group(1))
    mesh = TITAN_MESH.search(text)
    if mesh:
        names = [n.strip(" '\"") for n in mesh.group(2).split(",")]
        sizes = [s.strip() for s in mesh.group(3).split(",")]
        settings.update({f"mesh_{n}": s for n, s in zip(names, sizes) if n})
    batch = TITAN_BATCH.search(text)
    if batch:
        settings.update(local_batch_size=batch.group(1), global_batch_size=batch.group(2), seq_len=batch.group(3))
