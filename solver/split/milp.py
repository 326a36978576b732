"""The heterogeneous split as one MILP (cvxpy with HiGHS): the exact answer when there are
more items than solver/split/search.py's bit sets hold (a batch of millions of sequences).
Slower than the search when there are many kinds of partition (its bound is weak), but its
size does not grow with the number of items. tests/solver/split/test_engines.py holds the
two to the same optimum.

Per class of identical partitions and alternative it chooses how many copies n run it, how
many granules s they take together and the most any one of them takes, kmax; any s in
[n, n kmax] is a split among the copies, and spreading s evenly gives each at most kmax.
This is exact, and it leaves no permutations of identical partitions to branch over."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Sequence

from .search import Choice


class MilpError(Exception):
    pass


def milp(total: int, choices: Sequence[Choice], factor: Sequence[float]) -> dict[tuple[int, int], int] | None:
    """The optimal split as {(choice, copy): granules}, None when there is none; MilpError
    when the solver fails."""
    import cvxpy as cp  # imported here: 2 s of start-up that most commands never need
    import numpy as np

    size = len(factor)
    classes = list(dict.fromkeys(o.kind for o in choices))
    kinds = len(choices)
    g = np.array([o.granule for o in choices], dtype=float)
    most = np.array([o.most for o in choices], dtype=float)
    copies = np.array([o.copies for o in choices], dtype=float)
    n = cp.Variable(kinds, integer=True)        # copies running the option
    v = cp.Variable(kinds, boolean=True)        # n > 0
    s = cp.Variable(kinds, integer=True)        # granules the copies take together
    kmax = cp.Variable(kinds, integer=True)     # the most granules one copy takes
    y = cp.Variable(size, boolean=True)         # exactly this many partitions take part
    w = cp.Variable(nonneg=True)
    t = cp.Variable(nonneg=True)
    c = cp.Variable(nonneg=True)                # the slowest partition's busy time
    constraints = [g @ s == total, n >= 0, n <= cp.multiply(copies, v), v <= n, s >= n,
                   kmax >= 0, kmax <= most, cp.sum(y) == 1, np.arange(1, size + 1) @ y == cp.sum(n)]
    for key in classes:
        members = [i for i, o in enumerate(choices) if o.kind == key]
        constraints.append(cp.sum(n[members]) <= choices[members[0]].copies)
    for i, o in enumerate(choices):
        constraints += _product_at_most(s[i], n[i], kmax[i], o.copies, o.most)
        constraints.append(s[i] <= o.copies * kmax[i])   # implied, but it gives the relaxation the fluid bound
        constraints.append(c >= o.lane.fixed * v[i] + o.lane.per_item * o.granule * kmax[i])
        crossing = np.array([o.lane.exchange(m) for m in range(1, size + 1)])
        if crossing.any():  # w >= X(m) for the one m that holds, when the option runs
            constraints.append(w >= crossing @ y - crossing.max() * (1 - v[i]))
    if len(set(factor)) == 1:  # no bubble (the data split): the slowest lane's time as it is
        constraints.append(t >= factor[0] * c + w)
    else:  # t >= factor(m) c + w for the m that holds: z_m = c when y_m, else 0
        z = cp.Variable(size, nonneg=True)
        slowest = max(o.lane.fixed + o.lane.per_item * o.granule * o.most for o in choices)
        constraints += [z >= c - slowest * (1 - y), t >= np.array(factor) @ z + w]
    problem = cp.Problem(cp.Minimize(t), constraints)
    try:
        with _quiet():
            problem.solve(solver=cp.HIGHS, mip_rel_gap=1e-9, mip_abs_gap=0.0)
    except (cp.SolverError, ValueError, ArithmeticError) as error:
        raise MilpError(f"the MILP solver failed: {error}") from None
    if problem.status in ("infeasible", "infeasible_inaccurate"):
        return None
    if problem.status not in ("optimal", "optimal_inaccurate") or s.value is None:
        raise MilpError(f"the MILP solver says {problem.status}")
    return _spread(choices, np.rint(n.value).astype(int), np.rint(s.value).astype(int))


def _product_at_most(s, n, kmax, copies: int, most: int) -> list:
    """s <= n kmax, exactly: n written in binary digits d_j, each product d_j kmax a
    continuous p_j held to it by four rows (n <= copies, kmax <= most)."""
    import cvxpy as cp
    import numpy as np

    digits = max(1, copies.bit_length())
    d = cp.Variable(digits, boolean=True)
    p = cp.Variable(digits, nonneg=True)
    weights = 2.0 ** np.arange(digits)
    return [n == weights @ d, p <= most * d, p <= kmax, p >= kmax - most * (1 - d), s <= weights @ p]


def _spread(choices: Sequence[Choice], runs, granules) -> dict[tuple[int, int], int]:
    """Each choice's granules spread evenly over the first copies of its class not yet taken."""
    picks: dict[tuple[int, int], int] = {}
    taken: dict[int, int] = {}
    for i, (o, copies_run, total) in enumerate(zip(choices, runs, granules)):
        if copies_run <= 0:
            continue
        start = taken.get(o.kind, 0)
        taken[o.kind] = start + copies_run
        base, extra = divmod(int(total), int(copies_run))
        for j in range(copies_run):
            picks[(i, start + j)] = base + (1 if j < extra else 0)
    return picks


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
