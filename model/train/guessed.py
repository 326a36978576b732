"""Fields a design leaves unstated and how far their other values would move the prediction:
the band must not be confident about a guess (issue 35 section 4).

Two kinds. The planner searches the micro-batch, recompute, ZeRO stage and virtual stages of
a job that leaves them free (solver/train/enumerate.py) and predicts its best choice; a run
of the design may choose otherwise (a published run's recipe rarely is the model's optimum).
The overlaps and fp8 weights it does not search: left out, each takes the software stack's
default (model/config.py STACKS), and a run that set it otherwise runs at another speed. For
each field the design leaves out and that matters to the configuration (an overlap of a
dimension wider than one, fp8 weights under fp8, virtual stages on a pipeline), the chosen
configuration is estimated again at each alternative value that is valid and still fits in
memory (the searched fields' neighbours: the next micro-batch down and up, the other
recompute modes and ZeRO stages of the search's grid), and the widest move of throughput,
|log(alternative / chosen)|, is the field's spread (model/calibration.py Reason `spread`),
kept per direction (`sides`): the alternatives slower than the chosen configuration widen
the band's low side, the faster ones its high side. A searched field's alternatives are
slower (the search took its optimum), so it widens the low side alone: widened both ways,
the defaults run (benchmarks/defaults.py) held 85 % of the runs in its 80 % band, its high
side almost never reached. An alternative that does not fit may fit beside an unstated
memory saver (`SAVERS`: fp8 weights without the bf16 copy, activations offloaded to host
memory): a run that stated neither could have run both (a recipe that keeps fp8 weights, or
offloads, runs without recompute where the activations would not fit), so that pair is the
alternative then, and it may be faster than the search's choice. An alternative that would cost more
than a third of the throughput is not one a tuned run takes (ASSUMPTION: PLAUSIBLE; ZeRO-3 across a thousand replicas can run at a quarter of
ZeRO-1's pace, and no recipe sets it there), so it does not widen the band.

A design that leaves its software stack unstated already carries the `stack` reason
(model/calibration.py FACTORS), whose factor was measured by predicting the runs of other stacks
with the default stack's whole behaviour row (model/config.py STACKS), the TP, DP and MoE
all-to-all overlaps among its columns then as now (commit 4de2407, 2026-12-01: no run could state
an overlap until 2026-12-06, so each run's overlaps moved with its stack). The overlaps a stack
decides (`STACK_FIELDS`) are therefore part of what that factor measured; weighing their
alternatives again would count the same doubt twice, so with the stack unstated they do not
widen the band, and with it stated they do (a run may override its stack's default).
"""

from __future__ import annotations

import functools
import itertools
import math

import attrs

from ...compiler.ir import Partition
from ...compiler.schema import OFFLOAD_STACKS, offload_possible, offload_refusal, overlap_refusal
from ...dsl.numbers import percent
from ..calibration import UNSTATED, Reason, half_width
from ..config import STACKS, TrainConfig
from ..shape import ModelShape
from .offload import OFFLOAD_SHARES

PLAUSIBLE = math.log(1.5)   # the widest |log| move of an alternative a run would take (see above)
# field -> (when it matters to a configuration, its other values, in words)
FIELDS = {
    "tp_overlap": (lambda shape, cfg: cfg.tp > 1, lambda cfg: (True, False), "TP overlap with the GEMMs"),
    "dp_overlap": (lambda shape, cfg: cfg.dp * cfg.cp > 1, lambda cfg: (True, False), "gradient reduction overlap"),
    "ep_overlap": (lambda shape, cfg: shape.is_moe and cfg.ep > 1, lambda cfg: (True, False), "MoE all-to-all overlap"),
    "dispatcher": (lambda shape, cfg: shape.is_moe and cfg.ep > 1, lambda cfg: ("alltoall", "hybridep"),
                   "MoE token dispatcher"),
    "fp8_params": (lambda shape, cfg: cfg.precision.startswith("fp8"), lambda cfg: (True, False),
                   "fp8 weights without a bf16 copy"),
    "zero": (lambda shape, cfg: cfg.dp * cfg.cp > 1, lambda cfg: (0, 1, 3), "ZeRO stage"),
    "recompute": (lambda shape, cfg: True, lambda cfg: ("none", "selective", "full"), "activation recompute"),
    "microbatch": (lambda shape, cfg: True, lambda cfg: (cfg.microbatch // 2, cfg.microbatch * 2), "micro-batch"),
    "vp": (lambda shape, cfg: cfg.pp > 1, lambda cfg: (max(1, cfg.vp // 2), cfg.vp * 2), "virtual pipeline stages"),
}


# FIELDS whose default is the software stack's behaviour: with the stack unstated, the `stack`
# reason's factor holds their doubt (see above)
STACK_FIELDS = frozenset(FIELDS) & frozenset(next(iter(STACKS.values())))


# Unstated choices whose values free memory: name -> (when it is free to take them, the values
# in order of what they cost). fp8 weights drop the bf16 copy; activation offload (Megatron-Core
# `--cpu-offloading`, model/train/offload.py) moves a share of the layers' saved activations to
# host memory (the recipes of Megatron-Bridge's GB200/GB300 runs offload instead of recomputing:
# cpu_offloading_num_layers, benchmarks/runs/mb2509_2.gcl). The search takes offload only where a
# job asks (solver/train/enumerate.py), so a design that leaves it out leaves it to the run, where
# the rule for a stated offload allows it (the node's host link, compiler/schema.py
# `offload_possible`: without one the copy has no price, model/comms.py `host_rate`), the
# run's stack offloads as a recipe switch (`OFFLOAD_STACKS`), and that switch runs beside the
# alternative's pipeline and recompute (`offload_refusal`: Megatron-Core's at pp 1 without recompute).
SAVERS = {
    "fp8_params": (lambda shape, cfg, partition: FIELDS["fp8_params"][0](shape, cfg) and not cfg.fp8_params, (True,)),
    "offload": (lambda shape, cfg, partition: cfg.offload == 0 and offload_possible(partition.node.host_link)
                and cfg.stack in OFFLOAD_STACKS, OFFLOAD_SHARES[1:]),
}


def _valid(shape: ModelShape, cfg: TrainConfig, chosen: TrainConfig) -> bool:
    """Whether the search's grid holds `cfg`, an alternative of `chosen`, as far as an alternative
    value can break it: the batch splits into its micro-batches, an interleaved schedule's
    micro-batches fill the stages, and a virtual-stage count other than the chosen one splits the
    layers evenly (a pinned count is taken as written, solver/train/enumerate.py `_vp_candidates`:
    published recipes run uneven chunks); under the all-to-all overlap a Megatron stack runs a
    pipeline interleaved only, and no full recompute (compiler/rules/train.py `_megatron_overlap`)."""
    if cfg.microbatch < 1 or cfg.batch % (cfg.dp * cfg.microbatch):
        return False
    if cfg.overlaps_ep and overlap_refusal(cfg.stack, cfg.pp, cfg.vp, cfg.recompute):
        return False
    if cfg.vp == 1:
        return True
    return cfg.microbatches % cfg.pp == 0 and (cfg.vp == chosen.vp or shape.layers % (cfg.pp * cfg.vp) == 0)


def spreads(shape: ModelShape, cfg: TrainConfig, partition: Partition, stated: frozenset[str],
            stack_stated: bool = True) -> dict[str, float]:
    """For each field of FIELDS that the design does not state and that matters to `cfg`:
    the widest |log| throughput ratio of its other values that fit, against `cfg`'s."""
    return {field: max(pair) for field, pair in sides(shape, cfg, partition, stated, stack_stated).items()}


def sides(shape: ModelShape, cfg: TrainConfig, partition: Partition,
          stated: frozenset[str], stack_stated: bool = True) -> dict[str, tuple[float, float]]:
    """`spreads`, split by direction: (slower, faster), the widest |log| throughput ratio of the
    field's alternatives that run slower than `cfg` and of those that run faster. The fields the
    planner searches move only down from its choice (its optimum: an alternative that was on the
    grid and fitted was slower), save one that fits only beside an unstated saver; a stack
    default moves either way (TP overlap off by default: a run that turned it on is faster). With
    the stack unstated (`stack_stated` false) the stack's own fields are left to its reason."""
    from .step import estimate   # step imports this module's siblings; estimate at call time

    base = estimate(shape, cfg, partition).step_time
    out = {}
    for field, (matters, values, _) in FIELDS.items():
        if field in stated or not matters(shape, cfg) or (field in STACK_FIELDS and not stack_stated):
            continue
        savers = {f: values for f, (free, values) in SAVERS.items() if f != field and f not in stated and free(shape, cfg, partition)}
        others = [attrs.evolve(cfg, **{field: value}) for value in values(cfg) if value != getattr(cfg, field)]
        fitting = (_fitting(shape, other, partition, savers) for other in others if _valid(shape, other, cfg))
        moves = [math.log(base / e.step_time) for e in fitting if e is not None]   # > 0: the alternative is faster
        plausible = [m for m in moves if abs(m) <= PLAUSIBLE]
        out[field] = (max((-m for m in plausible if m < 0), default=0.0), max((m for m in plausible if m > 0), default=0.0))
    return out


def _fitting(shape: ModelShape, cfg: TrainConfig, partition: Partition, savers: dict[str, tuple]):
    """`cfg`'s estimate when it fits, else that of `cfg` with the unstated memory savers that fits
    first: one saver at a time, in SAVERS' order and each in the order of its values (what they
    cost: fp8 weights nothing, then ever more offloaded layers), then the savers together; None
    when none does."""
    from .step import estimate

    names = list(savers)
    both = (dict(zip(names, values)) for values in itertools.product(*(savers[n] for n in names)))
    tries = [{}] + [{f: v} for f in names for v in savers[f]] + (list(both) if len(names) > 1 else [])
    for extra in tries:
        if extra.get("offload") and offload_refusal(cfg.stack, extra["offload"], cfg.pp, cfg.recompute):
            continue     # the stack does not offload beside this pipeline or recompute (compiler/schema.py)
        e = estimate(shape, attrs.evolve(cfg, **extra) if extra else cfg, partition)
        if e.fits:
            return e
    return None


@functools.lru_cache(maxsize=64)   # a plan's text, JSON and band each ask for its reasons
def reasons(shape: ModelShape, cfg: TrainConfig, partition: Partition, stated: frozenset[str],
            others: tuple[Reason, ...] = ()) -> tuple[Reason, ...]:
    """A Reason for each unstated field whose alternatives move the prediction by more than the
    band of `others` already allows (its half width); the stack's own fields not where `others`
    carries the unstated stack's reason."""
    allowed = math.log1p(half_width(others))
    stack_stated = not any(r.key == "stack" for r in others)
    return tuple(Reason(UNSTATED, f"{field} not stated ({FIELDS[field][2]}): {_moves(pair)}", max(pair), sides=pair)
                 for field, pair in sides(shape, cfg, partition, stated, stack_stated).items() if max(pair) > allowed)


def _moves(pair: tuple[float, float]) -> str:
    """The alternatives' moves in words: `-26%` (all slower), `+13%` (all faster), `-26%/+13%`."""
    slower, faster = pair
    words = ([f"-{percent(-math.expm1(-slower), 2)}"] if slower else []) + ([f"+{percent(math.expm1(faster), 2)}"] if faster else [])
    return "/".join(words)
