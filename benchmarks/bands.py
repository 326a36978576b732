"""80 % bands from cross-validated residuals: normalized split-conformal prediction.

The residual r = log(measured / predicted) of a prediction the model was not fitted on
is scaled by s(flags) = exp(a + sum of b_f over the prediction's flags), where a flag is
a reason the prediction is uncertain (an uncalibrated chip, MoE, CP, ...). a and b come
from a least-squares fit of log|r| on the flags, b >= 0 (a reason can only widen a band).
A reason no fitted residual carries has no b to fit: the band takes for it the widest
factor it did fit (`Band.unseen`), not 1, which would claim that the reason adds no
doubt. Leaving out the only group that carries a reason (benchmarks/band_refit.py's
nested coverage) meets exactly this.
The band is then [q_lo * s, q_hi * s] in r, with q_lo and q_hi the split-conformal order
statistics of the normalized scores r / s: with n exchangeable scores, the interval
between the floor((n + 1) * 0.1)-th and the ceil((n + 1) * 0.9)-th smallest covers a new
score with probability at least 80 % (Lei et al., "Distribution-free predictive inference
for regression", JASA 2018, Sec. 2.2 and 5.2 for the locally weighted version). Scaling
by s keeps that marginal guarantee and makes the width follow what is known to be
uncertain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

RIDGE = 1e-10   # per residual, on the flags' log factors: see fit_band
FLOOR = 0.005   # |r| below this is taken as this: log|r| of an exact hit is not informative
# Reasons the model names that no published run may carry (every run states its software
# stack; no calibrated run is power-capped): fit_band lists them, at the widest fitted
# factor while no residual carries them; model/calibration.py may set them from elsewhere.
KNOWN = ("stack", "power_cap")


@dataclass(frozen=True)
class Band:
    base: float                       # exp(a): the scale of a prediction without flags
    factors: dict[str, float]         # flag -> exp(b_f), the scale's multiplier
    quantiles: tuple[float, float]    # conformal quantiles of r / s (low < 0 < high usually)
    confidence: float = 0.8
    unseen: float = 1.0               # the factor of a reason no fitted residual carried: the widest fitted
    carried: frozenset = frozenset()  # the reasons its residuals carried (the others' factor is `unseen`)

    def scale(self, flags) -> float:
        return self.base * math.prod(self.factors.get(f, self.unseen) for f in flags)

    def interval(self, flags) -> tuple[float, float]:
        """Bounds on log(measured / predicted)."""
        s = self.scale(flags)
        return self.quantiles[0] * s, self.quantiles[1] * s

    def covers(self, residual: float, flags) -> bool:
        # the normalized score against the quantiles, the arithmetic fit_band ranks by
        # (q x s against r can miss a boundary score by a rounding)
        low, high = self.quantiles
        return low <= residual / self.scale(flags) <= high

    def half_width(self, flags) -> float:
        """Half the band's width as a share of the prediction."""
        low, high = self.interval(flags)
        return (math.exp(high) - math.exp(low)) / 2


def fit_band(residuals: list[float], flagsets: list[tuple[str, ...]], confidence: float = 0.8,
             known: tuple[str, ...] = ()) -> Band:
    """The band of `confidence` from held-out residuals and their flags; `known` names
    flags to list even if no residual carries them. A flag no residual carries, listed or
    met later, takes `unseen`: the widest fitted factor."""
    names = sorted({f for fs in flagsets for f in fs} | set(known))
    x = np.array([[1.0] + [1.0 if n in fs else 0.0 for n in names] for fs in flagsets])
    y = np.log(np.maximum(np.abs(np.array(residuals, dtype=float)), FLOOR))
    # A flag on every residual (collinear with a) or two flags always together leave the
    # least-squares fit without a unique solution, and the solver's answer then hangs on
    # the last bits of its linear algebra (overflowing factors in one process, sane ones in
    # another). A tiny ridge on b picks the smallest factors among the equal fits (such a
    # flag's share goes to a; flags always together share it), unique and continuous.
    ridge = np.hstack([np.zeros((len(names), 1)), math.sqrt(RIDGE * max(1, len(y))) * np.eye(len(names))])
    x, y = np.vstack([x, ridge]), np.concatenate([y, np.zeros(len(names))])
    lower = [-np.inf] + [0.0] * len(names)
    coef = lsq_linear(x, y, bounds=(lower, [np.inf] * (len(names) + 1))).x if len(residuals) else np.zeros(len(names) + 1)
    base = math.exp(coef[0])
    carried = {f for fs in flagsets for f in fs}
    fitted = {n: math.exp(b) for n, b in zip(names, coef[1:]) if n in carried}
    unseen = max([1.0, *fitted.values()])
    factors = {n: fitted.get(n, unseen) for n in names}
    scores = sorted(r / (base * math.prod(factors[f] for f in fs)) for r, fs in zip(residuals, flagsets))
    return Band(base, factors, conformal(scores, confidence), confidence, unseen, frozenset(carried))


def conformal(scores: list[float], confidence: float) -> tuple[float, float]:
    """Split-conformal two-sided quantiles of sorted `scores` at `confidence`."""
    n = len(scores)
    if n == 0:
        return (-math.inf, math.inf)
    tail = round((1 - confidence) / 2, 9)      # 0.1, not 0.09999999999999998
    lo = math.floor(round((n + 1) * tail, 9))  # 1-based order statistics
    hi = math.ceil(round((n + 1) * (1 - tail), 9))
    return (scores[lo - 1] if lo >= 1 else -math.inf, scores[hi - 1] if hi <= n else math.inf)


def nested_coverage(residuals, flagsets, groups, confidence: float = 0.8, known=()) -> list[tuple[bool, float]]:
    """For each residual: is it inside the band fitted on the other groups' residuals,
    and that band's half width. Coverage measured this way is itself out of sample."""
    out = []
    for g in dict.fromkeys(groups):
        idx = [i for i, h in enumerate(groups) if h != g]
        band = fit_band([residuals[i] for i in idx], [flagsets[i] for i in idx], confidence, known)
        for i, h in enumerate(groups):
            if h == g:
                out.append((i, band.covers(residuals[i], flagsets[i]), band.half_width(flagsets[i])))
    out.sort()
    return [(covered, width) for _, covered, width in out]
