"""What a GPU-second of a partition costs: the cluster's cost of ownership (compiler/cost/tco.py)
over its lifetime at load, shared among the partitions in proportion to their capex (each
partition's own bill of materials, the shared racks and fabric by GPUs), then by GPU."""

from __future__ import annotations

from ...compiler.cost.tco import tco
from ...compiler.design import Entity
from ...compiler.ir import ClusterGraph


def usd_per_gpu_second(cluster: Entity, graph: ClusterGraph, partition: str) -> float | None:
    """USD of one GPU-second of `partition`; None without an `economics` block."""
    return _rates(cluster, graph).get(partition)


_RATES: dict[int, tuple[object, dict[str, float]]] = {}


def _rates(cluster: Entity, graph: ClusterGraph) -> dict[str, float]:
    """Per partition, computed once per graph (keyed by identity: hashing a design is slow)."""
    held = _RATES.get(id(graph))
    if held is None or held[0] is not graph:
        if len(_RATES) > 16:
            _RATES.clear()
        held = _RATES[id(graph)] = (graph, _compute(cluster, graph))
    return held[1]


def _compute(cluster: Entity, graph: ClusterGraph) -> dict[str, float]:
    t = tco(cluster, graph)
    if t is None or t.lifetime_seconds <= 0:
        return {}
    many = len(graph.partitions) > 1
    own = {p.name: sum(line.cost for line in t.bom.lines if many and line.key.startswith(f"{p.name}."))
           for p in graph.partitions}
    shared = t.bom.capex - sum(own.values())
    capex = {p.name: own[p.name] + shared * p.gpus / graph.gpus for p in graph.partitions}
    total = sum(capex.values())
    return {p.name: t.total * (capex[p.name] / total if total > 0 else p.gpus / graph.gpus)
            / (p.gpus * t.lifetime_seconds) for p in graph.partitions}
