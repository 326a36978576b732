"""What the exact search returns (`SearchResult`), and the running list of the best
configurations it keeps while it searches (`Top`)."""

from __future__ import annotations

import heapq
import itertools

import attrs

from ...model.train.step import Estimate
from .enumerate import Limit, Limits


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
                f"(compute, recompute, TP, CP, EP, PP, optimizer, bubble share, least gradient synchronization), "
                f"{self.pruned_memory:,} cut by memory "
                f"(monotone in micro-batch, recompute and ZeRO stage)")
        if self.pruned_limits:
            head += f", {self.pruned_limits:,} cut by the power limit"
        if self.status == "infeasible":
            return head + "; no configuration is admissible"
        return head + "; gap 0"


class Top:
    """The best `keep` admissible values seen; the worst of them is the pruning threshold.
    Equal values rank in the order they were offered. With `key`, configurations of one key
    (a layout at several power caps) hold one place, the best of them."""

    def __init__(self, keep: int, key=None) -> None:
        self.keep, self.heap, self.count, self.key = keep, [], itertools.count(), key

    @property
    def threshold(self) -> float:
        return -self.heap[0][0] if len(self.heap) >= self.keep else float("inf")

    def offer(self, value: float, e: Estimate) -> None:
        key = self.key(e) if self.key is not None else None
        item = (-value, -next(self.count), e, key)
        if key is not None:
            same = next((i for i, held in enumerate(self.heap) if held[3] == key), None)
            if same is not None:
                if value < -self.heap[same][0]:     # the better operating point of the same layout
                    self.heap[same] = item
                    heapq.heapify(self.heap)
                return
        if len(self.heap) < self.keep:
            heapq.heappush(self.heap, item)
        elif value < -self.heap[0][0]:
            heapq.heapreplace(self.heap, item)

    def ranked(self) -> list[tuple[float, Estimate]]:
        return [(-t[0], t[2]) for t in sorted(self.heap, key=lambda t: (-t[0], -t[1]))]
