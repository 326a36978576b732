"""Static warnings on a train job's pinned groups: a pinned tp or ep wider than the scale-up
domain of the partition it runs on must cross the scale-out fabric (the plan then says by
how much; here the pin is pointed at before anything is planned)."""

from __future__ import annotations

from typing import Callable, Iterator

from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from .design import Design, Entity, Partition as PartitionRef
from .ir import ClusterGraph, Partition


def group_checks(design: Design, lowered: Callable[[Entity], ClusterGraph]) -> Iterator[Diagnostic]:
    for job in design.local():
        pins = job.get("parallelism") if job.kind == "train" else None
        partition = _partition(job, lowered) if pins is not None else None
        if partition is None:
            continue
        inside = [t for t in partition.tiers if t.scope != "scaleout"]
        domain = max((t.group_gpus for t in inside), default=partition.node.gpus)
        for dim, what in (("tp", "tensor-parallel"), ("ep", "expert-parallel")):
            size = pins.get(dim)
            if size and size > domain:
                yield codes.SCALE_OUT_GROUP.make(
                    job.span_of(f"parallelism.{dim}"), what=f"{dim} = {size} {what} ranks",
                    domain=domain, notes=[f"every {dim} collective crosses the scale-out fabric, per layer and "
                                          "micro-batch", f"help: keep {dim} <= {domain}, or run on a larger "
                                          "scale-up domain"])


def _partition(job: Entity, lowered: Callable[[Entity], ClusterGraph]) -> Partition | None:
    target = job.get("on")
    if isinstance(target, tuple):
        if len(target) != 1:
            return None
        target = target[0]
    if isinstance(target, PartitionRef):
        return lowered(target.cluster).partition(target.name)
    if isinstance(target, Entity) and target.kind == "cluster":
        graph = lowered(target)
        return graph.partitions[0] if len(graph.partitions) == 1 else None
    return None
