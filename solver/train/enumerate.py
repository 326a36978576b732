"""The exhaustive reference enumerator: every valid configuration of a training job.

Slow on purpose and obviously correct: the oracle that tests and benchmarks compare the
fast search (`solver.train.search`) against. This module also *defines* the problem both of
them solve, in one place:

- the space (`space`, `configurations`): tp, pp, vp, dp, ep, cp, micro-batch,
  recompute, ZeRO stage and the placement order of the parallel dimensions; a hybrid
  sharding group, the recompute's modules and layer interval, and the offloaded share as
  the file pins them, or, where the job asks (`parallelism { search = [shard, offload] }`)
  and leaves them free, each from its grid (`variants`);
- validity: the parallel sizes use at most the job's GPUs, split evenly what they
  split (heads and KV heads by tp, layers by pp x vp, experts by ep, the batch by
  dp x micro-batch, the sequence by 2 x cp, micro-batches by pp when interleaving, dp x cp
  by a pinned shard group), and
  respect the values pinned in the file; dp is any replica count that leaves a valid
  configuration, so the GPU count is searched in whole replicas up to the job's GPUs
  (unless dp is pinned): an objective may leave GPUs idle, and the plan says why;
- the operating point (`operating_caps`, solver/train/operating.py): under a power limit or
  for energy, every configuration also at each clock step of the chip's DVFS curve, held
  there by a power cap per GPU (`TrainConfig.power_cap`), so that layout x GPU count x
  clock is one space and the plan is its best point;
- feasibility (`Limits`, `admissible`): memory within HBM and within the job's
  `subject to { memory <= ... }`, and the job's other limits (power, MFU, time, energy);
- the objective (`objective_value`): lower is better; goodput is tokens/s times the
  share of time that trains under failures (`solver.schedule.goodput`), which falls with
  the GPU count, so it can choose fewer GPUs than throughput does.

Choices made for the space, and why:

- ZeRO stages 0, 1 and 3. Stage 2 is left out: the model gives it the time of stage 1
  with less memory, because it does not charge the reduce-scatter that ZeRO-2 needs at
  every micro-batch under gradient accumulation; including it would make it a free lunch.
- tp is a power of two up to 64, cp a power of two up to 32, the micro-batch at most 16
  sequences, vp at most 8 (the ranges of the frameworks' documented configurations).
- Placement: tp innermost, then every order of the dimensions of cp, dp and pp whose
  size is above one; dimensions of size one go outermost (they span no link, and there
  they cannot distort the stride of a combined dp x cp group), so orders that give the
  same strides appear once.
- Experts fold over the ranks of a stage (Megatron-Core's MoE parallel folding with
  expert TP = 1: Liu et al. 2025, "MoE Parallel Folding"): an expert group is ep
  consecutive ranks of the stage's tp x cp x dp, so ep divides tp x cp x dp (what
  `gclc check` asks of pinned values) and only orders whose pipeline stride is a multiple
  of ep are kept: there a stage's ranks come in blocks that hold whole expert groups, so
  the group's span is that of ep consecutive ranks (`TrainConfig.stride("ep") == 1`).
  The order with pp outermost always qualifies.
- The choices searched only on request (`variants`: SEARCHABLE) multiply the space (each
  about triples the benchmark designs' spaces, offload x4; the search's CPU time grows 3-6x
  per choice, benchmarks/search.py --search), so a job names those it wants searched. Grids:
  shard groups of 2, 4, 8, ... ranks (a power of two below dp x cp; a group of every rank is
  plain ZeRO), every non-empty set of recompute modules (selective only), recompute on
  every 1st, 2nd, 4th or 8th layer (up to the layer count; selective or full), offload of
  0, 25, 50 or 100 % of each stage's layers.
- Pinned values are taken as written, even where they do not divide evenly (DeepSeek-V3
  runs 61 layers on 16 stages); only the batch must still split into whole micro-batches.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from typing import Callable, Iterator

import attrs

from ...compiler.schema import MAX_VP, MEGATRON_STACKS, RECOMPUTE_MODULES, SEARCHABLE, offload_refusal, overlap_refusal
from ...model.config import TrainConfig
from ...model.job import Job, job_optimizer, needs_distributed_optimizer, pinned_only
from ...model.train import offload as offload_model
from ...model.train.step import Estimate, estimate
# The job's limits and the objective (solver/train/limits.py): part of the problem defined here.
from .limits import (
    OBJECTIVES,
    Limit,
    Limits,
    admissible,
    busy,
    cost_rates,
    goodput_share,
    limits,
    max_gpus,
    measure,
    objective_value,
    objectives,
    power_of,
    violated,
)
# The operating points beside the layout (solver/train/operating.py): power caps under a limit or for energy.
from .operating import at_cap, operating_caps
from ...dsl.records import frozen

# The problem as callers read it (`space_def.NAME`): this module's definitions, and the limits, objectives
# and operating points it takes from limits.py and operating.py (re-exported: the problem is defined here).
__all__ = [
    # the space
    "RECOMPUTE", "ZERO_STAGES", "MAX_TP", "MAX_CP", "MAX_MICROBATCH", "PLACED", "RECOMPUTE_EVERY",
    "OFFLOAD_SHARES", "Space", "divisors", "powers_of_two", "searched", "variants", "variant_spaces", "space",
    "within_offload_limits",
    "megatron_overlap", "vp_candidates", "microbatch_candidates", "vp_valid", "inner_choices", "data_parallels", "data_parallel",
    "orders", "make_config", "config_maker", "branches", "configurations", "space_size",
    # the reference search
    "evaluate_all", "best", "ranked", "layout", "distinct",
    # limits and objectives (limits.py)
    "OBJECTIVES", "Limit", "Limits", "admissible", "busy", "cost_rates", "goodput_share", "limits", "max_gpus",
    "measure", "objective_value", "objectives", "power_of", "violated",
    # operating points (operating.py)
    "at_cap", "operating_caps",
]

RECOMPUTE = ("none", "selective", "full")       # ordered by activation memory, most first
ZERO_STAGES = (0, 1, 3)
MAX_TP = 64
MAX_CP = 32
MAX_MICROBATCH = 16
PLACED = ("cp", "dp", "pp")                     # the dimensions ordered outside tp
# SEARCHABLE: searched only where the job asks (`parallelism { search = [...] }`) and does not pin them.
RECOMPUTE_EVERY = (1, 2, 4, 8)
OFFLOAD_SHARES = offload_model.OFFLOAD_SHARES   # the grid model/train/guessed.py weighs too


def divisors(n: int, limit: int | None = None) -> list[int]:
    """The divisors of `n` up to `limit`, ascending, in O(min(limit, sqrt n)) steps: `layers =
    1e12` must not make the planner count to a trillion."""
    top = n if limit is None else min(n, limit)
    root = math.isqrt(n)
    if top <= root:
        return [d for d in range(1, top + 1) if n % d == 0]
    small = [d for d in range(1, root + 1) if n % d == 0]
    return sorted({d for d in small} | {n // d for d in small if n // d <= top})


def powers_of_two(limit: int) -> list[int]:
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


# ----------------------------------------------------------------- the space


@frozen
class Space:
    """Candidate values per dimension for a job, pins applied."""

    gpus: int
    tps: tuple[int, ...]
    pps: tuple[int, ...]
    cps: tuple[int, ...]
    eps: tuple[int, ...]
    recomputes: tuple[str, ...]
    zeros: tuple[int, ...]
    seq_parallel: bool | None    # pinned sequence parallelism (None: on when tp > 1)
    # Taken from the file (model/job.py `pinned_only`): hybrid sharding's group, the recompute's
    # modules and layer interval, the offloaded share, the CP balance and EP overlap; of the
    # first four, one variant of those the job asks to search (`variant_spaces`).
    pinned_only: dict = attrs.field(factory=dict, eq=False)
    searched: frozenset = frozenset()    # the SEARCHABLE choices the job asks to search


def searched(job: Job) -> frozenset:
    """The SEARCHABLE choices the job asks the planner to search and does not pin."""
    asked = job.pinned.get("search") or ()
    names = {str(getattr(a, "name", a)) for a in (asked if isinstance(asked, (tuple, list)) else (asked,))}
    return frozenset(n for n in SEARCHABLE if n in names and job.pinned.get(n) is None)


def variants(job: Job, space_: Space) -> list[dict]:
    """Every combination of the searched choices' values (the pinned ones fixed), the
    file's own values first."""
    base = dict(space_.pinned_only)
    grids = {"shard": [base["shard"]], "recompute_modules": [base["recompute_modules"]],
             "recompute_every": [base["recompute_every"]], "offload": [base["offload"]]}
    asked = space_.searched
    if "shard" in asked:
        grids["shard"] = [0, *powers_of_two(space_.gpus)[1:]]
    if "recompute_modules" in asked:
        grids["recompute_modules"] = [()] + [combo for k in range(1, len(RECOMPUTE_MODULES) + 1)
                                             for combo in itertools.combinations(RECOMPUTE_MODULES, k)
                                             if combo != ("core_attention",)   # () is the attention core
                                             and ("op_level" not in combo or len(combo) == 1)]   # a whole policy
    if "recompute_every" in asked:
        grids["recompute_every"] = [k for k in RECOMPUTE_EVERY if k <= job.shape.layers]
    if "offload" in asked:
        grids["offload"] = list(OFFLOAD_SHARES)
    keys = list(grids)
    return [base | dict(zip(keys, values)) for values in itertools.product(*(grids[k] for k in keys))]


def variant_spaces(job: Job, space_: Space) -> list[Space]:
    """The space once per variant of the searched choices, each with the recompute modes and
    ZeRO stages its variant allows (modules: selective; an interval: selective or full; a
    shard group: ZeRO >= 1); one space, the job's own, when nothing is searched."""
    if not space_.searched:
        return [space_]
    out = []
    for v in variants(job, space_):
        space_v = within_offload_limits(job.stack, space_, v["offload"])
        recomputes = space_v.recomputes
        if v["recompute_modules"]:
            recomputes = tuple(r for r in recomputes if r == "selective")
        if v["recompute_every"] > 1:
            recomputes = tuple(r for r in recomputes if r != "none")
        zeros = tuple(z for z in space_.zeros if z >= 1) if v["shard"] else space_.zeros
        if recomputes and zeros and space_v.pps:
            out.append(attrs.evolve(space_v, recomputes=recomputes, zeros=zeros, pinned_only=v))
    return out


def within_offload_limits(stack: str, space_: Space, offload: float) -> Space:
    """The space's pipeline depths and recompute modes that `stack` runs an offload of `offload` beside
    (compiler/schema.py `offload_refusal`: Megatron-Core offloads only at pp 1 without recompute, DeepSpeed
    every checkpointed layer or none); both empty when it runs that share with none."""
    if not offload:
        return space_
    pps = tuple(p for p in space_.pps if offload_refusal(stack, offload, p, None) is None)
    recomputes = tuple(r for r in space_.recomputes if offload_refusal(stack, offload, None, r) is None)
    return attrs.evolve(space_, pps=pps if recomputes else (), recomputes=recomputes if pps else ())


def space(job: Job, lim: Limits | None = None) -> Space:
    shape = job.shape
    lim = lim or limits(job)
    gpus = max_gpus(job, lim)

    def pick(key: str, default: list) -> tuple:
        value = job.pinned.get(key)
        return (int(value),) if value is not None else tuple(default)

    tps = pick("tp", [t for t in powers_of_two(min(MAX_TP, gpus))
                      if shape.heads % t == 0 and shape.kv_heads % t == 0])
    pps = pick("pp", divisors(shape.layers, gpus))
    cps = pick("cp", [c for c in powers_of_two(min(MAX_CP, gpus)) if c == 1 or job.seq % (2 * c) == 0])
    eps = pick("ep", divisors(shape.routed, gpus) if shape.is_moe else [1])
    recompute = job.pinned.get("recompute")
    zero = job.pinned.get("zero")
    sp = job.pinned.get("sp")
    extras = pinned_only(job)
    recomputes = (str(recompute),) if recompute is not None else RECOMPUTE
    if job.pinned.get("ep_overlap"):
        recomputes = tuple(r for r in recomputes if not overlap_refusal(job.stack, None, None, r))
    zeros = (int(zero),) if zero is not None else ZERO_STAGES
    if extras["shard"] or needs_distributed_optimizer(job):   # a shard group shards ZeRO state: stage 0 has none;
        zeros = tuple(z for z in zeros if z >= 1)   # Megatron's precision-aware optimizer needs the distributed one
    return within_offload_limits(job.stack, Space(gpus, tps, pps, cps, eps,
                                 recomputes, zeros, None if sp is None else bool(sp), extras, searched(job)), extras["offload"])


def megatron_overlap(job: Job) -> bool:
    """Whether the job overlaps its all-to-all on a Megatron stack, which Megatron-Core runs only in its
    interleaved 1F1B schedule on a pipeline and never beside a full recompute (core_r0.15.0
    transformer_config.py `__post_init__`; `gclc check` refuses the pinned contradictions)."""
    return bool(job.pinned.get("ep_overlap")) and job.stack in MEGATRON_STACKS


def vp_candidates(job: Job, pp: int) -> tuple[int, ...]:
    """Virtual stages allowed by the pins and the layer count (before the micro-batch rule); on a
    pipeline under Megatron's all-to-all overlap, interleaved ones only (`megatron_overlap`)."""
    vps = _vp_candidates(job.pinned.get("vp"), job.pinned.get("schedule"), job.shape.layers, pp)
    return tuple(v for v in vps if not overlap_refusal(job.stack, pp, v, None)) if job.pinned.get("ep_overlap") else vps


@functools.lru_cache(maxsize=4096)   # asked for every layout and micro-batch the search opens
def _vp_candidates(pinned, schedule, layers: int, pp: int) -> tuple[int, ...]:
    if pinned is not None:
        # Only the interleaved schedule runs several virtual stages, and only on a pipeline
        # (`gclc check` rejects the contradictions; the space never contains them).
        vp = int(pinned)
        if vp > 1 and (pp == 1 or schedule in ("one_f_one_b", "gpipe")) or vp == 1 and schedule == "interleaved":
            return ()
        # taken as written even when pp x vp does not divide the layers (`gclc check` warns
        # `uneven-pipeline`: Megatron's layout flags lighten the first and last stages, as the
        # published Qwen3-235B recipes run 94 layers over 8 x 2); only a free vp needs equal chunks
        return (vp,)
    interleaved = [v for v in range(2, MAX_VP + 1) if pp > 1 and layers % (pp * v) == 0]
    if schedule == "interleaved" and pp > 1:
        return tuple(interleaved)
    if schedule in ("one_f_one_b", "gpipe"):
        return (1,)
    return (1, *interleaved)


def microbatch_candidates(job: Job, per_replica: int) -> tuple[int, ...]:
    return _microbatches(per_replica, job.pinned.get("microbatch"), job.pinned.get("microbatches"))


@functools.lru_cache(maxsize=4096)
def _microbatches(per_replica: int, pinned, count) -> tuple[int, ...]:
    if pinned is not None:
        options = [int(pinned)] if per_replica % int(pinned) == 0 else []
    else:
        options = divisors(per_replica, MAX_MICROBATCH)
    if count is not None:
        options = [m for m in options if per_replica // m == int(count)]
    return tuple(options)


def vp_valid(vp: int, pp: int, microbatches: int) -> bool:
    """Interleaving needs the micro-batches to fill whole rounds of the pipeline."""
    return vp == 1 or microbatches % pp == 0


def inner_choices(job: Job, pp: int, dp: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(micro-batch, valid vps) pairs of a (tp, pp, cp, ep, dp) branch, micro-batch ascending."""
    if dp < 1 or job.batch % dp:
        return ()
    per_replica = job.batch // dp
    return _inner(per_replica, pp, vp_candidates(job, pp), microbatch_candidates(job, per_replica))


@functools.lru_cache(maxsize=4096)
def _inner(per_replica: int, pp: int, vps: tuple[int, ...], microbatches: tuple[int, ...]):
    out = []
    for mb in microbatches:
        valid = tuple(v for v in vps if vp_valid(v, pp, per_replica // mb))
        if valid:
            out.append((mb, valid))
    return tuple(out)


def data_parallels(job: Job, space_: Space, tp: int, pp: int, cp: int, ep: int) -> tuple[int, ...]:
    """Every replica count that leaves a valid configuration, most first (the pinned dp
    if valid): the GPU count is searched in whole replicas, up to the job's GPUs."""
    most = space_.gpus // (tp * pp * cp)
    pinned = job.pinned.get("dp")
    # (a replica count divides the batch: its divisors up to `most`, most first)
    candidates = [int(pinned)] if pinned is not None else reversed(divisors(job.batch, most) if job.batch > 0 else ())
    shard = int(space_.pinned_only.get("shard", 0))
    # a searched shard group is a proper hybrid one (a group of every rank is plain ZeRO, shard = 0)
    proper = "shard" in space_.searched and shard > 0
    valid = (dp for dp in candidates
             if dp <= most and job.batch % dp == 0 and (tp * cp * dp) % ep == 0 and (dp * cp) % max(1, shard) == 0
             and not (proper and dp * cp <= shard) and inner_choices(job, pp, dp))
    return tuple(valid)


def data_parallel(job: Job, space_: Space, tp: int, pp: int, cp: int, ep: int) -> int:
    """The most replicas that leave a valid configuration (0: none)."""
    return next(iter(data_parallels(job, space_, tp, pp, cp, ep)), 0)


def orders(tp: int, pp: int, dp: int, cp: int, ep: int = 1) -> tuple[tuple[str, ...], ...]:
    """Placement orders with distinct strides: tp innermost, then each order of the
    dimensions above one, size-one dimensions last; with experts, only the orders whose
    stages hold whole expert groups of consecutive ranks (the pipeline stride a multiple of ep)."""
    if pp == 1 and (tp * cp * dp) % ep == 0:
        ep = 1   # without a pipeline, pp is last: its stride is tp x cp x dp in every order
    if ep == 1:   # every order qualifies: only which dimensions are above one matters
        return _orders(1, min(pp, 2), min(dp, 2), min(cp, 2), 1)
    return _orders(tp, pp, dp, cp, ep)


@functools.lru_cache(maxsize=16384)   # asked for every layout of a search
def _orders(tp: int, pp: int, dp: int, cp: int, ep: int) -> tuple[tuple[str, ...], ...]:
    size = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    placed = [d for d in PLACED if size[d] > 1]
    rest = tuple(d for d in PLACED if size[d] == 1)
    out = []
    for perm in itertools.permutations(placed):
        order = ("tp", *perm, *rest)
        if math.prod([size[d] for d in order[: order.index("pp")]]) % ep == 0:
            out.append(order)
    return tuple(out)


def make_config(job: Job, space_: Space, tp: int, pp: int, dp: int, cp: int, ep: int, mb: int, vp: int,
                recompute: str, zero: int, order: tuple[str, ...]) -> TrainConfig:
    return config_maker(job, space_)(tp, pp, dp, cp, ep, mb, vp, recompute, zero, order)


def config_maker(job: Job, space_: Space, cap: float | None = None) -> Callable[..., TrainConfig]:
    """`make_config` for one job, space and power cap, the fields that depend on neither computed
    once (a search builds tens of thousands of configurations)."""
    fixed = dict(seq=job.seq, precision=job.precision, stack=job.stack, gpipe=job.pinned.get("schedule") == "gpipe",
                 sample_bytes=job.sample_bytes, checkpoint_every=job.checkpoint_every, power_cap=cap,
                 **job_optimizer(job), **space_.pinned_only)
    seq_parallel, job_batch = space_.seq_parallel, job.batch
    # Every field as `TrainConfig(batch=job_batch, **fixed)` sets it; a configuration is this
    # copied and the varying fields stored, as its __init__ would (it has no validator,
    # converter or post-init: tests/solver/train/test_speed_keys.py checks every field).
    template, new = vars(TrainConfig(batch=job_batch, **fixed)), object.__new__

    def make(tp: int, pp: int, dp: int, cp: int, ep: int, mb: int, vp: int, recompute: str, zero: int,
             order: tuple[str, ...], batch: int | None = None) -> TrainConfig:
        """`batch`: a global batch other than the job's (a bound's one micro-batch per replica)."""
        cfg = new(TrainConfig)
        fields = cfg.__dict__
        fields.update(template)
        if batch is not None:
            fields["batch"] = batch
        fields["tp"], fields["pp"], fields["dp"], fields["cp"], fields["ep"], fields["vp"] = tp, pp, dp, cp, ep, vp
        fields["microbatch"], fields["recompute"], fields["zero"], fields["order"] = mb, recompute, zero, order
        fields["sp"] = tp > 1 if seq_parallel is None else seq_parallel
        return cfg
    return make


def branches(job: Job, space_: Space) -> Iterator[tuple[int, int, int, int, int]]:
    """(tp, pp, cp, ep, dp) of every parallel layout with at least one valid configuration,
    the replica counts of each (tp, pp, cp, ep) most first."""
    for tp, pp, cp, ep in itertools.product(space_.tps, space_.pps, space_.cps, space_.eps):
        if tp * pp * cp > space_.gpus:
            continue
        for dp in data_parallels(job, space_, tp, pp, cp, ep):
            yield tp, pp, cp, ep, dp


def configurations(job: Job, objective: str = "throughput") -> Iterator[TrainConfig]:
    """Every configuration that is valid for `job` (memory and limits not yet checked), at
    every operating cap the objective searches."""
    for cap in operating_caps(job, objective):
        for space_ in variant_spaces(job, space(job)):
            make = config_maker(job, space_, cap)
            for tp, pp, cp, ep, dp in branches(job, space_):
                for order in orders(tp, pp, dp, cp, ep):
                    for mb, vps in inner_choices(job, pp, dp):
                        for vp, recompute, zero in itertools.product(vps, space_.recomputes, space_.zeros):
                            yield make(tp, pp, dp, cp, ep, mb, vp, recompute, zero, order)


def space_size(job: Job, objective: str = "throughput") -> int:
    """How many configurations `configurations` yields, counted without building them."""
    total = 0
    for space_ in variant_spaces(job, space(job)):
        for tp, pp, cp, ep, dp in branches(job, space_):
            inner = sum(len(vps) for _, vps in inner_choices(job, pp, dp))
            total += len(orders(tp, pp, dp, cp, ep)) * inner * len(space_.recomputes) * len(space_.zeros)
    return total * len(operating_caps(job, objective))


def evaluate_all(job: Job, objective: str = "throughput") -> Iterator[Estimate]:
    for cfg in configurations(job, objective):
        yield estimate(job.shape, cfg, job.partition)


def best(job: Job, objective: str = "throughput") -> tuple[Estimate | None, int]:
    """The best admissible configuration under `objective`, and how many were evaluated."""
    lim = limits(job)
    chosen, value, count = None, float("inf"), 0
    for candidate in evaluate_all(job, objective):
        count += 1
        if admissible(job, lim, candidate):
            v = objective_value(job, objective, candidate)
            if v < value:
                chosen, value = candidate, v
    return chosen, count


def ranked(job: Job, objective: str = "throughput") -> list[tuple[float, Estimate]]:
    """Every admissible configuration with its objective value, best first (each rank order
    and power cap of a layout apart: `distinct` keeps each layout's best)."""
    lim = limits(job)
    out = [(objective_value(job, objective, e), e) for e in evaluate_all(job, objective) if admissible(job, lim, e)]
    out.sort(key=lambda pair: pair[0])
    return out


# Every field of a configuration but the rank order and the power cap (`layout`).
_LAYOUT_FIELDS = operator.attrgetter(*[f.name for f in attrs.fields(TrainConfig) if f.name not in ("order", "power_cap")])


def layout(e: Estimate) -> tuple:
    """What makes two configurations different layouts: everything but the rank order and the
    power cap (the same layout placed another way, or run at another clock, is the same plan
    at its best, not a runner-up). A key: equal exactly where the configurations with order and
    power cap cleared are equal (the search reads it for every configuration it evaluates)."""
    return _LAYOUT_FIELDS(e.config)


def distinct(ranked_list: list[tuple[float, Estimate]]) -> list[tuple[float, Estimate]]:
    """The best rank order and clock of each layout (`layout`), best first: what the search
    keeps as the plan and its runners-up."""
    seen, out = set(), []
    for value, e in ranked_list:
        key = layout(e)
        if key not in seen:
            seen.add(key)
            out.append((value, e))
    return out
