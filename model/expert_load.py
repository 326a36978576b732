"""How routed tokens land on expert-parallel ranks, for training and serving alike: the copies a
token sends a rank (top_k distinct experts, within its picked groups under group-limited routing),
the distinct ranks a token reaches (what a dispatcher that sends a token once per rank moves) and
the distinct nodes (what one that crosses nodes once per node moves over the scale-out network),
the share of ranks (or experts: one a rank) that any of B tokens reaches (the experts whose
weights a serving iteration reads), and the busiest of the ranks' loads under uniform routing.

One law: every figure is built from each rank's own (P(a token reaches it), the variance of the
copies it gets), `_rank_figures`, exact where ranks cut across the routing groups."""

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
    figures = _rank_figures(experts, k, groups, picked, ranks)
    return (sum(reach for reach, _ in figures) / len(figures),
            sum(var for _, var in figures) / len(figures))


@lru_cache(maxsize=4096)
def _rank_figures(experts: int, k: int, groups: int, picked: int, ranks: int) -> tuple[tuple[float, float], ...]:
    """((P(a token reaches the rank), the variance of its copies there), ...), rank by rank: the
    ranks hold `local` consecutive experts each (a slice of one where there are more ranks than
    experts: every rank of a slice is reached as its expert is)."""
    local = min(experts, max(1, experts // ranks))
    size = experts // groups
    eligible = picked * size
    return tuple(_rank_copies(_offered(start, local, size, groups, picked), k, eligible)
                 for start in range(0, experts - local + 1, local))


def destinations(shape: ModelShape, ranks: int) -> float:
    """Expected distinct ranks of `ranks` EP ranks a token reaches: what a dispatcher that sends a
    token once to each rank holding any of its experts sends (sum over the ranks of P(reached):
    top_k with one expert a rank, 1 on one rank; DeepSeek-V3, 8 of 256 within 4 of 8 groups, on
    8 ranks: 3.6, not 5.3 without the groups)."""
    if not shape.is_moe or ranks <= 1:
        return 1.0
    return ranks * copies_on_rank(shape, ranks)[0]


def distinct_share(shape: ModelShape, ranks: int) -> float:
    """Share of a token's top_k routed copies a dispatcher that sends a token once per rank holding any of its
    experts sends over `ranks` ranks: its distinct destinations over top_k (at most 1; one rank, 1 / top_k)."""
    if not shape.is_moe or shape.top_k <= 1:
        return 1.0
    return min(1.0, destinations(shape, ranks) / shape.top_k)


def node_share(shape: ModelShape, ranks: int, per_node: int) -> float:
    """Share of a token's top_k routed copies a dispatcher that crosses nodes once per destination node
    sends over the scale-out network, with `ranks` EP ranks `per_node` to a node: one RDMA send per node
    holding any of the token's experts, then NVLink forwards it to that node's ranks holding them (DeepEP's
    internode normal kernels, internode.cu; HybridEP, whose RDMA buffer holds a rank's tokens once per remote
    NVLink domain). A node holds `per_node` ranks of consecutive experts, so its reach is a rank's of a layout
    of ranks / per_node ranks (`destinations`, exact across routing groups: DeepSeek-V3, 8 of 256 within 4 of
    8 groups, on 8 nodes of 8: at most 4). Never above `distinct_share` over the ranks (a reached node holds a
    reached rank), equal to it at one rank a node; for training's flex dispatchers and serving's DeepEP alike."""
    return distinct_share(shape, max(1, ranks // max(1, per_node)))   # one node: itself


def reached_share(shape: ModelShape, tokens: float, ranks: int) -> float:
    """Expected share of `ranks` EP ranks that at least one of `tokens` tokens, routed
    independently, reaches: the mean over the ranks of 1 - (1 - P(a token reaches it))^tokens
    (exact in expectation, ranks cutting groups included: each rank by its own probability)."""
    if not shape.is_moe or tokens <= 0:
        return 0.0
    reaches = _reaches(shape.routed, shape.top_k, shape.expert_groups, shape.group_top_k, ranks)
    return sum(share * (1 - (1 - reach) ** tokens) for reach, share in reaches)


@lru_cache(maxsize=4096)
def _reaches(experts: int, k: int, groups: int, picked: int, ranks: int) -> tuple[tuple[float, float], ...]:
    """((P(a token reaches a rank), the share of ranks with it), ...): the ranks' reaches, equal ones
    counted once (a serving iteration asks for them at every token count; most layouts have one)."""
    figures = _rank_figures(experts, k, groups, picked, ranks)
    counts: dict[float, int] = {}
    for reach, _ in figures:
        counts[reach] = counts.get(reach, 0) + 1
    return tuple((reach, n / len(figures)) for reach, n in counts.items())


def experts_touched(shape: ModelShape, tokens: float) -> float:
    """Share of the routed experts at least one of `tokens` tokens picks (one expert a rank):
    1 - (1 - top_k / routed)^tokens, group-limited routing or not (each expert is picked by a
    token with probability top_k / routed either way; what groups change is how the picks fall
    on ranks of several experts, `reached_share`, which at one expert a rank gives this, rank by rank)."""
    if not shape.is_moe or tokens <= 0:
        return 0.0
    return 1 - (1 - shape.top_k / shape.routed) ** tokens


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
