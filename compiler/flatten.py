"""Flattening a cluster graph to one vertex per GPU, node and switch — explicit and lazy.

The IR stays hierarchical; exports and analyses that need every device ask for it here.
`vertices()` and `edges()` are generators, so a million-GPU cluster can be streamed;
`to_networkx()` builds the whole graph and refuses beyond `limit` GPUs.
"""

from __future__ import annotations

import math
from typing import Iterator

from .ir import ClusterGraph, Partition, Tier

DEFAULT_LIMIT = 100_000


def vertices(graph: ClusterGraph) -> Iterator[tuple[str, dict]]:
    for p in graph.partitions:
        for n in range(p.nodes):
            yield _node(p, n), {"kind": "node", "type": p.node.name, "partition": p.name}
            for g in range(p.node.gpus):
                yield f"{_node(p, n)}/gpu{g}", {"kind": "gpu", "type": p.node.accelerator.name, "partition": p.name}
        for t in p.tiers:
            for s in range(_switches(p, t)):
                yield _switch(p, t, s), {"kind": "switch", "tier": t.name, "level": t.level}


def edges(graph: ClusterGraph) -> Iterator[tuple[str, str, dict]]:
    """GPU-node membership, and each node (or group) to the switch of every tier above it."""
    for p in graph.partitions:
        gpus_per_node = p.node.gpus
        for n in range(p.nodes):
            for g in range(gpus_per_node):
                yield _node(p, n), f"{_node(p, n)}/gpu{g}", {"kind": "member"}
        for t in p.tiers:
            nodes_per_group = max(1, t.group_gpus // gpus_per_node)
            for n in range(p.nodes):
                switch = _switch(p, t, min(n // nodes_per_group, _switches(p, t) - 1))
                yield _node(p, n), switch, {"kind": "link", "tier": t.name, "bandwidth": t.bandwidth * gpus_per_node}


def to_networkx(graph: ClusterGraph, limit: int = DEFAULT_LIMIT):
    import networkx as nx

    if graph.gpus > limit:
        raise ValueError(f"{graph.gpus:,} GPUs is more than the flattening limit of {limit:,}; "
                         "stream vertices() and edges() instead")
    flat = nx.Graph(name=graph.name)
    flat.add_nodes_from(vertices(graph))
    flat.add_edges_from(edges(graph))
    return flat


def _node(p: Partition, n: int) -> str:
    return f"{p.name}/node{n}"


def _switch(p: Partition, t: Tier, s: int) -> str:
    return f"{p.name}/{t.fabric}/L{t.level}/sw{s}"


def _switches(p: Partition, t: Tier) -> int:
    """One logical switch per group of this tier (a group's switches act as one here)."""
    return max(1, math.ceil(p.gpus / max(1, t.group_gpus)))
