"""A probe's kernel CSV against the std chip's efficiencies: what each kernel row implies for
the chip's training efficiency (its rate at the model's shape law, times the training share
of a kernel, solver/calibrate/observe.py TRAINING_SHARE) beside what dsl/std/ states.

    .venv/bin/python benchmarks/probe_compare.py [KERNEL_CSV] [--design DESIGN]

Default: the published MAMF row of an H100 SXM (tests/data/measurements/kernels/h100_mamf.csv)
on the DGX H100 pod of tests/data/calibrate/h100_pod.gcl. After a GPU session runs
benchmarks/probe_gpu.sh, give it the probe's CSV. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from gclc.compiler.driver import check_file  # noqa: E402
from gclc.compiler.measure.read import read_paths  # noqa: E402
from gclc.compiler.measure.records import KernelRun  # noqa: E402
from gclc.solver.calibrate.calibrate import calibrate  # noqa: E402

ROOT = HERE.parent
DEFAULT_CSV = ROOT / "tests" / "data" / "measurements" / "kernels" / "h100_mamf.csv"
DEFAULT_DESIGN = ROOT / "tests" / "data" / "calibrate" / "h100_pod.gcl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="?", default=str(DEFAULT_CSV))
    parser.add_argument("--design", default=str(DEFAULT_DESIGN))
    args = parser.parse_args(argv)
    wall, cpu = time.perf_counter(), time.process_time()
    design = check_file(args.design).design
    found, problems, _ = read_paths([args.csv])
    if problems:
        print("\n".join(f"{p.subject}: {p.summary}" for p in problems), file=sys.stderr)
        return 1
    kernels = [m for m in found if isinstance(m, KernelRun)]
    machine = kernels[0].about("gpu") if kernels else "?"
    result = calibrate(design, kernels)
    print(f"{args.csv}: {machine}")
    for row in result.rows:
        print(f"  {row.obs.what:<44} measured {row.obs.measured * 1e3:9.4f} ms   model at the std value "
              f"{math.exp(row.before) - 1:+7.1%}   after {math.exp(row.after) - 1:+7.1%}")
    gaps = []
    for param, value, _ in result.moved():
        gaps.append(value / param.prior - 1)
        print(f"  {param.label:<32} std {param.prior:7.2%}   implied by the probe {value:7.2%}   "
              f"({value / param.prior - 1:+.1%})")
    worst = max(gaps, key=abs) if gaps else 0.0
    print(f"probe vs std: {machine}, {len(result.rows)} kernel rows, {len(gaps)} efficiencies, largest gap "
          f"{worst:+.1%} | wall {time.perf_counter() - wall:.2f} s, CPU {time.process_time() - cpu:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
