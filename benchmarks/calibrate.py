"""Fit the model's physics to the published runs: per-chip sustained efficiencies (bf16 and
fp8 GEMMs, fused attention) and the global MoE host overhead. Prints the fitted values and
the accuracy they give; the values are then written, with this provenance, into the
chips' `efficiency { ... }` blocks in dsl/std/ and into compiler/model/step.py.

    .venv/bin/python benchmarks/calibrate.py [--runs DIR] [--csv MEASURED_CSV]

Only physics is fitted — one number per chip and precision, one global number — never a
per-run constant. The objective is the sum of Huber losses of log(predicted / measured),
so that a few runs the model cannot express well do not drag the fit.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from gclc.compiler.driver import check_file  # noqa: E402
from gclc.model import step as step_module  # noqa: E402
from gclc.model.job import pinned_config, train_job  # noqa: E402
from gclc.model.step import estimate  # noqa: E402

# Physical ranges searched: a sustained GEMM runs at 40-95 % of the dense peak; fused
# attention (forward + backward) at 20-80 % of the bf16 peak; the MoE overhead 0-20 ms.
GRIDS = {
    "bf16": [round(0.40 + 0.01 * i, 2) for i in range(56)],
    "fp8": [round(0.40 + 0.01 * i, 2) for i in range(56)],
    "attention": [round(0.20 + 0.01 * i, 2) for i in range(61)],
    "moe": [i * 5e-4 for i in range(0, 41)],
    "contention": [round(0.05 * i, 2) for i in range(17)],
}
MIN_RUNS = 4   # a chip's parameter is fitted only on at least this many runs
HUBER = 0.15                                             # |log error| beyond which loss grows linearly


def load(runs: Path, measured_csv: Path) -> list[tuple]:
    measured = {r["run_id"]: r for r in csv.DictReader(open(measured_csv, encoding="utf-8"))}
    cases = []
    for path in sorted(runs.glob("*.gcl")):
        row = measured.get(path.stem)
        value = row and row.get("meas_tokens_per_s_per_gpu")
        if not value or row.get("kind") != "steady_state":
            continue
        result = check_file(str(path))
        if result.design is None:
            continue
        job = train_job(result.design)
        cases.append((path.stem, job, pinned_config(job), float(value)))
    return cases


def loss(x: float) -> float:
    a = abs(x)
    return a * a if a <= HUBER else HUBER * (2 * a - HUBER)


def predict(job, cfg, params: dict) -> float:
    chip = job.partition.node.accelerator
    declared = dict(chip.efficiency)
    declared.update({k: v for (name, k), v in params.items() if name == chip.name})
    faster = attrs.evolve(chip, efficiency=tuple(sorted(declared.items())))
    partition = attrs.evolve(job.partition, node=attrs.evolve(job.partition.node, accelerator=faster))
    return estimate(job.shape, cfg, partition).tokens_per_s_per_gpu


def errors(cases, params: dict) -> list[float]:
    step_module.MOE_LAYER_OVERHEAD_S = params.get(("", "moe"), step_module.MOE_LAYER_OVERHEAD_S)
    step_module.GATHER_CONTENTION = params.get(("", "contention"), step_module.GATHER_CONTENTION)
    step_module.clear_caches()
    return [math.log(predict(job, cfg, params) / value) for _, job, cfg, value in cases]


def total(cases, params) -> float:
    return sum(loss(e) for e in errors(cases, params))


def relevant(cases, key) -> list:
    name, what = key
    if what == "contention":
        return [c for c in cases if c[2].zero >= 3]
    if not name:
        return [c for c in cases if c[1].shape.is_moe]
    chip_cases = [c for c in cases if c[1].partition.node.accelerator.name == name]
    if what in ("bf16", "fp8"):
        return [c for c in chip_cases if (c[2].precision == "fp8") == (what == "fp8")]
    return chip_cases


def fit(cases, rounds: int = 3) -> dict:
    chips = sorted({c[1].partition.node.accelerator.name for c in cases})
    keys = [("", "moe"), ("", "contention")] + [(chip, what) for chip in chips for what in ("bf16", "fp8", "attention")]
    params: dict = {}
    for _ in range(rounds):
        for key in keys:
            subset = relevant(cases, key)
            if len(subset) < MIN_RUNS:
                continue
            params[key] = min(GRIDS[key[1]], key=lambda v: total(subset, {**params, key: v}))
    return params


def describe(cases, params) -> str:
    errs = errors(cases, params)
    absolute = sorted(abs(math.exp(e) - 1) for e in errs)
    p90 = absolute[int(0.9 * (len(absolute) - 1))]
    ratios = sorted(math.exp(-e) for e in errs)  # measured / predicted: the error band
    band = (ratios[int(0.1 * (len(ratios) - 1))], ratios[int(0.9 * (len(ratios) - 1))])
    lines = [f"{len(cases)} runs: median |error| {statistics.median(absolute):.1%}, p90 {p90:.1%}, "
             f"max {absolute[-1]:.1%}; measured/predicted 10th-90th percentile {band[0]:.2f}-{band[1]:.2f} "
             "(compiler/model/calibration.py)"]
    for (chip, what), value in sorted(params.items()):
        n = len(relevant(cases, (chip, what)))
        label = {"moe": "MoE layer overhead (s)", "contention": "ZeRO-3 gather contention"}.get(what, f"{chip} {what}")
        lines.append(f"  {label:32} {value:.3f}   ({n} runs)")
    return "\n".join(lines)


def by_group(cases, params) -> str:
    groups: dict[str, list[float]] = {}
    for (run_id, *_), e in zip(cases, errors(cases, params)):
        groups.setdefault(run_id.rsplit("_", 1)[0], []).append(math.exp(e) - 1)
    return "\n".join(f"  {g:24} n={len(v):3}  median |err| {statistics.median(abs(x) for x in v):6.1%}  "
                     f"bias {statistics.mean(v):+6.1%}" for g, v in sorted(groups.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(HERE / "runs"))
    parser.add_argument("--csv", default=str(HERE / "data" / "public_runs_measured.csv"))
    args = parser.parse_args(argv)
    cases = load(Path(args.runs), Path(args.csv))
    print("before:", describe(cases, {}))
    params = fit(cases)
    print("fitted:", describe(cases, params))
    print(by_group(cases, params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
