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
from ...model.job import JobError, is_hetero, job_from_entity
from ...model.ranks import rank_partition
from ...model.shape import ModelShape
from ...compiler.ir import Partition
from ...solver.schedule.time_limit import MARGIN
from .target import JobPlan, Run, Share


class Infeasible(Exception):
    """No configuration of the job fits; the message is the planner's reason."""


def job_entity(design: Design, name: str | None, first: str = "train") -> Entity | None:
    """The job `name`, or the root file's first `first` job (train, as `gclc plan` chooses,
    or serve for a serving engine), else its first job (an rl job's pools export as both);
    None when the design has no job."""
    jobs = [e for e in design.entities if e.kind in ("train", "serve", "rl")]
    if name is None:
        local = [j for j in jobs if j.span.path == design.root] or jobs
        return next((j for j in local if j.kind == first), local[0] if local else None)
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


def job_plan(entity: Entity, timed: bool = True) -> JobPlan:
    """The job's plan; on a cluster of several partitions without one named, the partition
    whose plan is best (the one the job prefers, if it says). `timed`: with the time limit a
    scheduler is asked for (what the Slurm and Kubernetes exports need)."""
    timing = _with_time_limit if timed else (lambda plan, _: plan)
    candidates = on_one_partition(entity)
    if len(candidates) == 1:
        return timing(_job_plan(candidates[0]), entity)
    plans, reasons = [], []
    for candidate in candidates:
        try:
            plans.append(_job_plan(candidate))
        except Infeasible as problem:
            reasons.append(f"{candidate.get('on').name}: {problem}")
    if not plans:
        raise Infeasible("; ".join(reasons))
    return timing(max(plans, key=lambda p: p.tokens_per_s), entity)


def _with_time_limit(plan: JobPlan, entity: Entity) -> JobPlan:
    """A train job asks for the time the shared-cluster schedule gives it: its `time_limit`,
    else the slowest run it may take x a margin (solver/schedule/time_limit.py), built by the
    schedule's own job builder from every partition `entity` may use. Where the schedule
    would not start the job (a plan on fewer GPUs than it asks), the same rule on this plan's
    run; none without work to time (the reason stands in `time_source`)."""
    if entity.kind != "train":
        return plan
    from ...solver.schedule.jobs import Option, time_asked, train_job

    scheduled, problems = train_job(entity, _cluster_of(entity))
    rule = f"x {MARGIN:g}, in whole hours (solver/schedule/time_limit.py)"
    if scheduled is not None:
        limit = scheduled.time_limit
        source = f"the schedule's request: the slowest run the job may take on its partitions, checkpoints included, {rule}"
    else:
        run = plan.run
        share = plan.shares[0]
        option = Option(share.partition, plan.config.gpus, plan.tokens_per_s, run.interval, run.write, run.restart, None)
        limit = time_asked(entity, entity.get("batch"), entity.get("seq") or plan.shape.seq, option)
        why = "; ".join(p.summary for p in problems)
        source = (f"the schedule's rule on this plan's run, checkpoints included, {rule}; the schedule itself "
                  f"would not start the job ({why})")
        if limit is None:
            return attrs.evolve(plan, run=attrs.evolve(plan.run, time_limit=None, time_source=f"none: {why}"))
    if entity.get("time_limit") is not None:
        source = "time_limit"
    if math.isinf(limit):
        return attrs.evolve(plan, run=attrs.evolve(plan.run, time_limit=None, time_source="none: no time limit"))
    return attrs.evolve(plan, run=attrs.evolve(plan.run, time_limit=limit, time_source=source))


def _cluster_of(entity: Entity) -> Entity:
    from ...compiler.design import Partition as PartitionRef

    target = entity.get("on")
    target = target[0] if isinstance(target, tuple) else target
    return target.cluster if isinstance(target, PartitionRef) else target


def _job_plan(entity: Entity) -> JobPlan:
    from ...solver.split.plan import partition_jobs, plan_hetero
    from ...solver.jobs import job_objective
    from ...solver.train.plan import placement, plan

    shape = ModelShape.from_entity(entity.get("model"))
    if entity.kind == "serve":
        return _serve_plan(entity, shape)
    if is_hetero(entity):
        result = plan_hetero(entity)
        if result.best is None:
            raise Infeasible(f"`{entity.name}` fits neither split across its partitions")
        jobs = {j.partition.name: j for j in partition_jobs(entity)}
        shares = tuple(train_share(jobs[s.partition].partition, s.config, s.gpus, s.items)
                       for s in result.best.shares if s.config is not None and s.gpus)
        first = next(iter(jobs.values()))
        return JobPlan(entity.name, entity, shape, first.precision, first.stack, result.best.mode, shares,
                       _run(entity, None), result.best.tokens_per_s)
    job = job_from_entity(entity)
    chosen = plan(job, job_objective(entity))
    if chosen.best is None:
        reason = chosen.infeasibility.message if chosen.infeasibility else f"no configuration fits {job.gpus} GPUs"
        raise Infeasible(reason)
    config = chosen.best.config
    share = train_share(job.partition, config, config.gpus, job.batch)
    return JobPlan(entity.name, entity, shape, job.precision, job.stack, "single", (share,),
                   _run(entity, chosen.goodput), chosen.best.tokens_per_s, chosen.best, placement(chosen.best, job),
                   job.partition)


def _run(entity: Entity, goodput) -> Run:
    """Its priority, its tenant, and how often it fails and how long a restart takes
    (solver/schedule/goodput.py); the time limit comes from the schedule (`_with_time_limit`)."""
    if goodput is None:
        return Run(None, "", _priority(entity.get("priority")), tenant=_tenant(entity))
    return Run(None, "", _priority(entity.get("priority")), goodput.mtbf, goodput.restart, _tenant(entity),
               goodput.interval, goodput.write)


def _tenant(entity: Entity) -> str:
    return getattr(entity.get("tenant"), "name", "")


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
                            side.count, role, served.partition.tiers, served.partition.node.accelerator))
    limit = entity.get("time_limit")
    run = Run(float(limit) if limit is not None else None, "time_limit" if limit is not None else "",
              _priority(entity.get("priority")), tenant=_tenant(entity))
    return JobPlan(entity.name, entity, shape, served.best.config.precision, "serve", "serve", tuple(shares), run,
                   served=served)


def train_share(partition: Partition, config: TrainConfig, gpus: int, items: int) -> Share:
    """The share, with the widest of its TP and EP groups and the tier that group stays inside."""
    together, tier = 1, None
    tiers = rank_partition(partition, config.gpus).tiers   # the domains the model placed ranks in (NVL72: 64)
    for dim in ("tp", "ep"):
        size = getattr(config, dim)
        stages = comms.place(size, config.stride(dim), tiers)
        if size > together:
            together, tier = size, stages[-1].tier.name if stages else None
    return Share(partition.name, gpus, config, together, tier, items, tiers=tiers,
                 accelerator=partition.node.accelerator)


__all__ = ["Infeasible", "JobError", "job_entity", "job_plan"]
