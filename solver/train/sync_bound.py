"""The search's bounds raised by data-parallel synchronization (solver/train/search.py).

A bound B on a configuration's step, from every term but the gradient synchronization's
(compute, TP, EP, optimizer, the bubble), bounds S = the step less that synchronization.
S holds every micro-batch's pass through the stage's layers, so the layer pass is at most
S / m (m micro-batches), and the exposed synchronization never grows with the layer pass
(model/train/dp_sync.py `exposed`). The step is then at least

    min over S >= B of  S + exposed(S / m),

a piecewise linear function of S whose least value lies at B or at a kink (`dp_sync.kinks`
times m). Taken over every placement order and every ZeRO stage at which some configuration
of the layout fits in memory (the least memory of a stage: the most recompute, the best vp,
the layout's smallest micro-batch; one check per layout), it bounds every configuration of
the node that fits; the search computes it only for the nodes that reach the front of its
frontier.
"""

from __future__ import annotations

from ...model.train import dp_sync
from ...model.train.memory_grid import least_memory_by_zero
from ...model.ranks import rank_partition
from .bounds import SAFETY


def raised(step: float, traffic: dp_sync.Traffic, zero: int, microbatches: int, overlap: bool,
           kinks: tuple[float, ...] | None = None) -> float:
    """The least step of a configuration with this synchronization whose other terms take at
    least `step` seconds (see the module docstring). `kinks`: `dp_sync.kinks` of the traffic,
    if known (the search keeps them with each layout's traffic)."""
    m = microbatches
    least = step + dp_sync.exposed(traffic, zero, m, overlap, step / m)
    for kink in dp_sync.kinks(traffic, zero, overlap) if kinks is None else kinks:
        if m * kink > step:
            s = m * kink
            least = min(least, s + dp_sync.exposed(traffic, zero, m, overlap, s / m))
    return least


def _group_stride(order: tuple[str, ...], tp: int, pp: int, dp: int, cp: int) -> int:
    """min(stride(dp), stride(cp)) of a configuration placed in `order` (model/config.py `stride`)."""
    size, sizes, strides = 1, {"tp": tp, "pp": pp, "dp": dp, "cp": cp}, {}
    for dim in order:
        strides[dim] = size
        size *= sizes[dim]
    return min(strides["dp"], strides["cp"])


def _least(pairs: list[tuple[int, dp_sync.Traffic]]) -> tuple[tuple[int, dp_sync.Traffic], ...]:
    """The pairs that can give the least bound: ZeRO-1 and 2 expose the same (one stands for
    both), and a traffic no shorter in any collective than another of its stage's never
    exposes less (`dp_sync.exposed` grows with each), so it never sets the minimum."""
    by_stage: dict[int, list[dp_sync.Traffic]] = {}
    for zero, traffic in pairs:
        by_stage.setdefault(1 if zero == 2 else zero, []).append(traffic)
    return tuple((zero, t) for zero, traffics in by_stage.items() for t in dict.fromkeys(traffics)
                 if not any(o != t and all(a <= b for a, b in zip(o, t)) for o in traffics))


class SyncFloor:
    """Per layout, the synchronization each (ZeRO stage, placement order) of one search space
    runs, computed once, and the bounds it raises."""

    def __init__(self, job, make_config, zeros, frugal: str, memory_limit: float, vps,
                 fitting: dict[tuple, tuple[int, ...]] | None = None) -> None:
        self.job, self.make_config, self.zeros = job, make_config, tuple(sorted(zeros))
        self.frugal, self.memory_limit, self.vps = frugal, memory_limit, vps   # vps(pp): the vp candidates
        self.traffics: dict[tuple, tuple[bool, tuple]] = {}
        # `fitting_zeros`' answers: memory reads no power cap, so a search shares them between
        # the operating points of one space (solver/train/search.py `use`)
        self.fitting: dict[tuple, tuple[int, ...]] = {} if fitting is None else fitting

    def layout_traffic(self, layout: tuple, zeros) -> tuple[bool, tuple]:
        """(overlapped, the distinct (ZeRO stage, traffic, its kinks)) of a layout (tp, pp, dp, cp,
        ep, orders, a micro-batch it runs) at each of `zeros` (stages 1 to 3 run the same
        collectives: model/train/dp_sync.py)."""
        key = layout[:5] + (zeros,)
        found = self.traffics.get(key)
        if found is None:
            tp, pp, dp, cp, ep, orders, mb = layout
            partition = rank_partition(self.job.partition, tp * pp * cp * dp)
            pairs, cfg = [], None
            for sharded in (False, True):
                stages = [zero for zero in zeros if (zero >= 1) == sharded]
                # the traffic reads an order only through where the data-parallel group starts
                # (model/train/dp_sync.py `traffic`'s key): one configuration per distinct start
                firsts = {_group_stride(order, tp, pp, dp, cp): order for order in reversed(orders)} if stages else {}
                for order in firsts.values():
                    cfg = self.make_config(tp, pp, dp, cp, ep, mb, 1, "none", stages[0], order)
                    traffic = dp_sync.traffic(self.job.shape, cfg, partition)
                    pairs += [(zero, traffic) for zero in stages if (zero, traffic) not in pairs]
            overlap = cfg is not None and cfg.overlaps_dp
            found = self.traffics[key] = (overlap, tuple((zero, traffic, dp_sync.kinks(traffic, zero, overlap))
                                                         for zero, traffic in _least(pairs)))
        return found

    def fitting_zeros(self, layout: tuple) -> tuple[int, ...]:
        """The ZeRO stages at which the layout's micro-batch (layout[6]) fits with the most
        recompute and the best vp (memory does not depend on the order)."""
        key = layout[:5] + layout[6:]
        found = self.fitting.get(key)
        if found is None:
            tp, pp, dp, cp, ep, orders, mb = layout
            frugal = self.make_config(tp, pp, dp, cp, ep, mb, 1, self.frugal, self.zeros[-1], orders[0])
            least = least_memory_by_zero(self.job.shape, frugal, self.frugal, self.zeros, self.vps(pp), mb,
                                         self.job.partition.node.accelerator)
            found = self.fitting[key] = tuple(z for z, need in zip(self.zeros, least) if need <= self.memory_limit)
        return found

    def step(self, layout: tuple, step: float, microbatches: int) -> float:
        """`step`, a bound from every term but the synchronization on the configurations of
        `layout` (tp, pp, dp, cp, ep, orders, the layout's smallest micro-batch) that run
        at least `microbatches` micro-batches and fit, raised by the least synchronization they
        expose (more micro-batches never expose less: each pass is shorter, and ZeRO-3 gathers
        per micro-batch, so the fewest bound them all)."""
        zeros = self.fitting_zeros(layout)
        if not zeros:
            return step
        overlap, pairs = self.layout_traffic(layout, zeros)
        return min([raised(step, traffic, zero, microbatches, overlap, kinks) for zero, traffic, kinks in pairs]) * SAFETY
