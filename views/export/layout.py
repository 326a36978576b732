"""The cluster as schedulers see it: named nodes and, per fabric tier, named domains of nodes.

Names are stable and derived from the design: a node of a plain-node unit is
`dgx-h100-001`; a node inside a supernode is `gb200-nvl72-007-node03`, and that
supernode's domain is `gb200-nvl72-007`; other domains are the tier's name and an index
(`xdr-campus-leaf-03`). Unit numbers have at least three digits (more when the count
needs them), so a cluster that grows keeps its names. In a cluster of several partitions
the partition name leads (`h100-001`, `h100-shared-ndr-leaf-01`). A `hostnames` list in the cluster or a partition
replaces the node names, in this order, by the real ones.

Each tier of the IR whose groups span more than one node becomes a level; its domains
hold `group_gpus / gpus per node` consecutive nodes, the same grouping the performance
model assumes (consecutive ranks fill the innermost tier first).
"""

from __future__ import annotations

import math
import re


from ...compiler.design import Design
from ...compiler.ir import ClusterGraph, Partition, Tier
from ...compiler.hostlist import expand_all
from ...dsl.records import frozen


@frozen
class Domain:
    name: str
    first: int                  # index of its first node in the partition
    count: int                  # nodes in it
    children: tuple[str, ...]   # domains of the level below (empty on the lowest level)


@frozen
class Level:
    tier: Tier
    key: str                    # a label-safe name for the level: `nvlink-domain`, `xdr-campus-leaf`
    nodes_per_domain: int
    domains: tuple[Domain, ...]


@frozen
class Group:
    """One partition: its node names, in rank order, and its levels, innermost first."""

    partition: Partition
    slug: str
    nodes: tuple[str, ...]
    levels: tuple[Level, ...]

    @property
    def gpus_per_node(self) -> int:
        return self.partition.node.gpus


@frozen
class Layout:
    cluster: str
    slug: str
    groups: tuple[Group, ...]

    def group(self, partition: str) -> Group:
        return next(g for g in self.groups if g.partition.name == partition)


def slug(name: str) -> str:
    """`GB200_NVL72` -> `gb200-nvl72`: lowercase letters, digits and single hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def layout(graph: ClusterGraph, design: Design | None = None) -> Layout:
    several = len(graph.partitions) > 1
    groups, taken = [], set()
    for partition in graph.partitions:
        name = slug(partition.name)
        if name in taken:  # `H100` and `h100` are different partitions: keep their nodes apart
            name = f"{name}-{len(taken) + 1}"
        taken.add(name)
        prefix = name if several else slug(partition.unit)
        nodes = _node_names(partition, prefix)
        real = hostnames(design, graph.name, partition.name, several) if design is not None else None
        groups.append(Group(partition, name, tuple(real or nodes), _levels(partition, prefix, name, several)))
    return Layout(graph.name, slug(graph.name), tuple(groups))


def _node_names(partition: Partition, prefix: str) -> list[str]:
    width = len(str(partition.units))
    if partition.nodes_per_unit == 1:
        return [f"{prefix}-{u + 1:0{max(3, width)}d}" for u in range(partition.units)]
    inner = max(2, len(str(partition.nodes_per_unit)))
    return [f"{_unit_name(prefix, u, width)}-node{n + 1:0{inner}d}"
            for u in range(partition.units) for n in range(partition.nodes_per_unit)]


def _unit_name(prefix: str, index: int, width: int) -> str:
    return f"{prefix}-{index + 1:0{max(3, width)}d}"


def _levels(partition: Partition, prefix: str, name: str, several: bool) -> tuple[Level, ...]:
    per_node, total = partition.node.gpus, partition.nodes
    levels: list[Level] = []
    for tier in partition.tiers:
        size = min(total, max(1, tier.group_gpus // per_node))
        if size <= 1 or (levels and size <= levels[-1].nodes_per_domain):
            continue
        key = "nvlink-domain" if tier.scope != "scaleout" and tier.kind == "nvlink" else slug(tier.name)
        count = math.ceil(total / size)
        if tier.scope == "supernode" and size == partition.nodes_per_unit:
            width = len(str(partition.units))
            names = [_unit_name(prefix, d, width) for d in range(count)]
        else:
            base = f"{name}-{slug(tier.name)}" if several else slug(tier.name)
            names = [f"{base}-{d + 1:0{max(2, len(str(count)))}d}" for d in range(count)]
        below = levels[-1] if levels else None
        domains = tuple(Domain(names[d], d * size, min(size, total - d * size), _children(below, d * size, size))
                        for d in range(count))
        levels.append(Level(tier, key, size, domains))
    return tuple(levels)


def _children(below: Level | None, first: int, size: int) -> tuple[str, ...]:
    """The lower level's domains that start inside [first, first + size)."""
    if below is None:
        return ()
    return tuple(d.name for d in below.domains if first <= d.first < first + size)


def hostnames(design: Design, cluster: str, partition: str, several: bool) -> list[str] | None:
    """The real host names a `hostnames` list gives (checked to match the node count)."""
    entity = design[cluster]
    if several:
        record = entity.get("partition").get(partition)
        expressions = record.get("hostnames") if record is not None else None
    else:
        expressions = entity.get("hostnames")
    return expand_all(expressions) if expressions else None
