"""Fabric topologies expanded into tiers: group sizes, switches, links, bandwidth.

Pure arithmetic on counts, no design types, so it can be checked against published
reference architectures directly (see tests/compiler/test_topology.py).

Fat tree with radix k and oversubscription o (down:up = o:1 at every non-top tier):
a switch below the top uses d = k*o/(o+1) ports down and k - d up; a top switch uses
all k ports down. The endpoints reachable within tier i form groups of d^i (times the
rails that share a leaf group, for rail-optimized fabrics).
"""

from __future__ import annotations

import math

from ..dsl.records import frozen


@frozen
class TierShape:
    """One switching tier of a fabric, counted over the whole fabric."""

    level: int             # 1 = leaf, 2 = spine, 3 = core
    group_endpoints: int   # endpoints (ports) reachable without going above this tier
    switches: int
    links_below: int       # cables from the tier below (or the endpoints) into this tier
    oversubscription: float  # cumulative down:up ratio between endpoints and this tier
    hops: int              # switches crossed by a path that turns at this tier


def fat_tree(endpoints: int, radix: int, tiers: int, oversubscription: float = 1.0) -> tuple[TierShape, ...]:
    """Tiers of a (possibly oversubscribed) folded-Clos fat tree serving `endpoints` ports.
    `tiers` is the most the fabric is built with: a tree is only as tall as its endpoints need,
    so the first tier that can be the top of a tree holding every endpoint is the top and no
    tier above it is built (a one-node design on a two-tier fabric has a leaf, not a spine;
    1,024 ports on a three-tier radix-64 fabric have leaves and spines, no core)."""
    down = down_ports(radix, oversubscription)
    shapes, links, cumulative = [], endpoints, 1.0
    for level in range(1, tiers + 1):
        top = level == tiers or fat_tree_capacity(radix, level, oversubscription) >= endpoints
        per_switch = radix if top else down
        switches = max(1, math.ceil(links / per_switch))
        group = endpoints if top else min(endpoints, down**level)
        shapes.append(TierShape(level, group, switches, links, cumulative, 2 * level - 1))
        if top:
            break
        links = switches * (radix - down)
        cumulative *= oversubscription
    return tuple(shapes)


def fat_tree_capacity(radix: int, tiers: int, oversubscription: float = 1.0) -> int:
    """The most endpoints such a tree can serve: d^(t-1) * k for the folded Clos."""
    down = down_ports(radix, oversubscription)
    return down ** (tiers - 1) * radix


def down_ports(radix: int, oversubscription: float) -> int:
    return max(1, min(radix - 1, round(radix * oversubscription / (oversubscription + 1))))


def torus_groups(dims: tuple[int, ...]) -> tuple[int, ...]:
    """Chips reachable using the first 1, 2, ... dimensions: (4,), (4, 16), (4, 16, 64)."""
    groups, size = [], 1
    for d in dims:
        size *= d
        groups.append(size)
    return tuple(groups)


def torus_bisection_links(dims: tuple[int, ...], wraparound: bool = True) -> int:
    """Links cut by halving the largest dimension (twice as many with wraparound)."""
    total = math.prod(dims)
    largest = max(dims)
    return (total // largest) * (2 if wraparound and largest > 2 else 1)


@frozen
class TorusAxis:
    """One dimension of a k-D torus as a tier: the chips reachable using it and those inside it."""

    length: int            # chips along this axis
    group: int             # chips reachable using this and the inner axes
    ring_bandwidth: float  # per chip per direction a collective along the axis gets


def torus_axes(dims: tuple[int, ...], per_chip: float, wraparound: bool = True,
               domain: int | None = None) -> tuple[TorusAxis, ...]:
    """Axes of a torus whose chips have `per_chip` bandwidth per direction over all their links.

    Each axis longer than 1 gives a chip two links (to both neighbours), so one link carries
    per_chip / links. A collective along an axis runs as a ring: two counter-rotating rings
    with wraparound (2 links' worth), one folded ring on an open line (1 link's worth).
    Chips of a `domain` larger than the torus ride the last axis (`group` = domain).
    """
    links = sum(2 for d in dims if d > 1) or 1
    link = per_chip / links
    ring = 2 * link if wraparound else link
    axes, size = [], 1
    for i, d in enumerate(dims):
        size *= d
        last = i == len(dims) - 1
        group = max(size, domain or 0) if last else size
        if d > 1 or last:
            axes.append(TorusAxis(d, group, ring))
    return tuple(axes)
