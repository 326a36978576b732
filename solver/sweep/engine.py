"""Run design points in chunks, in this process or on a Dask cluster, and hand the rows
to a sink in point order.

One code path: chunks go to an executor (`InProcess`, or a `distributed.Client` for a
`LocalCluster` or an existing scheduler), at most `window` chunks are in flight so memory
stays flat in the number of points, and finished chunks are re-ordered before the sink
sees them, so the table is the same whichever executor ran it. On Ctrl-C the chunks that
did finish still reach the sink. Dask is imported only here, only when used.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Callable, Iterable, Iterator

import attrs

from .point import evaluate_chunk
from ...dsl.records import define, frozen

Chunk = list[tuple[int, dict[str, str]]]
Sink = Callable[[list[dict]], None]


@define
class Progress:
    total: int
    done: int = 0
    infeasible: int = 0
    started: float = attrs.Factory(time.monotonic)

    @property
    def eta(self) -> float | None:
        if not self.done:
            return None
        return (time.monotonic() - self.started) / self.done * (self.total - self.done)


@frozen
class Task:
    path: str
    job: str | None = None
    objective: str = "throughput"


def chunks(points: Iterable[tuple[int, dict[str, str]]], size: int) -> Iterator[Chunk]:
    iterator = iter(points)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def chunk_size(total: int, workers: int) -> int:
    """Enough chunks to balance the workers (8 each), few enough that scheduling is cheap."""
    return max(1, min(64, total // max(1, workers * 8)))


class InProcess:
    """The executor for one process: runs each chunk as it is submitted."""

    workers = 1

    def run(self, task: Task, stream: Iterator[Chunk], window: int) -> Iterator[tuple[int, list[dict]]]:
        for number, chunk in enumerate(stream):
            yield number, evaluate_chunk(task.path, chunk, task.job, task.objective)


class Distributed:
    """The executor for a Dask `distributed.Client` (a LocalCluster's or a remote scheduler's)."""

    def __init__(self, client):
        self.client = client
        self.workers = max(1, len(client.scheduler_info().get("workers", {})))

    def run(self, task: Task, stream: Iterator[Chunk], window: int) -> Iterator[tuple[int, list[dict]]]:
        from distributed import as_completed

        numbered = enumerate(stream)
        pending = as_completed()
        futures = {}

        def submit() -> bool:
            item = next(numbered, None)
            if item is None:
                return False
            number, chunk = item
            future = self.client.submit(evaluate_chunk, task.path, chunk, task.job, task.objective, pure=False)
            futures[future.key] = number
            pending.add(future)
            return True

        for _ in range(window):
            if not submit():
                break
        try:
            for future in pending:
                rows = future.result()
                yield futures.pop(future.key), rows
                submit()
        finally:
            for future in list(pending.futures):
                future.cancel()


def run(task: Task, points: Iterable[tuple[int, dict[str, str]]], total: int, sink: Sink, executor,
        size: int | None = None, on_progress: Callable[[Progress], None] | None = None) -> Progress:
    """Evaluate `points` with `executor`, calling `sink` with rows in point order."""
    progress = Progress(total)
    size = size or chunk_size(total, executor.workers)
    window = 4 * executor.workers
    ready: dict[int, list[dict]] = {}
    next_number = 0
    try:
        for number, rows in executor.run(task, chunks(points, size), window):
            ready[number] = rows
            progress.done += len(rows)
            progress.infeasible += sum(1 for r in rows if r["status"] != "ok")
            while next_number in ready:
                sink(ready.pop(next_number))
                next_number += 1
            if on_progress is not None:
                on_progress(progress)
    finally:  # Ctrl-C or a failure: what finished is kept, in order
        for number in sorted(ready):
            sink(ready.pop(number))
    return progress


def local_cluster(workers: int | None = None):
    """A LocalCluster of one single-threaded process per core (the search is CPU-bound Python)."""
    from distributed import LocalCluster

    n = workers or os.cpu_count() or 1
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                        silence_logs=40)
