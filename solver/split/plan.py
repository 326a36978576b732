"""Heterogeneous jobs: one training job over partitions of different chips (`on = [A.h100,
A.a100]`), split so that no partition idles waiting on another. Two splits, each a
small integer program solved exactly (solver/split/lanes.py), and the better one is the answer.

Each partition is first planned on its own (`solver.train.plan.plan` on the job restricted to
that partition, all its GPUs, the full batch). Its best configuration and runners-up,
and each of them with the other micro-batch sizes, are the alternatives it offers: the
split picks at most one per partition (a smaller micro-batch gives a finer granule of
sequences, at some cost per sequence) and decides how much of the work each takes.
Configurations are not re-planned for the share a partition ends up with. Partitions of
one kind (the same units, chips and tiers under other names: a fleet bought in batches) are
searched and laned once, and solver/split/lanes.py solves them as one class of copies (exact,
with none of the copies' permutations left to visit): the formulations below are per
partition for clarity; solver/split/search.py solves them without a MILP solver.

Data split (each partition holds whole model replicas; the global batch is divided):

    (p ranges over the alternatives; those of one partition satisfy sum u_p <= 1)

    variables  k_p  integer >= 0   granules of sequences for partition p; its share
                                    b_p = g_p k_p, g_p = dp x micro-batch (x pp when the
                                    schedule is interleaved), so its micro-batches divide
               u_p  binary         partition p takes part
               y_n  binary         exactly n partitions take part (n = 1..P)
               w    >= 0           the cross-partition gradient exchange
               t    >= 0           step time
    subject to sum_p g_p k_p = batch
               u_p <= k_p <= floor(batch / g_p) u_p
               sum_n y_n = 1,  sum_n n y_n = sum_p u_p
               w >= X_p(n) (u_p + y_n - 1)                     for all p, n >= 2
               t >= c_p u_p + d_p b_p + w - M (1 - y_n)         for all p, n
    minimize   t

    where c_p + d_p b is partition p's step time on b sequences: affine in b for a fixed
    configuration (micro-batches scale, the pipeline bubble, gradient synchronization
    and the optimizer do not), fitted exactly from the step model at b = g_p and
    b = batch; and X_p(n) is the all-reduce of the gradients between n partitions over
    the shared fabric: each of p's GPUs holds params x gradient bytes / GPUs after its
    own reduce-scatter, and exchanges it with n peers on p's top tier (in-network
    reduction where the fabric has it), exposed after the slowest partition. Because a
    partition may always be left out (u_p = 0), adding one never lowers throughput.

Pipeline split (layers across partitions, one pipeline through all of them):

    (p ranges over one alternative per pipeline depth pp_p of each partition)

    variables  k_p integer >= 0, L_p = pp_p k_p layers on p (whole layers per stage),
               u_p, y_n, w, t as above
    subject to sum_p L_p = layers, u_p <= k_p <= floor(cap_p / pp_p) u_p
               w >= A_p (u_p + y_n - 1)
               t >= (1 + (n - 1)/m) s_p L_p / layers + w - M (1 - y_n)
    minimize   t

    a fluid model: partition p runs L_p of the layers for the whole batch in
    L_p / layers of its own planned step time s_p; n partitions in a chain add a bubble
    of (n - 1)/m with m micro-batches (the fewest any alternative runs); A_p sends
    the activations and their gradients (4 x batch x seq x hidden bytes) across the
    boundary over the GPUs of one stage of p (tp x dp x cp) on p's top tier. cap_p is
    the layer count that fits p's memory (all of them when its own plan fits).

The data split is evaluated again with the step model at the chosen shares (the
reported times are the model's, not the split's), and never loses to running on the
best single partition. Utilization is a partition's busy time over the compute phase
of the step (the slowest partition: 1); the cross-partition exchange follows it.
"""

from __future__ import annotations

from typing import Sequence

import attrs

from ...compiler.design import Entity, Item, Record
from ...model import collectives, comms
from ...model.config import TrainConfig
from ...model.job import Job, JobError, job_from_entity, partition_refs
from ...model.train.optimizer import grad_bytes
from ...model.power import job_power
from ...model.train.step import Estimate, estimate
from ..train.enumerate import admissible, limits
from ..train.plan import Plan, plan
from ..train.search import search
from .lanes import Lane, split
from ...dsl.records import frozen

MODES = ("data", "pipeline")
MAX_MICROBATCH = 16          # as the enumerator


def partition_jobs(entity: Entity) -> list[Job]:
    """The job restricted to each partition it names, with all of that partition's GPUs.
    Each cluster is lowered once: the partitions of one cluster share its graph."""
    refs = partition_refs(entity)
    if not refs:
        return [job_from_entity(entity)]
    out, lowered = [], {}
    for ref in refs:
        items = tuple(Item(i.name, ref, i.span) if i.name == "on" else i for i in entity.record.items)
        restricted = attrs.evolve(entity, record=Record(items))
        first = lowered.get(id(ref.cluster))
        if first is None:
            job = lowered[id(ref.cluster)] = job_from_entity(restricted)
        else:
            job = attrs.evolve(first, entity=restricted, partition=first.graph.partition(ref.name))
        out.append(attrs.evolve(job, gpus=job.partition.gpus))
    return out


def kind(job: Job):
    """What a partition's plan depends on beyond the job it shares with the others: two
    partitions of one kind (the same units, chips and tiers under another name) have the
    same plan, lanes and costs, so each kind is planned and evaluated once."""
    return attrs.evolve(job.partition, name="")


def plan_partitions(jobs: Sequence[Job]) -> tuple[Plan, ...]:
    """Each partition planned alone on the full batch; the search runs once per kind."""
    searched: dict[object, object] = {}
    plans = []
    for job in jobs:
        key = kind(job)
        if key not in searched:
            searched[key] = search(job, "throughput")
        plans.append(plan(job, "throughput", searched=searched[key]))
    return tuple(plans)


# ----------------------------------------------------------------- results


@frozen
class Share:
    partition: str
    chip: str
    gpus: int                    # GPUs of the partition's configuration (0 when unused)
    items: int                   # sequences per step (data) or layers (pipeline)
    busy: float                  # s of the step it computes
    utilization: float           # busy / the compute phase (slowest = 1)
    config: TrainConfig | None
    fits: bool = True
    watts: float = 0.0           # W per GPU at the split's operating point (0 when unused)


@frozen
class HeteroSplit:
    mode: str                    # data | pipeline
    status: str                  # optimal | infeasible | error
    step_time: float = 0.0
    compute_time: float = 0.0
    exchange: float = 0.0        # s of cross-partition traffic after the compute phase
    tokens_per_s: float = 0.0
    shares: tuple[Share, ...] = ()
    power: float = 0.0           # W facility, the partitions taking part
    message: str = ""


@frozen
class HeteroPlan:
    job_kind = "hetero"   # not a field: what the views dispatch on (solver/jobs.py `Outcome`)
    name: str
    status: str                  # optimal | infeasible
    best: HeteroSplit | None
    data: HeteroSplit
    pipeline: HeteroSplit
    plans: tuple[Plan, ...]      # each partition planned alone on the full batch
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.best.tokens_per_s if self.best else 0.0

    @property
    def step_time(self) -> float | None:
        return self.best.step_time if self.best else None


# ----------------------------------------------------------------- the two splits


def _granule(cfg: TrainConfig) -> int:
    return cfg.dp * cfg.microbatch * (cfg.pp if cfg.vp > 1 else 1)


def _top_tier(job: Job):
    return job.partition.tiers[-1] if job.partition.tiers else None


def _gradient_exchange(job: Job, cfg: TrainConfig, peers: int) -> float:
    top = _top_tier(job)
    if top is None or peers < 2:
        return 0.0
    # the width the stack reduces gradients in, as inside a partition (model/train/optimizer.py)
    share = job.shape.params * grad_bytes(cfg) / cfg.gpus
    # ASSUMPTION: one NCCL call, one base, where DDP reduces in buckets (25 MB by default: several calls, each its
    # own base); at a model's gradient size the bytes dominate the bases
    return collectives.all_reduce(share, (comms.Stage(top, peers),))


def candidates(job: Job, chosen: Plan, micro: bool = True) -> list[Estimate]:
    """The configurations a partition offers the split: its plan's best and runners-up
    and, when `micro`, each of them with every other micro-batch size (a smaller one
    makes a finer granule of sequences); those admissible, fastest first, one per granule
    (data split, `micro`) or per pipeline depth (pipeline split)."""
    bases = ([chosen.best] if chosen.best else []) + list(chosen.runners_up)
    pool = list(bases)
    if micro and "microbatch" not in job.pinned:
        for base in bases:
            cfg = base.config
            per_replica = job.batch // cfg.dp
            for mb in range(1, min(per_replica, MAX_MICROBATCH) + 1):
                if per_replica % mb or mb == cfg.microbatch or (cfg.vp > 1 and (per_replica // mb) % cfg.pp):
                    continue
                pool.append(estimate(job.shape, attrs.evolve(cfg, microbatch=mb), job.partition))
    key = _granule if micro else (lambda c: c.pp)
    bounds = limits(job)          # memory within HBM and the job's `subject to`, as the search
    best: dict[object, Estimate] = {}
    for e in pool:
        k = key(e.config)
        if admissible(job, bounds, e) and (k not in best or e.step_time < best[k].step_time):
            best[k] = e
    return sorted(best.values(), key=lambda e: e.step_time)


def data_lanes(jobs: Sequence[Job], plans: Sequence[Plan]) -> list[Lane]:
    lanes, made = [], {}
    for job, chosen in zip(jobs, plans):
        name, key = job.partition.name, kind(job)
        if key not in made:
            made[key] = _data_lanes(job, chosen, len(jobs))
        lanes += [attrs.evolve(lane, name=name, group=name) for lane in made[key]]
    return lanes


def _data_lanes(job: Job, chosen: Plan, partitions: int) -> list[Lane]:
    lanes = []
    if chosen.best:
        name, batch = job.partition.name, job.batch
        for e in candidates(job, chosen):
            cfg, g = e.config, _granule(e.config)
            if batch > g:
                small = estimate(job.shape, attrs.evolve(cfg, batch=g), job.partition).step_time
                per = (e.step_time - small) / (batch - g)
                fixed = max(0.0, e.step_time - per * batch)
            else:
                per, fixed = e.step_time / batch, 0.0
            crossing = tuple(_gradient_exchange(job, cfg, n) for n in range(2, partitions + 1))
            lanes.append(Lane(name, g, fixed, per, batch, crossing, name, cfg))
    return lanes


def _share(job: Job, e: Estimate | None, items: int, busy: float, compute: float) -> Share:
    chip = job.partition.node.accelerator.name
    if e is None or items == 0:
        return Share(job.partition.name, chip, 0, 0, 0.0, 0.0, None)
    return Share(job.partition.name, chip, e.config.gpus, items, busy, busy / compute if compute > 0 else 1.0,
                 e.config, e.fits)


def _power(jobs: Sequence[Job], shares: Sequence[Share], estimates: Sequence[Estimate | None],
           step: float) -> tuple[float, tuple[Share, ...]]:
    """The facility watts of the partitions taking part, and the shares with each one's
    watts per GPU (the power view draws them)."""
    total, out = 0.0, []
    for job, share, e in zip(jobs, shares, estimates):
        if share.items == 0 or e is None:
            out.append(share)
            continue
        b = e.breakdown
        compute = min(1.0, (b.compute + b.recompute + b.optimizer) / e.step_time) if e.step_time else 1.0
        busy = compute * share.busy / step if step > 0 else compute
        drawn = job_power(job.graph, job.partition, share.gpus, busy)
        total += drawn.total
        out.append(attrs.evolve(share, watts=drawn.per_gpu))
    return total, tuple(out)


def data_split(jobs: Sequence[Job], plans: Sequence[Plan]) -> HeteroSplit:
    lanes = data_lanes(jobs, plans)
    if not lanes:
        return HeteroSplit("data", "infeasible", message="no partition can hold a model replica")
    chosen = split(jobs[0].batch, lanes)
    if chosen.status != "optimal":
        return HeteroSplit("data", chosen.status, message=chosen.message)
    picks: list[tuple[TrainConfig | None, int]] = []
    for job in jobs:
        used = [(lane.config, i) for lane, i in zip(lanes, chosen.items) if lane.key == job.partition.name and i > 0]
        picks.append(used[0] if used else (None, 0))
    options = [_evaluate_data(jobs, plans, lanes, picks)]
    kinds = set()
    for p, (job, chosen_p) in enumerate(zip(jobs, plans)):      # never worse than one partition alone
        if chosen_p.best is not None and kind(job) not in kinds:   # (the first of each kind)
            kinds.add(kind(job))
            alone: list[tuple[TrainConfig | None, int]] = [(None, 0)] * len(jobs)
            alone[p] = (chosen_p.best.config, job.batch)
            options.append(_evaluate_data(jobs, plans, lanes, alone))
    return min(options, key=lambda s: s.step_time)


def _evaluate_data(jobs: Sequence[Job], plans: Sequence[Plan], lanes: Sequence[Lane],
                   picks: Sequence[tuple[TrainConfig | None, int]]) -> HeteroSplit:
    estimates: list[Estimate | None] = []
    for job, chosen, (cfg, b) in zip(jobs, plans, picks):
        if b == 0 or cfg is None:
            estimates.append(None)
        elif chosen.best is not None and cfg == chosen.best.config and b == job.batch:
            estimates.append(chosen.best)
        else:
            estimates.append(estimate(job.shape, attrs.evolve(cfg, batch=b), job.partition))
    busy = [e.step_time if e is not None else 0.0 for e in estimates]
    compute = max(busy)
    used = sum(1 for e in estimates if e is not None)
    exchange = max((_gradient_exchange(job, e.config, used) for job, e in zip(jobs, estimates) if e is not None),
                   default=0.0)
    step = compute + exchange
    shares = tuple(_share(job, e, b, s, compute) for job, e, (_, b), s in zip(jobs, estimates, picks, busy))
    tokens = jobs[0].batch * jobs[0].seq / step
    fits = all(s.fits for s in shares if s.items)
    power, shares = _power(jobs, shares, estimates, step)
    return HeteroSplit("data", "optimal", step, compute, exchange, tokens, shares, power,
                       "" if fits else "a partition's share does not fit in memory")


def pipeline_split(jobs: Sequence[Job], plans: Sequence[Plan]) -> HeteroSplit:
    shape, batch, seq = jobs[0].shape, jobs[0].batch, jobs[0].seq
    layers = shape.layers
    lanes: list[Lane] = []
    by_config: dict[tuple[str, TrainConfig], Estimate] = {}
    for job, chosen in zip(jobs, plans):
        name, top = job.partition.name, _top_tier(job)
        bases = candidates(job, chosen, micro=False) if chosen.best else (
            [chosen.smallest] if chosen.smallest is not None else [])
        for base in bases:
            cfg = base.config
            cap = layers if base.fits else int(layers * base.hbm / base.memory.total)
            stage_gpus = cfg.tp * cfg.dp * cfg.cp
            send = 4 * batch * seq * shape.hidden / (stage_gpus * top.bandwidth * top.efficiency) if top else 0.0
            lanes.append(Lane(name, cfg.pp, 0.0, base.step_time / layers, cap, (send,) if send else (), name, cfg))
            by_config[(name, cfg)] = base
    if not lanes:
        return HeteroSplit("pipeline", "infeasible", message="no partition holds a layer")
    m = min((lane.config.microbatches for lane in lanes), default=1)
    bubble = [1 + n / m for n in range(len(jobs))]
    chosen = split(layers, lanes, bubble)
    if chosen.status != "optimal":
        return HeteroSplit("pipeline", chosen.status, message=chosen.message)
    compute, factor = chosen.compute_time, bubble[chosen.used - 1]
    shares, bases = [], []
    for job in jobs:
        used = [(lane, n) for lane, n in zip(lanes, chosen.items) if lane.key == job.partition.name and n > 0]
        if not used:
            shares.append(_share(job, None, 0, 0.0, compute))
            bases.append(None)
            continue
        lane, n = used[0]
        base = by_config[(lane.key, lane.config)]
        shares.append(_share(job, base, n, factor * lane.busy(n), compute))
        bases.append(base)
    step = chosen.step_time
    power, drawn = _power(jobs, shares, bases, step)
    return HeteroSplit("pipeline", "optimal", step, compute, chosen.exchange, batch * seq / step, drawn, power,
                       "fluid layer model: each partition's planned step time per layer, plus the chain's bubble")


def plan_hetero(entity_or_jobs, plans: Sequence[Plan] | None = None) -> HeteroPlan:
    """Split a job over its partitions; the better of the data and the pipeline split."""
    import time

    start = time.perf_counter()
    jobs = list(entity_or_jobs) if isinstance(entity_or_jobs, (list, tuple)) else partition_jobs(entity_or_jobs)
    if not jobs:
        raise JobError("no partitions to split over")
    plans = tuple(plans) if plans is not None else plan_partitions(jobs)
    data, pipe = data_split(jobs, plans), pipeline_split(jobs, plans)
    feasible = [s for s in (data, pipe) if s.status == "optimal"]
    best = feasible[0] if feasible else None
    for other in feasible[1:]:       # the pipeline split must win clearly: it is the coarser model
        if other.step_time < best.step_time * (1 - 1e-9):
            best = other
    return HeteroPlan(jobs[0].name, "optimal" if best else "infeasible", best, data, pipe, plans,
                      time.perf_counter() - start)
