"""Plan the job an export needs: a train job on one partition (the search) or across
several (the heterogeneous split), or a serve job (its width and replicas), as a
`JobPlan` of one share per partition."""

from __future__ import annotations

import math

import attrs

from ...compiler.design import Design, Entity
from ...compiler.lower import lower_cluster
from ...model import comms
from ...model.config import TrainConfig
from ...model.job import JobError, job_from_entity
from ...model.ranks import rank_partition
from ...model.shape import ModelShape
from ...compiler.ir import Partition
from .target import JobPlan, Run, Share


class Infeasible(Exception):
    """No configuration of the job fits; the message is the planner's reason."""


def job_entity(design: Design, name: str | None) -> Entity | None:
    """The job `name`, or the root file's first train job, else its first serve job (as
    `gclc plan` chooses); None when the design has no job."""
    jobs = [e for e in design.entities if e.kind in ("train", "serve")]
    if name is None:
        local = [j for j in jobs if j.span.path == design.root] or jobs
        return next((j for j in local if j.kind == "train"), local[0] if local else None)
    entity = next((e for e in jobs if e.name == name), None)
    if entity is None:
        known = ", ".join(j.name for j in jobs) or "none"
        raise JobError(f"no job `{name}`; the design's jobs: {known}")
    return entity


def on_one_partition(entity: Entity) -> list[Entity]:
    """A job whose `on` is a cluster of several partitions, as one job per partition it may
    take (its `prefer`red one alone when it names one); any other job as itself."""
    from ...compiler.design import Item, Partition as PartitionRef, Record

    target = entity.get("on")
    if isinstance(target, (tuple, PartitionRef)) or target is None or target.kind != "cluster":
        return [entity]
    names = [p.name for p in lower_cluster(target).partitions]
    if len(names) == 1:
        return [entity]
    preferred = entity.get("prefer")
    preferred = preferred[0] if isinstance(preferred, tuple) else preferred
    if isinstance(preferred, PartitionRef) and preferred.name in names:
        names = [preferred.name]
    span = entity.span_of("on")
    return [attrs.evolve(entity, record=Record(tuple(Item(i.name, PartitionRef(target, name), span)
                                                     if i.name == "on" else i for i in entity.record.items)))
            for name in names]


def job_plan(entity: Entity) -> JobPlan:
    """The job's plan; on a cluster of several partitions without one named, the partition
    whose plan is best (the one the job prefers, if it says)."""
    candidates = on_one_partition(entity)
    if len(candidates) == 1:
        return _job_plan(candidates[0])
    plans, reasons = [], []
    for candidate in candidates:
        try:
            plans.append(_job_plan(candidate))
        except Infeasible as problem:
            reasons.append(f"{candidate.get('on').name}: {problem}")
    if not plans:
        raise Infeasible("; ".join(reasons))
    return max(plans, key=lambda p: p.tokens_per_s)


def _job_plan(entity: Entity) -> JobPlan:
    from ...solver.split.plan import is_hetero, partition_jobs, plan_hetero
    from ...solver.jobs import job_objective
    from ...solver.train.plan import plan

    shape = ModelShape.from_entity(entity.get("model"))
    if entity.kind == "serve":
        return _serve_plan(entity, shape)
    if is_hetero(entity):
        result = plan_hetero(entity)
        if result.best is None:
            raise Infeasible(f"`{entity.name}` fits neither split across its partitions")
        jobs = {j.partition.name: j for j in partition_jobs(entity)}
        shares = tuple(_share(jobs[s.partition].partition, s.config, s.gpus, s.items)
                       for s in result.best.shares if s.config is not None and s.gpus)
        first = next(iter(jobs.values()))
        return JobPlan(entity.name, entity, shape, first.precision, first.stack, result.best.mode, shares,
                       _run(entity, result.best.tokens_per_s, None), result.best.tokens_per_s)
    job = job_from_entity(entity)
    chosen = plan(job, job_objective(entity))
    if chosen.best is None:
        reason = chosen.infeasibility.message if chosen.infeasibility else f"no configuration fits {job.gpus} GPUs"
        raise Infeasible(reason)
    config = chosen.best.config
    share = _share(job.partition, config, config.gpus, job.batch)
    return JobPlan(entity.name, entity, shape, job.precision, job.stack, "single", (share,),
                   _run(entity, chosen.best.tokens_per_s, chosen.goodput), chosen.best.tokens_per_s)


def _run(entity: Entity, tokens_per_s: float, goodput) -> Run:
    """The time limit (the job's `time_limit`, else its `duration`, else its tokens at the plan's
    goodput: the wall clock with checkpoints, failures and restarts), its priority, and how
    often it fails and how long a restart takes (solver/schedule/goodput.py)."""
    share = goodput.efficiency if goodput is not None and goodput.efficiency > 0 else 1.0
    limit, source = entity.get("time_limit"), "time_limit"
    if limit is None and entity.get("duration") is not None:
        limit, source = entity.get("duration"), "duration"
    tokens = entity.get("tokens")
    if limit is None and tokens and tokens_per_s > 0:
        limit, source = float(tokens) / (tokens_per_s * share), "time to train at the plan's goodput"
    return Run(float(limit) if limit is not None else None, source if limit is not None else "",
               _priority(entity.get("priority")), goodput.mtbf if goodput is not None else math.inf,
               goodput.restart if goodput is not None else 0.0)


def _priority(value):
    return value.name if hasattr(value, "name") else (int(value) if value is not None else None)


def _serve_plan(entity: Entity, shape: ModelShape) -> JobPlan:
    """One share per pool (aggregated: one; disaggregated: prefill, then decode), each of
    replicas of one width, each replica kept together."""
    from ...solver.serve.plan import plan_serve

    served = plan_serve(entity)
    if served.best is None:
        raise Infeasible(f"no configuration of `{entity.name}` meets its limits"
                         + (f" ({'; '.join(served.binding)})" if served.binding else ""))
    pools = [("prefill", served.prefill), ("decode", served.decode)] if served.prefill else [("serving", served.decode)]
    shares = []
    for role, side in pools:
        width = side.replica.gpus
        stages = comms.place(width, 1, served.partition.tiers)
        shares.append(Share(served.partition.name, side.gpus, None, width, stages[-1].tier.name if stages else None,
                            side.count, role, served.partition.tiers, served.partition.node.accelerator.name))
    limit = entity.get("time_limit")
    run = Run(float(limit) if limit is not None else None, "time_limit" if limit is not None else "",
              _priority(entity.get("priority")))
    return JobPlan(entity.name, entity, shape, served.best.config.precision, "serve", "serve", tuple(shares), run)


def _share(partition: Partition, config: TrainConfig, gpus: int, items: int) -> Share:
    """The share, with the widest of its TP and EP groups and the tier that group stays inside."""
    together, tier = 1, None
    tiers = rank_partition(partition, config.gpus).tiers   # the domains the model placed ranks in (NVL72: 64)
    for dim in ("tp", "ep"):
        size = getattr(config, dim)
        stages = comms.place(size, config.stride(dim), tiers)
        if size > together:
            together, tier = size, stages[-1].tier.name if stages else None
    return Share(partition.name, gpus, config, together, tier, items, tiers=tiers,
                 accelerator=partition.node.accelerator.name)


__all__ = ["Infeasible", "JobError", "job_entity", "job_plan"]
