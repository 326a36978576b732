"""What the exact search returns (`SearchResult`), and the running list of the best
configurations it keeps while it searches (`Top`)."""

from __future__ import annotations

import heapq
import itertools


from ...model.train.step import Estimate
from .enumerate import Limit, Limits, layout
from ...dsl.records import frozen


@frozen
class Rejected:
    """An evaluated configuration better than the optimum that a limit excluded."""

    value: float
    estimate: Estimate
    limit: Limit


@frozen
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
                f"(compute, recompute, TP, CP, EP, PP, optimizer, bubble share, least gradient synchronization, "
                f"the node's per-step host time), "
                f"{self.pruned_memory:,} cut by memory "
                f"(monotone in micro-batch, recompute and ZeRO stage)")
        if self.pruned_limits:
            head += f", {self.pruned_limits:,} cut by the power limit"
        if self.status == "infeasible":
            return head + "; no configuration is admissible"
        return head + "; gap 0"


class Top:
    """The best `keep` admissible values seen, one per layout (`layout`: the best rank order
    of each); the worst of them is the pruning threshold. A configuration bounded at the
    threshold can enter neither as a new layout nor as a better order of a kept one, so
    pruning at it keeps the list exact. Equal values rank in the order they were offered."""

    def __init__(self, keep: int) -> None:
        self.keep, self.heap, self.count, self.kept = keep, [], itertools.count(), {}

    @property
    def threshold(self) -> float:
        return -self.heap[0][0] if len(self.heap) >= self.keep else float("inf")

    def offer(self, value: float, e: Estimate) -> None:
        key = layout(e)
        held = self.kept.get(key)
        if held is not None:
            if value < -held[0]:   # a better order of a kept layout replaces it in place
                self.heap.remove(held)
                heapq.heapify(self.heap)
                self._push((-value, -next(self.count), e), key)
            return
        item = (-value, -next(self.count), e)
        if len(self.heap) < self.keep:
            self._push(item, key)
        elif value < -self.heap[0][0]:
            dropped = heapq.heappop(self.heap)
            del self.kept[layout(dropped[2])]
            self._push(item, key)

    def _push(self, item, key) -> None:
        heapq.heappush(self.heap, item)
        self.kept[key] = item

    def ranked(self) -> list[tuple[float, Estimate]]:
        return [(-t[0], t[2]) for t in sorted(self.heap, key=lambda t: (-t[0], -t[1]))]
