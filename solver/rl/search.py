"""The best pair of pools for an `rl` job: best-first search, exact over solver/rl/space.py.

Every point's training pool is planned exactly (solver/train, cheap) and its scoring, sync and
offload are closed forms; only the generation phase needs the simulator. Each point therefore
first gets a lower bound of its objective with the generation phase at its lower bounds
(solver/rl/generation.py `bound`: the slowest sample's tail, the busiest replica's work), and
enters a heap. The least bound is taken off: if its generation has been simulated the point is
the optimum (every other point's bound, and so its value, is at least as large: the step time,
the energy and the cost of a step never fall as generation takes longer, model/rl/step.py);
otherwise its generation is simulated and it goes back with its exact value. Every step reads
its batch's makespan (an overlapped one spread over the steps the batch spans, model/rl/step.py),
which no bound holds from above, so no point is exact before it is simulated; at equal values
simulated points come off first, so a training phase that dwarfs generation (`epochs = 1000`: every
point's step is then its training's) costs one simulation a plan reported. The search stops
once `top` + 1 exact points have come off the heap; those are the plan and its runners-up.

Power: a point whose exact facility power exceeds the job's bound is dropped when it comes off
(power is not monotone in the generation time: only exact points are judged).
`solver/rl/exhaustive.py` simulates every point instead; the tests check both agree.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time

import attrs

from ...compiler.design import Record
from ...dsl.numbers import count, quantity
from ...model.rl.job import RLJob
from ...model.rl.step import COLOCATED
from ...model.serve.engines import family_of
from ...model.serve.inference import Engine
from ..serve.space import engine_of
from . import generation as gen
from .pools import Candidate, TrainPool, evaluate, plan_train_pool
from .rollout import mean_length, rollout
from .space import Pools, gen_layouts, pools, staleness_choices
from ...dsl.records import frozen


@frozen
class SearchResult:
    best: tuple[Candidate, ...]          # the optimum, then the runners-up
    points: int                          # points of the space (pairs of pools x layouts x staleness)
    simulated: int                       # generation layouts simulated
    pruned: int                          # points whose bound alone ruled them out
    over_power: int                      # exact points over the power bound
    reasons: tuple[str, ...]             # why points were infeasible (when none is feasible)
    seconds: float


class Context:
    """The job's samples and engine, and the caches every search point shares."""

    def __init__(self, job: RLJob):
        self.job = job
        self.requests = rollout(job.entity)
        self.seq = max(1, round(mean_length(self.requests)))
        block = job.entity.get("generate") or Record()
        engine = engine_of(block)
        if block.get("engine.prefix_share") is None:   # a prompt's samples share its cache (vLLM's prefix caching)
            engine = attrs.evolve(engine, prefix_share=(job.samples - 1) / job.samples)
        # the stack launches its engines with NCCL's in-switch reduction off (model/rl/stacks.py [1352] [collnet])
        # and its vLLM hands the TP calls custom all-reduce refuses (across NVLink-joined hosts, or too large
        # inside one) to its own kernel where it has one ([symm]); another engine (SGLang) has no such path
        fallback = job.stack.engine_fallback_all_reduce if family_of(engine) == "vllm" else ""
        engine = attrs.evolve(engine, nccl_nvls=engine.nccl_nvls and job.stack.engine_nvls,
                              nccl_collnet=engine.nccl_collnet and job.stack.engine_collnet,
                              fallback_all_reduce=engine.fallback_all_reduce or fallback)
        self.engine: Engine = engine
        self.depth = max(1, job.staleness)   # steps' samples an asynchronous engine may hold at once
        self._train: dict = {}
        self._failed: dict[str, tuple[int, str]] = {}   # partition -> (GPUs, reason): its largest failed pool
        self._replicas: dict = {}
        self._bounds: dict = {}
        self._ceilings: dict = {}
        self._sims: dict = {}
        self._kept: dict = {}         # gen.shared_key -> what runs of one KV layout share (gen.shared_terms)
        self._iterations: dict = {}
        self._stats = gen.sample_stats(self.requests)   # the samples' means and longest response, read once
        self._areas: dict = {}        # gen.areas_key -> each share's cache area (gen.cache_areas)
        self._shares: dict = {}       # (gen.areas_key, batch) -> each share's sums (gen.ShareTerms)
        self.simulated = 0
        self.reasons: dict[str, None] = {}

    def train(self, name: str, gpus: int) -> TrainPool | None:
        key = (name, gpus)
        if key not in self._train:
            p = self.job.partition(name)
            pool = plan_train_pool(self.job, p, gpus, self.seq, self.job.memory_of(p))
            if isinstance(pool, str):
                self._train_failed(name, gpus, pool)
                pool = None
            self._train[key] = pool
        return self._train[key]

    def _train_failed(self, name: str, gpus: int, why: str) -> None:
        """One reason a partition: the largest pool tried on it that fits no layout, and why (a
        line for each size said the same thing a dozen times)."""
        earlier = self._failed.get(name)
        if earlier is not None:
            if earlier[0] > gpus:
                return
            self.reasons.pop(earlier[1], None)
        reason = (f"the policy's training fits no layout on {count(gpus, 'GPU')} of {name}, the largest pool tried "
                  f"there: {why}")
        self._failed[name] = (gpus, reason)
        self.reasons[reason] = None

    def replica(self, layout: gen.GenLayout):
        key = (layout.partition, layout.config)
        if key not in self._replicas:
            self._replicas[key] = gen.build(self.job.policy, self.job.partition(layout.partition), layout, self.engine)
        return self._replicas[key]

    def gen_limit(self, layout: gen.GenLayout, placement: str, train: TrainPool) -> float:
        """Bytes per GPU the engine may fill: the pool's bound, less (colocated) what training
        keeps there while the engine generates: the other models' weights. Its own weights, gradients
        and optimizer state wait in host memory (model/rl/host.py), or are the engine's own when both
        layouts split them alike (the engine reads the trained weights in place)."""
        partition = self.job.partition(layout.partition)
        limit = self.job.memory_of(partition)
        share = self.job.entity.get("generate.engine.memory")
        engine = float(share) * partition.node.accelerator.hbm_capacity if share is not None else limit
        if placement != COLOCATED:
            return min(limit, engine)
        return min(limit - train.resident, engine)

    def bound(self, layout: gen.GenLayout, limit: float) -> tuple[float, float] | None:
        key = (layout, limit)
        if key not in self._bounds:
            r = self.replica(layout)
            longest = gen.shared_terms(r, self.requests, self._kept)[0]     # the most cache one sample holds
            if gen.kv_capacity(r, limit) < longest:
                self.reasons[f"{layout.config.tp}x{layout.config.pp}x{layout.config.ep} replicas on "
                             f"{layout.partition} cannot hold the longest sample's cache"] = None
                self._bounds[key] = None
            else:
                areas = gen.areas_key(r, layout.replicas)
                if areas not in self._areas:
                    self._areas[areas] = gen.cache_areas(r, self.requests, layout.replicas)
                self._bounds[key] = gen.bound(r, layout, self.requests, gen.kv_capacity(r, limit), self.depth,
                                              self._areas[areas], self._shares, self._stats)
        return self._bounds[key]

    def ceiling(self, layout: gen.GenLayout, limit: float) -> float:
        """An upper bound of the stream without simulating: the steady time (the stream is the
        smaller of it and the makespan, solver/rl/generation.py)."""
        return self._per_layout(self._ceilings, gen.steady, layout, limit)

    def iterations(self, layout: gen.GenLayout, limit: float) -> tuple[float, float]:
        """The engine iterations the simulation would report (solver/rl/generation.py `iterations`)."""
        return self._per_layout(self._iterations, gen.iterations, layout, limit)

    def _per_layout(self, cache: dict, closed_form, layout: gen.GenLayout, limit: float):
        """`closed_form` (gen.steady, gen.iterations) of the layout's replica at its cache, computed once."""
        key = (layout, limit)
        if key not in cache:
            r = self.replica(layout)
            cache[key] = closed_form(r, layout, self.requests, gen.kv_capacity(r, limit), self.depth, self._stats)
        return cache[key]

    def simulate(self, layout: gen.GenLayout, limit: float) -> gen.Generation:
        run = self.begin(layout, limit)
        if isinstance(run, gen.GenerationRun):
            run = self._sims[(layout, limit)] = run.finish()
        return run

    def begin(self, layout: gen.GenLayout, limit: float) -> gen.Generation | gen.GenerationRun:
        """The layout's generation, or its simulation as far as it has run (`search` advances it
        only as far as its answer needs); a layout counts as simulated from its first event."""
        key = (layout, limit)
        if key not in self._sims:
            self.simulated += 1
            self._sims[key] = gen.begin_generation(self.replica(layout), layout, self.requests, limit, self.depth,
                                                   self._kept, self._stats)
        run = self._sims[key]
        if isinstance(run, gen.GenerationRun) and run.result is not None:
            run = self._sims[key] = run.result
        return run


def points(ctx: Context):
    """Every point of the space with its generation limit: (pools, layout, limit, train pool, staleness)."""
    for where in pools(ctx.job):
        train = ctx.train(where.train, where.train_gpus)
        if train is None:
            continue
        for layout in gen_layouts(ctx.job, ctx.job.partition(where.generate), where.gen_gpus):
            limit = ctx.gen_limit(layout, where.placement, train)
            for staleness in staleness_choices(ctx.job, where.placement):
                yield where, layout, limit, train, staleness


def search(job: RLJob, top: int = 3, ctx: Context | None = None) -> SearchResult:
    started = time.perf_counter()
    ctx = ctx or Context(job)
    heap: list = []
    tick = itertools.count()
    total = 0
    for where, layout, limit, train, staleness in points(ctx):
        total += 1
        bounds = ctx.bound(layout, limit)
        if bounds is None:
            continue
        placeholder = gen.Generation(layout, bounds[0], bounds[1], 0.0, 0.0, 0, 0, ctx.iterations(layout, limit))
        low = evaluate(job, where.placement, staleness, placeholder, train)
        value = low.value(job.objective)
        # no point is exact before it is simulated: every step reads its batch's makespan (colocated and
        # synchronous whole, overlapped spread over the steps it spans: model/rl/step.py), which no bound
        # holds from above; at equal values a point already simulated comes off first
        heapq.heappush(heap, (value, True, next(tick), (where, layout, limit, train, staleness), False))
    found, over = [], 0
    while heap and len(found) < top + 1:
        value, inexact, order, point, pending = heapq.heappop(heap)
        where, layout, limit, train, staleness = point
        if inexact:
            order = next(tick)      # its exact entry's place among equal values
            run = ctx.begin(layout, limit)
            if isinstance(run, gen.GenerationRun) and run.always_served():
                pending = True      # simulated only as far as the answer needs (`_advance`)
        if pending:
            run = ctx.begin(layout, limit)
            generation = run if isinstance(run, gen.Generation) else \
                _advance(job, heap, run, order, point, ctx.bound(layout, limit)[0])
            if generation is None:
                continue            # back in the heap at a higher bound
        else:
            generation = ctx.simulate(layout, limit)
        if not generation.feasible:
            continue
        candidate = evaluate(job, where.placement, staleness, generation, train)
        if inexact or pending:
            heapq.heappush(heap, (candidate.value(job.objective), False, order, point, False))
            continue
        if candidate.power > job.power:
            over += 1
            continue
        found.append(candidate)
    if over and not found:
        ctx.reasons[f"every plan found draws more than the {quantity(job.power, 'W')} power bound"] = None
    return SearchResult(tuple(found), total, ctx.simulated, max(0, len(heap)), over, tuple(ctx.reasons),
                        time.perf_counter() - started)


# `_advance` pauses a run first at this share of its makespan's bound (a layout whose run its
# paused bound rules out early, one whose cache thrashes, stops there), then at twice its clock up
# to that bound, then each time this much further in simulated time (its bound rises with it),
# weighing the point's bound against the heap's next entry at each pause.
EARLY = 0.25
ADVANCE = 1.1


def _advance(job: RLJob, heap: list, run: gen.GenerationRun, order: int, point: tuple,
             floor: float) -> gen.Generation | None:
    """A point whose generation is part-simulated: run it until it ends (its Generation) or until
    its bound passes the heap's next entry (it goes back in at that bound, keeping its exact
    entry's `order`: None). `floor`: the makespan's bound (`Context.bound`).

    Why the answer is the one a search that simulates each layout whole when it first comes off
    (and enters its exact value at once, at `order`) gives: there the exact entry (v, False, order)
    goes in; here (b, False, order) with b <= v: b is the point's value at lower bounds of the
    makespan and the stream (`GenerationRun.least`: every unserved sample ends at an event, none
    before the next one's time, nor before its replica has run the work it still needs), and the
    value never falls as generation takes longer (the search's own premise, module docstring),
    less a margin of 1e-9 of it for rounding. So every
    entry's key is at most the one that search holds for the point, and equal for every other
    entry; an entry that comes off is the least of those keys as well, so the entries that are
    answered (an exact point found or dropped, an inexact one started) come off in that search's
    order, with the same values and ties, and it stops after the same ones. A part-simulated point
    is left in the heap only where its run cannot end infeasible (`always_served`: that search
    would have dropped it), so the heap ends the same size; a layout counts as simulated once its
    run starts, where that search ran it whole."""
    where, layout, limit, train, staleness = point
    counted = gen.iterations(run.r, layout, run.requests, run.kv, run.depth)   # the finished run's own
    until = _pause(run.clock, floor)
    while True:
        generation = run.advance(until if heap else math.inf)
        if generation is not None:
            return generation
        makespan, stream = run.least()
        low = evaluate(job, where.placement, staleness, gen.Generation(layout, makespan, stream, 0.0, 0.0, 0, 0, counted), train)
        value = low.value(job.objective)
        if math.isfinite(value):
            value -= abs(value) * 1e-9
        if (value, False, order) > heap[0][:3]:
            heapq.heappush(heap, (value, False, order, point, True))
            return None
        until = _pause(max(until, run.clock), floor)


def _pause(clock: float, floor: float) -> float:
    """Where `_advance` pauses a run next, its clock at `clock` (its module note)."""
    return max(clock * ADVANCE, min(2 * clock, floor), floor * EARLY, 1e-3)


def generation_phase(ctx: Context, partition: str, gpus: int) -> gen.Generation | None:
    """The fastest generation of the step's samples on at most `gpus` GPUs of `partition` (the
    pool may leave GPUs idle: the dealt shares make the slowest sample land differently, so a
    layout with one replica more is not always faster), by makespan; best-first on the bounds."""
    from .space import sizes

    p = ctx.job.partition(partition)
    limit = ctx.job.memory_of(p)
    heap, tick = [], itertools.count()
    for size in sizes(p, gpus):
        for layout in gen_layouts(ctx.job, p, size):
            bounds = ctx.bound(layout, limit)
            if bounds is not None:
                heap.append((bounds[0], next(tick), False, layout))
    heapq.heapify(heap)
    while heap:
        _, _, exact, layout = heapq.heappop(heap)
        generation = ctx.simulate(layout, limit)
        if exact:
            return generation
        if generation.feasible:
            heapq.heappush(heap, (generation.makespan, next(tick), True, layout))
    return None


__all__ = ["Context", "Pools", "SearchResult", "generation_phase", "points", "search"]
