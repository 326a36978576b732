"""The heterogeneous split's core: divide a job's items (sequences or layers) over lanes
(partitions, or one partition's alternative configurations) so that the slowest lane plus
the cross-partition exchange is as short as possible, exactly (solver/split/search.py).
See solver/split/plan.py for what the lanes stand for."""

from __future__ import annotations

from typing import Sequence

import attrs

from ...model.config import TrainConfig
from ...dsl.records import frozen


@frozen
class Lane:
    """One partition as the split sees it: items (sequences or layers) cost `fixed` once
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


@frozen
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


SEARCH_ITEMS = 1 << 16        # the search's bit sets hold this many items (sequences or layers)
SEARCH_CAPS = 1 << 21         # and this many busy times; above either, the MILP


def split(total: int, lanes: Sequence[Lane], bubble: Sequence[float] | None = None,
          engine: str | None = None) -> Split:
    """Divide `total` items over `lanes` to minimize the step time, exactly.

    Lanes that share a `group` are alternative configurations of one partition: at most
    one of them runs. `bubble[n - 1]` multiplies the busy times when n groups take part
    (pipeline fill and drain); 1 when not given.

    Identical partitions (the same alternatives at the same costs) are one class, and an
    alternative that another of its partition beats on every count is dropped; then
    solver/split/search.py finds the optimum (see there how, and why it is exact), or,
    for more items than its bit sets hold, the MILP of solver/split/milp.py (`engine`
    forces one: "search" or "milp")."""
    count = len(lanes)
    if count == 0 or total <= 0:
        return Split("infeasible", message="nothing to split" if count else "no partitions")
    groups = list(dict.fromkeys(lane.key for lane in lanes))
    size = len(groups)
    factor = [float(bubble[min(n, len(bubble) - 1)]) if bubble else 1.0 for n in range(size)]
    options = _options(lanes, groups, size)
    if not options:
        return _infeasible(total, lanes)
    # numpy loads only when a split runs (a plan of one partition never needs it)
    from .search import Choice, optimum

    choices = [Choice(o.lane, o.granule, min(o.most, total // o.granule), len(o.copies), o.kind) for o in options]
    if engine is None:
        small = total <= SEARCH_ITEMS and sum(c.most for c in choices) <= SEARCH_CAPS
        engine = "search" if small else "milp"
    if engine == "search":
        chosen = optimum(total, choices, factor)
    else:
        from .milp import MilpError, milp

        try:
            chosen = milp(total, choices, factor)
        except MilpError as error:
            return Split("error", message=str(error))
    if chosen is None:
        return _infeasible(total, lanes)
    items = [0] * count
    for (option, copy), granules in chosen.items():
        items[options[option].copies[copy]] = granules * options[option].granule
    used = sum(1 for i in items if i > 0)
    compute = max(factor[used - 1] * lane.busy(i) for lane, i in zip(lanes, items))
    exchange = max((lane.exchange(used) for lane, i in zip(lanes, items) if i > 0), default=0.0)
    return Split("optimal", tuple(items), used, compute, exchange)


def _infeasible(total: int, lanes: Sequence[Lane]) -> Split:
    granules = ", ".join(sorted({f"{lane.key}: {lane.granule}" for lane in lanes}))
    return Split("infeasible", message=f"{total} cannot be made of the partitions' granules ({granules})")


@frozen
class _Option:
    """One alternative of a class of identical partitions: `copies` lists, per partition of
    the class, the index of its lane for this alternative."""

    lane: Lane
    granule: int
    most: int                    # granules one copy may take
    copies: tuple[int, ...]
    kind: int                    # the class: options of one class share its partitions


def _options(lanes: Sequence[Lane], groups: list[str], size: int) -> list[_Option]:
    """The options: identical partitions merged into classes, dominated alternatives
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
    # equal on everything that counts here (crossings beyond `size` partitions never do):
    # only the earlier one stays, else two such alternatives would drop each other
    strictly = (ga != gb or fa < fb or da < db or (la // ga) * ga > (lb // gb) * gb
                or any(ea < eb for ea, eb in exchange))
    return earlier or strictly


