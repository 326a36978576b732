"""How far one model's runs miss on a system beyond what the system's own constants explain:
the prior width of a model's offset (params.model_param), read from runs whose misses the fit
may see (the published runs of other systems, never the runs it will be judged on).

Each run's log(predicted / measured) is taken as a system's offset, plus its model's offset on
that system (the spread sought), plus the run's own scatter (another scale, sequence or layout
of the same model). The system enters as a fixed block, so that only differences between
models on one system count: the one-way random-effects ANOVA estimator for unbalanced cells,
pooled over systems (Searle, Casella and McCulloch, Variance Components, 1992, section 3.6:
E[MSB] = sigma_w^2 + n0 tau^2, n0 = (N - sum n_m^2 / N) / (K - 1)), truncated at 0."""

from __future__ import annotations

import math


def between_model_spread(rows: list[tuple[str, str, float]], noise: float) -> float:
    """The spread (standard deviation of log step time) of a model's offset on a system, from
    (system, model, log residual) rows. The runs' own scatter within a model on a system is
    pooled from the cells of two or more runs; `noise` stands for it where no cell has two."""
    cells: dict[str, dict[str, list[float]]] = {}
    for system, model, r in rows:
        if math.isfinite(r):
            cells.setdefault(system, {}).setdefault(model, []).append(r)
    within = [(sum((r - _mean(c)) ** 2 for r in c), len(c) - 1) for models in cells.values() for c in models.values()]
    dof = sum(d for _, d in within)
    sigma_w2 = sum(s for s, _ in within) / dof if dof else noise ** 2
    between, weight = 0.0, 0.0
    for models in cells.values():
        k = len(models)
        if k < 2:
            continue    # one model on the system: no difference between models to read
        n = sum(len(c) for c in models.values())
        grand = sum(sum(c) for c in models.values()) / n
        ssb = sum(len(c) * (_mean(c) - grand) ** 2 for c in models.values())
        n0 = (n - sum(len(c) ** 2 for c in models.values()) / n) / (k - 1)
        between += ssb - (k - 1) * sigma_w2
        weight += n0 * (k - 1)
    return math.sqrt(max(0.0, between / weight)) if weight else 0.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
