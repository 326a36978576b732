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
    (pipeline fill and drain); 1 when not given.

    Identical partitions (the same alternatives at the same costs) are one class in the
    MILP: per class and alternative it chooses how many copies n run it, how many
    granules s they take together and the most any one of them takes, kmax; any s in
    [n, n kmax] is a split among the copies, and spreading s evenly gives each at most
    kmax. This is exact, and it leaves no permutations of identical partitions for the
    branch and bound to visit (64 partitions of two kinds: a handful of integers). An
    alternative that another of its partition beats on every count is dropped first."""
    import cvxpy as cp  # imported here: 2 s of start-up that most commands never need
    import numpy as np

    count = len(lanes)
    if count == 0 or total <= 0:
        return Split("infeasible", message="nothing to split" if count else "no partitions")
    groups = list(dict.fromkeys(lane.key for lane in lanes))
    size = len(groups)
    factor = [float(bubble[min(n, len(bubble) - 1)]) if bubble else 1.0 for n in range(size)]
    options = _options(lanes, groups, size)
    if not options:
        return _infeasible(total, lanes)
    classes = list(dict.fromkeys(o.kind for o in options))
    kinds = len(options)
    g = np.array([o.granule for o in options], dtype=float)
    most = np.array([o.most for o in options], dtype=float)
    copies = np.array([len(o.copies) for o in options], dtype=float)
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
        members = [i for i, o in enumerate(options) if o.kind == key]
        constraints.append(cp.sum(n[members]) <= len(options[members[0]].copies))
    for i, o in enumerate(options):
        constraints += _product_at_most(s[i], n[i], kmax[i], len(o.copies), o.most)
        constraints.append(s[i] <= len(o.copies) * kmax[i])   # implied, but it gives the relaxation the fluid bound
        constraints.append(c >= o.lane.fixed * v[i] + o.lane.per_item * o.granule * kmax[i])
        crossing = np.array([o.lane.exchange(m) for m in range(1, size + 1)])
        if crossing.any():  # w >= X(m) for the one m that holds, when the option runs
            constraints.append(w >= crossing @ y - crossing.max() * (1 - v[i]))
    if len(set(factor)) == 1:  # no bubble (the data split): the slowest lane's time as it is
        constraints.append(t >= factor[0] * c + w)
    else:  # t >= factor(m) c + w for the m that holds: z_m = c when y_m, else 0
        z = cp.Variable(size, nonneg=True)
        slowest = max(o.lane.fixed + o.lane.per_item * o.granule * o.most for o in options)
        constraints += [z >= c - slowest * (1 - y), t >= np.array(factor) @ z + w]
    problem = cp.Problem(cp.Minimize(t), constraints)
    try:
        with _quiet():
            problem.solve(solver=cp.HIGHS, mip_rel_gap=1e-9, mip_abs_gap=0.0)
    except (cp.SolverError, ValueError, ArithmeticError) as error:
        return Split("error", message=f"the MILP solver failed: {error}")
    if problem.status in ("infeasible", "infeasible_inaccurate"):
        return _infeasible(total, lanes)
    if problem.status not in ("optimal", "optimal_inaccurate") or s.value is None:
        return Split("error", message=f"the MILP solver says {problem.status}")
    items = _spread(count, options, np.rint(n.value).astype(int), np.rint(s.value).astype(int))
    used = sum(1 for i in items if i > 0)
    compute = max(factor[used - 1] * lane.busy(i) for lane, i in zip(lanes, items))
    exchange = max((lane.exchange(used) for lane, i in zip(lanes, items) if i > 0), default=0.0)
    return Split("optimal", items, used, compute, exchange)


def _infeasible(total: int, lanes: Sequence[Lane]) -> Split:
    granules = ", ".join(sorted({f"{lane.key}: {lane.granule}" for lane in lanes}))
    return Split("infeasible", message=f"{total} cannot be made of the partitions' granules ({granules})")


@attrs.frozen
class _Option:
    """One alternative of a class of identical partitions: `copies` lists, per partition of
    the class, the index of its lane for this alternative."""

    lane: Lane
    granule: int
    most: int                    # granules one copy may take
    copies: tuple[int, ...]
    kind: int                    # the class: options of one class share its partitions


def _options(lanes: Sequence[Lane], groups: list[str], size: int) -> list[_Option]:
    """The MILP's options: identical partitions merged into classes, dominated alternatives
    dropped, and those that cannot take a single granule left out."""
    def cost(i: int) -> tuple:
        lane = lanes[i]
        return (max(1, lane.granule), lane.fixed, lane.per_item, max(0, lane.limit), lane.crossing)

    classes: dict[tuple, list[list[int]]] = {}
    for name in groups:
        members = sorted((i for i, lane in enumerate(lanes) if lane.key == name), key=lambda i: (cost(i), i))
        classes.setdefault(tuple(cost(i) for i in members), []).append(members)
    options = []
    for kind, (signature, partitions) in enumerate(classes.items()):
        for position, (granule, _, _, limit, _) in enumerate(signature):
            if limit // granule == 0 or any(_beats(signature[other], signature[position], size, other < position)
                                            for other in range(len(signature)) if other != position):
                continue
            copies = tuple(members[position] for members in partitions)
            options.append(_Option(lanes[copies[0]], granule, limit // granule, copies, kind))
    return options


def _beats(a: tuple, b: tuple, size: int, earlier: bool) -> bool:
    """Alternative `a` does everything `b` does at no more cost: its granule divides b's,
    it holds as many items, and its fixed and per-item times and its exchange for every
    count of partitions are no larger (ties: the earlier one stays)."""
    ga, fa, da, la, xa = a
    gb, fb, db, lb, xb = b
    if gb % ga or fa > fb or da > db or (la // ga) * ga < (lb // gb) * gb:
        return False
    exchange = [(Lane("", ga, fa, da, la, xa).exchange(m), Lane("", gb, fb, db, lb, xb).exchange(m))
                for m in range(2, size + 1)]
    if any(ea > eb for ea, eb in exchange):
        return False
    return earlier or a != b


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


def _spread(count: int, options: Sequence[_Option], runs, granules) -> tuple[int, ...]:
    """Each option's granules spread evenly over the first copies of its class not yet taken."""
    items = [0] * count
    taken: dict[int, int] = {}
    for o, copies_run, total in zip(options, runs, granules):
        if copies_run <= 0:
            continue
        start = taken.get(o.kind, 0)
        taken[o.kind] = start + copies_run
        base, extra = divmod(int(total), int(copies_run))
        for j in range(copies_run):
            items[o.copies[start + j]] = (base + (1 if j < extra else 0)) * o.granule
    return tuple(items)


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
