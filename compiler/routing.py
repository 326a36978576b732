"""How a fabric spreads flows over its equal-cost uplinks, and what hash collisions cost.

`adaptive`: the switches spread each flow over every uplink, or route so that no two flows
share one (adaptive routing, packet spraying, InfiniBand's fat-tree routing engine, which
"optimizes routing for congestion-free shift communication" (NVIDIA UFM Enterprise User
Manual, Network Management): the uplinks work as one pool.

`ecmp`: each flow is pinned to one uplink by a hash of its header, so flows collide (Meta,
"RDMA over Ethernet for Distributed AI Training at Meta Scale", SIGCOMM 2024: ECMP "rendered
poor performance for the training workload due to the low flow entropy"). A synchronous
collective waits for its slowest flow, so it finishes when the most loaded uplink does:
`flows` flows hashed over `paths` uplinks take E[max load] link-times, where spreading takes
max(1, flows / paths). The share is the ratio of the two, never above 1.

The expectation is exact: the loads are independent Poisson counts conditioned on their sum
(a multinomial), so P(max <= k) = P(sum of `paths` Poissons truncated at k = flows) /
P(sum = flows), a truncated convolution power.
"""

from __future__ import annotations

import functools
import math

ROUTINGS = ("adaptive", "ecmp")


def routing_of(fabric) -> str:
    """The fabric's `routing`, else its kind's default: Ethernet hashes (ECMP, RFC 2992; "By
    default, the load balancing option is ECMP": Cisco Nexus Hyperfabric, Dynamic Load
    Balancing; "the widely adopted ECMP": Meta, SIGCOMM 2024); InfiniBand's subnet manager
    routes a fat tree without collisions (UFM's fat-tree routing engine)."""
    stated = fabric.get("routing")
    if stated is not None:
        return stated.name
    return "ecmp" if getattr(fabric.get("kind"), "name", None) == "ethernet" else "adaptive"


@functools.lru_cache(maxsize=1024)
def ecmp_share(flows: int, paths: int) -> float:
    """The share of the uplinks' bandwidth a synchronous collective gets when `flows` equal
    flows are hashed over `paths` equal uplinks, against spreading them perfectly."""
    if flows <= 1 or paths <= 1:
        return 1.0
    return max(1.0, flows / paths) / expected_max_load(flows, paths)


@functools.lru_cache(maxsize=1024)
def expected_max_load(balls: int, bins: int) -> float:
    """E[the fullest bin] of `balls` thrown uniformly into `bins`: sum over k of P(max > k)."""
    floor = math.ceil(balls / bins)          # max >= the mean, rounded up, always
    total, k = float(floor), floor
    while k < balls:
        above = 1.0 - _at_most(balls, bins, k)
        if above < 1e-12:
            break
        total += above
        k += 1
    return total


def _at_most(balls: int, bins: int, k: int) -> float:
    """P(no bin holds more than k of `balls` in `bins`)."""
    import numpy as np                   # here: `gclc check` and plans without ECMP load neither
    from scipy.stats import poisson

    rate = balls / bins
    one = poisson.pmf(np.arange(min(k, balls) + 1), rate)
    power = _power(one, bins, balls)
    whole = poisson.pmf(balls, balls)          # P(sum of the untruncated Poissons = balls)
    return float(min(1.0, power[balls] / whole)) if power.size > balls else 0.0


def _power(poly, n: int, degree: int):
    """poly ** n (a numpy array), coefficients above `degree` dropped, by repeated squaring."""
    import numpy as np

    result = np.ones(1)
    while n:
        if n & 1:
            result = np.convolve(result, poly)[:degree + 1]
        n >>= 1
        if n:
            poly = np.convolve(poly, poly)[:degree + 1]
    return result
