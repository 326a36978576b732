"""A serve job without a demand: the most output tokens per second (or, with `minimize =
energy`, the most tokens per joule, then the most tokens per second) on the GPUs and power
allowed, aggregated or split into prefill and decode pools, each pool one replica layout.

The search is exact (solver/serve/counts.py chooses each candidate's counts): every
aggregated layout at its best count, and every pair of a prefill and a decode layout (each
one that no layout of its pool dominates), weighed in the order of an upper bound on what
any counts of the pair reach (the pools balanced with fractional replicas) until the bound
cannot beat the best. A first pass finds the best first criterion; a second, among the
candidates within EPS of it, the best second criterion (ties within rounding, such as the
same plan at twice the size). The proof says `bound` when pairs were left out by dominance,
the limits or the bound, `exhaustive` when every one was weighed."""

from __future__ import annotations

import attrs

from ...dsl.numbers import number, quantity
from .counts import EPS, Counts, Plan, Unit, undominated
from .screen import Screen, SearchResult, Side


class SaturatedSearch(Screen):
    def run(self) -> SearchResult:
        lim = self.limits
        self.counts = Counts(lim.gpus, lim.power, self.fits, self.energy, self.output, lim.exact, lim.replicas)
        singles = [self.unit(r, e) for r, e in self.both] if self.mode != "disaggregated" else []
        pairs = self.pairs() if self.mode != "aggregated" else []
        tops = [self.single_top(u) for u in singles]
        best = max((self.counts.first(t) for t in tops if t), default=-1.0)
        weighed = 0
        for ceiling, p, d in pairs:
            if ceiling < best:
                break
            weighed += 1
            best = max(best, self.counts.pair_top(p, d))
        self.pruned = len(self.prefills) * len(self.decodes) - weighed if self.mode != "aggregated" else 0
        if best <= 0:
            self.explain_pairs_power()
            return self.infeasible()
        floor = best * (1 - EPS)
        chosen = self.best_in_band([self.counts.single_in_band(u, floor) for u in singles]
                                   + [self.counts.pair_in_band(p, d, floor) for c, p, d in pairs if c >= floor])
        return self.result(chosen, "bound" if self.pruned else "exhaustive")

    def unit(self, r, e) -> Unit:
        return Unit(r, e, self.power([Side(r, e, 1)]))

    def fits(self, plan: Plan) -> bool:
        return self.power(_sides(plan)) <= self.limits.power

    def single_top(self, u: Unit) -> Plan | None:
        top = self.counts.single_top(u)
        pinned = self.counts.pinned(u)
        if pinned == 0:     # its replicas cannot make up the pinned GPUs or replicas
            self.broken.setdefault("gpus", set()).add(id(u.replica))
            self.misses.setdefault(("both", id(u.replica)), {})["gpus"] = u.gpus
        elif top is None and self.limits.gpus >= u.gpus:   # the replicas draw more than allowed
            self.broke_power(id(u.replica), u.watts * (pinned or 1))
        return top

    def pairs(self) -> list[tuple[float, Unit, Unit]]:
        """The undominated pairs whose single replicas fit, highest ceiling first."""
        pres = undominated([self.unit(r, e) for r, e in self.prefills])
        decs = undominated([self.unit(r, e) for r, e in self.decodes])
        fitting = [(self.counts.ceiling(p, d), p, d) for p in pres for d in decs
                   if p.gpus + d.gpus <= self.limits.gpus and self.fits(((p, 1), (d, 1)))]
        return sorted(fitting, key=lambda pair: -pair[0])

    def best_in_band(self, plans: list[Plan | None]) -> Plan:
        """The best second criterion; ties go to the earlier plan (aggregated first)."""
        best = None
        for plan in plans:
            if plan is not None and (best is None or self.counts.second(plan) > self.counts.second(best)):
                best = plan
        return best

    def result(self, plan: Plan, proof: str) -> SearchResult:
        sides = _sides(plan)
        mode = "aggregated" if len(sides) == 1 else "disaggregated"
        found = SearchResult(mode, sides[-1], sides[0] if len(sides) == 2 else None, None, self.power(sides), (), proof)
        return attrs.evolve(found, binding=self.binding(plan))

    def explain_pairs_power(self) -> None:
        """No plan: each decode layout whose every pair with a prefill layout that fits the
        GPUs draws more than allowed is marked as broken by power (what the reasons name)."""
        pres = [self.unit(r, e) for r, e in self.prefills]
        for r, e in self.decodes:
            d = self.unit(r, e)
            watts = [p.watts + d.watts for p in pres if p.gpus + d.gpus <= self.limits.gpus]
            if watts and min(watts) > self.limits.power:
                self.broke_power(id(r), min(watts), "decode")

    # ------------------------------------------------------------ why the plan is no larger
    def binding(self, plan: Plan) -> tuple[str, ...]:
        """For each pool that sets the rate, what stops one more of its replicas; for an
        aggregated plan, also what stops a larger batch."""
        out = [self.stops(plan, i) for i in _limiting(plan)]
        if len(plan) == 1:
            chosen = plan[0][0].replica.config
            bigger = [r for r, _ in self.both if r.config.batch > chosen.batch
                      and attrs.evolve(r.config, batch=chosen.batch) == chosen]
            if not bigger:
                out.append(self.batch_binding(chosen))
        return tuple(dict.fromkeys(out))

    def stops(self, plan: Plan, i: int) -> str:
        u, count = plan[i]
        role = "" if len(plan) == 1 else ("prefill ", "decode ")[i]
        if self.limits.replicas:
            return f"replicas: {number(count)} pinned (`parallelism {{ replicas }}`)"
        free = self.limits.gpus - sum(v.gpus * c for v, c in plan)
        if free == 0:
            return "gpus: every GPU serves"
        if free < u.gpus:
            return f"gpus: {number(free)} GPU{'s' if free > 1 else ''} left, fewer than a {role}replica's {number(u.gpus)}"
        grown = tuple((v, c + (j == i)) for j, (v, c) in enumerate(plan))
        if not self.fits(grown):
            return f"power: {quantity(self.limits.power, 'W')} stops another {role}replica"
        if self.counts.rate(grown) <= self.counts.rate(plan):
            return f"balance: another {role}replica would wait on the {('prefill', 'decode')[1 - i]} pool"
        return f"energy: another {role}replica would serve fewer tokens per joule"

    def batch_binding(self, chosen) -> str:
        """Why the batch is no larger: the limits the next larger batch of the same replica
        breaks, or the end of the batches searched."""
        larger = sorted((r for r in self.replicas if r.config.batch > chosen.batch
                         and attrs.evolve(r.config, batch=chosen.batch) == chosen), key=lambda r: r.config.batch)
        if not larger:
            return f"batch: {number(chosen.batch)} sequences per replica, the largest searched"
        broken = sorted(name for name, ids in self.broken.items() if id(larger[0]) in ids)
        words = " and ".join(broken) if broken else "the SLOs in simulation"
        return f"batch: {number(larger[0].config.batch)} sequences per replica would break {words}"


def _sides(plan: Plan) -> list[Side]:
    return [Side(u.replica, u.estimate, c) for u, c in plan]


def _limiting(plan: Plan) -> list[int]:
    """The pools whose capacity sets the plan's rate (both when they match)."""
    if len(plan) == 1:
        return [0]
    (p, n), (d, m) = plan
    return [i for i, slower in enumerate((n * p.rate <= m * d.rate, m * d.rate <= n * p.rate)) if slower]
