"""The kernel CSV (`gclc probe` writes it; docs/calibration.md documents it): `# key: value`
lines naming the machine (gpu, driver, cuda, torch, nccl, clocks), then a header and one row
per measurement:

    kind,precision,m,n,k,batch,heads,seq,head_dim,causal,bytes,ranks,nodes,seconds,rate

`kind` is gemm (an m x k by k x n product: 2mnk FLOPs), attention (fused scaled-dot-product
attention forward over `batch` x `heads` sequences of `seq` tokens, `head_dim` wide; half
the FLOPs when `causal`), hbm_copy (`bytes` read plus written), or a collective
(all_reduce, all_gather, reduce_scatter, alltoall, sendrecv) of `bytes` as nccl-tests
counts them over `ranks` GPUs on `nodes` hosts. `seconds` is the median time of one call,
`rate` the FLOP/s or bytes/s it implies: a row needs one of them; with both, they must
agree within 1 %."""

from __future__ import annotations

import csv
import io
import re

import attrs

from ...dsl.plain_number import PlainNumberError
from ...dsl.source import SourceFile
from .columns import COLUMNS, MAGIC
from .records import COLLECTIVES, KERNELS, CollectivePoint, CollectiveRun, KernelPoint, KernelRun
from ...dsl.numbers import number as number_text
from .nccl import version
from .text import Problems, line_span, number

SHAPES = {"gemm": ("m", "n", "k"), "attention": ("batch", "heads", "seq", "head_dim"), "hbm_copy": ("bytes",),
          **{op: ("bytes", "ranks", "nodes") for op in COLLECTIVES}}
IDENTITY = re.compile(r"^#\s*([a-z_][a-z0-9_]*)\s*:\s*(.*?)\s*$")
AGREE = 0.01
WHOLE = {"m", "n", "k", "batch", "heads", "seq", "head_dim", "bytes", "ranks", "nodes"}


def looks_like(text: str) -> bool:
    return text.startswith(MAGIC)


def read(source: SourceFile) -> tuple[list[KernelRun | CollectiveRun], Problems]:
    problems, identity, points = Problems(source), [], []
    lines = source.text.split("\n")
    header = next((i for i, line in enumerate(lines, 1) if line.strip() and not line.startswith("#")), None)
    nccl = ""
    for number_, line in enumerate(lines[:(header or len(lines) + 1) - 1], 1):
        match = IDENTITY.match(line)
        if match:
            identity.append((match.group(1), match.group(2)))
            if match.group(1) == "nccl" and match.group(2):   # the NCCL that timed the collective rows
                nccl = version(match.group(2)) or ""
                if not nccl:
                    problems.on_match(number_, match, 2, f"cannot read the NCCL version `{match.group(2)}`: "
                                      "expected major.minor.patch (2.21.5)", "keep the line as `gclc probe` wrote it")
    names = [c.strip() for c in lines[header - 1].split(",")] if header else []
    missing = [c for c in COLUMNS if c not in names]
    if header is None or missing:
        where = header or 1
        problems.at(where, 1, len(lines[where - 1]) if lines else 1,
                    f"the kernel CSV has no `{missing[0] if missing else 'kind'}` column",
                    "the header is: " + ",".join(COLUMNS))
        return [], problems
    for offset, cells in enumerate(csv.reader(io.StringIO("\n".join(lines[header:]))), header + 1):
        if not cells or not any(c.strip() for c in cells) or cells[0].startswith("#"):
            continue
        point = _row(source, offset, dict(zip(names, (c.strip() for c in cells))), len(cells) == len(names), problems)
        points.append(point) if point is not None else None
    if not points and not problems.found:
        problems.at(header, 1, len(lines[header - 1]), "the kernel CSV has no rows")
    kernels = [p for p in points if isinstance(p, KernelPoint)]
    runs = [KernelRun(tuple(identity), tuple(kernels), line_span(source, 1))] if kernels else []
    return runs + _collectives(points, dict(identity).get("gpu", ""), nccl), problems


def _collectives(points: list, gpu: str, nccl: str) -> list[CollectiveRun]:
    """The collective rows as runs: one per collective, GPU count and host count, timed on NCCL `nccl`."""
    runs: dict[tuple, list] = {}
    for op, ranks, nodes, point in (p for p in points if isinstance(p, tuple)):
        runs.setdefault((op, ranks, nodes), []).append(point)
    return [CollectiveRun(op, ranks, nodes, (gpu,), tuple(found), found[0].span, nccl) for (op, ranks, nodes), found in runs.items()]


def _row(source: SourceFile, line: int, row: dict[str, str], whole: bool, problems: Problems) -> KernelPoint | None:
    text = source.line_text(line)

    def fail(column: str, what: str, fix: str = "") -> None:
        start = _column_start(text, list(row).index(column)) if column in row else 0
        problems.at(line, start + 1, max(1, len(row.get(column, "")) or 1), what, fix)

    if not whole:
        problems.at(line, 1, len(text), f"a row of {text.count(',') + 1} cells under a header of {len(row)} columns")
        return None
    kind = row["kind"]
    if kind not in KERNELS + COLLECTIVES:
        fail("kind", f"unknown kernel `{kind}`", "one of " + ", ".join(KERNELS + COLLECTIVES))
        return None
    values = _numbers(row, (*SHAPES[kind], "seconds", "rate"), fail)
    if values is None:
        return None
    absent = [c for c in SHAPES[kind] if c not in values]
    if absent:
        fail(absent[0], f"a {kind} row needs `{absent[0]}`")
        return None
    if "seconds" not in values and "rate" not in values:
        fail("seconds", "a row needs `seconds` (median per call) or `rate`")
        return None
    if kind in COLLECTIVES:
        return _collective(kind, row["precision"] or "float", values, line_span(source, line))
    shape = {c: int(values[c]) for c in SHAPES[kind] if c != "bytes"}
    point = KernelPoint(kind, row["precision"] or "bf16", **shape, causal=row["causal"].lower() not in ("0", "false", "no"),
                        nbytes=int(values.get("bytes", 0)), seconds=1.0, span=line_span(source, line))
    seconds = values.get("seconds") or point.work / values["rate"]
    if "seconds" in values and "rate" in values and abs(point.work / seconds / values["rate"] - 1) > AGREE:
        fail("rate", f"rate {row['rate']} disagrees with the shape's work over `seconds` "
                     f"({number_text(point.work / seconds)} per s)", "check the seconds' unit (a median per call, in seconds)")
        return None
    return attrs.evolve(point, seconds=seconds)


def _numbers(row: dict[str, str], columns: tuple[str, ...], fail) -> dict[str, float] | None:
    """The positive numbers of a row's non-empty `columns` (shapes, bytes, ranks and nodes
    whole), or None after `fail` names the first bad one."""
    values = {}
    for column in columns:
        cell = row[column]
        if not cell:
            continue
        try:
            values[column] = number(cell, whole=column in WHOLE, positive=True, what=f"`{column}`")
        except PlainNumberError as problem:
            fail(column, str(problem))
            return None
    return values


def _collective(op: str, dtype: str, values: dict, span) -> tuple:
    """(op, ranks, nodes, the point) of a collective row."""
    size = int(values["bytes"])
    seconds = values.get("seconds") or size / values["rate"]
    point = CollectivePoint(size, size // 4, dtype, "sum" if "reduce" in op else "none", seconds, size / seconds, 0.0,
                            None, span)
    return op, int(values["ranks"]), int(values["nodes"]), point


def _column_start(text: str, index: int) -> int:
    """Where cell `index` of a CSV line starts (commas counted plainly: enough to point)."""
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == ","]
    return starts[min(index, len(starts) - 1)]
