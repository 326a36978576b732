"""Why a job has no admissible configuration: the constraint, by how much, and where.

Three cases, checked in order:

- the space is empty: the pinned values, the GPU count and the batch leave no valid
  configuration at all (pointing at the pin or the batch);
- memory: even the configuration that needs the least memory per GPU does not fit
  the chip's HBM, or the job's `subject to { memory <= ... }` (pointing at the chip's
  `hbm.capacity` or at the bound);
- another `subject to` limit (power, MFU, time, energy, gpus): the configuration
  that comes closest, and the bound's span.
"""

from __future__ import annotations

import math

import attrs

from ...compiler.design import Entity, Partition as PartitionRef, Record, Repeat
from ...compiler.schema import overlap_refusal
from ...model.job import Job
from ...model.train import host, offload_host
from ...model.train.memory import model_state
from ...model.train.step import Estimate
from ...dsl.source import Span
from ...dsl.numbers import duration, hbm, number, percent, quantity
from . import enumerate as space_def
from ...dsl.records import frozen


@frozen
class Infeasibility:
    constraint: str              # space | memory | power | mfu | time | energy | gpus
    message: str                 # one sentence, with the numbers and the source location
    needs: float | None = None   # what the closest configuration needs (base units)
    limit: float | None = None   # what the design allows
    unit: str = ""
    span: Span | None = None
    config: object | None = None  # the TrainConfig the numbers come from
    left_out: str = ""           # what the least-memory configuration could not use, and why (`left_out`)

    @property
    def location(self) -> str:
        return str(self.span) if self.span is not None else ""


def _gb(x: float) -> str:
    return quantity(x, "B")


def _config(c) -> str:
    return (f"tp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp} ep={c.ep} vp={c.vp} micro-batch {c.microbatch}, "
            f"{c.recompute} recompute, ZeRO {c.zero}, {c.gpus} GPUs")


def chip_entity(job: Job) -> Entity | None:
    """The `chip` declaration the job's GPUs come from (for its spans), if it can be traced."""
    node = node_entity(job)
    gpus = node.get("gpus") if node is not None else None
    return gpus.part if isinstance(gpus, Repeat) else None


def node_entity(job: Job) -> Entity | None:
    """The `node` declaration the job runs on (for its spans), if it can be traced."""
    try:
        target = job.entity.get("on")
        if isinstance(target, tuple):
            target = target[0]
        if isinstance(target, PartitionRef):
            units = target.cluster.get("partition").get(target.name).get("units")
        else:
            units = target.get("units")
            if units is None:
                partitions: Record = target.get("partition")
                units = next(i.value.get("units") for i in partitions.items if i.name == job.partition.name)
        unit = units.part if isinstance(units, Repeat) else units
        return unit.get("nodes").part if unit.kind == "supernode" else unit
    except (AttributeError, StopIteration, TypeError):
        return None


def hbm_span(job: Job) -> Span | None:
    chip = chip_entity(job)
    if chip is not None:
        return chip.span_of("hbm.capacity")
    return getattr(job.partition.node.accelerator, "span", None)


def left_out(job: Job) -> str:
    """What the least-memory configuration was not allowed because of `ep_overlap`, and why, as a clause
    ("" when nothing), read off the search itself: the recomputes and virtual-stage counts its space opens
    without the overlap and not with it (under Megatron's overlap full recompute, and vp = 1 on a pipeline, which
    holds fewer micro-batches in flight than interleaving), each with compiler/schema.py `overlap_refusal`'s
    words, the rule `gclc check` applies to a pinned one."""
    if not job.pinned.get("ep_overlap"):
        return ""
    plain = attrs.evolve(job, pinned={k: v for k, v in job.pinned.items() if k != "ep_overlap"})
    space_ = space_def.space(job)
    reasons: dict[str, list[str]] = {}
    for recompute in space_def.space(plain).recomputes:
        if recompute not in space_.recomputes and (refused := overlap_refusal(job.stack, None, None, recompute)):
            reasons.setdefault(refused[1], []).append(f"{recompute} recompute")
    pipelines: dict[tuple[int, str], list[int]] = {}
    for pp in space_.pps:
        for vp in sorted(set(space_def.vp_candidates(plain, pp)) - set(space_def.vp_candidates(job, pp))):
            if refused := overlap_refusal(job.stack, pp, vp, None):
                pipelines.setdefault((vp, refused[1]), []).append(pp)
    for (vp, why), pps in pipelines.items():
        reasons.setdefault(why, []).append(f"vp = {vp} at pp = {', '.join(map(str, pps))}")
    if not reasons:
        return ""
    pin = job.entity.span_of("parallelism.ep_overlap")
    clauses = "; ".join(f"{', '.join(what)} left out: {why}" for why, what in reasons.items())
    return f"under `ep_overlap = true` ({pin}) {clauses} (remove `ep_overlap` to open them)"


def explain(job: Job, result, smallest: Estimate | None) -> Infeasibility:
    """The reason `result` (a SearchResult with no best) found nothing admissible."""
    if result.status == "empty" or smallest is None:
        return _empty(job)
    lim = result.limits or space_def.limits(job)
    if smallest.memory.total > lim.memory:
        return _memory(job, lim, smallest)
    if not smallest.host_fits:
        return _host_memory(job, smallest)
    if not smallest.nvme_fits:
        return _nvme(job, smallest)
    closest = {target: e for target, _, e in result.closest}
    if set(closest) == {"host_dram"}:
        return _host_memory(job, closest["host_dram"])
    if "host_nvme" in closest and set(closest) <= {"host_dram", "host_nvme"}:
        return _nvme(job, closest["host_nvme"])
    return _other_limit(job, lim, result)


def _nvme(job: Job, e: Estimate) -> Infeasibility:
    """The nodes' local NVMe cannot hold the checkpoints retained on it and the data staged on it
    (model/train/host.py `nvme_need`)."""
    node = job.partition.node
    entity = node_entity(job)
    span = (entity.span_of("nvme") or entity.span) if entity is not None else node.span
    staged = host.staged_data(e.config, node)
    kept, keep = e.nvme_need - staged, e.config.checkpoint_keep or 1
    holds = ([f"{keep} checkpoint share(s) of {_gb(kept / keep)}"] if kept > 0 else []) + \
        ([f"{_gb(staged)} of staged training data"] if staged > 0 else [])
    help_ = ([f"keep fewer checkpoints (`keep`, {job.entity.span_of('checkpoint.keep')})"]
             if kept > 0 and job.entity.span_of("checkpoint.keep") is not None else []) + \
        (["write checkpoints to remote `storage`"] if kept > 0 else []) + \
        (["read the data from remote storage (input DPUs)"] if staged > 0 else []) + ["add NVMe"]
    message = (f"`{job.name}`: each {node.name} node holds {' and '.join(holds)} on its local NVMe, "
               f"{_gb(e.nvme_need)} in all, more than its {_gb(e.nvme)} ({span}), even with {e.config.gpus} GPUs "
               f"({_config(e.config)}); " + ", ".join(help_[:-1]) + ", or " + help_[-1])
    return Infeasibility("host_nvme", message, e.nvme_need, e.nvme, "B", span, e.config)


def _host_memory(job: Job, e: Estimate) -> Infeasibility:
    """The node's DRAM cannot hold the checkpoint staging buffer (or offloaded tensors)."""
    node = job.partition.node
    need = offload_host.host_memory(job.shape, e.config, job.partition, getattr(e.memory, "offloaded", 0.0))
    entity = node_entity(job)
    span = (entity.span_of("dram") or entity.span) if entity is not None else node.span
    why = offload_host.shortfall(need, node) or "its host DRAM is too small"
    help_ = ("add DRAM, give the node DPUs that take `storage` (GPUDirect Storage writes skip the host), "
             "or checkpoint less state")
    if need.offload > need.staging and (pin := job.entity.span_of("parallelism.offload")) is not None:
        # the activations a pinned `offload` sends to the host fill it: that line is the cause
        span = pin
        help_ = f"offload a smaller share, recompute more, or use nodes with more DRAM ({node.name} at {node.span})"
    left = left_out(job)
    return Infeasibility("host_dram", f"`{job.name}`: {why} ({span}), even in its least-memory configuration "
                         f"({_config(e.config)}){'; ' + left if left else ''}; {help_}", e.host_memory, e.host_dram,
                         "B", span, e.config, left)


def _memory(job: Job, lim, smallest: Estimate) -> Infeasibility:
    chip = job.partition.node.accelerator
    need, m = smallest.memory.total, smallest.memory
    state = sum(model_state(job.shape, smallest.config))
    bound = lim.get("memory")
    if need > lim.hbm or bound is None:
        limit, span = lim.hbm, hbm_span(job)
        allows = f"the {chip.name} has {hbm(chip.hbm_datasheet, lim.hbm)} ({span})"
    else:
        limit, span = lim.memory, bound.span
        share = f"{percent(bound.value / lim.hbm)} of " if bound.share else ""
        allows = f"the job allows {_gb(lim.memory)} ({share}the {chip.name}'s {hbm(chip.hbm_datasheet, lim.hbm)}, {span})"
    if state > limit:
        what = f"needs {_gb(state)} per GPU for weights, gradients and optimizer state alone ({_gb(need)} in all)"
    else:
        parts = ", ".join(f"{k} {_gb(v)}" for k, v in m.rows() if v)
        what = f"needs {_gb(need)} per GPU ({parts})"
    left = left_out(job)
    least = f"even in its least-memory configuration ({_config(smallest.config)})" + (f"; {left}" if left else "")
    short = f"short by {_gb(need - limit)} ({number(need / limit, 2)}x)"
    # Every parallel dimension and ZeRO-3 at most split the model state evenly, so the
    # whole state over what a GPU has left after its fixed buffers bounds the GPU count.
    whole = sum(model_state(job.shape, attrs.evolve(smallest.config, tp=1, pp=1, dp=1, cp=1, ep=1, zero=0)))
    room = limit - m.buffers
    gpus = f"; holding the model state takes at least {math.ceil(whole / room):,} GPUs" if room > 0 else ""
    return Infeasibility("memory", f"`{job.name}` {what} {least}; {allows}: {short}{gpus}", need, limit, "B",
                         span, smallest.config, left)


_UNITS = {"power": ("W", lambda x: quantity(x, "W")),
          "mfu": ("", percent), "time": ("s", duration),
          "energy": ("J", lambda x: quantity(x / 3600, "Wh")), "gpus": ("", lambda x: number(round(x))),
          "memory": ("B", _gb)}


def _other_limit(job: Job, lim, result) -> Infeasibility:
    power = lim.get("power")
    targets = [target for target, _, _ in result.closest]
    if power is not None and power.upper and (targets[:1] == ["power"] or not targets and result.least_power):
        from .least_power import least_power_words

        message, watts = least_power_words(job, power)
        return Infeasibility("power", message, watts, power.value, "W", power.span)
    for target, _, e in result.closest:
        limit = next((i for i in lim.items if i.target == target), None)
        if limit is None:
            continue
        value = space_def.measure(job, e, target)
        unit, fmt = _UNITS.get(target, ("", number))
        word = "at least" if limit.upper else "at most"
        message = (f"`{job.name}` cannot meet `{target} {limit.op} {fmt(limit.value)}` ({limit.span}): "
                   f"the closest configuration ({_config(e.config)}) reaches {fmt(value)}, so the job needs "
                   f"{word} {fmt(value)}")
        return Infeasibility(target, message, value, limit.value, unit, limit.span, e.config)
    return Infeasibility("limits", f"`{job.name}`: no configuration meets the job's `subject to` limits "
                         f"({job.entity.span})", span=job.entity.span)


def _empty(job: Job) -> Infeasibility:
    """No valid configuration at all: say which pin, GPU count or batch rules them out."""
    p, shape, gpus = job.pinned, job.shape, job.gpus
    spans = {k: job.entity.span_of(f"parallelism.{k}") for k in p}
    fixed = [k for k in ("tp", "pp", "cp") if k in p]
    product = 1
    for k in fixed:
        product *= int(p[k])
    if product > gpus:
        names = "·".join(fixed)
        return Infeasibility("space", f"`{job.name}` pins {names} = {product}, more than its {gpus} GPUs "
                             f"({spans[fixed[0]]})", product, gpus, "", spans[fixed[0]])
    if "dp" in p:
        dp = int(p["dp"])
        if job.batch % dp:
            return Infeasibility("space", f"`{job.name}` pins dp = {dp}, which does not divide the batch of "
                                 f"{job.batch} ({spans['dp']})", dp, job.batch, "", spans["dp"])
        if dp * product > gpus:
            return Infeasibility("space", f"`{job.name}` pins dp = {dp}: dp x {'·'.join(fixed) or 'tp'} = "
                                 f"{dp * product} GPUs, more than its {gpus} ({spans['dp']})", dp * product, gpus,
                                 "", spans["dp"])
    if "ep" in p:
        reason = _expert_fold(job, product, spans["ep"])
        if reason is not None:
            return reason
    for key in ("microbatch", "microbatches", "vp", "schedule", "ep", "shard"):
        if key in p:
            return Infeasibility("space", f"`{job.name}`: no data-parallel size up to {gpus} GPUs splits the batch "
                                 f"of {job.batch} under the pinned {key} = {p[key]} ({spans[key]})",
                                 span=spans[key])
    span = job.entity.span_of("batch")
    return Infeasibility("space", f"`{job.name}`: no valid configuration of {gpus} GPUs for a batch of {job.batch} "
                         f"({shape.layers} layers, {shape.heads} heads) ({span})", span=span)


def _expert_fold(job: Job, product: int, span: Span) -> Infeasibility | None:
    """Pinned ep that no layout can hold: expert groups fold over the tp x cp x dp ranks of
    a pipeline stage (MoE parallel folding, expert TP = 1), so tp x cp x dp must be a
    multiple of ep, with dp dividing the batch (the enumerator's rule, over its space)."""
    ep, space = int(job.pinned["ep"]), space_def.space(job)
    largest, fold = 0, 0
    for tp, pp, cp in ((t, p, c) for t in space.tps for p in space.pps for c in space.cps):
        most = job.gpus // (tp * pp * cp)
        dps = [int(job.pinned["dp"])] if "dp" in job.pinned else range(1, most + 1)
        fitting = [d for d in dps if d <= most and job.batch % d == 0]
        if any((tp * cp * d) % ep == 0 for d in fitting):
            return None
        largest = max([largest, *fitting])
        fold = max([fold, *(tp * cp * d for d in fitting)])
    fixed = "·".join(k for k in ("tp", "pp", "cp") if k in job.pinned) or "tp·pp·cp"
    return Infeasibility(
        "space", f"`{job.name}` pins ep = {ep}, but expert groups fold over the tp x cp x dp ranks of a pipeline "
        f"stage, so tp x cp x dp must be a multiple of {ep}; with {fixed} = {product} on {job.gpus} GPUs the "
        f"largest dp that divides the batch of {job.batch} is {largest}, and tp x cp x dp is at most {fold} ({span}); "
        f"help: pin ep to a divisor of {fold}, or give the job more GPUs", ep, fold, "", span)
