"""The physical constants a calibration may move, their priors and ranges, and the design
they apply to: per chip, the sustained GEMM efficiency of each precision, the fused
attention efficiency and the HBM efficiency (the chip's `efficiency { ... }` block); per
fabric, its achievable share of bandwidth and its per-hop latency (`efficiency`,
`latency`)."""

from __future__ import annotations

import math

import attrs

from ...compiler.formats import family
from ...compiler.ir import Accelerator, Partition
from ...model import compute
from ...model.calibration import BAND_SCALE, SERVE_THROUGHPUT_RATIO, SIGMA_PER_SCALE
from ...dsl.records import frozen

# Prior spreads (standard deviation of log value) of a design's constants. A GEMM efficiency the
# design states (a published-run fit) is known as well as the shipped model predicts a run on
# an unseen cluster: its prior's width is the shipped band's deviation (model/calibration.py
# BAND_SCALE x SIGMA_PER_SCALE, 8.5 %: the cross-validated spread of runs around a fit that never
# saw their system), a Bayesian shrinkage whose prior is the uncalibrated model's own band (was
# 10 %, an ASSUMPTION; benchmarks/calibrate_own.py held-back median 4.8 -> 4.65 %, one value
# tried, docs/calibration.md). The rest are ASSUMPTIONS sized from the spread of what
# benchmarks/calibrate.py fits across chips: one the design leaves to the vendor default moves
# freely, as does a fabric's stated efficiency; latencies are known to a factor of e.
SPREAD = {"stated": BAND_SCALE * SIGMA_PER_SCALE, "default": 0.30, "attention": 0.30, "hbm": 0.10, "efficiency": 0.20,
          "latency": 1.0, "host_step": 1.5}
# A chip constant a serving run informs (its HBM and GEMM efficiencies: observe_serve.py) is
# known as well as the serving model predicts: the prior's width is the shipped serving band's
# deviation (model/calibration.py SERVE_THROUGHPUT_RATIO, its 80 % bounds, x0.77 to x1.10, read
# as a normal's: log(1.10 / 0.77) / (2 x 1.2816) = 0.139), where the stated 8.5 % is what the
# training fit knows of it. The same shrinkage: at 10 % the fit left the calibrating TensorRT-LLM
# 405B runs 10-38 % off and their held-back runs 12-36 % (benchmarks/calibrate_own.py).
SERVE_SPREAD = math.log(SERVE_THROUGHPUT_RATIO[1] / SERVE_THROUGHPUT_RATIO[0]) / (2 * 1.2816)
# Physical ranges: a sustained share of a peak is above 2 % and at most 1; a latency per hop
# between 10 ns and 1 ms.
RANGE = {"share": (0.02, 1.0), "latency": (1e-8, 1e-3), "host_step": (1e-6, 0.05), "offset": (0.5, 2.0)}
# The prior width (standard deviation of log step time) of a model's offset on a cluster: how far
# one architecture's runs miss on one system beyond what the system's own constants explain,
# read from the published runs (solver/calibrate/model_spread.py on the 196 published runs of
# every system, each predicted by the published fit of all of them: `benchmarks/calibrate_own.py
# --model-spread`, 0.0689 on 2026-12-07). ESTIMATE: in-sample of that fit (the benchmark's folds
# read theirs from their own training systems instead, never from the runs they are judged on).
MODEL_SPREAD = 0.069


@frozen
class Param:
    """One constant: `("chip", name, key)` with key a precision family, `attention` or `hbm`; `("fabric", name, "efficiency" | "latency")`; `("engine", serve job,
    "host_step")`; or `("node", name, "step_overhead")` (step_overhead.py)."""

    key: tuple[str, str, str]
    prior: float
    spread: float
    low: float
    high: float

    @property
    def label(self) -> str:
        kind, name, what = self.key
        if kind == "engine":
            return f"{name} engine host time per iteration"
        if kind == "node":
            return f"{name} host time between training steps"
        return f"{name} {what} efficiency" if kind == "chip" and what not in ("hbm", "attention") else f"{name} {what}"

    def clamp(self, value: float) -> float:
        return min(self.high, max(self.low, value))


def gemm_key(precision: str) -> str:
    """The efficiency key of a GEMM precision: its family, with fp16 read as bf16 (they share a rate)."""
    key = family(precision)
    return "bf16" if key == "fp16" else key


def chip_param(chip: Accelerator, key: str) -> Param:
    """The chip's current value of `key` (what the model uses now) as the prior."""
    if key == "attention":
        prior, spread = compute.attention_efficiency(chip), SPREAD["attention"]
    elif key == "hbm":
        prior, spread = chip.efficiency_of("hbm") or compute.DEFAULT_HBM_EFFICIENCY, SPREAD["hbm"]
    else:
        prior = compute.gemm_efficiency(chip, key)
        spread = SPREAD["stated" if chip.efficiency_of(key) is not None else "default"]
    return Param(("chip", chip.name, key), prior, spread, *RANGE["share"])


def serving_prior(param: Param) -> Param:
    """A chip constant's prior as a serving run informs it: at least SERVE_SPREAD wide."""
    return attrs.evolve(param, spread=max(param.spread, SERVE_SPREAD)) if param.key[0] == "chip" else param


def fabric_params(partition: Partition, fabric: str) -> tuple[Param, Param]:
    tier = next(t for t in partition.tiers if t.fabric == fabric)
    latency = tier.latency if tier.latency > 0 else 1e-6
    return (Param(("fabric", fabric, "efficiency"), tier.efficiency, SPREAD["efficiency"], *RANGE["share"]),
            Param(("fabric", fabric, "latency"), latency, SPREAD["latency"], *RANGE["latency"]))


def engine_param(key: tuple[str, str, str], step_s: float, floor: float) -> Param:
    """A serve job's engine host time per iteration (`engine { host_step }`), its profile's
    value (at least `floor`) as the prior, known to a factor of e, between 1 us and 50 ms."""
    return Param(key, max(step_s, floor), SPREAD["host_step"], *RANGE["host_step"])


def model_param(model: str, spread: float = MODEL_SPREAD) -> Param:
    """A model's offset on its runs' step time (1: none), zero-mean in log, `spread` wide: a
    nuisance term, so that what one model's runs miss by (physics the model lacks for that
    architecture) stays with that model and is not carried by the cluster's constants to others."""
    return Param(("model", model, "offset"), 1.0, spread, *RANGE["offset"])


def applied(partition: Partition, values: dict[tuple[str, str, str], float]) -> Partition:
    """`partition` with the values of `values` (by key) in place of its chip's, fabrics' and
    node's (its per-step host time)."""
    overhead = values.get(("node", partition.node.name, "step_overhead"))
    if overhead is not None and overhead != partition.node.step_overhead:
        partition = attrs.evolve(partition, node=attrs.evolve(partition.node, step_overhead=overhead))
    chip = partition.node.accelerator
    mine = {what: v for (kind, name, what), v in values.items() if kind == "chip" and name == chip.name}
    if mine:
        efficiency = dict(chip.efficiency)
        efficiency.update(mine)
        if "bf16" in mine and "fp16" in efficiency:
            efficiency["fp16"] = mine["bf16"]
        chip = attrs.evolve(chip, efficiency=tuple(sorted(efficiency.items())))
        partition = attrs.evolve(partition, node=attrs.evolve(partition.node, accelerator=chip))
    tiers, first = [], {}
    for tier in partition.tiers:
        # the fitted value is the fabric's own (its first tier's, as fabric_params reads the
        # prior); tiers above carry it times what lowering charges them (an ECMP spine's hashed
        # share), as the calibrated design will lower them
        base = first.setdefault(tier.fabric, tier.efficiency)
        fitted = values.get(("fabric", tier.fabric, "efficiency"))
        efficiency = tier.efficiency if fitted is None or not base else tier.efficiency * fitted / base
        latency = values.get(("fabric", tier.fabric, "latency"), tier.latency)
        tiers.append(tier if (efficiency, latency) == (tier.efficiency, tier.latency)
                     else attrs.evolve(tier, efficiency=efficiency, latency=latency))
    return attrs.evolve(partition, tiers=tuple(tiers))


def log_prior(param: Param, value: float) -> float:
    """The prior's penalty of `value`: its squared distance from the prior, in spreads."""
    return (math.log(value / param.prior) / param.spread) ** 2
