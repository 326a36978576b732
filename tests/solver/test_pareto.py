"""The incremental Pareto front against brute force: on the front nothing is dominated, off
it something on the front dominates, and adding a point never leaves a dominated point
without a dominating one on the front."""

from __future__ import annotations

from hypothesis import given, strategies as st

from gclc.solver.sweep.pareto import Front, dominates, front

VALUES = st.integers(0, 6).map(float)  # small ranges make ties and duplicates common


def points(dims: int):
    return st.lists(st.tuples(*[VALUES] * dims), max_size=30).map(lambda vs: list(enumerate(vs)))


def brute_force(pts):
    return sorted(k for k, v in pts if not any(dominates(w, v) for _, w in pts))


@given(st.integers(1, 3).flatmap(points))
def test_front_equals_brute_force(pts):
    assert front(pts) == brute_force(pts)


@given(st.integers(1, 3).flatmap(points))
def test_no_front_point_is_dominated_and_every_other_point_is(pts):
    on = set(front(pts))
    values = dict(pts)
    for key, v in pts:
        dominated = any(dominates(w, v) for _, w in pts)
        assert dominated == (key not in on)
        if dominated:
            assert any(dominates(values[f], v) for f in on)


@given(st.integers(1, 3).flatmap(lambda d: st.tuples(points(d), st.tuples(*[VALUES] * d))))
def test_adding_a_point_never_removes_a_dominating_one(case):
    pts, new = case
    before = Front(())
    for key, v in pts:
        before.add(key, v)
    after = Front(())
    for key, v in pts + [(len(pts), new)]:
        after.add(key, v)
    values = dict(pts) | {len(pts): new}
    on_after = set(after.keys())
    for key in set(before.keys()) - on_after:  # a point leaves the front only for one that dominates it
        assert dominates(new, values[key])
    for key, v in pts:
        if any(dominates(w, v) for _, w in pts):
            assert any(dominates(values[f], v) for f in on_after)


def test_senses_of_objectives():
    f = Front(("time_to_train", "throughput"))
    fast = {"point": 0, "status": "ok", "time_to_train_s": 10.0, "tokens_per_s": 5.0}
    slow_but_higher = {"point": 1, "status": "ok", "time_to_train_s": 20.0, "tokens_per_s": 9.0}
    worse = {"point": 2, "status": "ok", "time_to_train_s": 30.0, "tokens_per_s": 4.0}
    infeasible = {"point": 3, "status": "infeasible", "time_to_train_s": None, "tokens_per_s": None}
    for row in (fast, slow_but_higher, worse, infeasible):
        f.add_row(row)
    assert f.keys() == [0, 1]  # throughput is maximized, time minimized
