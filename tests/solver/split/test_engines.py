"""The heterogeneous split's two exact engines (issue 12, class 9): the search of
solver/split/search.py (the default) and the MILP of solver/split/milp.py (for more items
than the search's bit sets hold). Both equal the exhaustive optimum, on costs that need
not grow with the count of partitions (the search then admits only the counts of each
range) and on busy times that do not grow with the items."""

import pytest
from hypothesis import given, settings, strategies as st

from gclc.solver.split import search as split_search
from gclc.solver.split.lanes import Lane, split

from .test_hetero_scale import exhaustive
from gclc.testing.profiles import scaled_examples

EXAMPLES = max(10, settings.default.max_examples // 2)


@st.composite
def fleets(draw, most_copies=3):
    """Partitions of one to three kinds, copies of each offering the same alternatives;
    exchanges any sequence over the count (not only growing), per-item times 0 or more."""
    def alternative():
        per_item = draw(st.one_of(st.just(0.0), st.floats(1e-3, 1.0)))
        crossing = tuple(draw(st.lists(st.floats(0.0, 0.5), min_size=1, max_size=5)))
        return (draw(st.sampled_from([1, 2, 3, 4, 6])), draw(st.floats(0.0, 2.0)), per_item,
                draw(st.integers(0, 14)), crossing)

    kinds = [[alternative() for _ in range(draw(st.integers(1, 2)))] for _ in range(draw(st.integers(1, 3)))]
    lanes, index = [], 0
    for alternatives in kinds:
        for _ in range(draw(st.integers(1, most_copies if len(kinds) < 3 else 2))):
            name = f"p{index}"
            index += 1
            lanes += [Lane(name, g, f, d, limit, x, name) for g, f, d, limit, x in alternatives]
    return lanes


BUBBLES = st.one_of(st.none(), st.lists(st.floats(1.0, 2.5), min_size=1, max_size=6).map(tuple))


def assert_a_real_split(result, total, lanes):
    assert sum(result.items) == total
    for name in {lane.key for lane in lanes}:
        assert sum(1 for lane, i in zip(lanes, result.items) if lane.key == name and i) <= 1
    for lane, items in zip(lanes, result.items):
        assert items % lane.granule == 0 and 0 <= items <= lane.limit


@settings(max_examples=EXAMPLES, deadline=None)
@given(fleets(), st.integers(1, 30), BUBBLES)
def test_the_search_is_the_exhaustive_optimum_whatever_the_costs(lanes, total, bubble):
    result, exact = split(total, lanes, bubble, engine="search"), exhaustive(total, lanes, bubble)
    if exact is None:
        assert result.status == "infeasible"
        return
    assert result.status == "optimal"
    assert result.step_time == pytest.approx(exact, rel=1e-9, abs=1e-12)
    assert_a_real_split(result, total, lanes)


@settings(max_examples=scaled_examples(5), deadline=None)  # each a MILP solve: the costly side
@given(fleets(), st.integers(1, 40), BUBBLES)
def test_the_two_engines_agree(lanes, total, bubble):
    search, milp = split(total, lanes, bubble, engine="search"), split(total, lanes, bubble, engine="milp")
    assert search.status == milp.status
    if search.status == "optimal":
        assert search.step_time == pytest.approx(milp.step_time, rel=1e-6, abs=1e-9)
        assert_a_real_split(milp, total, lanes)


def test_more_items_than_the_bit_sets_hold_go_to_the_milp(monkeypatch):
    calls = []
    real = split_search.optimum   # split() imports it from there when a split runs
    monkeypatch.setattr(split_search, "optimum", lambda *a: calls.append(a) or real(*a))
    fast, slow = Lane("fast", 1, 0.0, 1.0, 10**9), Lane("slow", 1, 0.0, 3.0, 10**9)
    result = split(10**9, [fast, slow])
    assert not calls and result.status == "optimal"
    assert result.items == (750_000_000, 250_000_000) and result.step_time == pytest.approx(7.5e8)
    small = split(100, [fast, slow])
    assert len(calls) == 1 and small.items == (75, 25)


def test_many_kinds_of_partition_split_like_the_fluid_bound_says():
    # 64 partitions of 16 kinds, each kind k taking a sequence in (1 + k/4) ms: at 4 copies
    # per kind the fluid optimum gives kind k a share inversely proportional to its time;
    # the exact split is within one granule of that bound and no lower.
    lanes = [Lane(f"p{i}", 1, 0.0, 1e-3 * (1 + (i % 16) / 4), 4096) for i in range(64)]
    total = 4096
    rate = sum(1 / lane.per_item for lane in lanes)
    fluid = total / rate
    result = split(total, lanes)
    assert result.status == "optimal" and result.used == 64
    assert fluid <= result.step_time <= fluid + max(lane.per_item for lane in lanes)
    assert_a_real_split(result, total, lanes)
