"""Exact branch-and-bound search for the best training configuration of a job.

It explores exactly the space of `solver.train.enumerate` (same validity, limits and
objective) and returns the same optimum and runners-up, evaluating a small part of it.
The tree, best bound first over one frontier; each node is bounded before it costs an
estimate, and tightened only when it reaches the front (`solver/train/bounds.py` turns a bound on
the step into one on the objective; `solver/train/branch.py` visits the leaves):

0. Replica count. Every layout (tp, pp, cp, ep, dp) waits unopened, bounded by compute
   per sequence, which does not depend on dp (one evaluation of the compute term per
   (tp, pp, cp, ep) and micro-batch): compute >= min c x batch / dp, plus the MoE host
   overhead and the bubble's share. A layout whose bound never reaches the front is never
   opened (its memory is never checked either: it counts as cut by a bound). Under the step
   objectives without a power limit, the layouts of one (tp, pp, cp, ep) wait as one chain,
   most replicas first, bounded by the least compute per sequence x batch / its most
   replicas; each layout gets its own bound only as the chain reaches the front.
1. Layout (tp, pp, cp, ep, dp). Cut whole when `job_power` at its GPU count, even with
   every GPU waiting, breaks `subject to { power <= ... }`. The micro-batches that can fit
   form a prefix (memory never grows as the micro-batch shrinks; the least-memory
   configuration of a micro-batch is full recompute if allowed, the highest ZeRO stage, any
   vp), and the rest is cut without an estimate. Without an estimate either, the compute
   term at the largest fitting micro-batch and the optimizer at the highest ZeRO stage
   bound the layout:

       compute(largest) + MoE overhead + optimizer + (pp - 1) / vp_max x that / most micro-batches

2. Micro-batch. Its own compute term, MoE overhead, the layout's least optimizer time and
   the bubble's share bound it before any estimate; at the front, the compute, TP, EP and
   optimizer terms of one configuration (no recompute, the highest ZeRO stage, the first vp
   and placement order: `model.train.step.bound_terms`, the estimate's own arithmetic) tighten it
   to compute + TP + EP + optimizer + the bubble's share, and it becomes a branch; that
   configuration's whole estimate waits for the branch's visit.
   The search stops when the next bound on the frontier cannot beat the (top + 1)-th best
   value found, so the runners-up are exact too. A node of steps 0 to 2 that reaches the
   front is first raised by the least gradient synchronization its configurations expose
   (solver/train/sync_bound.py: over the ZeRO stages at which one of them fits and the placement
   orders) and goes back if it no longer leads.
3. Inside a branch, per placement order, per ZeRO stage, per configuration: memory is
   checked exactly first (it does not depend on the order); one estimate per order gives
   its CP + EP + PP time (the order's bound; before it, EP alone), one per (order, stage)
   at the most recompute gives the least DP time over recompute choices and the exact
   optimizer time (the stage's bound); each configuration is then bounded with its own
   recompute's compute + recompute + TP and its own vp's bubble before it is estimated.

Operating points (solver/train/operating.py): under a power limit or for energy, the space
is searched once per clock step (a power cap per GPU), fastest first, with one top list, as
the variants below are; a layout at several caps holds one place among the runners-up. Under
a power limit every bound is also raised by what the limit implies: a configuration on G GPUs
within the limit computes at most (limit - P0(G)) / (P1(G) - P0(G)) of its step (power is
affine in the busy share), so its step is at least its computing time over that share, and a
layout whose GPUs draw more than the limit while they wait is cut whole.

Choices a job asks to search (`parallelism { search = [...] }`: shard group, recompute
modules and interval, offload) split the space into variants (`enumerate.variant_spaces`),
each explored as above with its choices fixed, so every bound is one of a pinned variant's.
The best values found carry over from variant to variant (one top list), and every
layout is bounded by compute before any is opened, so a variant that cannot beat the
values found costs a compute bound per layout.

What the bounds rest on (tests/solver/train/test_bounds.py checks each on random designs, and
checks every bound the search computes against every configuration it covers, so a
recalibration that breaks one fails there rather than silently here):

- the step time is the sum of the breakdown's terms, all non-negative;
- compute, recompute and TP time do not depend on the ZeRO stage, vp or the placement
  order (tp is always innermost); no recompute has the least compute + recompute + TP;
- optimizer time depends only on the layout and the ZeRO stage, and does not grow with it;
- CP, EP and PP time do not depend on recompute or the ZeRO stage, CP and EP not on vp,
  EP not on the order (expert groups take consecutive ranks), and PP time does not shrink
  with more virtual stages; EP time is at least the MoE layers' host overhead per micro-batch;
- DP time does not depend on vp and does not grow with more recompute, nor with a longer
  pass of a micro-batch through the stage's layers; the step less DP time holds m such passes;
- the bubble is at least (pp - 1) / vp x ((compute + recompute + TP + CP + EP + PP) / micro-batches
  - the output layer's time per micro-batch), which grows with the micro-batch;
- memory does not depend on the order and never grows with more recompute (none,
  selective, full), a higher ZeRO stage or a smaller micro-batch;
- compute per step never grows with the micro-batch: used only for dense layers and for
  MoE layouts whose micro-batches route whole tokens to every local expert (otherwise
  every micro-batch is bounded with its own compute);
- for MFU, MFU x step time x GPUs is fixed by the job; for energy, job power is affine in
  the busy share (checked at run time per GPU count; where it is not, power is read from
  `job_power` and bounded by its smaller end, which assumes it grows with the busy share);
  for goodput, the share of time that trains depends on the GPU count alone.
"""

from __future__ import annotations

import heapq
import itertools
import time

from ...model.config import TrainConfig
from ...model.job import Job
from ...model.train.memory_grid import fitting_microbatches
from ...model.train.step import (
    Estimate,
    bound_terms,
    compute_by_depth,
    estimate,
    optimizer_time,
    output_layer_time,
)
from . import enumerate as space_def
from .bounds import SAFETY, JobPower, ObjectiveBound, bubble_share, compute_monotone, step_bound
from .branch import visit
from .enumerate import RECOMPUTE, Limit
from .search_result import Rejected, SearchResult, Top
from .sync_bound import SyncFloor

__all__ = ["Rejected", "SearchResult", "compute_monotone", "search"]


class _Search:
    def __init__(self, job: Job, objective: str, top: int, audit=None) -> None:
        if objective not in space_def.OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}")
        self.base, self.job, self.objective = job, job, objective
        self.lim = space_def.limits(job)
        self.spaces = space_def.variant_spaces(job, space_def.space(job, self.lim))
        # The operating points beside the layout: the chip as it is, and under a power limit or
        # for energy each clock step (a power cap). One top list over all of them, so that the
        # same layout at another cap never counts as a runner-up of its own.
        self.caps = space_def.operating_caps(job, objective)
        self.top = Top(max(1, top + 1))
        self.total = self.evaluated = self.estimates = 0
        self.pruned = {"bound": 0, "memory": 0, "limits": 0}
        self.rejected: list[Rejected] = []
        self.closest: dict[str, tuple[float, Estimate]] = {}
        self.least_power: tuple[float, int] | None = None
        self.power_limit = next((lim for lim in self.lim.items if lim.target == "power" and lim.upper), None)
        # audit(bound, fields): called with every bound computed and the fields (tp, pp, dp,
        # cp, ep, microbatch, order, zero, recompute, vp, power_cap) fixed in the part of the
        # space it covers; tests check each against every configuration of that part.
        self.audit = audit
        self.layouts: dict[int, list[tuple]] = {}   # id(space) -> its layouts (`layouts_of`)
        self.coarse_parts: dict[tuple, tuple] = {}  # (tp, pp, cp, ep, dp) -> `coarse_bound`'s cap-free parts
        # Memory reads no power cap (`fits_nowhere`), so what a layout's memory allows is found
        # once for every operating point: id(space) -> (tp, pp, dp, cp, ep) -> its micro-batches that
        # fit (`open_layout`), and id(space) -> `SyncFloor.fitting_zeros`' answers
        self.fitting: dict[int, dict[tuple, int]] = {}
        self.fitting_zeros: dict[int, dict[tuple, tuple[int, ...]]] = {}
        self.at_cap(self.caps[0])
        self.use(self.spaces[0] if self.spaces else space_def.space(job, self.lim))

    def at_cap(self, cap: float | None) -> None:
        """Search the operating point of power cap `cap` next (None: the chip as it is): the
        job on chips under that cap, and its power and bounds there."""
        self.cap, self.job = cap, space_def.at_cap(self.base, cap)
        self.power = JobPower(self.job)
        self.bound = ObjectiveBound(self.job, self.objective, self.power,
                                    self.power_limit.value if self.power_limit is not None else None)

    def use(self, space) -> None:
        """Search `space` next: one variant of the choices the job asks to search (the whole
        space when it asks for none). The best values found so far carry over; every layout
        is bounded before any is opened (`coarse_bound`)."""
        self.space = space
        self.make_config = space_def.config_maker(self.job, space, self.cap)
        self.frugal_recompute = max(space.recomputes, key=RECOMPUTE.index)   # the least activation memory allowed
        self.sync = SyncFloor(self.job, self.make_config, space.zeros, self.frugal_recompute, self.lim.memory,
                              lambda pp: space_def.vp_candidates(self.job, pp), self.fitting_zeros.setdefault(id(space), {}))
        self.fits = self.fitting.setdefault(id(space), {})
        self.top_zero = max(space.zeros)
        self.per_sequence: dict[tuple, tuple[float, float, float]] = {}
        pinned = self.job.pinned.get("microbatch")
        self.largest_microbatch = int(pinned) if pinned is not None else space_def.MAX_MICROBATCH

    def checked(self, bound: float, **fields) -> float:
        """Show `bound` to the audit (callers skip the call, and building its fields, when
        nothing audits: a search bounds tens of thousands of nodes)."""
        if self.audit is not None:
            # a searched variant fixes its choices too (shard, recompute modules and interval, offload)
            self.audit(bound, fields | (dict(self.space.pinned_only) if self.space.searched else {})
                       | {"power_cap": self.cap})
        return bound

    # ------------------------------------------------------------ helpers
    def config(self, tp, pp, dp, cp, ep, mb, vp, recompute, zero, order) -> TrainConfig:
        return self.make_config(tp, pp, dp, cp, ep, mb, vp, recompute, zero, order)

    def estimate(self, cfg: TrainConfig) -> Estimate:
        self.estimates += 1
        return estimate(self.job.shape, cfg, self.job.partition)

    def value(self, e: Estimate) -> float:
        if self.objective == "energy":
            return self.power(e) / e.tokens_per_s
        if self.objective == "cost":
            per_second, per_joule = space_def.cost_rates(self.job)
            return (per_second + per_joule * self.power(e)) / e.tokens_per_s
        return space_def.objective_value(self.job, self.objective, e)

    def value_bound(self, step: float, work: float, rep: Estimate) -> float:
        """A lower bound on the objective of a configuration on rep's GPUs whose step is at
        least `step` s, of which at least `work` s compute (compute + recompute + optimizer)."""
        gpus = rep.config.gpus
        return self.bound(gpus, step, work, rep.mfu * rep.step_time * gpus)

    def offer(self, e: Estimate) -> None:
        """Count an evaluated configuration and keep it if admissible."""
        self.evaluated += 1
        value = self.value(e)
        broken = space_def.violated(self.job, self.lim, e, self.power)
        if broken is None:
            self.top.offer(value, e)
            return
        if value < self.top.threshold:
            self.rejected.append(Rejected(value, e, broken))
        if not self.top.heap:  # nothing admissible yet: remember how close each limit came
            self._closest(broken, e)

    def _closest(self, broken: Limit, e: Estimate) -> None:
        target = broken.target
        amount = space_def.measure(self.job, e, target, self.power)
        if amount is None:
            return
        gap = amount - broken.value if broken.upper else broken.value - amount
        if target not in self.closest or gap < self.closest[target][0]:
            self.closest[target] = (gap, e)

    # ------------------------------------------------------------ the tree
    def run(self) -> SearchResult:
        start = time.perf_counter()
        if self.fits_nowhere():
            self.count_unopened()
        else:
            for cap in self.caps:
                self.at_cap(cap)
                for space in self.spaces:
                    self.use(space)
                    self.explore()
        ranked = self.top.ranked()
        best_value = ranked[0][0] if ranked else None
        rejected = tuple(sorted((r for r in self.rejected if best_value is None or r.value < best_value),
                                key=lambda r: r.value))
        status = "optimal" if ranked else ("infeasible" if self.total else "empty")
        return SearchResult(
            self.objective, status, ranked[0][1] if ranked else None, best_value,
            tuple(e for _, e in ranked[1:]), tuple(v for v, _ in ranked[1:]), self.total, self.evaluated,
            self.pruned["bound"], self.pruned["memory"], self.pruned["limits"], self.estimates,
            time.perf_counter() - start, rejected,
            tuple((k, gap, e) for k, (gap, e) in sorted(self.closest.items(), key=lambda kv: kv[1][0])),
            self.lim, self.least_power)

    def fits_nowhere(self) -> bool:
        """Whether no layout of any variant holds even its smallest micro-batch at its least
        memory (the most recompute allowed, the highest ZeRO stage, the best vp): `open_layout`'s
        own test, so every layout the search would open is cut by memory and none need be. The
        scan stops at the first layout that fits (on a design that plans, the first or second).
        One scan holds at every operating point: memory reads the chip's vendor and capacity,
        which no power cap changes (model/dvfs.py `with_cap` sets its power_cap alone)."""
        for space in self.spaces:
            self.use(space)
            for tp, pp, cp, ep, dp, orders, inner, _, _ in self.layouts_of(space):
                if self.fitting_of(tp, pp, dp, cp, ep, orders, inner):
                    return False
        return True

    def fitting_of(self, tp: int, pp: int, dp: int, cp: int, ep: int, orders, inner) -> int:
        """How many of a layout's micro-batches (ascending) can fit at their least memory: the
        most recompute allowed, the highest ZeRO stage, the best vp. Found once a space for
        every operating point (`self.fits`: memory reads no power cap)."""
        fitting = self.fits.get((tp, pp, dp, cp, ep))
        if fitting is None:
            job = self.job
            frugal = self.config(tp, pp, dp, cp, ep, inner[0][0], 1, self.frugal_recompute, self.top_zero, orders[0])
            fitting = self.fits[tp, pp, dp, cp, ep] = fitting_microbatches(
                job.shape, frugal, self.frugal_recompute, self.top_zero, space_def.vp_candidates(job, pp),
                [mb for mb, _ in inner], self.lim.memory, job.partition.node.accelerator)
        return fitting

    def count_unopened(self) -> None:
        """Where nothing fits (`fits_nowhere`): count every layout as `explore` would, cut by the
        power limit while its GPUs wait or else by memory, without bounding or opening any."""
        for cap in self.caps:
            self.at_cap(cap)
            for space in self.spaces:
                self.use(space)
                for tp, pp, cp, ep, dp, _, _, _, count in self.layouts_of(space):
                    self.total += count
                    if not self.power_cut(tp * pp * cp * dp, count):
                        self.pruned["memory"] += count

    def power_cut(self, gpus: int, count: int, within: dict[int, bool] | None = None) -> bool:
        """Cut a layout of `count` configurations on `gpus` GPUs whole when its GPUs draw more than
        the job's power limit while they wait (`within`: GPU count -> whether they draw within it)."""
        if self.power_limit is None:
            return False
        fits = within.get(gpus) if within is not None else None
        if fits is None:
            fits = self.power_limit.holds(self.power.floor(gpus))
            if within is not None:
                within[gpus] = fits
        if fits:
            return False
        self.pruned["limits"] += count
        if self.least_power is None or self.power.floor(gpus) < self.least_power[0]:
            self.least_power = (self.power.floor(gpus), gpus)
        return True

    def explore(self) -> None:
        """Best-first over the current space's frontier, until no bound can beat the top."""
        # best-first frontier: (bound, seq, kind, node, leaves covered)
        self.pending, self.seq = [], itertools.count()
        within: dict[int, bool] = {}   # GPU count -> whether its GPUs draw within the limit while they wait
        # (tp, pp, cp, ep) -> its layouts, bounded one at a time (`push_chain`) where that is exact
        chains: dict[tuple, list] | None = {} if self.chained() else None
        for tp, pp, cp, ep, dp, orders, inner, leaves, count in self.layouts_of(self.space):
            self.total += count
            if self.power_cut(tp * pp * cp * dp, count, within):
                continue
            layout = (tp, pp, dp, cp, ep, orders, inner, leaves)
            if chains is not None:   # (layouts_of lists each tp x pp x cp x ep's replica counts together, most first)
                chains.setdefault((tp, pp, cp, ep), []).append((layout, count))
                continue
            bound, sync = self.coarse_bound(layout)
            self.push(bound, "replicas", layout, count, sync)
        for chain in (chains or {}).values():
            self.push_chain(chain)
        pending = self.pending
        while pending:
            bound, _, kind, node, leaves, sync = heapq.heappop(pending)
            if bound >= self.top.threshold:
                self.pruned["bound"] += leaves + sum(item[4] for item in pending)
                break
            if sync is not None:    # at the front: raise the bound by the synchronization first
                raised = self.with_sync(*sync)
                if raised > bound:
                    self.push(raised, kind, node, leaves)
                    continue
            if kind == "chain":
                self.unchain(*node)
            elif kind == "replicas":
                self.open_layout(node)
            elif kind == "layout":
                self.expand(*node)
            elif kind == "microbatch":
                self.bound_branch(*node, bound)
            else:
                visit(self, node)

    def layouts_of(self, space) -> list[tuple]:
        """(tp, pp, cp, ep, dp, orders, inner choices, leaves per micro-batch, leaves) of every
        layout of `space`: the same at every power cap, so listed once per space."""
        found = self.layouts.get(id(space))
        if found is None:
            job, per_vp = self.job, len(space.recomputes) * len(space.zeros)
            # (pp, dp, orders) -> (inner choices, leaves per micro-batch): the inner choices depend on pp and dp alone
            choices: dict[tuple[int, int, int], tuple[tuple, tuple[int, ...]]] = {}
            found = self.layouts[id(space)] = []
            for tp, pp, cp, ep, dp in space_def.branches(job, space):
                orders = space_def.orders(tp, pp, dp, cp, ep)
                known = choices.get((pp, dp, len(orders)))
                if known is None:
                    inner = space_def.inner_choices(job, pp, dp)
                    known = choices[pp, dp, len(orders)] = (inner, tuple(len(vps) * per_vp * len(orders)
                                                                         for _, vps in inner))
                found.append((tp, pp, cp, ep, dp, orders, *known, sum(known[1])))
        return found

    def push(self, bound: float, kind: str, node, leaves: int, sync: tuple | None = None) -> None:
        """`sync`: what `with_sync` raises the bound with when the node reaches the front."""
        heapq.heappush(self.pending, (bound, next(self.seq), kind, node, leaves, sync))

    def with_sync(self, layout: tuple, gpus: int, step: float, work: float, flops_time: float, microbatches: int,
                  fields: dict | None) -> float:
        """The bound of a node whose step is at least `step` without the data-parallel
        synchronization, raised by the least that its configurations expose (solver/train/sync_bound.py)."""
        bound = self.bound(gpus, self.sync.step(layout, step, microbatches), work, flops_time)
        if self.audit is not None:
            self.checked(bound, **fields, fitting=True)   # (it covers the configurations that fit)
        return bound

    def open_layout(self, layout) -> None:
        """Cut a layout's micro-batches that cannot fit, then bound the rest as one node
        (compute monotone in the micro-batch) or push each micro-batch."""
        job = self.job
        tp, pp, dp, cp, ep, orders, inner, leaves = layout
        all_vps = space_def.vp_candidates(job, pp)
        # the least-memory configuration of the smallest micro-batch: the others' memory is read off it
        fitting = self.fitting_of(tp, pp, dp, cp, ep, orders, inner)
        self.pruned["memory"] += sum(leaves[fitting:])
        if not fitting:
            return
        frugal = self.config(tp, pp, dp, cp, ep, inner[0][0], 1, self.frugal_recompute, self.top_zero, orders[0])
        layout = (tp, pp, dp, cp, ep, orders, inner[:fitting], leaves[:fitting])
        # The optimizer at the highest ZeRO stage: the least of every configuration of the
        # layout (it reads neither the micro-batch nor the recompute: frugal's is theirs).
        optimizer = optimizer_time(job.shape, frugal, job.partition)
        if fitting > 1 and compute_monotone(job, tp, cp, ep, [mb for mb, _ in inner[:fitting]]):
            # Compute per step never grows with the micro-batch: the largest that fits
            # bounds them all, and the most micro-batches bound the bubble's share.
            largest = inner[fitting - 1][0]
            # (the output layer's time per micro-batch grows with it: the largest's bounds them all)
            per_seq, flops_time, overhead, head = self.sequence_cost((tp, pp, cp, ep), largest, orders[0])
            compute, most = per_seq * job.batch / dp, job.batch // (dp * inner[0][0])
            fixed = compute + overhead * (job.batch // (dp * largest))
            step = step_bound(fixed, optimizer, pp, max(all_vps), most, head)
            bound = self.bound(tp * pp * cp * dp, step, (compute + optimizer) * SAFETY, flops_time * job.batch)
            fields = None
            if self.audit is not None:
                fields = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=tuple(mb for mb, _ in inner[:fitting]))
                self.checked(bound, **fields)
            sync = ((tp, pp, dp, cp, ep, orders, inner[0][0]), tp * pp * cp * dp, step, (compute + optimizer) * SAFETY,
                    flops_time * job.batch, max(1, job.batch // (dp * largest)), fields)
            self.push(bound, "layout", (layout, optimizer), sum(leaves[:fitting]), sync)
        else:
            self.expand(layout, optimizer)

    def coarse_bound(self, layout) -> tuple[float, tuple]:
        """A bound on a layout before any of its own estimates, and what raises it at the
        front. Compute per sequence c(mb) does not depend on dp, so one evaluation per (tp, pp,
        cp, ep) and micro-batch bounds every replica count:
        compute >= min c x batch / dp, and the bubble >= (pp - 1) / vp_max x min c; where
        compute never grows with the micro-batch, c at the largest allowed is the minimum.
        (Opening a layout costs its memory check, optimizer and micro-batches: most layouts
        never reach the front, so none is opened before it does.)"""
        tp, pp, dp, cp, ep, orders, inner, _ = layout
        key = (tp, pp, cp, ep)
        mbs, vmax, fewest = self.coarse_parts_of(tp, pp, cp, ep, dp, inner)
        costs = [self.sequence_cost(key, mb, orders[0]) for mb in mbs]
        # (lists rather than generators: a layout's few micro-batches, thousands of layouts)
        per_seq, flops_time = min([c[0] for c in costs]), costs[0][1]
        overhead = min([c[2] for c in costs])     # EP's host overhead per micro-batch (0: dense)
        head = max([c[3] for c in costs])         # the most output-layer time per micro-batch
        compute = per_seq * self.job.batch / dp
        step = (compute + overhead * fewest + bubble_share(per_seq + overhead, pp, vmax, 1, head)) * SAFETY
        bound = self.bound(tp * pp * cp * dp, step, compute * SAFETY, flops_time * self.job.batch)
        fields = None
        if self.audit is not None:
            fields = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=tuple(mb for mb, _ in inner))
            self.checked(bound, **fields)
        return bound, ((tp, pp, dp, cp, ep, orders, inner[0][0]), tp * pp * cp * dp, step, compute * SAFETY,
                       flops_time * self.job.batch, max(1, fewest), fields)

    def chained(self) -> bool:
        """Whether the layouts of one (tp, pp, cp, ep) wait as one chain (`push_chain`): where
        the objective is the step (throughput, time) without a power limit, whose bound is the
        step bound itself."""
        return self.objective in ("throughput", "time") and self.power_limit is None

    def push_chain(self, chain: list[tuple], per_seq: float | None = None) -> None:
        """Push the layouts of one (tp, pp, cp, ep), replica counts most first, as one node bounded
        by compute alone: c x batch / dp, dp the most replicas in the chain and c the least
        compute per sequence of any micro-batch `coarse_bound` reads for one of them (the
        largest allowed, and each layout's own: `per_seq`, kept for the rest of the chain).
        Every layout's `coarse_bound` is at least this (it adds the MoE overhead and the
        bubble's share, and fewer replicas compute more each), so a chain whose front never
        reaches the front costs one bound, not one per layout."""
        tp, pp, dp, cp, ep, orders, inner, _ = chain[0][0]
        if per_seq is None:
            key, mbs = (tp, pp, cp, ep), {self.largest_microbatch}
            if self.job.shape.is_moe:   # (dense: compute never grows with the micro-batch, the largest's is the least)
                mbs.update(mb for (layout, _) in chain for mb in self.coarse_parts_of(*key, layout[2], layout[6])[0])
            per_seq = min([self.sequence_cost(key, mb, orders[0])[0] for mb in sorted(mbs)])
        step = per_seq * self.job.batch / dp * SAFETY + self.bound.fixed   # (the step objective's bound is its step)
        if self.audit is not None:
            for (_, _, dp_, _, _, _, inner_, _), _ in chain:
                self.checked(step, tp=tp, pp=pp, dp=dp_, cp=cp, ep=ep, microbatch=tuple(mb for mb, _ in inner_))
        self.push(step, "chain", (chain, per_seq), sum(count for _, count in chain))

    def unchain(self, chain: list[tuple], per_seq: float) -> None:
        """A chain at the front: its first layout waits with its own `coarse_bound`, the rest as a chain."""
        (layout, count), rest = chain[0], chain[1:]
        bound, sync = self.coarse_bound(layout)
        self.push(bound, "replicas", layout, count, sync)
        if rest:
            self.push_chain(rest, per_seq)

    def coarse_parts_of(self, tp: int, pp: int, cp: int, ep: int, dp: int, inner) -> tuple:
        """What `coarse_bound` reads of a layout that no power cap changes: the micro-batches
        whose compute bounds the layout's (the largest allowed alone where compute never grows
        with it), the most virtual stages and the fewest micro-batches."""
        key = (tp, pp, cp, ep, dp)
        found = self.coarse_parts.get(key)
        if found is None:
            largest, batch = self.largest_microbatch, self.job.batch
            mbs = [mb for mb, _ in inner]
            if compute_monotone(self.job, tp, cp, ep, [largest, *mbs]):
                mbs = [largest]     # compute per sequence there is the least of every micro-batch's
            fewest = batch // (dp * inner[-1][0])     # micro-batches ascending: the largest last
            found = self.coarse_parts[key] = (mbs, max(space_def.vp_candidates(self.job, pp)), fewest)
        return found

    def sequence_cost(self, key: tuple, mb: int, order: tuple) -> tuple[float, float, float, float]:
        """(compute seconds, model FLOPs over the chip's peak) per sequence of (tp, pp, cp, ep)
        at micro-batch `mb`, the MoE host overhead and the output layer's seconds per
        micro-batch: the same for every dp, and computed for every pp at once (the layers'
        work does not depend on it)."""
        cost = self.per_sequence.get((key, mb))
        if cost is None:
            tp, pp, cp, ep = key
            job = self.job
            pps = [depth for depth in self.space.pps if tp * depth * cp <= self.space.gpus]   # (as `branches`)
            cfg = self.make_config(tp, pp, 1, cp, ep, mb, 1, "none", self.top_zero, order, batch=mb)
            head = output_layer_time(job.shape, cfg, job.partition)
            for depth, (compute, flops, overhead) in zip(pps, compute_by_depth(job.shape, cfg, job.partition, pps)):
                self.per_sequence[(tp, depth, cp, ep), mb] = (compute / mb, flops / mb, overhead, head)
            cost = self.per_sequence[key, mb]
        return cost

    def representative(self, layout, i: int) -> TrainConfig:
        """The configuration a micro-batch branch is bounded with: no recompute, the highest ZeRO stage."""
        tp, pp, dp, cp, ep, orders, inner, _ = layout
        mb, vps = inner[i]
        return self.config(tp, pp, dp, cp, ep, mb, vps[0], "none", self.top_zero, orders[0])

    def expand(self, layout, optimizer: float) -> None:
        """Push every micro-batch of a layout, bounded before any estimate of its own by its
        compute per sequence, the layout's least optimizer time and the bubble's share."""
        tp, pp, dp, cp, ep, orders, inner, leaves = layout
        gpus, batch = tp * pp * cp * dp, self.job.batch
        for i, (mb, vps) in enumerate(inner):
            per_seq, flops_time, overhead, head = self.sequence_cost((tp, pp, cp, ep), mb, orders[0])
            compute, m = per_seq * batch / dp, batch // (dp * mb)
            step = step_bound(compute + overhead * m, optimizer, pp, max(vps), m, head)
            bound = self.bound(gpus, step, (compute + optimizer) * SAFETY, flops_time * batch)
            fields = None
            if self.audit is not None:
                fields = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=mb)
                self.checked(bound, **fields)
            sync = ((tp, pp, dp, cp, ep, orders, inner[0][0]), gpus, step, (compute + optimizer) * SAFETY, flops_time * batch,
                    max(1, m), fields)
            self.push(bound, "microbatch", (layout, i), leaves[i], sync)

    def bound_branch(self, layout, i: int, floor: float) -> None:
        """Bound micro-batch `i` of a layout with its representative's compute + TP + EP +
        optimizer + bubble share (at least `floor`, the bound it had) and push the branch. Only
        those terms are computed here (the whole estimate waits for the branch's visit), but
        for the MFU objective, whose bound reads the representative's MFU."""
        tp, pp, dp, cp, ep, orders, inner, leaves = layout
        mb, vps = inner[i]
        cfg = self.representative(layout, i)
        rep = self.estimate(cfg) if self.objective == "mfu" else None
        if rep is not None:
            b = rep.breakdown   # EP time is the same for every order, recompute and ZeRO stage, and least
            # at the smallest vp (the overlap's unpaired passes grow with vp): the representative's
            compute, tp_time, ep_time, optimizer = b.compute, b.tp, b.ep, b.optimizer
            flops_time = rep.mfu * rep.step_time * cfg.gpus
        else:
            compute, tp_time, ep_time, optimizer = bound_terms(self.job.shape, cfg, self.job.partition)
            flops_time = 0.0    # read by the MFU objective's bound only
        head = self.sequence_cost((tp, pp, cp, ep), mb, orders[0])[3]   # the output layer's time (expand read it)
        step = step_bound(compute + tp_time + ep_time, optimizer, pp, max(vps), cfg.microbatches, head)
        bound = self.bound(cfg.gpus, step, compute + optimizer, flops_time)
        fields = None
        if self.audit is not None:
            fields = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=mb)
            self.checked(bound, **fields)
        sync = ((tp, pp, dp, cp, ep, orders, inner[0][0]), cfg.gpus, step, compute + optimizer, flops_time,
                cfg.microbatches, fields)
        self.push(max(bound, floor), "branch", (tp, pp, dp, cp, ep, mb, vps, orders, rep or cfg, leaves[i]), leaves[i],
                  sync)


def search(job: Job, objective: str = "throughput", top: int = 3, audit=None) -> SearchResult:
    """The optimum of the cost model for `job` under `objective`, the `top` runners-up,
    and how much of the space was evaluated and pruned (see the module docstring).
    `audit(bound, fields)`, if given, sees every lower bound the search computes."""
    return _Search(job, objective, top, audit).run()
