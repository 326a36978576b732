"""A serve job without a demand: the most output tokens per second (or, with `minimize =
energy`, the most tokens per joule) on the GPUs and power allowed, aggregated or split into
prefill and decode pools. Every admissible configuration is weighed: the search is exhaustive."""

from __future__ import annotations

import math

import attrs

from ..dsl.numbers import number, quantity
from .serve_screen import Screen, SearchResult, Side


class SaturatedSearch(Screen):
    def run(self) -> SearchResult:
        best: SearchResult | None = None
        for r, e in self.both:
            count = self.fit_power(lambda n: [Side(r, e, n)], self.limits.gpus // r.gpus)
            found = SearchResult("aggregated", Side(r, e, count), None, None, self.power([Side(r, e, count)]), (),
                                 "exhaustive") if count else None
            if not count and self.limits.gpus >= r.gpus:  # one replica already draws more than allowed
                self.broke_power(id(r), self.power([Side(r, e, 1)]))
            if found and (best is None or self.better(found, best)):
                best = found
        if self.mode != "aggregated":
            best = self.split(best)
        if best is None:
            return self.infeasible()
        return attrs.evolve(best, binding=self.binding(best))

    def split(self, best: SearchResult | None) -> SearchResult | None:
        pre = _best_per_gpu(self.prefills)
        dec = _best_per_gpu(self.decodes)
        if pre is None or dec is None:
            return best
        (rp, ep), (rd, ed) = pre, dec
        for n_p in range(1, self.limits.gpus // rp.gpus + 1):
            n_d = (self.limits.gpus - n_p * rp.gpus) // rd.gpus
            if n_d < 1:
                break
            n_d = self.fit_power(lambda n: [Side(rp, ep, n_p), Side(rd, ed, n)], n_d)
            if n_d:
                sides = [Side(rp, ep, n_p), Side(rd, ed, n_d)]
                found = SearchResult("disaggregated", sides[1], sides[0], None, self.power(sides), (), "exhaustive")
                best = found if best is None or self.better(found, best) else best
        return best

    def better(self, a: SearchResult, b: SearchResult) -> bool:
        """More tokens per second, or (minimize = energy) more tokens per joule."""
        if self.energy:
            return _rate(a) / a.power > _rate(b) / b.power
        return _rate(a) > _rate(b)

    def fit_power(self, sides_of, count: int) -> int:
        """The most replicas, up to `count`, within the power limit (power is affine in them)."""
        if count <= 0 or self.power(sides_of(count)) <= self.limits.power:
            return max(count, 0)
        base, step = self.power(sides_of(0)), self.power(sides_of(1)) - self.power(sides_of(0))
        fits = math.floor((self.limits.power - base) / step) if step > 0 else count
        while fits > 0 and self.power(sides_of(fits)) > self.limits.power:  # rounding at the edge
            fits -= 1
        return max(0, min(count, fits))

    def binding(self, best: SearchResult) -> tuple[str, ...]:
        d = best.decode
        batch = d.replica.config.batch
        bigger = [e for r, e in self.both if r.config.batch > batch and
                  attrs.evolve(r.config, batch=batch) == d.replica.config]
        out = []
        if d.count * d.replica.gpus + (best.prefill.gpus if best.prefill else 0) + d.replica.gpus <= self.limits.gpus:
            out.append(f"power: {quantity(self.limits.power, 'W')} stops another replica")
        if best.mode == "aggregated" and not bigger:
            out.append(self.batch_binding(d.replica.config))
        return tuple(out) or ("gpus: every GPU serves",)

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


def _rate(result: SearchResult) -> float:
    d = result.decode
    if result.prefill is None:
        return d.estimate.tokens_per_s * d.count
    p = result.prefill
    out = d.estimate.tokens_per_s / max(d.estimate.requests_per_s, 1e-30)
    return min(d.count * d.estimate.requests_per_s, p.count * p.estimate.requests_per_s) * out


def _best_per_gpu(pairs):
    return max(pairs, key=lambda p: p[1].requests_per_s / p[0].gpus, default=None)
