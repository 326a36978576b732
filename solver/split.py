"""The heterogeneous split's core: divide a job's items (sequences or layers) over lanes
(partitions, or one partition's alternative configurations) so that the slowest lane plus
the cross-partition exchange is as short as possible: a small MILP solved by HiGHS through
cvxpy. See solver/hetero.py for what the lanes stand for."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Sequence

import attrs

from ..model.config import TrainConfig

@attrs.frozen
class Lane:
    """One partition as the MILP sees it: items (sequences or layers) cost `fixed` once
    plus `per_item` each, in multiples of `granule`, at most `limit`."""

    name: str
    granule: int
    fixed: float
    per_item: float
    limit: int
    crossing: tuple[float, ...] = ()   # s of exchange when 2, 3, ... partitions take part
    group: str = ""                    # lanes of one group (one partition's configurations): at most one runs
    config: TrainConfig | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def key(self) -> str:
        return self.group or self.name

    def exchange(self, used: int) -> float:
        if used < 2 or not self.crossing:
            return 0.0
        return self.crossing[min(used - 2, len(self.crossing) - 1)]

    def busy(self, items: int) -> float:
        return self.fixed + self.per_item * items if items > 0 else 0.0


@attrs.frozen
class Split:
    status: str                  # optimal | infeasible | error
    items: tuple[int, ...] = ()
    used: int = 0
    compute_time: float = 0.0    # the slowest partition's busy time (with the pipeline bubble factor)
    exchange: float = 0.0
    message: str = ""

    @property
    def step_time(self) -> float:
        return self.compute_time + self.exchange


def split(total: int, lanes: Sequence[Lane], bubble: Sequence[float] | None = None) -> Split:
    """Divide `total` items over `lanes` to minimize the step time (MILP, HiGHS).

    Lanes that share a `group` are alternative configurations of one partition: at most
    one of them runs. `bubble[n - 1]` multiplies the busy times when n groups take part
    (pipeline fill and drain); 1 when not given."""
    import cvxpy as cp  # imported here: 2 s of start-up that most commands never need
    import numpy as np

    count = len(lanes)
    if count == 0 or total <= 0:
        return Split("infeasible", message="nothing to split" if count else "no partitions")
    groups = list(dict.fromkeys(lane.key for lane in lanes))
    size = len(groups)
    factor = [float(bubble[min(n, len(bubble) - 1)]) if bubble else 1.0 for n in range(size)]
    g = np.array([max(1, lane.granule) for lane in lanes], dtype=float)
    most = np.array([max(0, lane.limit) // max(1, lane.granule) for lane in lanes], dtype=float)
    k = cp.Variable(count, integer=True)
    u = cp.Variable(count, boolean=True)
    y = cp.Variable(size, boolean=True)
    w = cp.Variable(nonneg=True)
    t = cp.Variable(nonneg=True)
    constraints = [g @ k == total, k >= u, k <= cp.multiply(most, u), cp.sum(y) == 1,
                   np.arange(1, size + 1) @ y == cp.sum(u)]
    for name in groups:
        members = [i for i, lane in enumerate(lanes) if lane.key == name]
        if len(members) > 1:
            constraints.append(cp.sum(u[members]) <= 1)
    uniform = len(set(factor)) == 1  # no bubble (the data split): the slowest lane's time as it is
    c = cp.Variable(nonneg=True)      # the slowest lane's busy time
    for p, lane in enumerate(lanes):
        busy = lane.fixed * u[p] + lane.per_item * g[p] * k[p]
        crossing = np.array([lane.exchange(n) for n in range(1, size + 1)])
        if crossing.any():  # w >= X_p(n) for the one n that holds, when p takes part: one row, not one per n
            constraints.append(w >= crossing @ y - crossing.max() * (1 - u[p]))
        constraints.append(c >= busy)
    if uniform:
        constraints.append(t >= factor[0] * c + w)
    else:  # t >= factor(n) c + w for the n that holds: z_n = c when y_n, else 0 (P rows, not lanes x P)
        z = cp.Variable(size, nonneg=True)
        slowest = max(lane.fixed + lane.per_item * g[p] * most[p] for p, lane in enumerate(lanes))
        constraints += [z >= c - slowest * (1 - y), t >= np.array(factor) @ z + w]
    problem = cp.Problem(cp.Minimize(t), constraints)
    try:
        with _quiet():
            problem.solve(solver=cp.HIGHS, mip_rel_gap=1e-9, mip_abs_gap=0.0)
    except (cp.SolverError, ValueError, ArithmeticError) as error:
        return Split("error", message=f"the MILP solver failed: {error}")
    if problem.status in ("infeasible", "infeasible_inaccurate"):
        granules = ", ".join(sorted({f"{lane.key}: {lane.granule}" for lane in lanes}))
        return Split("infeasible", message=f"{total} cannot be made of the partitions' granules ({granules})")
    if problem.status not in ("optimal", "optimal_inaccurate") or k.value is None:
        return Split("error", message=f"the MILP solver says {problem.status}")
    items = tuple(int(round(v)) * int(gg) for v, gg in zip(k.value, g))
    used = sum(1 for i in items if i > 0)
    compute = max(factor[used - 1] * lane.busy(i) for lane, i in zip(lanes, items))
    exchange = max((lane.exchange(used) for lane, i in zip(lanes, items) if i > 0), default=0.0)
    return Split("optimal", items, used, compute, exchange)


@contextlib.contextmanager
def _quiet():
    """HiGHS prints a banner on stdout (file descriptor 1) when cvxpy creates it; keep
    `gclc plan --json` clean."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


# ----------------------------------------------------------------- jobs per partition
