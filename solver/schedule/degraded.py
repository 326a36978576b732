"""Parts slow or down for a while: degradation events in the schedule.

An event is a part (`model/network/degrade.py`'s PARTS) at a share of its rate from `start` to
`end` seconds, somewhere in a partition:

- `nic:D` or `gpu:D`: the NIC or a GPU of scale-up domain D (a node, an NVL72 rack): the jobs
  holding GPUs there and spanning more than it (a NIC) or holding any (a GPU);
- `link:L`: one uplink of leaf L (the groups of the first level above the domains): the jobs
  holding GPUs under that leaf and spanning more than it;
- `spine`: one spine switch: every job that spans more than one leaf.

A train job touched by an event runs at its plan's step on the partition as the degraded part's
GPUs see it (`degrade`: a synchronous step waits for its straggler) over the healthy step, for
as long as the event lasts or the run goes on; events that touch it at once compose (each
degrades the partition the last left). ASSUMPTIONS: a job's contention slowdown
(`contention.py`) and its degradation multiply; a trace row states no model, so it is never
slowed; a job placed across leaves whose plan stays inside one is priced on its plan's tiers.
"""

from __future__ import annotations

import re

import attrs

from ...model.network.degrade import PARTS, Degradation, DegradeError, degrade, share_of
from ...dsl.records import frozen

WHERE = {"nic": "D", "gpu": "D", "link": "L"}    # the parts placed by an index, and what it counts
UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_EVENT = re.compile(r"^(?:(?P<partition>[A-Za-z_][\w-]*)/)?(?P<part>[a-z]+)(?::(?P<where>\d+))?"
                    r"=(?P<share>[^@]+)@(?P<start>[^-]+)-(?P<end>.+)$")


class EventError(ValueError):
    """An event that cannot be read or placed (what is wrong and what to write instead)."""


@frozen
class Event:
    part: str
    share: float
    start: float
    end: float
    where: int | None = None         # the domain (nic, gpu) or leaf (link); None for a spine
    partition: str | None = None     # None: the cluster's first partition

    @property
    def degradation(self) -> Degradation:
        return Degradation(self.part, self.share)

    def describe(self) -> str:
        at = f" {self.part} {self.where}" if self.where is not None else f" {self.part}"
        return f"{self.degradation.describe().replace(' ' + self.part, at, 1)} from {self.start:g} s to {self.end:g} s"


def parse_event(text: str) -> Event:
    """`[PARTITION/]PART[:INDEX]=SHARE@START-END`: `nic:3=50%@1h-3h`, `spine=down@0-30min`."""
    m = _EVENT.match(text.strip())
    if m is None:
        raise EventError(f"`{text}`: write [PARTITION/]PART[:INDEX]=SHARE@START-END, e.g. `nic:3=50%@1h-3h` "
                         "or `spine=down@0-30min`")
    part, where = m["part"], m["where"]
    if part not in PARTS:
        raise EventError(f"`{part}`: the part is one of {', '.join(PARTS)}")
    if (part in WHERE) != (where is not None):
        raise EventError(f"`{text}`: " + (f"say which {part}: `{part}:{WHERE[part]}` ({'the scale-up domain' if WHERE[part] == 'D' else 'the leaf'}, from 0)"
                                          if part in WHERE else "a spine switch takes no index: `spine=...`"))
    share = _share(m["share"].strip())
    start, end = _seconds(m["start"]), _seconds(m["end"])
    if not start < end:
        raise EventError(f"`{text}`: the event ends after it starts (START-END)")
    return Event(part, share, start, end, int(where) if where is not None else None, m["partition"])


def _share(text: str) -> float:
    try:
        return share_of(text)
    except ValueError as error:
        raise EventError(str(error)) from None


def _seconds(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|min|h|d)?\s*", text)
    if m is None:
        raise EventError(f"`{text}`: a time is a number with s, min, h or d (`90min`, `2h`)")
    value = float(m[1]) * UNITS[m[2] or "s"]
    if value > 10 * 365 * 86400:
        raise EventError(f"`{text}`: a time is at most ten years, as a trace's")
    return value


class Degradations:
    """The events of one schedule and, at each moment, what they take from each running job."""

    def __init__(self, events: tuple[Event, ...], graph, states: dict, curves: dict) -> None:
        first = graph.partitions[0].name
        self.events = tuple(attrs.evolve(e, partition=e.partition or first) for e in events)
        self.graph, self.states, self.curves = graph, states, curves
        self.active: set[int] = set()
        self.slowed: dict[int, set[str]] = {}     # event -> the jobs it slowed
        self._memo: dict[tuple, float] = {}
        for e in self.events:
            self._check(e)

    def _check(self, e: Event) -> None:
        state = self.states.get(e.partition)
        if state is None:
            raise EventError(f"`{e.partition}`: no partition of that name on the cluster "
                             f"(one of {', '.join(self.states)})")
        count = state.domains if e.part in ("nic", "gpu") else -(-state.domains // self._leaf(state))
        if e.where is not None and e.where >= count:
            raise EventError(f"`{e.part}:{e.where}`: `{e.partition}` has {count} "
                             f"{'scale-up domains' if e.part in ('nic', 'gpu') else 'leaves'}, 0 to {count - 1}")
        try:
            degrade(self.graph, self.graph.partition(e.partition), e.degradation)
        except DegradeError as problem:
            raise EventError(f"{e.describe()}: {problem}") from None

    @staticmethod
    def _leaf(state) -> int:
        return state.group_domains[1] if len(state.group_domains) > 1 else state.domains

    def touches(self, e: Event, alloc) -> bool:
        if alloc.partition != e.partition:
            return False
        if e.part == "gpu":
            return e.where in alloc.index
        if e.part == "nic":
            return e.where in alloc.index and alloc.level >= 1
        if alloc.level < 2:          # inside one leaf: nothing climbs through a leaf's uplinks or a spine
            return False
        return e.part == "spine" or any(d // self._leaf(self.states[e.partition]) == e.where for d in alloc.domains)

    def factor(self, name: str, alloc, option_gpus: int) -> float:
        """The job's step with the active events that touch it over its healthy step (1: none)."""
        curve = self.curves.get((name, alloc.partition, option_gpus))
        touching = tuple(sorted(i for i in self.active if self.touches(self.events[i], alloc)))
        if curve is None or not touching:
            return 1.0
        key = (id(curve), touching)
        if key not in self._memo:
            from ...model.train.step import estimate

            partition = curve.partition
            for i in touching:
                partition = degrade(self.graph, partition, self.events[i].degradation)
            slow = estimate(curve.shape, curve.config, partition).step_time
            self._memo[key] = max(1.0, slow / curve.step({}))
        if self._memo[key] > 1.0:
            for i in touching:
                self.slowed.setdefault(i, set()).add(name)
        return self._memo[key]

    def report(self) -> tuple[tuple[Event, tuple[str, ...]], ...]:
        """Each event with the jobs it slowed."""
        return tuple((e, tuple(sorted(self.slowed.get(i, ())))) for i, e in enumerate(self.events))
