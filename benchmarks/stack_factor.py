"""The `stack` band factor (model/calibration.py FACTORS), measured the way its comment says: no
published run leaves its software stack unstated, so the runs whose stack is not the default are
predicted with the default stack, and the factor is the ratio of the median |log error| to their
median |log error| with their own stack (shipped model, in sample: what is measured is how much
wider a wrong stack makes the error, not the error).

    .venv/bin/python benchmarks/stack_factor.py [--runs DIR] [--csv MEASURED_CSV]

With the default stack comes its whole behaviour row (model/config.py STACKS): the fields a stack
decides (the TP, DP and MoE all-to-all overlaps, the loss, the gradient reduction's dtype, dropout)
move with it, as they did when the factor was first measured (2026-12-01, before a run could state
any of them). The factor therefore holds the doubt of those fields, and model/train/guessed.py does
not weigh the overlaps again for a design whose stack is unstated (STACK_FIELDS). The second figure
holds the overlaps at the run's own, to show what share of the factor they are. The last line is a
one-line summary.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package
sys.path.insert(0, str(HERE))

from accuracy import DEFAULT_MEASURED, DEFAULT_RUNS  # noqa: E402

# The TrainConfig fields whose None means "the stack's behaviour" (model/config.py `behaviour`)
STACK_DECIDED = ("tp_overlap", "dp_overlap", "ep_overlap", "loss", "grad_reduce", "dropout")
OVERLAPS = ("tp", "dp", "ep")


def log_error(case, cfg) -> float:
    from gclc.model.train.step import estimate

    return abs(math.log(estimate(case.job.shape, cfg, case.job.partition).tokens_per_s_per_gpu / case.measured))


def measure(cases, default: str) -> dict:
    """Median |log error| of the non-default-stack runs: own stack, default stack with its row, and
    default stack with the run's own overlaps."""
    own, moved, held = [], [], []
    for case in cases:
        if case.cfg.stack == default:
            continue
        row = attrs.evolve(case.cfg, stack=default, **dict.fromkeys(STACK_DECIDED))
        own.append(log_error(case, case.cfg))
        moved.append(log_error(case, row))
        kept = {f"{d}_overlap": bool(getattr(case.cfg, f"overlaps_{d}")) for d in OVERLAPS}
        held.append(log_error(case, attrs.evolve(row, **kept)))
    m = [statistics.median(x) for x in (own, moved, held)]
    return dict(n=len(own), own=m[0], moved=m[1], held=m[2], factor=m[1] / m[0], without_overlaps=m[2] / m[0])


def main(argv: list[str] | None = None) -> int:
    import calibrate
    from gclc.compiler.schema import DEFAULT_STACK

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(DEFAULT_RUNS))
    parser.add_argument("--csv", default=str(DEFAULT_MEASURED))
    args = parser.parse_args(argv)
    r = measure(calibrate.load(Path(args.runs), Path(args.csv)), DEFAULT_STACK)
    print(f"{r['n']} runs not on {DEFAULT_STACK}: median |log error| {r['own']:.4f} with their own stack, "
          f"{r['moved']:.4f} with {DEFAULT_STACK}'s behaviour row, {r['held']:.4f} with it but their own overlaps")
    print(f"stack factor: x{r['factor']:.2f} (x{r['without_overlaps']:.2f} without the overlaps' share)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
