"""Time and change, Kubernetes-style.

- `Timeline`: the future (job arrivals, run ends, failures, repairs) as a heap ordered by
  time then insertion; the simulation jumps from one to the next, never polls.
- `ApiServer`: the record of every state change, each with the next resource version
  (like etcd's revision). Nothing changes the cluster except `commit`.
- `Informer`: the scheduler's view. It `list`s once (the state at a version) and then
  `watch`es from that version: every change after it is delivered to the handlers once,
  in version order. A change cannot be missed or seen twice by construction: delivery
  walks the log by index and the index only moves forward, one change at a time.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable

from ...dsl.records import frozen


@frozen
class Timer:
    time: float
    kind: str            # arrive | finish | timeout | node-fail | node-repair | switch-fail | wake | deactivate
    subject: str         # a job, or a partition
    data: Any = None     # the run's id for finish; the domain for node events


class Timeline:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()

    def push(self, timer: Timer) -> None:
        heapq.heappush(self._heap, (timer.time, next(self._order), timer))

    def pop(self) -> Timer:
        return heapq.heappop(self._heap)[2]

    def peek_time(self) -> float:
        return self._heap[0][0]

    def __len__(self) -> int:
        return len(self._heap)


@frozen
class Change:
    version: int
    time: float
    kind: str            # submitted | bound | released | node-down | node-up
    subject: str
    data: Any = None


class ApiServer:
    def __init__(self) -> None:
        self.log: list[Change] = []

    @property
    def version(self) -> int:
        return len(self.log)

    def commit(self, time: float, kind: str, subject: str, data: Any = None) -> Change:
        change = Change(self.version + 1, time, kind, subject, data)
        self.log.append(change)
        return change


class Informer:
    """List once, then watch: `sync()` hands every new change to the handlers, once."""

    def __init__(self, api: ApiServer, handlers: dict[str, Callable[[Change], None]]) -> None:
        self.api, self.handlers = api, handlers
        self.seen = api.version          # the List: the state as of this version
        self.delivered = 0

    def sync(self) -> int:
        log, count = self.api.log, 0
        while self.seen < len(log):
            change = log[self.seen]
            if change.version != self.seen + 1:
                raise AssertionError(f"watch gap: expected version {self.seen + 1}, got {change.version}")
            self.seen += 1
            self.handlers[change.kind](change)
            count += 1
        self.delivered += count
        return count
