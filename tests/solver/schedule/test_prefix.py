"""The Fenwick tree the failure draw uses: after any sequence of changes, the item that
holds unit r is the one a cumulative sum over every count finds."""

import numpy as np
from hypothesis import given, strategies as st

from gclc.solver.schedule.prefix import Fenwick


@given(st.lists(st.integers(0, 9), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.integers(-9, 9)), max_size=30))
def test_find_is_searchsorted_over_the_cumulative_sum(counts, changes):
    tree, counts = Fenwick(counts), list(counts)
    for index, delta in changes:
        index %= len(counts)
        delta = max(delta, -counts[index])          # counts stay non-negative, like working GPUs
        counts[index] += delta
        tree.add(index, delta)
    total = sum(counts)
    expected = np.searchsorted(np.cumsum(counts), np.arange(total + 1), side="right").tolist()
    assert [tree.find(u) for u in range(total + 1)] == expected   # total itself: past the last item


@given(st.lists(st.integers(0, 8), min_size=1, max_size=40), st.integers(1, 200))
def test_the_fullest_domains_first_are_a_stable_sorts_prefix(free, gpus):
    from gclc.solver.schedule.state import _fullest_first

    free = np.array(free)
    order = np.argsort(-free, kind="stable")
    got = _fullest_first(free, gpus)
    assert list(got) == list(order[:len(got)])
    assert free[got].sum() >= min(gpus, free.sum()) and (free[got] > 0).all()
