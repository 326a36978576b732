"""Exact branch-and-bound search for the best training configuration of a job.

It explores exactly the space of `solver.enumerate` (same validity, limits and
objective) and returns the same optimum and runners-up, evaluating a small part of it.
The tree, best bound first over a frontier of layouts and micro-batch branches:

1. Layout (tp, pp, cp, ep; dp is the largest valid). Cut whole when `job_power` at its
   GPU count, even with every GPU waiting, breaks `subject to { power <= ... }`. The
   micro-batches that can fit form a prefix (memory never grows as the micro-batch
   shrinks; the least-memory configuration of a micro-batch is full recompute if
   allowed, the highest ZeRO stage, any vp), and the rest is cut without an estimate.
   One estimate at the largest fitting micro-batch bounds the layout:

       compute(largest) + optimizer + (pp - 1) / vp_max * compute(largest) / most micro-batches

2. Micro-batch branch. One estimate (no recompute, the highest ZeRO stage, the first vp
   and placement order) bounds it: compute + TP + optimizer + the bubble's share of them.
   The search stops when the next bound on the frontier cannot beat the (top + 1)-th best
   value found, so the runners-up are exact too.
3. Inside a branch, per placement order, per ZeRO stage, per configuration: memory is
   checked exactly first (it does not depend on the order); one estimate per order gives
   its CP + EP + PP time (the order's bound), one per (order, stage) at the most
   recompute gives the least DP time over recompute choices and the exact optimizer
   time (the stage's bound); each configuration is then bounded with its own recompute's
   compute + recompute + TP and its own vp's bubble before it is estimated.

What the bounds rest on (tests/solver/test_bounds.py checks each on random designs, and
checks every bound the search computes against every configuration it covers, so a
recalibration that breaks one fails there rather than silently here):

- the step time is the sum of the breakdown's terms, all non-negative;
- compute, recompute and TP time do not depend on the ZeRO stage, vp or the placement
  order (tp is always innermost); no recompute has the least compute + recompute + TP;
- optimizer time depends only on the layout and the ZeRO stage, and does not grow with it;
- CP, EP and PP time do not depend on recompute or the ZeRO stage, CP and EP not on vp,
  and PP time does not shrink with more virtual stages;
- DP time does not depend on vp and does not grow with more recompute;
- the bubble is at least (pp - 1) / vp x (compute + recompute + TP + CP + EP + PP) / micro-batches;
- memory does not depend on the order and never grows with more recompute (none,
  selective, full), a higher ZeRO stage or a smaller micro-batch;
- compute per step never grows with the micro-batch: used only for dense layers and for
  MoE layouts whose micro-batches route whole tokens to every local expert (otherwise
  the layout is expanded without a layout bound);
- for MFU, MFU x step time is fixed within a layout; for energy, job power is affine in
  the busy share (checked at run time per GPU count; where it is not, power is read from
  `job_power` and bounded by its smaller end, which assumes it grows with the busy share).
"""

from __future__ import annotations

import heapq
import itertools
import time

import attrs

from ..model.config import TrainConfig
from ..model.job import Job
from ..model.memory import memory
from ..model.power import job_power
from ..model.step import Estimate, estimate
from . import enumerate as space_def
from .enumerate import RECOMPUTE, Limit, Limits

SAFETY = 1 - 1e-12   # bounds are scaled down by this, so rounding never makes one exceed a true value


@attrs.frozen
class Rejected:
    """An evaluated configuration better than the optimum that a limit excluded."""

    value: float
    estimate: Estimate
    limit: Limit


@attrs.frozen
class SearchResult:
    objective: str
    status: str                          # optimal | infeasible (valid configurations, none admissible) | empty
    best: Estimate | None
    value: float | None                  # objective value of `best` (lower is better)
    runners_up: tuple[Estimate, ...]
    runner_values: tuple[float, ...]
    configurations: int                  # size of the space (= enumerator's count)
    evaluated: int                       # configurations whose estimate was taken
    pruned_bound: int                    # cut by a lower bound on the objective
    pruned_memory: int                   # cut by memory without an estimate
    pruned_limits: int                   # cut by another limit (power) without an estimate
    estimates: int                       # estimate() calls, bounds included
    seconds: float
    rejected: tuple[Rejected, ...] = ()  # faster configurations that a limit excluded (witnesses)
    closest: tuple[tuple[str, float, Estimate], ...] = ()   # infeasible: best value reached per limit
    limits: Limits | None = None
    least_power: tuple[float, int] | None = None   # (W, GPUs): the lowest power floor of a layout cut by power

    @property
    def pruned(self) -> int:
        return self.pruned_bound + self.pruned_memory + self.pruned_limits

    @property
    def proof(self) -> str:
        if self.status == "empty":
            return "the space is empty: no configuration satisfies the pinned values and divisibility"
        head = (f"exhaustive with bound pruning over {self.configurations:,} configurations: "
                f"{self.evaluated:,} evaluated, {self.pruned_bound:,} cut by lower bounds "
                f"(compute + recompute + TP + optimizer + bubble share), {self.pruned_memory:,} cut by memory "
                f"(monotone in micro-batch, recompute and ZeRO stage)")
        if self.pruned_limits:
            head += f", {self.pruned_limits:,} cut by the power limit"
        if self.status == "infeasible":
            return head + "; no configuration is admissible"
        return head + "; gap 0"


class _Top:
    """The best `keep` admissible values seen; the worst of them is the pruning threshold."""

    def __init__(self, keep: int) -> None:
        self.keep, self.heap, self.count = keep, [], itertools.count()

    @property
    def threshold(self) -> float:
        return -self.heap[0][0] if len(self.heap) >= self.keep else float("inf")

    def offer(self, value: float, e: Estimate) -> None:
        item = (-value, -next(self.count), e)
        if len(self.heap) < self.keep:
            heapq.heappush(self.heap, item)
        elif value < -self.heap[0][0]:
            heapq.heapreplace(self.heap, item)

    def ranked(self) -> list[tuple[float, Estimate]]:
        return [(-v, e) for v, _, e in sorted(self.heap, key=lambda t: (-t[0], -t[1]))]


def fixed_time(e: Estimate) -> float:
    """Compute + recompute + TP: what every configuration sharing e's (tp, pp, cp, ep, dp,
    micro-batch, recompute) spends, whatever its ZeRO stage, vp or placement."""
    b = e.breakdown
    return b.compute + b.recompute + b.tp


def step_bound(fixed: float, optimizer: float, pp: int, vp: int, microbatches: int) -> float:
    """A lower bound on the step time: the fixed work, the optimizer and the bubble's share of it."""
    bubble = (pp - 1) / vp * fixed / microbatches if pp > 1 else 0.0
    return (fixed + optimizer + bubble) * SAFETY


class _Power:
    """Job power as a function of the GPU count and the busy share: `job_power`, read as
    P0 + (P1 - P0) x busy where it is affine (it is: activity is linear in busy)."""

    def __init__(self, job: Job) -> None:
        self.job, self.table = job, {}

    def ends(self, gpus: int) -> tuple[float, float, bool]:
        if gpus not in self.table:
            job = self.job
            p0, half, p1 = (job_power(job.graph, job.partition, gpus, b).total for b in (0.0, 0.5, 1.0))
            self.table[gpus] = (p0, p1, abs(half - (p0 + p1) / 2) <= 1e-9 * max(abs(p0), abs(p1), 1.0))
        return self.table[gpus]

    def __call__(self, e: Estimate) -> float:
        p0, p1, affine = self.ends(e.config.gpus)
        if not affine:
            return space_def.power_of(self.job, e)
        return p0 + (p1 - p0) * space_def.busy(e)

    def floor(self, gpus: int) -> float:
        p0, p1, _ = self.ends(gpus)
        return min(p0, p1)

    def energy_bound(self, gpus: int, step: float, work: float) -> float:
        """Joules per step at least, for a step of at least `step` s with at least `work`
        s of computing (busy = work / step, capped at 1)."""
        p0, p1, affine = self.ends(gpus)
        if not affine or p1 < p0:
            return min(p0, p1) * step * SAFETY
        return (p0 * step + (p1 - p0) * min(step, work)) * SAFETY


class _Search:
    def __init__(self, job: Job, objective: str, top: int, audit=None) -> None:
        if objective not in space_def.OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}")
        self.job, self.objective = job, objective
        self.lim = space_def.limits(job)
        self.space = space_def.space(job, self.lim)
        self.top = _Top(max(1, top + 1))
        self.total = self.evaluated = self.estimates = 0
        self.pruned = {"bound": 0, "memory": 0, "limits": 0}
        self.rejected: list[Rejected] = []
        self.closest: dict[str, tuple[float, Estimate]] = {}
        self.power = _Power(job)
        self.least_power: tuple[float, int] | None = None
        self.tokens = job.batch * job.seq
        rec = self.space.recomputes
        self.frugal_recompute = max(rec, key=RECOMPUTE.index)   # the least activation memory allowed
        self.top_zero = max(self.space.zeros)
        self.power_limit = next((lim for lim in self.lim.items if lim.target == "power" and lim.upper), None)
        # audit(bound, fields): called with every bound computed and the fields (tp, pp, dp,
        # cp, ep, microbatch, order, zero, recompute, vp) fixed in the part of the space it
        # covers; tests check each against every configuration of that part.
        self.audit = audit
        self.widest: dict[tuple, int] = {}          # (tp, pp, cp, ep) -> the most replicas
        self.per_sequence: dict[tuple, tuple[float, float]] = {}

    def checked(self, bound: float, **fields) -> float:
        if self.audit is not None:
            self.audit(bound, fields)
        return bound

    # ------------------------------------------------------------ helpers
    def config(self, tp, pp, dp, cp, ep, mb, vp, recompute, zero, order) -> TrainConfig:
        return space_def.make_config(self.job, self.space, tp, pp, dp, cp, ep, mb, vp, recompute, zero, order)

    def estimate(self, cfg: TrainConfig) -> Estimate:
        self.estimates += 1
        return estimate(self.job.shape, cfg, self.job.partition)

    def memory(self, cfg: TrainConfig) -> float:
        return memory(self.job.shape, cfg).total

    def value(self, e: Estimate) -> float:
        if self.objective == "energy":
            return self.power(e) / e.tokens_per_s
        return space_def.objective_value(self.job, self.objective, e)

    def value_bound(self, step: float, work: float, rep: Estimate) -> float:
        """A lower bound on the objective of a configuration on rep's GPUs whose step is at
        least `step` s, of which at least `work` s compute (compute + recompute + optimizer)."""
        if self.objective in ("throughput", "time"):
            return step
        if self.objective == "mfu":
            return -rep.mfu * rep.step_time / step if step > 0 else float("-inf")
        if self.objective == "goodput":  # the share depends on the GPU count alone
            share = space_def.goodput_share(self.job, rep.config.gpus)
            return -self.tokens / step * share if step > 0 else float("-inf")
        return self.power.energy_bound(rep.config.gpus, step, work) / self.tokens

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
        job, space = self.job, self.space
        pending = []      # best-first frontier: (bound, seq, kind, node), kind "layout" or "branch"
        seq = itertools.count()
        for tp, pp, cp, ep, dp in space_def.branches(job, space):
            orders = space_def.orders(tp, pp, dp, cp, ep)
            inner = space_def.inner_choices(job, pp, dp)
            per_vp = len(space.recomputes) * len(space.zeros) * len(orders)
            leaves = [len(vps) * per_vp for _, vps in inner]
            self.total += sum(leaves)
            gpus = tp * pp * cp * dp
            if self.power_limit is not None and not self.power_limit.holds(self.power.floor(gpus)):
                self.pruned["limits"] += sum(leaves)
                if self.least_power is None or self.power.floor(gpus) < self.least_power[0]:
                    self.least_power = (self.power.floor(gpus), gpus)
                continue
            layout = (tp, pp, dp, cp, ep, orders, inner, leaves)
            coarse = self.coarse_bound(layout)
            if coarse is None:
                self.open_layout(layout, pending, seq)
            else:
                heapq.heappush(pending, (coarse, next(seq), "replicas", layout))
        while pending:
            bound, _, kind, node = heapq.heappop(pending)
            if bound >= self.top.threshold:
                for _, _, k, n in [(bound, 0, kind, node), *pending]:
                    self.pruned["bound"] += sum(n[-1]) if k == "replicas" else sum(n[0][-1]) if k == "layout" else n[-1]
                break
            if kind == "replicas":
                self.open_layout(node, pending, seq)
            elif kind == "layout":
                self.expand(*node, pending, seq)
            else:
                self.visit(node)
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

    def open_layout(self, layout, pending: list, seq) -> None:
        """Cut a layout's micro-batches that cannot fit, then bound the rest as one node
        (compute monotone in the micro-batch) or push each micro-batch branch."""
        job = self.job
        tp, pp, dp, cp, ep, orders, inner, leaves = layout
        all_vps = space_def.vp_candidates(job, pp)
        fitting = 0
        for mb, _ in inner:
            least = min(self.memory(self.config(tp, pp, dp, cp, ep, mb, v, self.frugal_recompute,
                                                self.top_zero, orders[0])) for v in all_vps)
            if least > self.lim.memory:   # nor does any larger micro-batch fit
                break
            fitting += 1
        self.pruned["memory"] += sum(leaves[fitting:])
        if not fitting:
            return
        layout = (tp, pp, dp, cp, ep, orders, inner[:fitting], leaves[:fitting])
        if fitting > 1 and self.monotone_in_microbatch(layout):
            # Compute per step never grows with the micro-batch: the largest that fits
            # bounds them all, and the most micro-batches bound the bubble's share.
            rep = self.representative(layout, fitting - 1)
            b, most = rep.breakdown, job.batch // (dp * inner[0][0])
            bound = self.value_bound(step_bound(b.compute, b.optimizer, pp, max(all_vps), most),
                                     b.compute + b.optimizer, rep)
            bound = self.checked(bound, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep,
                                 microbatch=tuple(mb for mb, _ in inner[:fitting]))
            heapq.heappush(pending, (bound, next(seq), "layout", (layout, rep)))
        else:
            self.expand(layout, None, pending, seq)

    def coarse_bound(self, layout) -> float | None:
        """A bound on a layout of fewer than the most replicas, before any of its own
        estimates (None: open it now). Compute per sequence c(mb) does not depend on dp,
        so one estimate per (tp, pp, cp, ep) and micro-batch bounds every replica count:
        compute >= min c x batch / dp, and the bubble >= (pp - 1) / vp_max x min c; where
        compute never grows with the micro-batch, c at the largest allowed is the minimum."""
        tp, pp, dp, cp, ep, orders, inner, _ = layout
        key = (tp, pp, cp, ep)
        if key not in self.widest:      # the most replicas of this (tp, pp, cp, ep): opened at once
            self.widest[key] = dp
            return None
        pinned = self.job.pinned.get("microbatch")
        largest = int(pinned) if pinned is not None else space_def.MAX_MICROBATCH
        mbs = [mb for mb, _ in inner]
        if compute_monotone(self.job, tp, cp, ep, [largest, *mbs]):
            mbs = [largest]     # compute per sequence there is the least of every micro-batch's
        per_seq, flops_time = min(self.sequence_cost(key, mb, orders[0]) for mb in mbs)
        gpus, vmax = tp * pp * cp * dp, max(space_def.vp_candidates(self.job, pp))
        compute = per_seq * self.job.batch / dp
        step = (compute + ((pp - 1) / vmax * per_seq if pp > 1 else 0.0)) * SAFETY
        if self.objective in ("throughput", "time"):
            bound = step
        elif self.objective == "mfu":
            bound = -flops_time * self.job.batch / gpus / step if step > 0 else float("-inf")
        else:
            bound = self.power.energy_bound(gpus, step, compute * SAFETY) / self.tokens
        return self.checked(bound, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=tuple(mb for mb, _ in inner))

    def sequence_cost(self, key: tuple, mb: int, order: tuple) -> tuple[float, float]:
        """(compute seconds, model FLOPs over the chip's peak) per sequence of (tp, pp, cp, ep)
        at micro-batch `mb`: one estimate of a single micro-batch, the same for every dp."""
        if (key, mb) not in self.per_sequence:
            tp, pp, cp, ep = key
            cfg = attrs.evolve(self.config(tp, pp, 1, cp, ep, mb, 1, "none", self.top_zero, order), batch=mb)
            e = self.estimate(cfg)
            self.per_sequence[key, mb] = (e.breakdown.compute / mb, e.mfu * e.step_time * cfg.gpus / mb)
        return self.per_sequence[key, mb]

    def representative(self, layout, i: int) -> Estimate:
        """The estimate a micro-batch branch is bounded with: no recompute, the highest ZeRO stage."""
        tp, pp, dp, cp, ep, orders, inner, _ = layout
        mb, vps = inner[i]
        return self.estimate(self.config(tp, pp, dp, cp, ep, mb, vps[0], "none", self.top_zero, orders[0]))

    def expand(self, layout, known: Estimate | None, pending: list, seq) -> None:
        """Push every micro-batch branch of a layout with its bound (compute + TP + optimizer + bubble share)."""
        tp, pp, dp, cp, ep, orders, inner, leaves = layout
        for i, (mb, vps) in enumerate(inner):
            rep = known if known is not None and known.config.microbatch == mb else self.representative(layout, i)
            b = rep.breakdown
            bound = self.value_bound(step_bound(b.compute + b.tp, b.optimizer, pp, max(vps), rep.config.microbatches),
                                     b.compute + b.optimizer, rep)
            bound = self.checked(bound, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=mb)
            heapq.heappush(pending, (bound, next(seq), "branch", (tp, pp, dp, cp, ep, mb, vps, orders, rep, leaves[i])))

    def monotone_in_microbatch(self, layout) -> bool:
        tp, pp, dp, cp, ep, orders, inner, _ = layout
        return compute_monotone(self.job, tp, cp, ep, [mb for mb, _ in inner])

    def visit(self, branch) -> None:
        """Every configuration of one (tp, pp, cp, ep, dp, micro-batch) branch: evaluated or cut.

        Leaves are keyed (recompute, zero, vp, order). Per placement order, one probe (the
        most recompute allowed, the first vp) gives the order's CP, EP and PP time (the
        same for every recompute and ZeRO stage, and the least over vp) and, per ZeRO
        stage, the least DP time over recompute choices; with the branch's compute and
        TP time they bound the order, the stage, and each remaining configuration."""
        tp, pp, dp, cp, ep, mb, vps, orders, rep, _ = branch
        lim, space = self.lim, self.space
        m = rep.config.microbatches
        recomputes = sorted(space.recomputes, key=RECOMPUTE.index)
        frugal = recomputes[-1]
        zeros = sorted(space.zeros, key=lambda z: (z != 1, z))      # the distributed optimizer first
        vp0, vmax = vps[0], max(vps)
        fitting: dict[tuple, bool] = {}

        def fits(rc: str, z: int, vp: int) -> bool:
            key = (rc, z, vp)
            if key not in fitting:
                cfg = self.config(tp, pp, dp, cp, ep, mb, vp, rc, z, orders[0])
                fitting[key] = self.memory(cfg) <= lim.memory
            return fitting[key]
        status: dict[tuple, str] = {}
        cache: dict[tuple, Estimate] = {}
        fixed = {"none": fixed_time(rep)}        # compute + recompute + TP, per recompute choice ("none": the least)
        redo = {"none": 0.0}                      # recompute time, per recompute choice
        floor_fixed, floor_optimizer, compute = fixed_time(rep), rep.breakdown.optimizer, rep.breakdown.compute

        def bound(rc: str, comm: float, dp_time: float, optimizer: float, vp_most: int, **fields) -> float:
            """A bound for configurations with recompute `rc` ("none": any) and vp <= `vp_most`."""
            f = fixed.get(rc, floor_fixed)
            step = f + comm + dp_time + optimizer + ((pp - 1) / vp_most * (f + comm) / m if pp > 1 else 0.0)
            value = self.value_bound(step * SAFETY, compute + redo.get(rc, 0.0) + optimizer, rep)
            return self.checked(value, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=mb, **fields)

        def evaluate(key: tuple) -> Estimate:
            if key not in cache:
                rc, z, vp, order = key
                cache[key] = self.estimate(self.config(tp, pp, dp, cp, ep, mb, vp, rc, z, order))
            e = cache[key]
            if key not in status:
                status[key] = "evaluated"
                self.offer(e)
            fixed[key[0]], redo[key[0]] = fixed_time(e), e.breakdown.recompute
            return e

        def cut(keys, kind: str = "bound") -> None:
            for key in keys:
                if key not in status:
                    status[key] = kind
                    self.pruned[kind] += 1

        def live(z: int, order: tuple) -> list[tuple]:
            return [(rc, z, vp, order) for rc in recomputes for vp in vps if fits(rc, z, vp)]

        rep_key = ("none", self.top_zero, vp0, orders[0])
        cache[rep_key] = rep
        if "none" in space.recomputes:
            evaluate(rep_key)
        for order in orders:
            b = rep.breakdown
            comm = b.cp + b.ep + b.pp if order == orders[0] else None
            for i, z in enumerate(zeros):
                keys = [k for k in live(z, order) if k not in status]
                if not keys:
                    continue
                if comm is not None and bound("none", comm, 0.0, floor_optimizer, vmax, order=order) >= self.top.threshold:
                    cut(k for later in zeros[i:] for k in live(later, order))
                    break
                probe = evaluate((frugal, z, vp0, order)).breakdown
                comm = probe.cp + probe.ep + probe.pp
                if bound("none", comm, 0.0, floor_optimizer, vmax, order=order) >= self.top.threshold:
                    cut(k for later in zeros[i:] for k in live(later, order))
                    break
                if bound("none", comm, probe.dp, probe.optimizer, vmax, order=order, zero=z) >= self.top.threshold:
                    cut(keys)
                    continue
                for key in keys:
                    if key in status:
                        continue
                    rc, _, vp, _ = key
                    if bound(rc, comm, probe.dp, probe.optimizer, vp, order=order, zero=z, recompute=rc,
                             vp=vp) >= self.top.threshold:
                        cut((key,))
                    else:
                        evaluate(key)
        for rc, z, vp in itertools.product(recomputes, zeros, vps):
            cut(((rc, z, vp, order) for order in orders), "bound" if fits(rc, z, vp) else "memory")


def compute_monotone(job: Job, tp: int, cp: int, ep: int, microbatches) -> bool:
    """Whether the search may take compute per step not to grow with the micro-batch: for
    dense layers always (bigger GEMMs are never slower per token); for MoE layers only
    where every micro-batch routes whole tokens to every local expert, even split over the
    TP ranks (tokens x top_k divisible by the local experts), so no grouped GEMM rounds
    its rows."""
    shape = job.shape
    if not shape.is_moe:
        return True
    if shape.routed % ep:
        return False
    local, split = shape.routed // ep, cp * tp
    return all((mb * job.seq) % split == 0 and (mb * job.seq // split * shape.top_k) % local == 0
               for mb in microbatches)


def search(job: Job, objective: str = "throughput", top: int = 3, audit=None) -> SearchResult:
    """The optimum of the cost model for `job` under `objective`, the `top` runners-up,
    and how much of the space was evaluated and pruned (see the module docstring).
    `audit(bound, fields)`, if given, sees every lower bound the search computes."""
    return _Search(job, objective, top, audit).run()


def least_memory(job: Job) -> Estimate | None:
    """The valid configuration that needs the least memory per GPU, found with the same
    monotonicity as the search (more recompute, a higher ZeRO stage and a smaller
    micro-batch never need more)."""
    space = space_def.space(job)
    best_cfg, best_memory = None, float("inf")
    frugal = max(space.recomputes, key=RECOMPUTE.index)
    top_zero = max(space.zeros)
    for tp, pp, cp, ep, dp in space_def.branches(job, space):
        order = space_def.orders(tp, pp, dp, cp, ep)[0]
        all_vps = space_def.vp_candidates(job, pp)
        for mb, vps in space_def.inner_choices(job, pp, dp):
            def need(v: int) -> tuple[float, TrainConfig]:
                cfg = space_def.make_config(job, space, tp, pp, dp, cp, ep, mb, v, frugal, top_zero, order)
                return memory(job.shape, cfg).total, cfg
            if min(need(v)[0] for v in all_vps) >= best_memory:
                break       # no larger micro-batch needs less
            amount, cfg = min((need(v) for v in vps), key=lambda pair: pair[0])
            if amount < best_memory:
                best_cfg, best_memory = cfg, amount
    return None if best_cfg is None else estimate(job.shape, best_cfg, job.partition)
