"""The heterogeneous split at scale (issue 12, class 9): identical partitions merged into
classes, dominated alternatives dropped, each kind of partition planned once; the answer
stays the exhaustive optimum of the same model."""

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.solver.split import plan as hetero
from gclc.model.job import hetero_entity
from gclc.solver.split.plan import partition_jobs, plan_hetero
from gclc.solver.split.lanes import Lane, split

EXAMPLES = max(10, settings.default.max_examples // 2)


@st.composite
def alternative(draw):
    crossing = draw(st.floats(0.0, 0.5))
    return (draw(st.sampled_from([1, 2, 3, 4])), draw(st.floats(0.0, 2.0)), draw(st.floats(1e-3, 1.0)),
            draw(st.integers(0, 24)), tuple(crossing * (1 + 0.3 * n) for n in range(5)))


@st.composite
def fleets(draw):
    """Partitions of one to three kinds, one to three copies of each: every copy of a
    kind offers the same alternatives (as partitions of one node type do)."""
    kinds = draw(st.lists(st.lists(alternative(), min_size=1, max_size=2), min_size=1, max_size=2))
    counts = [draw(st.integers(1, 3)) for _ in kinds]
    lanes, index = [], 0
    for alternatives, copies in zip(kinds, counts):
        for _ in range(copies):
            name = f"p{index}"
            index += 1
            lanes += [Lane(name, g, f, d, limit, x, name) for g, f, d, limit, x in alternatives]
    return lanes


def exhaustive(total, lanes, bubble=None):
    """The least step time over every choice of at most one alternative per partition and
    every number of its granules."""
    groups = list(dict.fromkeys(lane.key for lane in lanes))
    choices = []
    for name in groups:
        own = [lane for lane in lanes if lane.key == name]
        choices.append([None] + [(lane, k) for lane in own for k in range(1, lane.limit // lane.granule + 1)])
    best = None
    for pick in itertools.product(*choices):
        taken = [(lane, lane.granule * k) for lane, k in (p for p in pick if p is not None)]
        if sum(items for _, items in taken) != total:
            continue
        used = len(taken)
        factor = bubble[min(used - 1, len(bubble) - 1)] if bubble else 1.0
        step = factor * max(lane.busy(i) for lane, i in taken) + max(lane.exchange(used) for lane, _ in taken)
        best = step if best is None else min(best, step)
    return best


@settings(max_examples=EXAMPLES, deadline=None)
@given(fleets(), st.integers(1, 30), st.sampled_from([None, (1.0, 1.25, 1.5, 1.75, 2.0, 2.25)]))
def test_identical_partitions_merged_keep_the_exhaustive_optimum(lanes, total, bubble):
    result, exact = split(total, lanes, bubble), exhaustive(total, lanes, bubble)
    if exact is None:
        assert result.status == "infeasible"
        return
    assert result.status == "optimal"
    assert result.step_time == pytest.approx(exact, rel=1e-7, abs=1e-9)
    # the split it reports is a real one: whole granules, at most one alternative per partition
    assert sum(result.items) == total
    for name in {lane.key for lane in lanes}:
        assert sum(1 for lane, i in zip(lanes, result.items) if lane.key == name and i) <= 1
    for lane, items in zip(lanes, result.items):
        assert items % lane.granule == 0 and 0 <= items <= lane.limit


def test_a_dominated_alternative_is_never_needed():
    # b is a's granule times two, slower per item and at a higher fixed cost: a does all b does
    a, b = Lane("p", 1, 0.1, 1.0, 50, group="p"), Lane("p", 2, 0.2, 1.5, 50, group="p")
    other = Lane("q", 1, 0.0, 2.0, 50)
    result = split(30, [a, b, other])
    assert result.items[1] == 0 and result.step_time == pytest.approx(exhaustive(30, [a, b, other]))


def test_sixty_four_identical_partitions_split_evenly():
    lanes = [Lane(f"p{i}", 2, 0.1, 0.01, 1000, (0.05,) * 63) for i in range(64)]
    result = split(64 * 8, lanes)
    assert result.status == "optimal" and result.used == 64
    assert set(result.items) == {8}


# ----------------------------------------------------------------- one plan per kind of partition

FLEET = """import "std/nvidia"

fabric Shared extends NDR_FatTree {
  topology = fat_tree(tiers = 2, radix = 64, oversubscription = 1:1)
}

cluster Fleet {
  scaleout = Shared
%s
}

model Small {
  arch = dense  layers = 16  hidden = 2048  heads = 16  ffn = 5504  vocab = 32000  seq = 2048
}

train job {
  model = Small
  on = [%s]
  batch = %d
  precision = bf16
}
"""


def fleet(partitions: int) -> str:
    # alternating H100 and A100 servers: two kinds of partition, however many there are
    parts = "\n".join(f"  partition p{i} {{ units = 1 x {'DGX_H100' if i % 2 == 0 else 'DGX_A100'} }}"
                      for i in range(partitions))
    return FLEET % (parts, ", ".join(f"Fleet.p{i}" for i in range(partitions)), 8 * partitions)


def test_each_kind_of_partition_is_searched_once(monkeypatch):
    calls = []
    real = hetero.search
    monkeypatch.setattr(hetero, "search", lambda job, *a, **k: calls.append(job.partition.name) or real(job, *a, **k))
    result = check_text(fleet(6), "fleet.gcl")
    assert result.design is not None, [d.summary for d in result.diagnostics]
    jobs = partition_jobs(hetero_entity(result.design))
    assert [job.partition.name for job in jobs] == [f"p{i}" for i in range(6)]
    assert len({id(job.graph) for job in jobs}) == 1          # the cluster lowered once
    outcome = plan_hetero(jobs)
    assert calls == ["p0", "p1"]
    # the copies' plans are their own (their partition) and equal to the first's
    for job, chosen in zip(jobs, outcome.plans):
        assert chosen.job.partition.name == job.partition.name
        assert chosen.best.config == outcome.plans[int(job.partition.name[1:]) % 2].best.config
    assert sum(s.items for s in outcome.data.shares) == jobs[0].batch


def test_two_alternatives_equal_on_every_count_that_counts_keep_one():
    # found by the deep profile: one partition with two alternatives that differ only in
    # their crossing times, which never count for a single partition; each was judged to
    # beat the other and both were dropped, so the split said "infeasible"
    fast = Lane("p0", 1, 0.0, 1.0, 1, crossing=(0.0,) * 5, group="p0")
    slow_exchange = Lane("p0", 1, 0.0, 1.0, 1, crossing=(0.5, 0.65, 0.8, 0.95, 1.1), group="p0")
    for lanes in ([fast, slow_exchange], [slow_exchange, fast]):
        result = split(1, lanes)
        assert result.status == "optimal" and result.step_time == pytest.approx(exhaustive(1, lanes))
