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
    tp, pp, dp, cp, ep, mb, vps, orders, rep, _ = branch
    if not isinstance(rep, Estimate):   # the representative's configuration: estimated only now
        rep = search.estimate(rep)
    lim, space = search.lim, search.space
    m = rep.config.microbatches
    recomputes = sorted(space.recomputes, key=RECOMPUTE.index)
    frugal = recomputes[-1]
    zeros = sorted(space.zeros, key=lambda z: (z != 1, z))      # the distributed optimizer first
    vp0, vmax = vps[0], max(vps)
    need = memory_grid(search.job.shape, rep.config, recomputes, zeros, vps,   # memory: not on the order
                       chip=search.job.partition.node.accelerator)

    def fits(rc: str, z: int, vp: int) -> bool:
        return need[rc, z, vp] <= lim.memory

    evaluated: set[tuple] = set()   # the leaves offered; every other is cut, counted at the end
    cache: dict[tuple, Estimate] = {}
    fixed = {"none": fixed_time(rep)}        # compute + recompute + TP, per recompute choice ("none": the least)
    redo = {"none": 0.0}                      # recompute time, per recompute choice
    floor_fixed, floor_optimizer, compute = fixed_time(rep), rep.breakdown.optimizer, rep.breakdown.compute
    head = output_layer_time(search.job.shape, rep.config, search.job.partition)   # outside the bubble

    def bound(rc: str, comm: float, dp_time: float, optimizer: float, vp_most: int, **fields) -> float:
        """A bound for configurations with recompute `rc` ("none": any) and vp <= `vp_most`."""
        f = fixed.get(rc, floor_fixed)
        step = f + comm + dp_time + optimizer + bubble_share(f + comm, pp, vp_most, m, head)
        value = search.value_bound(step * SAFETY, compute + redo.get(rc, 0.0) + optimizer, rep)
        if search.audit is not None:
            search.checked(value, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatch=mb, **fields)
        return value

    def evaluate(key: tuple) -> Estimate:
        if key not in cache:
            rc, z, vp, order = key
            cache[key] = search.estimate(search.config(tp, pp, dp, cp, ep, mb, vp, rc, z, order))
        e = cache[key]
        if key not in evaluated:
            evaluated.add(key)
            search.offer(e)
        fixed[key[0]], redo[key[0]] = fixed_time(e), e.breakdown.recompute
        return e

    def live(z: int, order: tuple) -> list[tuple]:
        return [(rc, z, vp, order) for rc in recomputes for vp in vps if fits(rc, z, vp)]

    rep_key = ("none", search.top_zero, vp0, orders[0])
    cache[rep_key] = rep
    if "none" in space.recomputes:
        evaluate(rep_key)
    for order in orders:
        b = rep.breakdown
        # the order's CP + EP + PP time: the representative's for its order, else at least its EP time
        comm = b.cp + b.ep + b.pp if order == orders[0] else b.ep
        for i, z in enumerate(zeros):
            keys = [k for k in live(z, order) if k not in evaluated]
            if not keys:
                continue
            # (a bound that cuts leaves them unevaluated: the count at the end counts them cut)
            if bound("none", comm, 0.0, floor_optimizer, vmax, order=order) >= search.top.threshold:
                break   # this stage and the later ones
            probe = evaluate((frugal, z, vp0, order)).breakdown
            comm = probe.cp + probe.ep + probe.pp
            if bound("none", comm, 0.0, floor_optimizer, vmax, order=order) >= search.top.threshold:
                break
            if bound("none", comm, probe.dp, probe.optimizer, vmax, order=order, zero=z) >= search.top.threshold:
                continue   # this stage
            for key in keys:
                rc, _, vp, _ = key
                if key not in evaluated and not bound(rc, comm, probe.dp, probe.optimizer, vp, order=order, zero=z,
                                                      recompute=rc, vp=vp) >= search.top.threshold:
                    evaluate(key)
    # every leaf not evaluated was cut: by memory where it does not fit, else by a bound
    seen = collections.Counter([key[:3] for key in evaluated])     # (recompute, zero, vp) -> orders evaluated
    for rc, z, vp in itertools.product(recomputes, zeros, vps):
        left = len(orders) - seen[rc, z, vp]
        if left:
            search.pruned["bound" if fits(rc, z, vp) else "memory"] += left
