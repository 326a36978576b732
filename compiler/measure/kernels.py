"""The kernel CSV (`gclc probe` writes it; docs/calibration.md documents it): `# key: value`
lines naming the machine (gpu, driver, cuda, torch, nccl, clocks), then a header and one row
per kernel measurement:

    kind,precision,m,n,k,batch,heads,seq,head_dim,causal,bytes,seconds,rate

`kind` is gemm (an m x k by k x n product: 2mnk FLOPs), attention (fused scaled-dot-product
attention forward over `batch` x `heads` sequences of `seq` tokens, `head_dim` wide; half
the FLOPs when `causal`) or hbm_copy (`bytes` read plus written). `seconds` is the median
time of one call, `rate` the FLOP/s or bytes/s it implies: a row needs one of them; with
both, they must agree within 1 %."""

from __future__ import annotations

import csv
import io
import re

import attrs

from ...dsl.source import SourceFile
from .records import KERNELS, KernelPoint, KernelRun
from ...dsl.numbers import number as number_text
from .text import Problems, line_span, number

MAGIC = "# gclc kernels v1"
COLUMNS = ("kind", "precision", "m", "n", "k", "batch", "heads", "seq", "head_dim", "causal", "bytes", "seconds", "rate")
SHAPES = {"gemm": ("m", "n", "k"), "attention": ("batch", "heads", "seq", "head_dim"), "hbm_copy": ("bytes",)}
IDENTITY = re.compile(r"^#\s*([a-z_][a-z0-9_]*)\s*:\s*(.*?)\s*$")
AGREE = 0.01


def looks_like(text: str) -> bool:
    return text.startswith(MAGIC)


def read(source: SourceFile) -> tuple[list[KernelRun], Problems]:
    problems, identity, points = Problems(source), [], []
    lines = source.text.split("\n")
    header = next((i for i, line in enumerate(lines, 1) if line.strip() and not line.startswith("#")), None)
    for line in lines[:(header or len(lines) + 1) - 1]:
        match = IDENTITY.match(line)
        if match:
            identity.append((match.group(1), match.group(2)))
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
    return ([KernelRun(tuple(identity), tuple(points), line_span(source, 1))] if points else []), problems


def _row(source: SourceFile, line: int, row: dict[str, str], whole: bool, problems: Problems) -> KernelPoint | None:
    text = source.line_text(line)

    def fail(column: str, what: str, fix: str = "") -> None:
        start = _column_start(text, list(row).index(column)) if column in row else 0
        problems.at(line, start + 1, max(1, len(row.get(column, "")) or 1), what, fix)

    if not whole:
        problems.at(line, 1, len(text), f"a row of {text.count(',') + 1} cells under a header of {len(row)} columns")
        return None
    kind = row["kind"]
    if kind not in KERNELS:
        fail("kind", f"unknown kernel `{kind}`", "one of " + ", ".join(KERNELS))
        return None
    values = {}
    for column in (*SHAPES[kind], "seconds", "rate"):
        cell = row[column]
        if not cell:
            continue
        try:
            values[column] = number(cell)
        except ValueError:
            fail(column, f"`{cell}` is not a number ({column})")
            return None
        if not values[column] > 0:
            fail(column, f"{column} must be positive, not {cell}")
            return None
    absent = [c for c in SHAPES[kind] if c not in values]
    if absent:
        fail(absent[0], f"a {kind} row needs `{absent[0]}`")
        return None
    if "seconds" not in values and "rate" not in values:
        fail("seconds", "a row needs `seconds` (median per call) or `rate`")
        return None
    shape = {c: int(values[c]) for c in SHAPES[kind] if c != "bytes"}
    point = KernelPoint(kind, row["precision"] or "bf16", **shape, causal=row["causal"].lower() not in ("0", "false", "no"),
                        nbytes=int(values.get("bytes", 0)), seconds=1.0, span=line_span(source, line))
    seconds = values.get("seconds") or point.work / values["rate"]
    if "seconds" in values and "rate" in values and abs(point.work / seconds / values["rate"] - 1) > AGREE:
        fail("rate", f"rate {row['rate']} disagrees with the shape's work over `seconds` "
                     f"({number_text(point.work / seconds)} per s)", "check the seconds' unit (a median per call, in seconds)")
        return None
    return attrs.evolve(point, seconds=seconds)


def _column_start(text: str, index: int) -> int:
    """Where cell `index` of a CSV line starts (commas counted plainly: enough to point)."""
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == ","]
    return starts[min(index, len(starts) - 1)]
