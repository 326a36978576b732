"""What the scheduler schedules, built from the design: every `train` job of the root
file (and `rl` job: solver/rl/schedule.py) and every row of its `workload` blocks, with
the partitions each may use, the GPU counts it may run at and its rate at each (from `plan`
for train jobs), its work, and its checkpoint. Problems are located diagnostics (a job
larger than any partition, an unknown GPU type, a job without work), never exceptions."""

from __future__ import annotations

import math

import attrs

from ...dsl import codes
from ...compiler.design import Design, Entity
from ...dsl.diagnostics import Diagnostic, Label
from ...dsl.numbers import number, percent
from ...compiler.ir import ClusterGraph, Partition
from ...compiler.lower import lower_cluster
from ...model.job import Job, job_from_entity
from ...compiler.trace import MAX_SECONDS, beyond_horizon, priority_value, workload_jobs
from ...dsl.source import SourceFile
from .contention import StepCurve
from .failures import checkpoint, node_storage, reliability
from .goodput import Reliability, goodput
from .records import Option, SchedJob, Workload
from .services import days_covered, service_of, stretches
from .tenants import tenants_of, unknown_tenants
from .time_limit import expected_run, requested

MAX_SIZES = 6     # GPU counts tried per partition for a job with a range
# GPUs of one partition the simulation tracks, node by node: five times the largest cluster the
# examples hold (gb200_nvl72_100k.gcl); 1e30 GPUs in a node overflowed its int64 arrays (fuzz)
MAX_SCHEDULED_GPUS = 1_000_000


class ScheduleError(Exception):
    def __init__(self, diagnostics: list[Diagnostic], sources: tuple[SourceFile, ...] = ()):
        super().__init__("; ".join(d.summary for d in diagnostics))
        self.diagnostics, self.sources = diagnostics, sources


def build(design: Design, cluster_name: str | None = None, plan_fn=None) -> Workload:
    """Every job of the root file on one cluster; raises ScheduleError with diagnostics."""
    cluster = _cluster(design, cluster_name)
    too_large = _too_large(cluster)
    if too_large:
        raise ScheduleError(too_large)
    graph, rates = _lowered(cluster)
    problems: list[Diagnostic] = []
    jobs: list[SchedJob] = []
    sources: list[SourceFile] = []
    curves: dict = {}        # each train option's step at shares of the tiers (contention.py)
    for entity in design.local():
        if entity.kind in ("train", "rl") and _on_cluster(entity, cluster) and _late(entity, problems):
            continue
        if entity.kind == "train" and _on_cluster(entity, cluster):
            job = _train(entity, cluster, graph, rates, plan_fn, problems, curves)
            jobs += [job] if job is not None else []
        elif entity.kind == "rl" and _on_cluster(entity, cluster):
            job = _rl(entity, problems)
            jobs += [job] if job is not None else []
        elif entity.kind == "workload" and _on_cluster(entity, cluster):
            rows, found, source = workload_jobs(entity)
            problems += found
            sources += [source] if source is not None else []
            jobs += [j for j in (_row(r, entity, cluster, graph, problems) for r in rows) if j is not None]
    jobs += _services(design, cluster, graph, jobs, problems)
    if not jobs and not problems:
        problems.append(codes.NO_SIZE.make(cluster.span, what=f"no train job or workload runs on `{cluster.name}`",
                                           notes=["help: add a `train` job `on` it or a `workload` block"]))
    tenants = tenants_of(design, cluster)
    problems += unknown_tenants(jobs, tenants, cluster)
    if problems:
        raise ScheduleError(problems, tuple(sources))
    return Workload(graph, cluster, tuple(jobs), rates, tuple(sources), tenants, curves)


def _late(entity: Entity, problems: list[Diagnostic]) -> bool:
    """Whether a train or rl job's `submit` (or `duration`) passes what a schedule simulates
    (compiler/trace.py MAX_SECONDS), adding the located error if so."""
    late = [f for f in ("submit", "duration") if entity.get(f) is not None and float(entity.get(f).value) > MAX_SECONDS]
    if late:
        problems.append(beyond_horizon(entity.span_of(late[0]), late[0], float(entity.get(late[0]).value)))
    return bool(late)


def _services(design: Design, cluster: Entity, graph: ClusterGraph, others: list[SchedJob],
              problems: list[Diagnostic]) -> list[SchedJob]:
    """Every serve job on the cluster as stretches of serving over the days the others need."""
    serving = [e for e in design.local() if e.kind == "serve" and _on_cluster(e, cluster)]
    if not serving:
        return []
    days = days_covered(others)
    out = []
    for entity in serving:
        service = service_of(entity, graph, problems)
        out += stretches(service, entity, days) if service is not None else []
    return out


def train_job(entity: Entity, cluster: Entity, plan_fn=None) -> tuple[SchedJob | None, list[Diagnostic]]:
    """One train job as `build` schedules it on `cluster`, with the time it asks for (what
    the exports ask the real scheduler for), or None and the problems that keep it out."""
    graph, rates = _lowered(cluster)
    problems: list[Diagnostic] = []
    return _train(entity, cluster, graph, rates, plan_fn, problems), problems


def _too_large(cluster: Entity) -> list[Diagnostic]:
    """A partition of more GPUs than the simulation tracks, at its `units`."""
    found = []
    for p in lower_cluster(cluster).partitions:
        if p.gpus > MAX_SCHEDULED_GPUS:
            part = (cluster.get("partition") or {}).get(p.name) if cluster.get("partition") is not None else None
            span = part.span_of("units") if part is not None else cluster.span_of("units")
            found.append(codes.NO_SIZE.make(
                span or cluster.span, what=f"`{p.name}` holds {p.gpus:,} GPUs; `gclc schedule` simulates at most "
                f"{MAX_SCHEDULED_GPUS:,} GPUs a partition, node by node",
                notes=["help: schedule a smaller cluster (`--set` a smaller count of nodes or GPUs a node)"]))
    return found


def _lowered(cluster: Entity) -> tuple[ClusterGraph, dict[str, Reliability]]:
    graph = lower_cluster(cluster)
    return graph, {p.name: reliability(cluster, graph, p) for p in graph.partitions}


def _cluster(design: Design, name: str | None) -> Entity:
    clusters = [e for e in design.local() if e.kind == "cluster"] or list(design.of_kind("cluster"))
    if name is not None:
        clusters = [c for c in design.of_kind("cluster") if c.name == name]
    if not clusters:
        raise ScheduleError([codes.NO_SIZE.make(None, what=f"no cluster {f'`{name}` ' if name else ''}to schedule on")])
    return clusters[0]


def _on_cluster(entity: Entity, cluster: Entity) -> bool:
    on = entity.get("on")
    return any(getattr(t, "cluster", t).name == cluster.name for t in (on if isinstance(on, tuple) else (on,)))


def _partitions(entity: Entity, field: str, graph: ClusterGraph) -> list[Partition]:
    target = entity.get(field)
    if target is None:
        return []
    out = []
    for t in target if isinstance(target, tuple) else (target,):
        out += [graph.partition(t.name)] if hasattr(t, "cluster") else list(graph.partitions)
    return list(dict.fromkeys(out))


def _ordered(entity: Entity, graph: ClusterGraph) -> tuple[list[Partition], tuple[str, ...]]:
    allowed = _partitions(entity, "on", graph)
    prefer = [p for p in _partitions(entity, "prefer", graph) if p in allowed]
    return prefer + [p for p in allowed if p not in prefer], tuple(p.name for p in prefer)


def _sizes(low: int, high: int, step: int) -> list[int]:
    """Candidate GPU counts from high down to low: the ends, one, two and four steps (nodes)
    below the top (an elastic job makes room for a service's few nodes without halving),
    and powers of two of `step`; the largest MAX_SIZES of them."""
    sizes, n = {high, low} | {high - k * step for k in (1, 2, 4) if high - k * step > low}, step
    while n < high:
        if n > low:
            sizes.add(n)
        n *= 2
    return sorted(sizes, reverse=True)[:MAX_SIZES]


def _train(entity, cluster, graph, rates, plan_fn, problems, curves=None) -> SchedJob | None:
    from ..train.plan import plan as make_plan
    from ..train.review import fewer_gpus

    plan_fn = plan_fn or make_plan
    partitions, prefer = _ordered(entity, graph)
    weight, label = priority_value(entity.get("priority"))
    largest = max(p.gpus for p in partitions)
    want_high = entity.get("gpus") or largest
    want_low = entity.get("min_gpus") or want_high
    if want_low > largest:
        problems.append(codes.JOB_TOO_LARGE.make(entity.span_of("min_gpus" if entity.get("min_gpus") else "gpus"),
                                                 job=entity.name, gpus=want_low, most=largest,
                                                 labels=[Label(entity.span_of("on"), "where it may run")]))
        return None
    options, job0, fewer = _train_options(entity, cluster, graph, rates, plan_fn, partitions, (want_low, want_high),
                                          curves)
    if not options:
        span = entity.span_of(next((f for f in ("min_gpus", "gpus") if entity.get(f)), "on"))
        if fewer:
            job, best = fewer
            reason, fill = fewer_gpus(job, best.config)
            what = f"`{entity.name}` asks for {job.gpus:,} GPUs, but its best plan on them uses {best.config.gpus:,}: {reason}"
            notes = _fewer_help(job, best, fill, plan_fn)
        else:
            what = f"`{entity.name}` has no feasible plan on {want_low:,} to {want_high:,} GPUs of the partitions it may use"
            notes = ["help: `gclc plan` on the job says why it has no feasible plan"]
        problems.append(codes.NO_FEASIBLE_SIZE.make(span, what=what, notes=notes))
        return None
    work, unit = _work(entity, job0.batch, job0.seq, options[0])
    if work is None:
        problems.append(codes.NO_SIZE.make(entity.span, what=f"`{entity.name}` has no amount of work to schedule",
                                           notes=["help: add `tokens = 1 T`, `steps = 10000` or `duration = 2 d`"]))
        return None
    submit, stated = entity.get("submit"), entity.get("time_limit")
    # asked for the slowest way it may run, so that no option it starts on is cut short
    slowest = max(expected_run(work, o.rate, o.interval, o.write) for o in options)
    limit = requested(float(stated.value) if stated is not None else None, slowest)
    return SchedJob(entity.name, weight, label, float(submit.value) if submit is not None else 0.0, work, unit,
                    bool(entity.get("gang", True)), tuple(options), prefer, entity.span, limit,
                    getattr(entity.get("tenant"), "name", ""), user=entity.get("user") or "")


def _fewer_help(job: Job, best, fill: int | None, plan_fn) -> list[str]:
    """A stated size the best plan leaves partly idle (the schedule holds exactly `gpus`): the
    two ways out, the plan's own size or `fill` replicas pinned to fill the stated one (planned
    here, so that the note says what it costs)."""
    used = best.config.gpus
    notes = [f"help: run it on {used:,} GPUs with `min_gpus = {used}` (or `gpus = {used}`): "
             f"{number(best.tokens_per_s)} tokens/s"]
    filled = plan_fn(attrs.evolve(job, pinned={**job.pinned, "dp": fill}), "throughput", 0).best if fill else None
    if filled is not None and filled.config.gpus == job.gpus:
        notes.append(f"help: or hold all {job.gpus:,} with `dp = {fill}` in its `parallelism`: "
                     f"{number(filled.tokens_per_s)} tokens/s ({'+' if filled.tokens_per_s >= best.tokens_per_s else '-'}"
                     f"{percent(abs(filled.tokens_per_s / best.tokens_per_s - 1))})")
    return notes


def _train_options(entity, cluster, graph, rates, plan_fn, partitions, wanted: tuple[int, int], curves):
    """(the job's options, one per partition and GPU count its plan uses; the first job planned;
    (the job on the GPUs given, its best plan) where that plan uses fewer than the job's floor, or None), over the sizes from
    `wanted`'s low to high GPUs on each partition it may use."""
    want_low, want_high = wanted
    # the fewest GPUs a plan may use: the job's stated floor; without one, any plan the
    # planner finds on the GPUs it may take (it leaves GPUs idle that do not help)
    least = entity.get("min_gpus") or entity.get("gpus") or 1
    job0: Job | None = None
    options, fewer = [], None
    for p in partitions:
        high = min(want_high, p.gpus)
        if want_low > high:
            continue
        base = attrs.evolve(job_from_entity(_pinned_to(entity, cluster, p)), graph=graph, partition=p)
        storage = node_storage(cluster, p)
        for n in _sizes(want_low, high, p.node.gpus):
            job = attrs.evolve(base, gpus=n)
            chosen = plan_fn(job, "throughput", 0)
            if chosen.best is not None and chosen.best.config.gpus < least:
                fewer = fewer or (job, chosen.best)
            elif chosen.best is not None:
                used = chosen.best.config.gpus
                ckpt = checkpoint(entity, job.shape, storage, used, p.node.gpus, p.node.accelerator)
                good = goodput(ckpt, rates[p.name].rate(used))
                options.append(Option(p.name, used, chosen.best.tokens_per_s, good.interval, good.write,
                                      good.restart, good.efficiency))
                if curves is not None:
                    curves[(entity.name, p.name, used)] = StepCurve(job.shape, chosen.best.config, job.partition)
                job0 = job0 or job
    return list({(o.partition, o.gpus): o for o in options}.values()), job0, fewer


def _rl(entity: Entity, problems: list[Diagnostic]) -> SchedJob | None:
    """An rl job: one gang holding both its pools, on one partition or two (solver/rl/schedule.py)."""
    from ..rl.schedule import gang_options

    found = gang_options(entity, problems)
    if found is None:
        return None
    options, steps = found
    weight, label = priority_value(entity.get("priority"))
    submit, limit = entity.get("submit"), entity.get("time_limit")
    return SchedJob(entity.name, weight, label, float(submit.value) if submit is not None else 0.0, steps, "steps",
                    True, tuple(Option(p, gpus, rate, math.inf, 0.0, 0.0, None, companion)
                                for p, gpus, rate, companion in options), (),
                    entity.span, float(limit.value) if limit is not None else math.inf,
                    getattr(entity.get("tenant"), "name", ""))


def _pinned_to(entity: Entity, cluster: Entity, p: Partition) -> Entity:
    """`entity` as if it ran `on` partition `p` alone (what `job_from_entity` evaluates)."""
    from ...compiler.design import Item, Partition as PartitionRef, Record

    on = PartitionRef(cluster, p.name) if cluster.get("partition") is not None else cluster
    items = tuple(Item(i.name, on, i.span) if i.name == "on" else i for i in entity.record.items)
    return attrs.evolve(entity, record=Record(items))


def time_asked(entity: Entity, batch: int, seq: int, option: Option) -> float | None:
    """The time limit the schedule's rule gives `entity` were `option` its only way to run
    (what an export asks for a plan the schedule itself would not start); None without work."""
    work, _ = _work(entity, batch, seq, option)
    if work is None:
        return None
    stated = entity.get("time_limit")
    return requested(float(stated.value) if stated is not None else None,
                     expected_run(work, option.rate, option.interval, option.write))


def _work(entity: Entity, batch: int, seq: int, first: Option) -> tuple[float | None, str]:
    if entity.get("tokens") is not None:
        return float(entity.get("tokens")), "tokens"
    if entity.get("steps") is not None:
        return float(entity.get("steps") * batch * seq), "tokens"
    if entity.get("duration") is not None:  # the time it takes at its largest size on its first partition
        return float(entity.get("duration").value) * first.rate, "tokens"
    return None, "tokens"


def _seconds(value, default: float) -> float:
    return float(value.value) if value is not None else default


def _row(row, workload: Entity, cluster: Entity, graph: ClusterGraph, problems) -> SchedJob | None:
    partitions = _partitions(workload, "on", graph)
    if row.type is not None:
        typed = [p for p in partitions if row.type.lower() in (p.name.lower(), p.node.accelerator.name.lower())]
        if not typed:
            known = sorted({p.name for p in partitions} | {p.node.accelerator.name for p in partitions})
            problems.append(codes.TRACE_ROW.make(row.span, what=f"GPU type `{row.type}` is no partition or chip of "
                                                 f"`{workload.name}`'s target", notes=[codes.suggest(row.type, known)
                                                                                       or f"known: {', '.join(known)}"]))
            return None
        partitions = typed
    largest = max(p.gpus for p in partitions)
    if row.gpus > largest:
        problems.append(codes.JOB_TOO_LARGE.make(row.span, job=row.name, gpus=row.gpus, most=largest))
        return None
    gang = bool(workload.get("gang", True))
    # a trace row has no model: its rate is its GPU count (work in GPU-seconds), and it
    # checkpoints as the workload's `checkpoint` block says (else a failure loses the run)
    interval, write, restart = (_seconds(workload.get(f"checkpoint.{k}"), d)
                                for k, d in (("interval", float("inf")), ("write", 0.0), ("restart", 0.0)))
    options = tuple(Option(p.name, row.gpus, float(row.gpus), interval, write, restart, None)
                    for p in partitions if row.gpus <= p.gpus)
    return SchedJob(row.name, row.priority, row.label, row.submit, row.duration * row.gpus, "GPU-s", gang,
                    options, (), row.span, row.time_limit, row.tenant, user=row.user)
