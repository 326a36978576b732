"""Power as measured: gclc's full-load draw of a node against published measurements of the
same kind of node while it trains with its GPUs near full use.

    .venv/bin/python benchmarks/power_accuracy.py

The rows are benchmarks/data/power_measured.csv, each with its source: the highest draw a
paper measured at a node's input (AC, at the wall) while it trained. gclc's figure is the IT
load of one such node at full load (`gclc explain`'s `power.it` for a cluster of one node and
no scale-out fabric: GPUs at their full-clock draw, the host parts and the node overhead at
their ratings). Nothing is fitted: the error is the model's as it stands (issue 28 part 6,
"power as measured", is open: host parts do not yet draw by load), so there is nothing to
cross-validate yet. The rows come from one group's H100 measurements; the MLPerf Inference
v4.0/v4.1 and Training v4.0 power results are kept out as the independent check.

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


def full_load_w(node: str) -> float:
    """gclc's IT load of one `node` at full load (W)."""
    from gclc.compiler.driver import check_text
    from gclc.compiler.lower import lower
    from gclc.compiler.metrics import power_breakdown

    result = check_text(DESIGN.format(node=node), path=f"<{node}>")
    if result.design is None or not result.ok:
        raise SystemExit(f"{node}: the one-node design does not check: {result.diagnostics}")
    return next(m.value for m in power_breakdown(lower(result.design)) if m.key == "power.it")


def signed(share: float) -> str:
    from gclc.dsl.numbers import percent
    return ("+" if share >= 0 else "") + percent(share)


def main(argv: list[str] | None = None) -> int:
    from gclc.dsl.numbers import quantity

    wall, cpu = time.perf_counter(), time.process_time()
    errors = []
    print(f"{'row':<40} {'node':<10} {'measured':>10} {'gclc':>10} {'error':>8}")
    for row in rows():
        measured, predicted = float(row["measured_w"]), full_load_w(row["node"])
        error = predicted / measured - 1
        errors.append(error)
        print(f"{row['id']:<40} {row['node']:<10} {quantity(measured, 'W'):>10} {quantity(predicted, 'W'):>10} "
              f"{signed(error):>8}")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    median = statistics.median(errors)
    print(f"power accuracy: {len(errors)} measured nodes, gclc's full-load draw median {signed(median)} "
          f"off the measured peak (none fitted, nothing cross-validated); {cpu:.2f} s CPU / {wall:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
