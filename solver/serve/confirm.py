"""Confirming a serve candidate in simulation, one run at a time (solver/serve/demand_search.py).

A candidate's pools start at the replicas their capacity needs; the pool that misses an SLO
grows by GROWTH (at least one replica; at most to what the GPUs allowed hold, before it gives
up) until the percentiles hold, and once a grown pool meets them the counts between the last
that broke an SLO and the first that met them all are bisected (more replicas of a pool never
serve worse), so the plan has the fewest replicas.

The search runs a candidate's runs one at a time (`Confirming.step`) and puts it back among
the others after each, under the bound of the counts it would simulate next: those counts
only grow, so the bound only rises, and a candidate whose bound can no longer beat the best
plan found stops there. Interleaving changes which runs are made, never what a candidate's
runs find: each candidate's sequence of runs is the one confirming it alone would make.
"""

from __future__ import annotations

import math

import attrs

from ...model.serve.inference import kv_transfer_time
from .outcome import Outcome, missed_by
from .screen import SearchResult, Side
from .sim import Pool, simulate
from ...dsl.records import define

GROWTH = 1.25               # a pool that misses its SLO grows by this factor (at least one replica)


@define(eq=False)
class Confirming:
    """A candidate part-way through its confirmation."""

    sides: list                         # (replica, estimate, starting count) of each pool
    counts: list[int]                   # growing: the counts simulated next
    binding: tuple[str, ...]            # what the plan found will say binds it
    failed: tuple[int, int] | None = None   # (pool, count) of the last run that broke an SLO
    found: SearchResult | None = None   # bisecting: the plan at the fewest replicas known to meet the SLOs
    looked: bool = False                # whether any outcome was looked at (else it was pruned unseen)

    @property
    def next(self) -> list[tuple]:
        """The pools the next run simulates."""
        counts = list(self.counts)
        if self.found is not None:
            grow, lo = self.failed
            counts[grow] = (lo + counts[grow]) // 2
        return [(r, e, n) for (r, e, _), n in zip(self.sides, counts)]

    @property
    def least(self) -> list[tuple]:
        """The fewest replicas any plan it goes on to find has (what its bound is taken at): the
        pool that last broke an SLO may settle one replica past that count (growing by GROWTH
        may overshoot, and bisecting comes back), every other pool at its count now."""
        if self.failed is None:
            return self.next
        grow, lo = self.failed
        return [(r, e, lo + 1 if i == grow else n) for i, ((r, e, _), n) in enumerate(zip(self.sides, self.counts))]

    def step(self, search) -> SearchResult | Confirming | None:
        """One run: the plan when this run settles it, None when the counts break a limit,
        else itself, to go on from the counts it simulates next."""
        if self.found is not None:
            return self.bisect(search)
        now = self.next
        if sum(n * r.gpus for r, _, n in now) > search.limits.gpus:
            return None
        built = [Side(r, e, n) for r, e, n in now]
        power = search.power(built, search.demand.rate)
        if power > search.limits.power:  # more replicas only draw more: no need to simulate
            search.broke_power(id(now[-1][0]), power, "decode" if len(now) == 2 else "both")
            return None
        self.looked = True
        outcome = search.simulate(built)
        missed = missed_by(outcome, search.limits.slo)
        if not missed:
            found = result(built, outcome, power, self.binding)
            if self.failed is None:
                return found
            self.found, self.binding = found, found.binding
            return self.settled()
        grow = 0 if len(built) == 2 and any(m.startswith("ttft") for m in missed) else len(built) - 1
        n = self.counts[grow]
        self.binding, self.failed = broken(missed, n, grow, len(built)), (grow, n)
        # grown, but to no more than the GPUs hold where they still hold more than now
        most = (search.limits.gpus - sum(s.gpus for i, s in enumerate(built) if i != grow)) // built[grow].replica.gpus
        grown = max(n + 1, math.ceil(n * GROWTH))
        self.counts[grow] = min(grown, most) if most > n else grown
        return self

    def bisect(self, search) -> SearchResult | Confirming:
        """One run between the last count that broke an SLO and the first that met them all."""
        grow, lo = self.failed
        built = [Side(r, e, n) for r, e, n in self.next]
        mid = built[grow].count
        outcome = search.simulate(built)
        missed = missed_by(outcome, search.limits.slo)
        if missed:
            self.failed, self.binding = (grow, mid), broken(missed, mid, grow, len(built))
        else:
            self.counts[grow] = mid
            self.found = result(built, outcome, search.power(built, search.demand.rate), ())
        return self.settled()

    def settled(self) -> SearchResult | Confirming:
        """The plan once no count is left between the bounds, else itself."""
        grow, lo = self.failed
        if self.counts[grow] - lo > 1:
            return self
        return attrs.evolve(self.found, binding=self.binding)

    def give_up(self) -> SearchResult | None:
        """Out of runs: the plan found so far (bisecting: not proven the fewest replicas)."""
        return None if self.found is None else attrs.evolve(self.found, binding=self.binding)


def run_simulation(search, sides: list[Side]) -> Outcome:
    """Simulate the pools at the search's demand, stopped once what the search needs to know
    (which pool grows) is certain."""
    hbm = search.limits.memory_bytes(sides[-1].replica.hbm)
    decode = pool_of(sides[-1], hbm, search.router)
    demand, slo, warmup = search.demand.requests, search.limits.slo, search.warmup_s
    if len(sides) == 1:
        return simulate(demand, decode, slo=slo, warmup_s=warmup, stop=any_broken)
    pre, dec = sides[0].replica, sides[1].replica
    transfers: dict[float, float] = {}      # by prompt length: a run moves many prompts of each

    def transfer(prompt: float) -> float:
        seconds = transfers.get(prompt)
        if seconds is None:
            seconds = transfers[prompt] = kv_transfer_time(pre, dec, prompt)
        return seconds
    # a split grows its prefill pool when TTFT breaks, else its decode pool: stop once that is known
    return simulate(demand, decode, pool_of(sides[0], hbm, search.router), transfer, slo, warmup,
                    lambda missed: any(m.startswith("ttft") for m in missed) or len(missed) == len(slo))


def any_broken(missed: tuple[str, ...]) -> bool:
    """A pool that breaks any SLO grows: a run may stop at the first broken bound."""
    return True


def pool_of(side: Side, hbm_limit: float, router: str = "least_requests") -> Pool:
    r = side.replica
    return Pool(r, side.count, r.config.batch, r.kv_capacity_tokens(hbm_limit), router)


def result(built: list[Side], outcome: Outcome, power: float, binding: tuple[str, ...]) -> SearchResult:
    decode, prefill = (built[1], built[0]) if len(built) == 2 else (built[0], None)
    return SearchResult("disaggregated" if prefill else "aggregated", decode, prefill, outcome, power, binding, "")


def broken(missed: list[str], count: int, pool: int, pools: int) -> tuple[str, ...]:
    """The binding lines of a run that broke `missed` with `count` replicas in `pool`."""
    which = "prefill " if pool == 0 and pools == 2 else ""
    return tuple(f"{m}: {count} {which}{'replica breaks' if count == 1 else 'replicas break'} it in simulation"
                 for m in missed)
