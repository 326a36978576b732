"""How routed tokens land on expert-parallel ranks (model/expert_load.py), where the ranks cut across
the routing groups too: checked against every subset of picked groups, and the law that a rank's
expected copies are its share of the experts whatever the groups."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import attrs
import pytest

from hypothesis import example, given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model import expert_load
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

ROOT = Path(__file__).resolve().parents[2]
MOE = ModelShape.from_entity(serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design).get("model"))


def by_every_subset(experts: int, k: int, groups: int, picked: int, ranks: int) -> tuple[float, float]:
    """The same two figures by enumerating every set of picked groups, rank by rank."""
    local, size = experts // ranks, experts // groups
    eligible = picked * size
    reached = variance = 0.0
    for start in range(0, experts, local):
        touched = mean = square = 0.0
        subsets = list(itertools.combinations(range(groups), picked))
        for chosen in subsets:
            offered = sum(max(0, min(start + local, (g + 1) * size) - max(start, g * size)) for g in chosen)
            if offered == 0:
                continue
            p = offered / eligible
            m = k * p
            touched += (1 - math.comb(eligible - offered, k) / math.comb(eligible, k)) / len(subsets)
            mean += m / len(subsets)
            square += (m * (1 - p) * (eligible - k) / (eligible - 1) + m * m) / len(subsets)
        reached += touched
        variance += square - mean * mean
    return reached / ranks, variance / ranks


def test_ranks_that_cut_across_groups_by_every_subset():
    # 96 experts in 6 groups of 16, 3 picked, on 4 ranks of 24: rank 0 holds group 0 and half of
    # group 1 (the review's case: the old law assumed a rank inside one group or holding whole ones)
    assert expert_load._copies(96, 8, 6, 3, 4) == pytest.approx(by_every_subset(96, 8, 6, 3, 4))
    assert expert_load._copies(96, 8, 12, 4, 16) == pytest.approx(by_every_subset(96, 8, 12, 4, 16))
    reach, _ = expert_load._copies(96, 8, 6, 3, 4)
    assert 0.72 < reach < 0.74       # a Monte-Carlo of 200,000 tokens read 0.729


layouts = st.sampled_from([(96, 6, 3), (96, 12, 4), (256, 8, 4), (256, 16, 4), (64, 4, 2), (64, 1, 1)])


@given(layouts, st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([1, 2, 4, 8]))
@example((96, 6, 3), 4, 8)
@example((96, 12, 4), 16, 8)
def test_a_rank_receives_its_share_of_the_copies_whatever_the_groups(layout, ranks, k):
    """Law: every expert is as likely as any other under uniform routing within uniformly picked
    groups, so a rank's expected copies are k x its experts / all experts; the variance is not negative."""
    experts, groups, picked = layout
    if experts % ranks or picked * (experts // groups) < k:
        return
    local = experts // ranks
    for start in range(0, experts, local):
        offered = expert_load._offered(start, local, experts // groups, groups, picked)
        assert sum(offered.values()) == pytest.approx(1.0)
        mean = sum(w * k * a / (picked * experts // groups) for a, w in offered.items())
        assert mean == pytest.approx(k * local / experts)
    assert expert_load._copies(experts, k, groups, picked, ranks)[1] >= 0


def _shape(experts: int, k: int, groups: int, picked: int) -> ModelShape:
    return attrs.evolve(MOE, routed=experts, top_k=k, expert_groups=groups, group_top_k=picked)


@settings(max_examples=scaled_examples(40), deadline=None)
@given(layouts, st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       st.floats(0.0, 5000.0), st.floats(0.0, 5000.0))
@example((96, 6, 3), 8, 4, 3.0, 40.0)
def test_the_ranks_tokens_reach(layout, k, ranks, a, b):
    """Laws of the one law serving and training share: more tokens reach no fewer ranks (or
    experts), never more than all of them; each expert is picked with probability k / E whatever
    the groups, so the experts touched are 1 - (1 - k/E)^B; group-limited routing reaches no more
    ranks than plain routing of the same k of E (a token's picks crowd into its groups); one
    token's share of the ranks is its distinct destinations over the ranks, between 1 and
    min(k, ranks) of them, and only on the ranks of its picked groups."""
    experts, groups, picked = layout
    if experts % ranks or picked * (experts // groups) < k:
        return
    shape, plain = _shape(experts, k, groups, picked), _shape(experts, k, 1, 1)
    low, high = min(a, b), max(a, b)
    for s in (shape, plain):
        assert 0.0 <= expert_load.reached_share(s, low, ranks) <= expert_load.reached_share(s, high, ranks) <= 1 + 1e-12
        assert expert_load.experts_touched(s, high) == pytest.approx(1 - (1 - k / experts) ** high, rel=1e-9, abs=1e-12)
        # ...which is the rank-by-rank law at one expert a rank
        assert expert_load.experts_touched(s, high) == pytest.approx(expert_load.reached_share(s, high, experts),
                                                                      rel=1e-9, abs=1e-12)
        one = expert_load.destinations(s, ranks)
        assert 1 - 1e-9 <= one <= min(k, ranks) + 1e-9
        if ranks > 1:
            assert expert_load.reached_share(s, 1, ranks) * ranks == pytest.approx(one, rel=1e-9)
    assert expert_load.reached_share(shape, high, ranks) <= expert_load.reached_share(plain, high, ranks) + 1e-12
    assert expert_load.destinations(shape, ranks) <= expert_load.destinations(plain, ranks) + 1e-9
    # group-limited routing reaches only the ranks of its picked groups (DeepSeek-V3's node limit)
    if groups % ranks == 0:
        assert expert_load.destinations(shape, ranks) <= min(picked, ranks) + 1e-9
    elif ranks % groups == 0:
        assert expert_load.destinations(shape, ranks) <= picked * ranks // groups + 1e-9


def test_distinct_destinations_by_sampling():
    """A token's distinct destination ranks, sampled as Megatron-Core's `group_limited_topk` draws
    under random logits (groups first, then top_k experts among theirs), against the law: 96
    experts in 6 groups of 16, 3 picked, 8 of them, on 4 ranks of 24 that cut across groups."""
    shape = _shape(96, 8, 6, 3)
    assert _sampled_distinct(24, 7) == pytest.approx(expert_load.destinations(shape, 4), abs=0.02)   # sd about 0.004


def test_distinct_destination_nodes_by_sampling():
    """DeepEP's internode kernels send a token once per node holding any of its experts ([deepepnode]): a
    node of consecutive ranks holds consecutive experts, so the distinct nodes are `destinations` of the
    coarser layout, exact where nodes cut across groups. Sampled as `group_limited_topk` draws: 96 experts in
    6 groups of 16, 3 picked, 8 of them, on 12 ranks of 8 experts, 3 to a node of 24 (4 nodes)."""
    shape = _shape(96, 8, 6, 3)
    assert _sampled_distinct(24, 11) == pytest.approx(expert_load.node_share(shape, 12, 3) * 8, abs=0.02)   # sd about 0.004


def _sampled_distinct(width: int, seed: int, draws: int = 40000) -> float:
    """The mean distinct blocks of `width` consecutive experts a token's 8 experts lie in, over `draws` of
    `group_limited_topk` under random logits: 3 of 6 groups of 16 experts, then 8 experts among theirs."""
    rng, total = random.Random(seed), 0
    for _ in range(draws):
        chosen = rng.sample(range(6), 3)
        experts = rng.sample([g * 16 + i for g in chosen for i in range(16)], 8)
        total += len({e // width for e in experts})
    return total / draws


@settings(max_examples=scaled_examples(40), deadline=None)
@given(layouts, st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16, 32, 64]), st.sampled_from([1, 2, 4, 8]))
def test_a_token_reaches_no_more_nodes_than_ranks(layout, k, ranks, per_node):
    """Law: a token sent once per node holding any of its experts reaches between 1 and as many nodes as
    ranks (never more than top_k), and under group-limited routing with a group a node (or several) no more
    than the groups it picks (DeepSeek-V3 on 8 nodes: 4)."""
    from gclc.model.serve.moe import sent_share
    experts, groups, picked = layout
    if experts % ranks or picked * (experts // groups) < k or ranks % per_node:
        return
    shape = _shape(experts, k, groups, picked)
    nodes_reached, ranks_reached = expert_load.node_share(shape, ranks, per_node) * k, sent_share(shape, "deepep", ranks) * k
    assert 1 - 1e-9 <= nodes_reached <= ranks_reached + 1e-9 <= k + 2e-9
    nodes = ranks // per_node
    if nodes > 1 and groups % nodes == 0:
        assert nodes_reached <= min(picked, nodes) + 1e-9
