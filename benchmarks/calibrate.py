"""Fit the model's physics to the published runs: per-chip sustained efficiencies (GEMMs
per precision, fused attention) and the ZeRO-3 gather contention (routing, grouped GEMMs,
all-to-all and the MoE layer's host time are physics without a fitted constant:
model/train/moe.py). Prints the fitted values and the accuracy they give; the values are then
written, with this provenance, into the chips' `efficiency { ... }` blocks in dsl/std/
and into model/train/step.py.

    .venv/bin/python benchmarks/calibrate.py [--runs DIR] [--csv MEASURED_CSV]

Only physics is fitted — one number per chip and precision, a few global numbers —
never a per-run or per-group constant. The objective is the sum of Huber losses of
log(predicted / measured), so that a few runs the model cannot express well do not drag
the fit. The fit ignores the efficiencies written in dsl/std/ (they are its own earlier
output): a (chip, key) with too few runs takes the value of the same silicon's sibling
part, else the median of the fitted chips (compute.py's default rule), so that
benchmarks/crossval.py can refit without any group's runs and predict that group honestly.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from gclc.compiler.formats import family, generation as chip_generation
from gclc.model import compute as compute_module
from gclc.model.train import step as step_module
from gclc.model.train import dp_sync
from gclc.model.calibration import SAME_SILICON
from gclc.model.train.step import estimate

# Physical ranges searched: a sustained GEMM runs at 30-95 % of the dense peak; fused
# attention (forward + backward) at 15-80 % of the bf16 peak.
GRIDS = {
    "gemm": [round(0.30 + 0.005 * i, 3) for i in range(131)],
    "attention": [round(0.15 + 0.005 * i, 3) for i in range(131)],
    "contention": [round(0.05 * i, 2) for i in range(17)],
    # the share of the attention kernels' rate reached inside training (model/compute.py)
    "attention_share": [round(0.20 + 0.01 * i, 2) for i in range(101)],
    # the hosts' fixed time per step (`node { step_overhead }`, model/train/step.py), seconds: none, or
    # 1 ms to about 1 s in steps of 10 % (the range solver/calibrate/step_overhead.py fits in)
    "step_overhead": [0.0] + [round(0.001 * 1.1 ** i, 6) for i in range(73)],
}
MIN_RUNS = 4   # a chip's parameter is fitted only on at least this many runs
# The hosts' fixed time per step (the loss and grad-norm reads that drain the GPU's queue, the
# optimizer's and data loader's Python, the next step's first launches: model/train/step.py
# `_with_host`) as one global of the published fit, for every run whose design states none.
# ASSUMPTION: the published stacks (Megatron-LM, NeMo, llm-foundry, torchtitan, MaxText) spend about
# the same host time between steps, so that the runs of short steps read it for all; it is what
# an operator's calibration starts from (solver/calibrate/step_overhead.py takes the node's value as
# its prior) instead of the 20 ms that module assumes. Tried 2026-12-07 and left off (docs/calibration.md
# "A per-step host time read from the published runs"): fitted on all 196 runs 55 ms, in-sample median
# 4.6 %, cross-validated (accuracy.py) 5.6 -> 5.2 %; calibrate_own.py --splits all: uncalibrated
# 5.5 -> 5.0 % (mean of the three splits), calibrated 4.3 -> 4.6 %, band 79 -> 78 %.
STEP_OVERHEAD = False
HUBER = 0.15   # |log error| beyond which the loss grows linearly
# The efficiency keys the fit owns; any other key a chip declares (hbm) is a measured fact.
FITTED_KEYS = ("bf16", "fp16", "fp8", "fp4", "attention")
GLOBALS = ("contention", "attention_share")
# The attention kernels' in-training share per tensor-core generation (model/compute.py
# ATTENTION_KERNELS) instead of one global share: each generation with MIN_RUNS runs fits its
# own (the global share otherwise; model/compute.py ATTENTION_TRAINING_SHARES ships the fit on all
# runs). Why: the generations' kernel rates are not measured alike (Blackwell's backward is an
# ASSUMPTION), so the share is where that difference lands. Measured 2026-12-06 and left off then
# (B200's band 65 -> 59 %); turned on 2026-12-07 after the llm-foundry rows' fp32 gradient reduction
# and eager elementwise chains, measured on one tree: accuracy.py cross-validated median 6.03 ->
# 5.61 %, p90 14.63 -> 14.48 %, band 79.1 -> 80.1 %, every condition of 8+ runs at least 70 %
# (B200 76 %, H100 73 -> 79 %, GB300 100 -> 70 %). A share per chip did worse (2026-12-06:
# accuracy.py p90 15.9 %, B200's band 53 %; calibrate_own.py 4.5 %).
PER_GENERATION_SHARE = True


@dataclass(frozen=True)
class Case:
    """One measured run, checked and lowered once."""

    run_id: str
    group: str
    job: object          # model.job.Job
    cfg: object          # model.config.TrainConfig
    measured: float      # tokens/s per accelerator

    @property
    def chip(self) -> str:
        return self.job.partition.node.accelerator.name

    @property
    def gemm_key(self) -> str:
        return gemm_key(self.cfg.precision)

    @property
    def generation(self) -> str | None:
        """Its chip's tensor-core generation (compiler/formats.py), whose attention kernels it runs where
        `kernels` (model/compute.py ATTENTION_KERNELS)."""
        return chip_generation(self.job.partition.node.accelerator)

    @property
    def kernels(self) -> bool:
        """Whether its chip's attention comes from kernel data (model/compute.py ATTENTION_KERNELS)."""
        return compute_module.kernel_efficiency(self.job.partition.node.accelerator) is not None


def gemm_key(precision: str) -> str:
    """The efficiency a precision's GEMMs run at: its family's (`fp8_e4m3` and `mxfp8` are fp8,
    the chips' efficiencies are kept by family: compiler/ir.py `efficiency_of`), fp16 at bf16's."""
    fam = family(precision)
    return "bf16" if fam == "fp16" else fam


def load(runs: Path, measured_csv: Path, keep=lambda run_id: True) -> list[Case]:
    """The steady-state runs of `runs` with a measurement (those whose id `keep` accepts)."""
    from gclc.compiler.driver import check_file
    from gclc.model.job import pinned_config, train_job

    measured = {r["run_id"]: r for r in csv.DictReader(open(measured_csv, encoding="utf-8"))}
    cases = []
    for path in sorted(runs.glob("*.gcl")):
        if not keep(path.stem):
            continue
        row = measured.get(path.stem)
        value = row and row.get("meas_tokens_per_s_per_gpu")
        if not value or row.get("kind") != "steady_state":
            continue
        result = check_file(str(path))
        if result.design is None:
            continue
        job = train_job(result.design)
        note_chip(job.partition.node.accelerator)
        cases.append(Case(path.stem, row.get("group", ""), job, pinned_config(job), float(value)))
    return cases


def loss(x: float) -> float:
    a = abs(x)
    return a * a if a <= HUBER else HUBER * (2 * a - HUBER)


# ---------------------------------------------------------------- parameters -> model


def resolved(chip: str, key: str, params: dict) -> tuple[float | None, str]:
    """The efficiency the calibration gives (chip, key) and where it comes from: fitted on
    the chip's runs, from its same-silicon sibling, the median of the same vendor's fitted
    chips, or None (the model's default)."""
    if (chip, key) in params:
        return params[(chip, key)], "fitted"
    sibling = SAME_SILICON.get(chip)
    if sibling and (sibling, key) in params:
        return params[(sibling, key)], "sibling"
    vendor = VENDOR.get(chip)
    family = [v for (other, k), v in params.items() if k == key and other and VENDOR.get(other) == vendor]
    if vendor and family:
        return statistics.median(family), "vendor"
    return None, "default"


# chip -> vendor of every chip a case runs on (filled as cases are evaluated)
VENDOR: dict[str, str] = {}


def note_chip(chip) -> None:
    VENDOR[chip.name] = chip.vendor


# Where every fit starts, and what an unfitted global takes: the middle of each searched
# range, not the shipped constants (those came from a fit on all runs, held-out ones too).
START = {what: grid[len(grid) // 2] for what, grid in GRIDS.items()}


def defaults(params: dict) -> dict[str, float]:
    """The model's fallback for chips without a calibrated value: the median of the fitted
    chips (GEMMs of every precision together, attention apart)."""
    gemm = [v for (chip, k), v in params.items() if chip and k not in ("attention", "attention_share")]
    attention = [v for (chip, k), v in params.items() if chip and k == "attention"]
    return {"gemm": statistics.median(gemm) if gemm else START["gemm"],
            "attention": statistics.median(attention) if attention else START["attention"]}


# The model's constants as shipped, to put back after fitting in this process (tests).
_SHIPPED = {(dp_sync, "GATHER_CONTENTION"): dp_sync.GATHER_CONTENTION,
            (compute_module, "VENDOR_DEFAULTS"): compute_module.VENDOR_DEFAULTS,
            (compute_module, "DEFAULT_GEMM_EFFICIENCY"): compute_module.DEFAULT_GEMM_EFFICIENCY,
            (compute_module, "DEFAULT_ATTENTION_EFFICIENCY"): compute_module.DEFAULT_ATTENTION_EFFICIENCY,
            (compute_module, "ATTENTION_TRAINING_SHARE"): compute_module.ATTENTION_TRAINING_SHARE,
            (compute_module, "ATTENTION_TRAINING_SHARES"): compute_module.ATTENTION_TRAINING_SHARES}


def restore_shipped() -> None:
    """Undo apply_globals: the model's constants as shipped, caches emptied."""
    for (module, name), value in _SHIPPED.items():
        setattr(module, name, value)
    step_module.clear_caches()


def apply_globals(params: dict) -> None:
    """Set the global constants the model reads (module attributes) to `params`' values."""
    dp_sync.GATHER_CONTENTION = params.get(("", "contention"), START["contention"])
    compute_module.ATTENTION_TRAINING_SHARE = params.get(("", "attention_share"), START["attention_share"])
    # the fold's own per-generation shares, never the shipped ones (fitted on every group)
    compute_module.ATTENTION_TRAINING_SHARES = {name: v for (name, key), v in params.items()
                                                if key == "attention_share" and name and PER_GENERATION_SHARE}
    fallback = defaults(params)
    compute_module.VENDOR_DEFAULTS = {}   # the fit resolves vendor medians itself (resolved)
    compute_module.DEFAULT_GEMM_EFFICIENCY = fallback["gemm"]
    compute_module.DEFAULT_ATTENTION_EFFICIENCY = fallback["attention"]
    step_module.clear_caches()


def calibrated_partition(case: Case, params: dict):
    """The case's partition with the chip's fitted efficiencies replaced by `params`', and the
    node's per-step host time the fitted global where the design states none."""
    chip = case.job.partition.node.accelerator
    note_chip(chip)
    kept = {k: v for k, v in chip.efficiency if k not in FITTED_KEYS}
    for key in FITTED_KEYS:
        kernels = compute_module.kernel_efficiency(chip)
        if key == "attention" and kernels is not None:
            # its generation's kernels times that generation's fitted in-training share where
            # its runs fit one (PER_GENERATION_SHARE), else the global share (model/compute.py)
            share = params.get((chip_generation(chip), "attention_share"))
            if share is not None and PER_GENERATION_SHARE:
                kept[key] = kernels * share
            continue
        value, _ = resolved(chip.name, gemm_key(key) if key != "attention" else key, params)
        if value is not None:
            kept[key] = value
    faster = attrs.evolve(chip, efficiency=tuple(sorted(kept.items())))
    node = attrs.evolve(case.job.partition.node, accelerator=faster)
    if not node.step_overhead and ("", "step_overhead") in params:   # the design's stated value stands
        node = attrs.evolve(node, step_overhead=params[("", "step_overhead")])
    return attrs.evolve(case.job.partition, node=node)


def predict(case: Case, params: dict) -> float:
    """Tokens/s per accelerator with `params` (apply_globals(params) first)."""
    return estimate(case.job.shape, case.cfg, calibrated_partition(case, params)).tokens_per_s_per_gpu


def errors(cases, params: dict) -> list[float]:
    apply_globals(params)
    return [math.log(predict(c, params) / c.measured) for c in cases]


def total(cases, params) -> float:
    return sum(loss(e) for e in errors(cases, params))


# ---------------------------------------------------------------- the fit


def relevant(cases, key) -> list:
    name, what = key
    if what == "step_overhead":
        return [c for c in cases if not c.job.partition.node.step_overhead]   # a stated one stands
    if what == "contention":
        return [c for c in cases if c.cfg.zero >= 3]
    if what == "attention_share":
        return [c for c in cases if c.kernels and c.cfg.behaviour("attention") != "unfused"
                and (not name or c.generation == name)]
    on_chip = [c for c in cases if c.chip == name]
    if what == "attention":
        return on_chip
    return [c for c in on_chip if c.gemm_key == what]


def keys_of(cases) -> list[tuple[str, str]]:
    chip_keys = sorted({(c.chip, c.gemm_key) for c in cases}
                       | {(c.chip, "attention") for c in cases if not c.kernels}
                       | ({(c.generation, "attention_share") for c in cases if c.kernels}
                          if PER_GENERATION_SHARE else set()))
    return [("", g) for g in GLOBALS + (("step_overhead",) if STEP_OVERHEAD else ())] + chip_keys


def _line_search(grid: list[float], cost) -> float:
    """Golden-section search over a sorted grid for the minimum of a unimodal cost
    (the loss of log errors is unimodal in one efficiency: predictions rise with it)."""
    lo, hi = 0, len(grid) - 1
    seen: dict[int, float] = {}

    def f(i: int) -> float:
        if i not in seen:
            seen[i] = cost(grid[i])
        return seen[i]

    while hi - lo > 3:
        a = lo + round((hi - lo) * 0.382)
        b = lo + round((hi - lo) * 0.618)
        if f(a) <= f(b):
            hi = b
        else:
            lo = a
    return grid[min(range(lo, hi + 1), key=f)]


def fit(cases, start: dict | None = None, rounds: int = 3) -> dict:
    """Coordinate descent over the physical parameters, from `start` (or the grids' middle)."""
    params: dict = dict(start or {})
    keys = [k for k in keys_of(cases) if len(relevant(cases, k)) >= MIN_RUNS]
    params = {k: v for k, v in params.items() if k in keys}
    for _ in range(rounds):
        moved = False
        for key in keys:
            subset = relevant(cases, key)
            grid = GRIDS[key[1] if key[1] in GRIDS else "gemm"]
            best = _line_search(grid, lambda v: total(subset, {**params, key: v}))
            moved |= params.get(key) != best
            params[key] = best
        if not moved:
            break
    return params


# ---------------------------------------------------------------- reports


def tables(cases, params) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """model/calibration.py's CALIBRATED (chip -> fitted GEMM precisions) and LARGEST_RUN
    (chip -> GPUs of its largest run) for a fit on `cases`."""
    calibrated: dict[str, list[str]] = {}
    for chip, key in sorted(params):
        if chip and key not in ("attention", "attention_share"):
            calibrated.setdefault(chip, []).append(key)
    largest: dict[str, int] = {}
    for c in cases:
        largest[c.chip] = max(largest.get(c.chip, 0), c.cfg.gpus)
    return {k: tuple(v) for k, v in calibrated.items()}, dict(sorted(largest.items()))


def describe(cases, params) -> str:
    errs = errors(cases, params)
    absolute = sorted(abs(math.exp(e) - 1) for e in errs)
    p90 = absolute[int(0.9 * (len(absolute) - 1))]
    lines = [f"{len(cases)} runs: median |error| {statistics.median(absolute):.1%}, p90 {p90:.1%}, "
             f"max {absolute[-1]:.1%}"]
    fallback = defaults(params)
    lines.append(f"  default GEMM efficiency {fallback['gemm']:.3f}, attention {fallback['attention']:.3f} "
                 "(model/compute.py)")
    for (chip, what), value in sorted(params.items()):
        n = len(relevant(cases, (chip, what)))
        label = {"contention": "ZeRO-3 gather contention",
                 "attention_share": "attention kernels' in-training share"}.get(what, f"{chip} {what}")
        lines.append(f"  {label:32} {value:.4g}   ({n} runs)")
    return "\n".join(lines)


def by_group(cases, params) -> str:
    groups: dict[str, list[float]] = {}
    for case, e in zip(cases, errors(cases, params)):
        groups.setdefault(case.group, []).append(math.exp(e) - 1)
    return "\n".join(f"  {g[:44]:44} n={len(v):3}  median |err| {statistics.median(abs(x) for x in v):6.1%}  "
                     f"bias {statistics.mean(v):+6.1%}" for g, v in sorted(groups.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(HERE / "runs"))
    parser.add_argument("--csv", default=str(HERE / "data" / "public_runs_measured.csv"))
    args = parser.parse_args(argv)
    cases = load(Path(args.runs), Path(args.csv))
    params = fit(cases)
    print("fitted:", describe(cases, params))
    print(by_group(cases, params))
    calibrated, largest = tables(cases, params)
    print("model/calibration.py:\nCALIBRATED =", calibrated, "\nLARGEST_RUN =", largest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
