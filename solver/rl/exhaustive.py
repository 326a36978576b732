"""Every point of an rl job's space simulated and valued: the oracle the best-first search
(solver/rl/search.py) is checked against on small designs. Same space, same model, no bounds."""

from __future__ import annotations

from ...model.rl.job import RLJob
from .pools import Candidate, evaluate
from .search import Context, points


def exhaustive(job: RLJob, ctx: Context | None = None) -> list[Candidate]:
    """Every feasible point within the power bound, best first (ties in the order visited)."""
    ctx = ctx or Context(job)
    found = []
    for where, layout, limit, train, staleness in points(ctx):
        if ctx.bound(layout, limit) is None:
            continue
        generation = ctx.simulate(layout, limit)
        if not generation.feasible:
            continue
        candidate = evaluate(job, where.placement, staleness, generation, train)
        if candidate.power <= job.power:
            found.append(candidate)
    return sorted(found, key=lambda c: c.value(job.objective))
