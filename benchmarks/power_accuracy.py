"""Power as measured: gclc's draw of a node with its GPUs at a known power against published
measurements of the same kind of node at the wall, cross-validated by leaving each source out.

    .venv/bin/python benchmarks/power_accuracy.py

The rows are benchmarks/data/power_measured.csv, each with its source: the highest draw seen
at a node's input (AC, at the wall) while its GPUs ran at a known limit (700 W while training,
450 W under an MLPerf MaxQ power limit), and the node idle. gclc's figure is the IT load of one
such node (`gclc explain`'s `power.it` for a cluster of one node and no scale-out fabric) with
its accelerators drawing that limit, its host parts at the load that puts on them
(compiler/host_load.py).

One constant is fitted: the share of a node's `overhead` (fans, boards, conversion losses)
drawn at full load, `host_load.OVERHEAD_BUSY`, by least squares on the relative error over the
loaded rows. The figure to quote is leave-one-source-out: for each source, the constant is
refitted on the other sources' rows and that source's rows are predicted with it. The idle
rows set the idle floor (`OVERHEAD_IDLE`), so they are printed as a check, in sample, and
are no part of the error. The MLPerf Inference v4.0/v4.1 and Training v4.0 power results are
kept out as the independent check.

The last line states what was measured in this run.
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "power_measured.csv"
DESIGN = 'import "std/nvidia"\ncluster One {{\n  units = 1 x {node}\n}}\n'


def rows() -> list[dict]:
    with DATA.open(newline="") as f:
        return list(csv.DictReader(f))


def _graph(node: str):
    from gclc.compiler.driver import check_text
    from gclc.compiler.lower import lower

    result = check_text(DESIGN.format(node=node), path=f"<{node}>")
    if result.design is None or not result.ok:
        raise SystemExit(f"{node}: the one-node design does not check: {result.diagnostics}")
    return lower(result.design)


def terms(row: dict) -> tuple[float, float]:
    """gclc's IT load of the row's node as A + B x C, B the overhead's busy share (W, W)."""
    from gclc.compiler import host_load
    from gclc.compiler.metrics import power_breakdown

    graph = _graph(row["node"])
    part = graph.partitions[0]
    chip = part.node.accelerator
    gpu_w = chip.idle if row["gpu_w"] == "idle" else float(row["gpu_w"])
    it = {m.key: m.value for m in power_breakdown(graph, {part.name: gpu_w})}
    load = host_load.heat_load(chip.idle, chip.full_clock or chip.tdp, gpu_w)
    rated = part.nodes * part.node.overhead
    c = rated * load
    a = it["power.it"] - it.get("power.node_overhead", 0.0) + rated * host_load.OVERHEAD_IDLE * (1 - load)
    return a, c


def fit(points: list[tuple[float, float, float]]) -> float:
    """The busy share that minimises the squared relative error over (A, C, measured)."""
    num = sum(c / m * (1 - a / m) for a, c, m in points)
    den = sum((c / m) ** 2 for a, c, m in points)
    return num / den if den > 0 else 0.0


def signed(share: float) -> str:
    from gclc.dsl.numbers import percent
    return ("+" if share >= 0 else "") + percent(share)


def main(argv: list[str] | None = None) -> int:
    from gclc.compiler import host_load
    from gclc.dsl.numbers import quantity

    wall, cpu = time.perf_counter(), time.process_time()
    table = [(row, *terms(row), float(row["measured_w"])) for row in rows()]
    loaded = [t for t in table if t[0]["kind"] != "idle"]
    shipped = fit([t[1:] for t in loaded])
    sources = sorted({t[0]["source_group"] for t in loaded})
    print(f"{'row':<52} {'GPUs at':>8} {'measured':>9} {'gclc':>9} {'error':>7} {'left out':>9}")
    errors = []
    for source in sources:
        share = fit([t[1:] for t in loaded if t[0]["source_group"] != source])
        for row, a, c, m in (t for t in loaded if t[0]["source_group"] == source):
            predicted = a + host_load.OVERHEAD_BUSY * c       # as gclc ships it
            errors.append((a + share * c) / m - 1)
            print(f"{row['id']:<52} {row['gpu_w'] + ' W':>8} {quantity(m, 'W'):>9} {quantity(predicted, 'W'):>9} "
                  f"{signed(predicted / m - 1):>7} {signed(errors[-1]):>9}  busy share {share:.3f} without {source}")
    for row, a, c, m in (t for t in table if t[0]["kind"] == "idle"):
        predicted = a + host_load.OVERHEAD_BUSY * c
        print(f"{row['id']:<52} {'idle':>8} {quantity(m, 'W'):>9} {quantity(predicted, 'W'):>9} "
              f"{signed(predicted / m - 1):>7} {'in sample':>9}  (sets the idle floor)")
    print(f"sources: {'; '.join(sorted({t[0]['source'].split(' (')[0] for t in table}))}")
    in_sample = [(a + shipped * c) / m - 1 for _, a, c, m in loaded]
    print(f"busy share fitted on every source: {shipped:.3f} (compiler/host_load.py ships "
          f"{host_load.OVERHEAD_BUSY:.3f}); in sample median |error| {statistics.median(abs(e) for e in in_sample):.1%}")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"power accuracy: {len(errors)} loaded node measurements from {len(sources)} sources, leave-one-source-out "
          f"median |error| {statistics.median(abs(e) for e in errors):.1%}, worst {max(errors, key=abs):+.1%} "
          f"(one constant fitted); {cpu:.2f} s CPU / {wall:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
