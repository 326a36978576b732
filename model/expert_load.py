"""How routed tokens land on expert-parallel ranks, for training and serving alike: the copies a
token sends a rank (top_k distinct experts, within its picked groups under group-limited routing)
and the busiest of the ranks' loads under uniform routing."""

from __future__ import annotations

import math
from functools import lru_cache

from .shape import ModelShape


def copies_on_rank(shape: ModelShape, ranks: int) -> tuple[float, float]:
    """(probability that a token routes any copy to a given one of `ranks` EP ranks, the variance of
    the copies it routes there), averaged over the ranks. A token picks top_k distinct experts
    uniformly, among all `routed` or, with group-limited routing, among the `group_top_k` of the
    `groups` groups it picks first (Megatron-Core moe_utils.py `group_limited_topk`; DeepSeek-V3's
    node-limited routing: groups are contiguous experts, as EP ranks hold them; under random logits
    every group and every expert in the chosen groups is equally likely). Given the experts `a` the
    rank offers in the chosen groups, its copies are hypergeometric: k of N = group_top_k x group
    size, a of them on the rank."""
    return _copies(shape.routed, shape.top_k, shape.expert_groups, shape.group_top_k, ranks)


@lru_cache(maxsize=4096)
def _copies(experts: int, k: int, groups: int, picked: int, ranks: int) -> tuple[float, float]:
    local = min(experts, max(1, experts // ranks))
    size = experts // groups
    eligible = picked * size
    reached = variance = 0.0
    starts = range(0, experts - local + 1, local)
    for start in starts:
        reach, var = _rank_copies(_offered(start, local, size, groups, picked), k, eligible)
        reached += reach
        variance += var
    return reached / len(starts), variance / len(starts)


def _offered(start: int, local: int, size: int, groups: int, picked: int) -> dict[int, float]:
    """{experts the rank holding [start, start + local) offers in the token's picked groups:
    probability}: the picked groups a uniform draw of `picked` of `groups`, the rank overlapping
    some groups partly where its experts cut across them (a count of picked overlapped groups and
    their offered experts, built group by group)."""
    overlaps = [min(start + local, (g + 1) * size) - max(start, g * size) for g in range(groups)]
    overlaps = [o for o in overlaps if o > 0]
    # ways[j][a]: subsets of j overlapped groups offering a experts
    ways: list[dict[int, int]] = [{0: 1}]
    for o in overlaps:
        grown = [dict(level) for level in ways] + [{}]
        for j, level in enumerate(ways):
            for a, n in level.items():
                grown[j + 1][a + o] = grown[j + 1].get(a + o, 0) + n
        ways = grown
    rest, total = groups - len(overlaps), math.comb(groups, picked)
    out: dict[int, float] = {}
    for j, level in enumerate(ways):
        if j > picked or picked - j > rest:
            continue
        for a, n in level.items():
            out[a] = out.get(a, 0.0) + n * math.comb(rest, picked - j) / total
    return out


def _rank_copies(offered: dict[int, float], k: int, eligible: int) -> tuple[float, float]:
    """(P(any copy lands on the rank), the variance of its copies) over the offered distribution."""
    touched = mean = square = 0.0
    for a, weight in offered.items():
        if weight <= 0 or a <= 0:
            continue
        touched += weight * (1 - math.comb(eligible - a, k) / math.comb(eligible, k))
        p = a / eligible
        m = k * p
        var = m * (1 - p) * (eligible - k) / (eligible - 1) if eligible > 1 else 0.0
        mean += weight * m
        square += weight * (var + m * m)
    return touched, max(0.0, square - mean * mean)


def busiest_load(shape: ModelShape, tokens: float, ranks: int) -> float:
    """The routed copies the busiest of `ranks` EP ranks receives from `tokens` tokens routed
    independently, over the mean rank's: each rank's count is a sum of the tokens' `copies_on_rank`
    (mean tokens x top_k / ranks, variance tokens x the per-token variance), and the largest of
    `ranks` such counts lies E[max of ranks standard normals] deviations above the mean (1.42 for 8;
    sqrt(2 ln ranks), 2.04, overstated it, and a Poisson count's variance overstated theirs)."""
    mean = tokens * shape.top_k / ranks if ranks else 0.0
    if ranks <= 1 or mean <= 0:
        return 1.0
    return 1.0 + expected_max_normal(ranks) * math.sqrt(tokens * copies_on_rank(shape, ranks)[1]) / mean


@lru_cache(maxsize=None)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals]: the integral of x n phi(x) Phi(x)^(n-1) (midpoint
    rule on [-10, 10], 1e-3 steps); 0.56 for 2, 1.42 for 8, 2.34 for 64, below sqrt(2 ln n) (2.04 for 8)."""
    if n <= 1:
        return 0.0
    step, total = 1e-3, 0.0
    for i in range(20000):
        x = -10.0 + (i + 0.5) * step
        total += x * n * math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) * (0.5 * (1 + math.erf(x / math.sqrt(2)))) ** (n - 1)
    return total * step
