"""Compile time and IR size from 1k to 1M GPUs (goal: <= 1 s at 1M GPUs on one core,
IR size independent of the GPU count). Prints one row per size.

    .venv/bin/python benchmarks/compile_scale.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from gclc.compiler.driver import check_file
from gclc.compiler.ir_json import graph_json, value_count
from gclc.compiler.lower import lower
from gclc.compiler.metrics import explain
from gclc.compiler.topology import fat_tree_capacity

DESIGN = Path(__file__).resolve().parent.parent / "tests" / "data" / "nvl72.gcl"
SIZES = (1_008, 10_080, 100_008, 1_000_008)  # multiples of 72 GPUs


def main() -> None:
    print(f"{'GPUs':>10} {'check+lower+explain':>20} {'IR values':>10} {'IR bytes':>9}")
    for gpus in SIZES:
        racks = gpus // 72
        start = time.perf_counter()
        tiers = next(t for t in range(1, 6) if fat_tree_capacity(144, t) >= gpus)
        result = check_file(str(DESIGN), {"racks": str(racks), "tiers": str(tiers)})
        assert result.design is not None, [d.summary for d in result.diagnostics]
        graph = lower(result.design)
        explain(graph)
        text = graph_json(graph)
        elapsed = time.perf_counter() - start
        print(f"{graph.gpus:>10,} {elapsed:>19.3f}s {value_count(json.loads(text)):>10} {len(text):>9}")


if __name__ == "__main__":
    main()
