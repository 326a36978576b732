"""The replica counts of a serve plan without a demand, chosen exactly for one layout
(aggregated) or one pair of layouts (prefill and decode pools) within the GPU and power limits.

A pool is one replica layout run `count` times: a plan never mixes layouts inside a pool
(solver/serve/screen.py's `Side`), so the choice is a layout (or a pair) and its counts.
Power adds up over replicas and pools (each GPU draws for its own busy share,
model/power.py; tests/solver/serve/test_saturated_laws.py checks it), so a pool's watts are
its count times one replica's; the power limit is checked with the search's own power
function (`fits`), linear arithmetic only places the edge.

The objective is lexicographic: tokens per second, then the least power; or (`minimize =
energy`) tokens per joule, then the most tokens per second. Plans within EPS of the best
first criterion are ties (the same plan scaled, or rounding), decided by the second."""

from __future__ import annotations

import math
from typing import Callable


from ...model.serve.inference import Replica, ServeEstimate
from ...dsl.records import frozen

EPS = 1e-9      # plans this close in the first criterion are ties
ROUNDING = 1e-12  # beyond the rounding between summed and computed watts


@frozen
class Unit:
    """One replica of a layout as the counts see it."""

    replica: Replica
    estimate: ServeEstimate
    watts: float            # one replica at full batch

    @property
    def gpus(self) -> int:
        return self.replica.gpus

    @property
    def rate(self) -> float:
        return self.estimate.requests_per_s


Plan = tuple   # ((unit, count),) aggregated, or ((prefill, n), (decode, m))


def tokens_per_s(plan: Plan, output: float) -> float:
    """As the plan reports them (solver/serve/plan.py `ServePlan.tokens_per_s`): a split serves
    the requests of its slower pool, `output` tokens each."""
    if len(plan) == 1:
        (u, c), = plan
        return u.estimate.tokens_per_s * c
    (p, n), (d, m) = plan
    return min(m * d.rate, n * p.rate) * output


def summed_watts(plan: Plan) -> float:
    return sum(u.watts * c for u, c in plan)


def undominated(units: list[Unit]) -> list[Unit]:
    """The layouts of a pool no other one beats outright: as many GPUs or fewer, as many
    requests per second or more, and less power (by more than rounding). A plan with a
    dominated layout does no better than the same counts of the one that dominates it."""
    kept: list[Unit] = []
    for u in sorted(units, key=lambda u: (u.gpus, u.watts, -u.rate)):
        if not any(k.gpus <= u.gpus and k.rate >= u.rate and k.watts < u.watts * (1 - ROUNDING) for k in kept):
            kept.append(u)
    return kept


class Counts:
    """The best counts of a layout or a pair, within `gpus` and `limit` watts (`fits` is the
    search's own check of a plan's power), a request being worth `output` tokens."""

    def __init__(self, gpus: int, limit: float, fits: Callable[[Plan], bool], energy: bool, output: float,
                 exact: bool = False, replicas: int | None = None):
        self.gpus, self.limit, self.fits, self.energy, self.output = gpus, limit, fits, energy, output
        self.exact = exact          # `gpus = N`: every plan uses exactly `gpus` GPUs
        self.replicas = replicas    # pinned replicas of an aggregated plan

    def rate(self, plan: Plan) -> float:
        return tokens_per_s(plan, self.output)

    # ------------------------------------------------------------ the criteria
    def first(self, plan: Plan) -> float:
        rate = self.rate(plan)
        return rate / summed_watts(plan) if self.energy else rate

    def second(self, plan: Plan) -> float:
        return self.rate(plan) if self.energy else -summed_watts(plan)

    def ceiling(self, p: Unit, d: Unit) -> float:
        """Above the first criterion of any counts of the pair: the pools balanced with
        fractional replicas (a plan that is out of balance wastes the larger pool's GPUs and
        watts). A pair costs p.gpus / p.rate + d.gpus / d.rate GPUs (and likewise watts) per
        request per second."""
        per_gpu = p.gpus / p.rate + d.gpus / d.rate
        per_watt = p.watts / p.rate + d.watts / d.rate
        if self.energy:
            return self.output / per_watt * (1 + ROUNDING)
        return self.output * min(self.gpus / per_gpu, self.limit / per_watt) * (1 + ROUNDING)

    # ------------------------------------------------------------ counts
    def most(self, plan_of: Callable[[int], Plan], top: int) -> int:
        """The most replicas k <= top of the plan's last pool that fit the power limit
        (power only grows with k)."""
        if top <= 0 or self.limit == math.inf:
            return max(top, 0)
        base, step = summed_watts(plan_of(0)), plan_of(1)[-1][0].watts
        k = min(top, math.floor((self.limit - base) / step)) if step > 0 else top
        k = max(k, 0)
        clear_below = summed_watts(plan_of(k)) <= self.limit * (1 - ROUNDING)
        clear_above = k == top or summed_watts(plan_of(k + 1)) > self.limit * (1 + ROUNDING)
        if clear_below and clear_above:
            return k
        while k > 0 and not self.fits(plan_of(k)):
            k -= 1
        while k < top and self.fits(plan_of(k + 1)):
            k += 1
        return k

    def pinned(self, u: Unit) -> int | None:
        """The one count an aggregated layout may run (pinned replicas, or the exact GPUs over its
        replica's); 0 when it cannot make them up; None when the count is free."""
        if self.replicas:
            fits = self.replicas * u.gpus == self.gpus if self.exact else self.replicas * u.gpus <= self.gpus
            return self.replicas if fits else 0
        if self.exact:
            return self.gpus // u.gpus if self.gpus % u.gpus == 0 else 0
        return None

    def single_top(self, u: Unit) -> Plan | None:
        """An aggregated layout's most replicas: the most tokens per second, and the same
        tokens per joule as any count (power is proportional to the replicas)."""
        pinned = self.pinned(u)
        if pinned is not None:
            return ((u, pinned),) if pinned and self.fits(((u, pinned),)) else None
        c = self.most(lambda k: ((u, k),), self.gpus // u.gpus)
        return ((u, c),) if c else None

    def single_in_band(self, u: Unit, floor: float) -> Plan | None:
        """The layout's best count among those whose first criterion reaches `floor`."""
        top = self.single_top(u)
        if top is None or self.first(top) < floor:
            return None
        if self.energy or self.pinned(u) is not None:
            return top
        c = top[0][1]
        while c > 1 and self.first(((u, c - 1),)) >= floor:   # the fewest replicas as fast (least power)
            c -= 1
        return ((u, c),)

    def decodes(self, p: Unit, n: int, d: Unit) -> int:
        """The most decode replicas beside n prefill replicas (0: none fits); with exact GPUs,
        the one count that uses the rest of them (0: none does, or it draws too much)."""
        rest = self.gpus - n * p.gpus
        if self.exact:
            m = rest // d.gpus if rest > 0 and rest % d.gpus == 0 else 0
            return m if m and self.fits(((p, n), (d, m))) else 0
        return self.most(lambda m: ((p, n), (d, m)), rest // d.gpus)

    def prefills(self, p: Unit, d: Unit) -> range:
        """The prefill counts a pair may run beside at least one decode replica."""
        return range(1, (self.gpus - d.gpus) // p.gpus + 1)

    def _left_over(self, p: Unit, n: int, d: Unit) -> bool:
        """With exact GPUs, a prefill count whose rest no decode count makes up exactly, while
        a larger prefill count may: skipped, where without them the loop would end."""
        return self.exact and self.gpus - n * p.gpus >= d.gpus

    def pair_top(self, p: Unit, d: Unit) -> float:
        """The best first criterion of any counts of the pair (-inf: none fits). For each
        prefill count the decode count that scores best: the most that fit (tokens per
        second), or those nearest the balance (tokens per joule rises up to it, falls after)."""
        best = -math.inf
        for n in self.prefills(p, d):
            top = self.decodes(p, n, d)
            if top < 1:
                if self._left_over(p, n, d):
                    continue
                break    # more prefill replicas leave less for the decode pool
            if self.energy and not self.exact:
                f = math.floor(n * p.rate / d.rate)
                for m in {min(max(k, 1), top) for k in (f - 1, f, f + 1)}:
                    best = max(best, self.first(((p, n), (d, m))))
                continue
            best = max(best, self.first(((p, n), (d, top))))
            if n * p.rate >= top * d.rate:
                break    # the decode pool limits: more prefill replicas only shrink it
        return best

    def pair_in_band(self, p: Unit, d: Unit, floor: float) -> Plan | None:
        """The pair's counts with the best second criterion among those whose first reaches
        `floor` (None: none does)."""
        best: Plan | None = None
        for n in self.prefills(p, d):
            top = self.decodes(p, n, d)
            if top < 1 and self._left_over(p, n, d):
                continue
            if top < 1 or not self.energy and top * d.rate * self.output < floor:
                break    # more prefill replicas leave fewer decode replicas: all slower still
            if self.exact:    # the decode count is the rest of the GPUs
                plan = ((p, n), (d, top)) if self.first(((p, n), (d, top))) >= floor else None
            else:
                plan = self._energy_count(p, n, d, top, floor) if self.energy else \
                    self._rate_count(p, n, d, top, floor)
            if plan is not None and (best is None or self.second(plan) > self.second(best)):
                best = plan
        return best

    def _rate_count(self, p: Unit, n: int, d: Unit, top: int, floor: float) -> Plan | None:
        """Tokens per second: the fewest decode replicas whose plan reaches `floor`."""
        if self.first(((p, n), (d, top))) < floor:
            return None
        m = max(1, min(top, math.ceil(floor / (d.rate * self.output))))
        while m > 1 and self.first(((p, n), (d, m - 1))) >= floor:
            m -= 1
        while self.first(((p, n), (d, m))) < floor:
            m += 1
        return ((p, n), (d, m))

    def _energy_count(self, p: Unit, n: int, d: Unit, top: int, floor: float) -> Plan | None:
        """Tokens per joule: the most tokens per second among the decode counts that reach
        `floor`: the fewest that keep up with the prefill pool, or the most below that."""
        m = max(1, math.ceil(n * p.rate / d.rate))
        while m > 1 and (m - 1) * d.rate >= n * p.rate:
            m -= 1
        while m * d.rate < n * p.rate:
            m += 1
        for k in (min(m, top), min(m, top) - 1):
            if k >= 1 and self.first(((p, n), (d, k))) >= floor:
                return ((p, n), (d, k))
        return None
