"""Power as measured: gclc's draw of a node with its GPUs at a known power against published
measurements of the same kind of node at the wall, cross-validated by leaving each source out.

    .venv/bin/python benchmarks/power_accuracy.py

The rows are benchmarks/data/power_measured.csv, each with its source: the highest draw seen
at a node's input (AC, at the wall) while its GPUs ran at a known limit (700 W while training,
450 W under an MLPerf MaxQ power limit), and the node idle. gclc's figure is the IT load of one
such node (`gclc explain`'s `power.it` for a cluster of one node and no scale-out fabric) with
its accelerators drawing that limit, its host parts at the load that puts on them
(compiler/host_load.py).

A second set is whole serving runs (benchmarks/power_serving.py: MLPerf Inference v5.1 power
results of 8 x B200 nodes serving Llama 2 70B, Llama 3.1 405B and 8B, Offline and Server):
gclc predicts the node's power and its energy per output token from the run's model and
configuration alone, the GPUs' draw from what the replica's kernels keep busy. Those rows are
never fitted on, so their errors are out of sample as they stand.

One constant is fitted: the share of a node's `overhead` (fans, boards, conversion losses)
drawn at full load, `host_load.OVERHEAD_BUSY`, by least squares on the relative error over the
loaded rows. The figure to quote is leave-one-source-out: for each source, the constant is
refitted on the other sources' rows and that source's rows are predicted with it. The idle
rows set the idle floor (`OVERHEAD_IDLE`), so they are printed as a check, in sample, and
are no part of the error. The MLPerf Inference v4.0/v4.1 and Training v4.0 power results are
kept out as the independent check.

The band is the 80th percentile of the cross-validated |error| (nearest rank): the interval
that held four rows in five here, stated with the share it covers.

The last line states what was measured in this run.
"""

from __future__ import annotations

import csv
import functools
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))          # power_serving and serve_mlperf beside this file
DATA = HERE / "data" / "power_measured.csv"
IDLE_FLOOR_SOURCE = "mlperf-inference-v3.1-nvidia"   # the idle rows compiler/host_load.py's OVERHEAD_IDLE comes from
DESIGN = 'import "std/nvidia"\ncluster One {{\n  units = 1 x {node}\n}}\n'


def rows() -> list[dict]:
    with DATA.open(newline="") as f:
        return list(csv.DictReader(f))


@functools.lru_cache(maxsize=None)
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


def band(errors: list[float]) -> float:
    """The 80th percentile of |error|, nearest rank."""
    ranked = sorted(abs(e) for e in errors)
    return ranked[max(0, -(-8 * len(ranked) // 10) - 1)]


def serving(share: float) -> tuple[list[float], list[float]]:
    """Print the serving runs against gclc at busy share `share`; (power errors, J/token errors)."""
    import power_serving
    from gclc.dsl.numbers import quantity

    print(f"\n{'serving run':<52} {'W/GPU':>6} {'measured':>9} {'gclc':>9} {'error':>7}  "
          f"{'tokens/s':>9} {'gclc':>9}  {'J/token':>8} {'gclc':>8} {'error':>7}")
    power, energy = [], []
    for row in power_serving.rows():
        per_gpu, tokens = power_serving.gpu_watts_and_tokens(row)
        a, c = terms({"node": row["node"], "gpu_w": str(per_gpu)})
        watts, measured, measured_tokens = a + share * c, float(row["measured_w"]), float(row["tokens_per_s"])
        power.append(watts / measured - 1)
        energy.append((watts / tokens) / (measured / measured_tokens) - 1)
        print(f"{row['id']:<52} {per_gpu:>6.0f} {quantity(measured, 'W'):>9} {quantity(watts, 'W'):>9} "
              f"{signed(power[-1]):>7}  {measured_tokens:>9.0f} {tokens:>9.0f}  {measured / measured_tokens:>8.4f} "
              f"{watts / tokens:>8.4f} {signed(energy[-1]):>7}")
    return power, energy


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
        floor = row["source_group"] == IDLE_FLOOR_SOURCE
        print(f"{row['id']:<52} {'idle':>8} {quantity(m, 'W'):>9} {quantity(predicted, 'W'):>9} "
              f"{signed(predicted / m - 1):>7} {'in sample' if floor else 'check':>9}  "
              f"{'(sets the idle floor)' if floor else '(the idle floor on another node, not fitted)'}")
    print(f"sources: {'; '.join(sorted({t[0]['source'].split(' (')[0] for t in table}))}")
    in_sample = [(a + shipped * c) / m - 1 for _, a, c, m in loaded]
    print(f"busy share fitted on every source: {shipped:.3f} (compiler/host_load.py ships "
          f"{host_load.OVERHEAD_BUSY:.3f}); in sample median |error| {statistics.median(abs(e) for e in in_sample):.1%}")
    served, energy = serving(shipped)         # never fitted on: out of sample at the fit on every node source
    power = errors + served
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"system power: {len(errors)} node rows leave-one-source-out median |error| "
          f"{statistics.median(abs(e) for e in errors):.1%}; {len(served)} serving runs (never fitted) median "
          f"{statistics.median(abs(e) for e in served):.1%}, worst {max(served, key=abs):+.1%}")
    print(f"power accuracy: {len(power)} loaded measurements from {len(sources) + 1} sources, cross-validated "
          f"(leave-one-source-out, one constant fitted; serving runs never fitted): system power median |error| "
          f"{statistics.median(abs(e) for e in power):.1%}, band ±{band(power):.1%} holds 80%; energy per token "
          f"({len(energy)} runs) median |error| {statistics.median(abs(e) for e in energy):.1%}, band "
          f"±{band(energy):.1%} holds 80%, worst {max(energy, key=abs):+.1%}; {cpu:.2f} s CPU / {wall:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
