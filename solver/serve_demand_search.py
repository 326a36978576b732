"""A serve job with a demand (`rate` or `trace`): the fewest GPUs, then the least power (with
`minimize = energy`: the least power, then the fewest GPUs), whose simulated percentiles meet
the SLOs.

A candidate is a replica layout (aggregated) or a pair of them (prefill and decode pools),
each pool starting at the replicas its analytic capacity needs: the full-batch rate is an
upper bound on what the simulation achieves (it adds queueing and length variability, and an
iteration's cost is convex in its contents). Confirming a candidate simulates it, growing the
pool that misses its SLO until the percentiles hold; counts only grow, so a candidate's key
at its starting counts bounds every key it can reach (`bound`).

Branch and bound: candidates leave a heap in the order of their bound. The first time one
leaves, its bound is tightened with the TPOT floor (solver/serve_bound.py) and it goes back;
the second time it is confirmed. The search stops when the least bound left cannot beat the
best plan found. Ties go to the earlier candidate (the order of their capacity bounds), so
the choice is exactly that of confirming every candidate (`exhaustive=True`, kept for the
law that checks it: tests/solver/test_serve_search_laws.py).
"""

from __future__ import annotations

import heapq
import math

import attrs

from ..model.inference import kv_transfer_time
from .serve_bound import tpot_replicas
from .serve_screen import Screen, SearchResult, Side
from .serve_outcome import Outcome, slo_percentile
from .serve_sim import Pool, simulate

MAX_SIMULATIONS = 60        # finalists simulated before the search reports its gap
GROWTH = 1.25               # a pool that misses its SLO grows by this factor (at least one replica)
PREFILLS, DECODES = 4, 8    # disaggregated: the best prefill and decode layouts paired


class DemandSearch(Screen):
    exhaustive = False      # confirm every candidate (no bound, no budget): the reference the bounds must match

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = 0   # candidates' outcomes looked at, simulated or reused
        self.runs: dict[tuple, list[tuple[int, Outcome]]] = {}  # pools but the batch limit -> (limit, outcome)

    def run(self) -> SearchResult:
        candidates = self.candidates()
        heap = [(self.bound(sides), i, False) for i, sides in enumerate(candidates)]
        heapq.heapify(heap)
        best, best_key = None, (math.inf, math.inf, math.inf)
        budget_left = False
        while heap:
            bound, i, tight = heapq.heappop(heap)
            if not self.exhaustive and (*bound, i) > best_key:
                self.pruned += 1 + len(heap)  # the least bound left: none of them can win
                break
            if bound[0 if not self.energy else 1] > self.limits.gpus:
                self.pruned += 1  # more GPUs than allowed, and confirming only adds replicas
                continue
            if not tight:
                candidates[i] = self.tpot_floor(candidates[i])
                heapq.heappush(heap, (self.bound(candidates[i]), i, True))
                continue
            if not self.exhaustive and self.simulated >= MAX_SIMULATIONS:
                budget_left = True
                break
            outcomes = self.outcomes
            found = self.confirm(candidates[i], None if self.exhaustive else (i, best_key))
            self.pruned += self.outcomes == outcomes
            if found is not None and (*self.key(found), i) < best_key:
                best, best_key = found, (*self.key(found), i)
        if best is None:
            return self.infeasible()
        proof = "exhaustive" if self.exhaustive else "budget: finalists left unsimulated" if budget_left else "bound"
        return SearchResult(best.mode, best.decode, best.prefill, best.outcome, best.power, best.binding, proof)

    # ------------------------------------------------------------ candidates and their bounds
    def candidates(self) -> list[list]:
        """Every pool layout at the replicas its capacity needs, in the order of their GPUs
        (then the smaller replicas): the order that breaks ties."""
        rate = self.demand.rate or 0.0
        out = [] if self.mode == "disaggregated" else [[(r, e, _needed(rate, e))] for r, e in self.both]
        if self.mode != "aggregated":
            out += self.split_candidates(rate)
        return sorted(out, key=lambda c: (_gpus(c), sum(r.gpus for r, _, _ in c)))

    def split_candidates(self, rate: float) -> list[list]:
        """Prefill and decode pools sized by their capacity; the best few of each side."""
        pres = sorted(self.prefills, key=lambda p: _needed(rate, p[1]) * p[0].gpus)[:PREFILLS]
        decs = sorted(self.decodes, key=lambda d: _needed(rate, d[1]) * d[0].gpus)[:DECODES]
        return [[(rp, ep, _needed(rate, ep)), (rd, ed, _needed(rate, ed))] for rp, ep in pres for rd, ed in decs]

    def bound(self, sides: list) -> tuple[float, float]:
        """A lower bound on the key of every plan confirming `sides` can reach: its pools only
        grow, and the GPUs and the power (solver/serve_screen.py) grow with them."""
        gpus, power = _gpus(sides), self.power([Side(r, e, n) for r, e, n in sides], self.demand.rate)
        return (power, gpus) if self.energy else (gpus, power)

    def key(self, found: SearchResult) -> tuple[float, float]:
        gpus = found.decode.gpus + (found.prefill.gpus if found.prefill else 0)
        return (found.power, gpus) if self.energy else (gpus, found.power)

    def tpot_floor(self, sides: list) -> list:
        """The serving pool grown to the fewest replicas whose loaded mean TPOT meets a TPOT
        bound on the median or a higher percentile (solver/serve_bound.py): fewer break it
        in any simulation, so they need not be simulated."""
        bound = min((v for k, v in self.limits.slo.items() if k.split(".")[0] == "tpot"
                     and k.partition(".")[2] not in ("", "mean") and float(k.partition(".")[2][1:]) >= 50),
                    default=math.inf)
        r, e, n = sides[-1]
        most = max(n, (self.limits.gpus - sum(c * x.gpus for x, _, c in sides[:-1])) // r.gpus)
        grown = tpot_replicas(r, self.demand.rate or 0.0, n, most, bound, self.prompt, self.output)
        return [*sides[:-1], (r, e, grown)]

    # ------------------------------------------------------------ confirming one candidate
    def confirm(self, sides: list, against: tuple[int, tuple] | None) -> SearchResult | None:
        """Simulate, growing the pool that misses its SLO, until the percentiles hold; give up
        when the counts break a limit or (`against`: this candidate's index and the best
        key so far) their bound cannot beat the best plan."""
        counts = [n for _, _, n in sides]
        pool = "decode " if len(sides) == 2 else ""
        binding = (f"capacity: fewer {pool}replicas cannot carry the demand (analytic bound)",) if counts[-1] > 1 else (
            f"size: one {pool}replica of {sides[-1][0].gpus} GPUs carries the demand; no smaller layout fits or meets "
            "the SLOs",)
        failed = None   # (pool, count) of the last run that broke an SLO
        while self.exhaustive or self.simulated < MAX_SIMULATIONS:
            now = [(r, e, n) for (r, e, _), n in zip(sides, counts)]
            if _gpus(now) > self.limits.gpus:
                return None
            if against is not None and (*self.bound(now), against[0]) > against[1]:
                return None
            built = [Side(r, e, n) for r, e, n in now]
            power = self.power(built, self.demand.rate)
            if power > self.limits.power:  # more replicas only draw more: no need to simulate
                self.broke_power(id(sides[-1][0]), power, "decode" if len(sides) == 2 else "both")
                return None
            outcome = self.simulate(built)
            missed = list(outcome.stopped) or _missed(outcome, self.limits.slo)
            if not missed:
                found = _result(built, outcome, power, binding)
                return self.narrow(sides, counts, *failed, found) if failed else found
            grow = 0 if len(built) == 2 and any(m.startswith("ttft") for m in missed) else len(built) - 1
            binding, failed = _broken(missed, counts[grow], grow, len(built)), (grow, counts[grow])
            counts[grow] = max(counts[grow] + 1, math.ceil(counts[grow] * GROWTH))
        return None

    def narrow(self, sides: list, counts: list[int], grow: int, lo: int, found: SearchResult) -> SearchResult:
        """A pool that grew by a step of GROWTH may have passed the fewest replicas that meet
        the SLOs: bisect between the last count that broke one and the first that met them
        all (more replicas of a pool never serve worse), within the simulation budget."""
        hi, binding = counts[grow], found.binding
        while hi - lo > 1 and (self.exhaustive or self.simulated < MAX_SIMULATIONS):
            mid = (lo + hi) // 2
            built = [Side(r, e, mid if i == grow else n) for i, ((r, e, _), n) in enumerate(zip(sides, counts))]
            outcome = self.simulate(built)
            missed = list(outcome.stopped) or _missed(outcome, self.limits.slo)
            if missed:
                lo, binding = mid, _broken(missed, mid, grow, len(built))
            else:
                hi, found = mid, _result(built, outcome, self.power(built, self.demand.rate), ())
        return attrs.evolve(found, binding=binding)

    def simulate(self, sides: list[Side]) -> Outcome:
        """The simulated outcome; reused when the same pools ran under another batch limit that
        neither run reaches (the limit is then never what stops an admission: the runs are one)."""
        self.outcomes += 1
        limit = sides[-1].replica.config.batch
        pools = tuple((attrs.evolve(s.replica.config, batch=0), s.count) for s in sides)
        runs = self.runs.setdefault(pools, [])
        for other, outcome in runs:
            if outcome.peak_batch < min(limit, other):
                return outcome
        outcome = self.run_simulation(sides)
        self.simulated += 1
        runs.append((limit, outcome))
        return outcome

    def run_simulation(self, sides: list[Side]) -> Outcome:
        hbm = self.limits.memory_bytes(sides[-1].replica.hbm)
        decode = _pool(sides[-1], hbm)
        if len(sides) == 1:
            return simulate(self.demand.requests, decode, slo=self.limits.slo, warmup_s=self.warmup_s, stop=_known)
        pre, dec = sides[0].replica, sides[1].replica
        # a split grows its prefill pool when TTFT breaks, else its decode pool: stop once that is known
        return simulate(self.demand.requests, decode, _pool(sides[0], hbm),
                        lambda prompt: kv_transfer_time(pre, dec, prompt), self.limits.slo, self.warmup_s,
                        lambda missed: any(m.startswith("ttft") for m in missed) or len(missed) == len(self.limits.slo))


def _result(built: list[Side], outcome: Outcome, power: float, binding: tuple[str, ...]) -> SearchResult:
    decode, prefill = (built[1], built[0]) if len(built) == 2 else (built[0], None)
    return SearchResult("disaggregated" if prefill else "aggregated", decode, prefill, outcome, power, binding, "")


def _broken(missed: list[str], count: int, pool: int, pools: int) -> tuple[str, ...]:
    """The binding lines of a run that broke `missed` with `count` replicas in `pool`."""
    which = "prefill " if pool == 0 and pools == 2 else ""
    return tuple(f"{m}: {count} {which}{'replica breaks' if count == 1 else 'replicas break'} it in simulation"
                 for m in missed)


def _known(missed: tuple[str, ...]) -> bool:
    """A pool that breaks any SLO grows: a run may stop at the first broken bound."""
    return True


def _needed(rate: float, e) -> int:
    """Replicas whose full-batch capacity carries `rate` (at least one)."""
    return max(1, math.ceil(rate / e.requests_per_s))


def _gpus(sides: list) -> int:
    return sum(n * r.gpus for r, _, n in sides)


def _pool(side: Side, hbm_limit: float) -> Pool:
    r = side.replica
    return Pool(r, side.count, r.config.batch, r.kv_capacity_tokens(hbm_limit))


def _missed(outcome: Outcome, slo: dict[str, float]) -> list[str]:
    """The SLO bounds the simulated percentiles break (bare names bound the mean)."""
    missed = []
    for key, bound in slo.items():
        if outcome.percentile(*slo_percentile(key)) > bound:
            missed.append(key)
    return missed
