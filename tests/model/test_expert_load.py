"""How routed tokens land on expert-parallel ranks (model/expert_load.py), where the ranks cut across
the routing groups too: checked against every subset of picked groups, and the law that a rank's
expected copies are its share of the experts whatever the groups."""

from __future__ import annotations

import itertools
import math

import pytest

from hypothesis import example, given, strategies as st

from gclc.model import expert_load
from gclc.testing import load_profile

load_profile()


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
