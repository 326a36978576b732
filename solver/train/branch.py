"""The leaves of one micro-batch branch of the exact search (solver/train/search.py): every
configuration of a (tp, pp, cp, ep, dp, micro-batch) evaluated or cut by a bound or by memory."""

from __future__ import annotations

import collections
import itertools

from ...model.train.memory_grid import memory_grid
from ...model.train.step import Estimate, output_layer_time
from .bounds import SAFETY, bubble_share, fixed_time
from .enumerate import RECOMPUTE


def visit(search, branch) -> None:
    """Every configuration of one (tp, pp, cp, ep, dp, micro-batch) branch: evaluated or cut.

    Leaves are keyed (recompute, zero, vp, order). Per placement order, one probe (the
    most recompute allowed, the first vp) gives the order's CP, EP and PP time (the
    same for every recompute and ZeRO stage, and the least over vp) and, per ZeRO
    stage, the least DP time over recompute choices; with the branch's compute and
    TP time they bound the order, the stage, and each remaining configuration."""
    leaves = _Leaves(search, branch)
    rep = leaves.rep
    rep_key = ("none", search.top_zero, leaves.vps[0], leaves.orders[0])
    leaves.cache[rep_key] = rep
    if "none" in search.space.recomputes:
        leaves.evaluate(rep_key)
    for order in leaves.orders:
        b = rep.breakdown
        # the order's CP + EP + PP time: the representative's for its order, else at least its EP time
        leaves.visit_order(order, b.cp + b.ep + b.pp if order == leaves.orders[0] else b.ep)
    leaves.count_cut()


class _Leaves:
    """One branch's leaves: which fit in memory, which were evaluated, and the bounds that cut
    the rest (learnt from the leaves evaluated so far)."""

    def __init__(self, search, branch) -> None:
        self.tp, self.pp, self.dp, self.cp, self.ep, self.mb, self.vps, self.orders, rep, _ = branch
        if not isinstance(rep, Estimate):   # the representative's configuration: estimated only now
            rep = search.estimate(rep)
        self.search, self.rep, self.m, self.lim = search, rep, rep.config.microbatches, search.lim
        self.recomputes = sorted(search.space.recomputes, key=RECOMPUTE.index)
        self.zeros = sorted(search.space.zeros, key=lambda z: (z != 1, z))      # the distributed optimizer first
        self.need = memory_grid(search.job.shape, rep.config, self.recomputes, self.zeros, self.vps,  # not on the order
                                chip=search.job.partition.node.accelerator)
        self.evaluated: set[tuple] = set()   # the leaves offered; every other is cut, counted at the end
        self.cache: dict[tuple, Estimate] = {}
        self.fixed = {"none": fixed_time(rep)}  # compute + recompute + TP, per recompute choice ("none": the least)
        self.redo = {"none": 0.0}                # recompute time, per recompute choice
        self.floor_fixed, self.floor_optimizer = fixed_time(rep), rep.breakdown.optimizer
        self.compute = rep.breakdown.compute
        self.head = output_layer_time(search.job.shape, rep.config, search.job.partition)   # outside the bubble

    def fits(self, rc: str, z: int, vp: int) -> bool:
        return self.need[rc, z, vp] <= self.lim.memory

    def bound(self, rc: str, comm: float, dp_time: float, optimizer: float, vp_most: int, **fields) -> float:
        """A bound for configurations with recompute `rc` ("none": any) and vp <= `vp_most`."""
        search, f = self.search, self.fixed.get(rc, self.floor_fixed)
        step = f + comm + dp_time + optimizer + bubble_share(f + comm, self.pp, vp_most, self.m, self.head)
        value = search.value_bound(step * SAFETY, self.compute + self.redo.get(rc, 0.0) + optimizer, self.rep)
        if search.audit is not None:
            search.checked(value, tp=self.tp, pp=self.pp, dp=self.dp, cp=self.cp, ep=self.ep, microbatch=self.mb,
                           **fields)
        return value

    def evaluate(self, key: tuple) -> Estimate:
        if key not in self.cache:
            rc, z, vp, order = key
            self.cache[key] = self.search.estimate(self.search.config(self.tp, self.pp, self.dp, self.cp, self.ep,
                                                                      self.mb, vp, rc, z, order))
        e = self.cache[key]
        if key not in self.evaluated:
            self.evaluated.add(key)
            self.search.offer(e)
        self.fixed[key[0]], self.redo[key[0]] = fixed_time(e), e.breakdown.recompute
        return e

    def visit_order(self, order: tuple, comm: float) -> None:
        """One placement order's leaves, ZeRO stage by stage, with `comm` its CP + EP + PP time
        known so far."""
        search, vmax, vp0 = self.search, max(self.vps), self.vps[0]
        for z in self.zeros:
            keys = [(rc, z, vp, order) for rc in self.recomputes for vp in self.vps
                    if self.fits(rc, z, vp) and (rc, z, vp, order) not in self.evaluated]
            if not keys:
                continue
            # (a bound that cuts leaves them unevaluated: the count at the end counts them cut)
            if self.bound("none", comm, 0.0, self.floor_optimizer, vmax, order=order) >= search.top.threshold:
                break   # this stage and the later ones
            probe = self.evaluate((self.recomputes[-1], z, vp0, order)).breakdown
            comm = probe.cp + probe.ep + probe.pp
            if self.bound("none", comm, 0.0, self.floor_optimizer, vmax, order=order) >= search.top.threshold:
                break
            if self.bound("none", comm, probe.dp, probe.optimizer, vmax, order=order, zero=z) >= search.top.threshold:
                continue   # this stage
            for key in keys:
                rc, _, vp, _ = key
                if key not in self.evaluated and not self.bound(rc, comm, probe.dp, probe.optimizer, vp, order=order,
                                                                zero=z, recompute=rc, vp=vp) >= search.top.threshold:
                    self.evaluate(key)

    def count_cut(self) -> None:
        """Every leaf not evaluated was cut: by memory where it does not fit, else by a bound."""
        seen = collections.Counter([key[:3] for key in self.evaluated])     # (recompute, zero, vp) -> orders evaluated
        for rc, z, vp in itertools.product(self.recomputes, self.zeros, self.vps):
            left = len(self.orders) - seen[rc, z, vp]
            if left:
                self.search.pruned["bound" if self.fits(rc, z, vp) else "memory"] += left
