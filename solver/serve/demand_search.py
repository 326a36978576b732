"""A serve job with a demand (`rate` or `trace`): the fewest GPUs, then the least power (with
`minimize = energy`: the least power, then the fewest GPUs), whose simulated percentiles meet
the SLOs.

A candidate is a replica layout (aggregated) or a pair of them (prefill and decode pools:
every admissible prefill layout with every admissible decode layout, none dropped by a rule
of thumb; the screen drops only layouts whose latency floors already break an SLO:
solver/serve/floor.py), each pool starting at the replicas its analytic capacity needs: the
full-batch rate is an upper bound on what the simulation achieves (it adds queueing and
length variability, and an iteration's cost is convex in its contents). Confirming a candidate
simulates it, growing the pool that misses its SLO until the percentiles hold
(solver/serve/confirm.py); counts only grow, so a candidate's key at its starting counts bounds
every key it can reach (`bound`).

Branch and bound: candidates leave a heap in the order of their bound. The first time one
leaves, its bound is tightened with the loaded TPOT estimate (solver/serve/bound.py, a
steady-state ASSUMPTION that a law holds to the plan confirming without it) and it goes back;
the second time its first run is made, and after each run that does not settle it, it goes
back under the bound of the fewest replicas it can still settle at: the runs go to whichever
candidate can still win with the fewest, and a candidate stops growing once another's plan beats
its bound. (Once half the simulation budget is spent with no plan found, a candidate is
confirmed to its end, to have a plan to prune by: the one whose growing pool has the most room
left within the GPUs allowed, since one whose other pools leave it none ends without a plan.) The pairs, too many to bound one by one (DeepSeek-V3 on 32
nodes pairs some 10^5), are drawn lazily: one drawer per prefill layout walks the decode
layouts in the order of the part of the bound that adds up over pools (GPUs, or watts under
`minimize = energy`), so a pair is bounded only once the search could confirm it. The search
stops when the least bound left cannot beat the best plan found. Ties go to the earlier
candidate (the order of their capacity bounds), so the choice is exactly that of confirming
every candidate (`exhaustive=True`, kept for the law that checks it:
tests/solver/serve/test_search_laws.py).
"""

from __future__ import annotations

import heapq
import math

import attrs

from ...dsl.numbers import count, number
from .bound import tpot_replicas
from .confirm import Confirming, any_broken, pool_of, result, run_simulation
from .screen import Screen, SearchResult, Side
from .outcome import Outcome, missed_by
from .sim import Pool, simulate

MAX_SIMULATIONS = 60        # finalists simulated before the search reports its gap
UNDECIDED = "budget: finalists left unsimulated, none simulated meets the SLOs"   # the proof of a plan not found
PAIRS, LOOSE, TIGHT, CONFIRMING = -1, 0, 1, 2  # heap entries: a drawer of split pairs; a candidate before and after
# its TPOT floor; a candidate part-way through its confirmation (solver/serve/confirm.py)
DETERMINISTIC = ("least_requests", "round_robin")   # routers whose prefill routing no decode pool changes


class DemandSearch(Screen):
    exhaustive = False      # confirm every candidate (no bound, no budget): the reference the bounds must match

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.runs: dict[tuple, list[tuple[int, Outcome]]] = {}  # pools but the batch limit -> (limit, outcome)
        self.pre_sides: list[tuple] = []        # the split's prefill pools, by drawer
        self.dec_sides: list[tuple] = []        # (decode layout's index, pool), in the order the drawers walk
        self.verdicts: dict[tuple, Outcome | None] = {}     # a split's prefill pool -> its TTFT verdict

    def run(self) -> SearchResult:
        heap = self.start()
        best, best_key = None, (math.inf, math.inf, (math.inf,))
        unsimulated = 0     # candidates left when the budget ran out
        while heap:
            entry = heapq.heappop(heap)
            if best is None and self.diving():
                entry = self.roomiest(entry, heap)
            bound, tie, stage, item = entry[:2], entry[2], entry[3], entry[4]
            if not self.exhaustive and (*bound, tie) > best_key:
                # the least bound left: none of them, nor any pair not yet drawn, can win
                self.pruned += sum(self.size(e) for e in (entry, *heap))
                break
            if stage == PAIRS:
                self.draw(heap, *item)
                continue
            if stage != CONFIRMING and bound[0 if not self.energy else 1] > self.limits.gpus:
                self.pruned += 1  # more GPUs than allowed, and confirming only adds replicas
                continue
            if stage == LOOSE:
                grown = self.tpot_floor(item)
                if len(item) == 1 and self.fixed(item[0][0]) and grown[0][2] > item[0][2]:
                    self.pruned += 1    # its pinned count is below the TPOT floor's
                    continue
                heapq.heappush(heap, (*self.bound(grown), tie, TIGHT, grown))
                continue
            if not self.exhaustive and self.simulated >= MAX_SIMULATIONS:
                found, unsimulated = self.out_of_runs([entry, *heap])
                if found is not None and (*self.key(found[0]), found[1]) < best_key:
                    best, best_key = found[0], (*self.key(found[0]), found[1])
                break
            found = self.confirm(item) if stage == TIGHT else item.step(self)
            while isinstance(found, Confirming) and best is None and self.diving():
                found = found.step(self)    # no plan yet and half the budget spent: see this one through
            if isinstance(found, Confirming):
                # back among the others under the bound of the counts it simulates next
                heapq.heappush(heap, (*self.bound(found.least), tie, CONFIRMING, found))
                continue
            if found is None and (stage == TIGHT or not item.looked):
                self.pruned += 1    # it ended without a run
            if found is not None and (*self.key(found), tie) < best_key:
                best, best_key = found, (*self.key(found), tie)
        if best is None:
            return self.undecided(unsimulated) if unsimulated else self.infeasible()
        proof = "exhaustive" if self.exhaustive else "budget: finalists left unsimulated" if unsimulated else "bound"
        return SearchResult(best.mode, best.decode, best.prefill, best.outcome, best.power, best.binding, proof)

    def diving(self) -> bool:
        """Whether a candidate is confirmed to its end before another runs: once half the
        budget is spent with no plan found (best first may spend it all on the many candidates
        whose bounds tie and find none; confirming one through finds a plan to prune by)."""
        return not self.exhaustive and MAX_SIMULATIONS // 2 <= self.simulated < MAX_SIMULATIONS

    def roomiest(self, entry: tuple, heap: list) -> tuple:
        """The candidate a dive sees through: of those part-way through their confirmation, the one
        whose growing pool may still add the most replicas within the GPUs allowed (the earliest in
        the heap's order among equals), so that the dive ends in a plan wherever any candidate can;
        a candidate whose other pools leave its growing one no room only ends without a plan. The
        entry popped goes back when another is chosen."""
        chosen = min((e for e in (entry, *heap) if e[3] == CONFIRMING),
                     key=lambda e: (-self.room(e[4]), *e[:3]), default=entry)
        if chosen is not entry:
            heap.remove(chosen)
            heapq.heapify(heap)
            heapq.heappush(heap, entry)
        return chosen

    def room(self, c: Confirming) -> int:
        """Replicas a candidate's growing pool may still add before its pools take the GPUs allowed."""
        grow = c.failed[0] if c.failed is not None else len(c.sides) - 1
        pools = c.next
        others = sum(n * r.gpus for i, (r, _, n) in enumerate(pools) if i != grow)
        replica, _, count = pools[grow]
        return (self.limits.gpus - others) // replica.gpus - count

    def out_of_runs(self, entries: list[tuple]) -> tuple[tuple | None, int]:
        """The budget is spent: the best (plan, tie) that candidates part-way through their
        confirmation had found (bisecting, not proven the fewest replicas), and the
        candidates left unsimulated."""
        found = [(e[4].give_up(), e[2]) for e in entries if e[3] == CONFIRMING]
        found = [f for f in found if f[0] is not None]
        best = min(found, key=lambda f: (*self.key(f[0]), f[1]), default=None)
        return best, sum(self.size(e) for e in entries)

    def undecided(self, left: int) -> SearchResult:
        """No plan, but not proven infeasible: the budget ran out with `left` candidates unsimulated."""
        found = self.infeasible()
        why = (f"demand: none of the {MAX_SIMULATIONS} candidates simulated {self.meets()} at "
               f"{self.demand.described()} on {self.limits.gpus} GPUs, and {number(left)} were left unsimulated (the search's "
               "budget): one of them may, so this is not proven infeasible")
        return attrs.evolve(found, binding=tuple(r for r in found.binding if not r.startswith("demand:")) + (why,),
                            proof=UNDECIDED)

    # ------------------------------------------------------------ candidates and their bounds
    def start(self) -> list[tuple]:
        """The heap: every aggregated layout at the replicas its capacity needs, and for the
        split, one drawer per prefill layout that yields its pairs with every decode layout in
        the order of their bound. Each entry is (bound, tie, stage, item); the tie is the
        candidate's place in the order of its GPUs, then its replicas' GPUs, aggregated first,
        then the most capacity (of layouts that draw alike, the one with the most headroom: a
        replica holding requests streams whatever its batch limit) (the order that breaks ties,
        the same whether the search prunes or not)."""
        rate = self.demand.rate or 0.0
        heap = []
        if self.mode != "disaggregated":
            for a, (r, e) in enumerate(self.both):
                fixed = self.fixed(r)
                if fixed == 0:
                    self.pruned += 1    # its replicas cannot make up the pinned GPUs or replicas
                    continue
                sides = [(r, e, fixed or _needed(rate, e))]
                heap.append((*self.bound(sides), (_gpus(sides), r.gpus, 0, -_capacity(sides), a), LOOSE, sides))
        if self.mode != "aggregated" and self.prefills and self.decodes:
            self.pre_sides = [(r, e, _needed(rate, e)) for r, e in self.prefills]
            decs = [(d, (r, e, _needed(rate, e))) for d, (r, e) in enumerate(self.decodes)]
            self.dec_sides = sorted(decs, key=lambda d: self.least([d[1]]))   # each drawer walks them in this order
            heap += [self.drawer(p, 0) for p in range(len(self.pre_sides))]
        heapq.heapify(heap)
        return heap

    def fixed(self, r) -> int | None:
        """The one count an aggregated layout may run: pinned replicas, or the exact GPUs over
        its replica's (0: it cannot make them up); None when the count is searched."""
        lim = self.limits
        if lim.replicas:
            return lim.replicas if lim.allows(lim.replicas * r.gpus) else 0
        if lim.exact:
            return lim.gpus // r.gpus if lim.gpus % r.gpus == 0 else 0
        return None

    def least(self, sides: list) -> float:
        """The part of the bound's first term that adds up over pools: GPUs, or (minimize =
        energy) watts, since the power of two pools is the sum of each pool's own
        (model/power.py: each GPU draws for its own busy share; tested by the laws)."""
        if not self.energy:
            return float(_gpus(sides))
        return self.power([Side(r, e, n) for r, e, n in sides], self.demand.rate)

    def drawer(self, p: int, j: int) -> tuple:
        """The entry that draws prefill layout `p`'s pair with the `j`th decode layout: its
        bound is below that of every pair it has left to draw (the decodes ascend in `least`;
        a margin covers the sum's rounding, and the watts are rounded as a pair's bound is:
        rounding keeps the order), and its tie below every candidate's, so a pair is drawn
        before any candidate its bound could tie is confirmed."""
        first = self.least([self.pre_sides[p]]) + self.least([self.dec_sides[j][1]])
        return (_watts(first * (1 - 1e-9)) if self.energy else first, -math.inf, (-1, p), PAIRS, (p, j))

    def draw(self, heap: list, p: int, j: int) -> None:
        """Push prefill layout `p`'s pair with the `j`th decode layout and the drawer of the next
        one; a drawer past the GPUs allowed is dropped, with every pair it had left."""
        if not self.energy and self.least([self.pre_sides[p], self.dec_sides[j][1]]) > self.limits.gpus:
            self.pruned += len(self.dec_sides) - j   # the rest need more GPUs still
            return
        d, dec = self.dec_sides[j]
        pre = self.pre_sides[p]
        sides = [pre, dec]
        heapq.heappush(heap, (*self.bound(sides), (_gpus(sides), pre[0].gpus + dec[0].gpus, 1, -_capacity(sides), p, d),
                              LOOSE, sides))
        if j + 1 < len(self.dec_sides):
            heapq.heappush(heap, self.drawer(p, j + 1))

    def size(self, entry: tuple) -> int:
        """Candidates an entry stands for: one, or a drawer's pairs left to draw."""
        return len(self.dec_sides) - entry[4][1] if entry[3] == PAIRS else 1

    def bound(self, sides: list) -> tuple[float, float]:
        """A lower bound on the key of every plan confirming `sides` can reach: its pools only
        grow, and the GPUs and the power (solver/serve/screen.py) grow with them."""
        gpus = _gpus(sides)
        if self.limits.exact and gpus <= self.limits.gpus:
            gpus = self.limits.gpus     # every plan it reaches uses them all
            if len(sides) == 2:         # a split reaches one of these: the least of their powers
                (p, pe, n0), (d, de, m0) = sides
                power = _watts(min((self.power([Side(p, pe, n), Side(d, de, m)], self.demand.rate)
                                    for n, m in _exact_splits(p.gpus, n0, d.gpus, m0, gpus)), default=math.inf))
                return (power, gpus) if self.energy else (gpus, power)
        # its pools only grow (among all the GPUs pinned, the rest idle: a lower bound)
        power = self.power([Side(r, e, n) for r, e, n in sides], self.demand.rate, gpus)
        return (_watts(power), gpus) if self.energy else (gpus, _watts(power))

    def key(self, found: SearchResult) -> tuple[float, float]:
        gpus = found.decode.gpus + (found.prefill.gpus if found.prefill else 0)
        return (_watts(found.power), gpus) if self.energy else (gpus, _watts(found.power))

    def tpot_floor(self, sides: list) -> list:
        """The serving pool grown to the fewest replicas whose loaded mean TPOT meets a TPOT
        bound on the median or a higher percentile (solver/serve/bound.py): fewer break it
        in any simulation, so they need not be simulated."""
        bound = min((v for k, v in self.limits.slo.items() if k.split(".")[0] == "tpot"
                     and k.partition(".")[2] not in ("", "mean") and float(k.partition(".")[2][1:]) >= 50),
                    default=math.inf)
        r, e, n = sides[-1]
        most = max(n, (self.limits.gpus - sum(c * x.gpus for x, _, c in sides[:-1])) // r.gpus)
        grown = tpot_replicas(r, self.demand.rate or 0.0, n, most, bound, self.prompt, self.output)
        return [*sides[:-1], (r, e, grown)]

    # ------------------------------------------------------------ confirming one candidate
    def confirm(self, sides: list) -> SearchResult | Confirming | None:
        """A candidate's first run (solver/serve/confirm.py): the plan, None, or the candidate
        part-way through its confirmation. A pinned count is simulated once, and a split on
        exactly the GPUs pinned is bisected at once."""
        if len(sides) == 1 and self.fixed(sides[0][0]):
            return self.confirm_fixed(sides)
        if len(sides) == 2 and self.limits.exact:
            return self.confirm_split_exactly(sides)
        counts = [n for _, _, n in sides]
        pool = "decode " if len(sides) == 2 else ""
        binding = (f"capacity: fewer {pool}replicas cannot carry the demand (analytic bound)",) if counts[-1] > 1 else (
            f"size: one {pool}replica of {count(sides[-1][0].gpus, 'GPU')} carries the demand; no smaller layout fits or meets "
            "the SLOs",)
        return Confirming(sides, counts, binding).step(self)

    def confirm_fixed(self, sides: list) -> SearchResult | None:
        """An aggregated layout at its one allowed count: simulated once."""
        built = [Side(r, e, n) for r, e, n in sides]
        what = "replicas" if self.limits.replicas else "gpus"
        each = built[0].replica.gpus
        return self.settle(built, (f"{what}: {number(built[0].count)} replicas of {number(each)} "
                                   f"GPU{'s' if each != 1 else ''}, as pinned",))

    def settle(self, built: list[Side], binding: tuple[str, ...]) -> SearchResult | None:
        """The pools as they are, simulated: a plan when the power allows them and they meet the SLOs."""
        power = self.power(built, self.demand.rate)
        if power > self.limits.power:
            self.broke_power(id(built[-1].replica), power, "decode" if len(built) == 2 else "both")
            return None
        outcome = self.simulate(built)
        missed = missed_by(outcome, self.limits.slo)
        return None if missed else result(built, outcome, power, binding)

    def confirm_split_exactly(self, sides: list) -> SearchResult | None:
        """A prefill and a decode layout on exactly the GPUs pinned: of the splits n x prefill +
        m x decode = gpus with each pool at least what its capacity needs, the one of least power
        that meets the SLOs. Those that meet them are one run of n (a broken TTFT asks for more
        prefill replicas, any other SLO for more decode replicas; each pool serves no worse with
        more replicas), and the power never rises with n (the prefill pool's draw is the work its
        rate brings whatever its count; a decode pool of more replicas holds requests on more
        GPUs: law in tests/solver/serve/test_exact_split.py), so the plan is the run's top end:
        the last split, where it serves (a light demand: one run), else bisected for. Splits over
        the power limit are a run of the smallest n, left out first."""
        (p, pe, n0), (d, de, m0) = sides
        built = [[Side(p, pe, n), Side(d, de, m)] for n, m in _exact_splits(p.gpus, n0, d.gpus, m0, self.limits.gpus)]
        powers = [self.power(b, self.demand.rate) for b in built]
        lo = next((i for i, w in enumerate(powers) if w <= self.limits.power), len(built))
        if lo == len(built):
            if built:
                self.broke_power(id(d), min(powers), "decode")
            return None
        hi, found = len(built) - 1, None
        while lo <= hi and (self.exhaustive or self.simulated < MAX_SIMULATIONS):
            mid = hi if found is None and hi == len(built) - 1 else (lo + hi) // 2   # the least power first
            outcome = self.simulate(built[mid])
            missed = missed_by(outcome, self.limits.slo)
            ttft = any(m.startswith("ttft") for m in missed)
            if ttft and len(missed) > sum(m.startswith("ttft") for m in missed):
                return found    # both pools fall short: moving GPUs further this way cannot serve; keep a split that did
            if not missed:
                found = result(built[mid], outcome, powers[mid], ("gpus: every GPU serves, as pinned",))
            lo, hi = (mid + 1, hi) if ttft or not missed else (lo, mid - 1)
        return found

    def simulate(self, sides: list[Side]) -> Outcome:
        """The simulated outcome; a split's whose prefill pool alone breaks a TTFT bound is that
        pool's verdict (`prefill_verdict`), whatever its decode pool."""
        key = (sides[0].replica.config, sides[0].count) if len(sides) == 2 and self.router in DETERMINISTIC else None
        if self.verdicts.get(key) is not None:
            return self.verdicts[key]
        outcome = self.pools_run(sides)
        if key is not None and key not in self.verdicts and \
                any(m.startswith("ttft") for m in missed_by(outcome, self.limits.slo)):
            self.verdicts[key] = self.prefill_verdict(sides)
        return self.verdicts.get(key) or outcome

    def prefill_verdict(self, sides: list[Side]) -> Outcome | None:
        """The split's prefill pool run alone against the TTFT bounds (a decode replica holding every
        sequence at once): the outcome stopped at the TTFT bounds it breaks, None when it breaks none.
        A request's first token leaves the prefill pool whatever the decode pool does (a decode
        replica that cannot hold it only adds a miss; the routers in DETERMINISTIC draw nothing),
        so every split with this prefill pool breaks them: one verdict spares simulating each
        decode pool's, and is the same whichever decode pool asked first (the plan does not
        depend on the order candidates are confirmed in)."""
        ttft = {k: v for k, v in self.limits.slo.items() if k.startswith("ttft")}
        pre = sides[0]
        # decoded on a replica of the prefill layout, so that nothing in the run (its events' times
        # included) depends on which decode pool asked
        holds_all = Pool(pre.replica, 1, len(self.demand.requests) + 1, math.inf, self.router)
        outcome = simulate(self.demand.requests, holds_all, pool_of(pre, math.inf, self.router), None, ttft,
                           self.warmup_s, any_broken)
        self.simulated += 1
        missed = missed_by(outcome, ttft)
        return attrs.evolve(outcome, stopped=tuple(missed)) if missed else None

    def pools_run(self, sides: list[Side]) -> Outcome:
        """The pools simulated; reused when the same pools ran under another batch limit that
        neither run reaches (the limit is then never what stops an admission: the runs are one)."""
        limit = sides[-1].replica.config.batch
        pools = tuple((attrs.evolve(s.replica.config, batch=0), s.count) for s in sides)
        runs = self.runs.setdefault(pools, [])
        for other, outcome in runs:
            if outcome.peak_batch < min(limit, other):
                return outcome
        outcome = run_simulation(self, sides)
        self.simulated += 1
        runs.append((limit, outcome))
        return outcome


def _watts(power: float) -> float:
    """Watts as the search compares them: to 4 significant digits (0.05 %, far inside what the
    power model can tell apart), so that pools that draw alike (a decode layout under two batch
    limits, both holding requests all the time; two 16-GPU layouts 1 W apart) tie and the tie
    order decides, as it does for equal GPUs, instead of a simulation each and of rounding
    noise. Rounding never reorders two powers, so a bound stays below what it bounds."""
    return float(f"{power:.4g}")


def _needed(rate: float, e) -> int:
    """Replicas whose full-batch capacity carries `rate` (at least one)."""
    return max(1, math.ceil(rate / e.requests_per_s))


def _exact_splits(p: int, n0: int, d: int, m0: int, total: int) -> list[tuple[int, int]]:
    """(prefill, decode) replica counts of p and d GPUs, at least (n0, m0), using exactly `total` GPUs."""
    return [(n, (total - n * p) // d) for n in range(n0, (total - m0 * d) // p + 1) if (total - n * p) % d == 0]


def _capacity(sides: list) -> float:
    """Requests per second the pools carry at full batch: the least pool's."""
    return min(n * e.requests_per_s for _, e, n in sides)


def _gpus(sides: list) -> int:
    return sum(n * r.gpus for r, _, n in sides)


