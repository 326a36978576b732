"""Heterogeneous splits (solver/split/plan.py): the split's laws and the split of a real design."""

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.job import hetero_entity
from gclc.solver.split.plan import partition_jobs, plan_hetero
from gclc.solver.split.lanes import Lane, split
from gclc.views.plan_json import hetero_json
from gclc.views.plan_text import hetero_text
from gclc.solver.train.plan import plan

DATA = Path(__file__).parent.parent.parent / "data"
ENTITY = hetero_entity(check_file(str(DATA / "hetero.gcl"), {}).design)
JOBS = partition_jobs(ENTITY)
PLANS = tuple(plan(job, "throughput") for job in JOBS)   # planned once for the whole module
RESULT = plan_hetero(JOBS, PLANS)

# Half the profile's examples (30 under `ci`, 1000 under GCLC_HYPOTHESIS=deep): each is a solve.
EXAMPLES = max(10, settings.default.max_examples // 2)

# ----------------------------------------------------------------- the split on random lanes

GRANULES = st.sampled_from([1, 2, 3, 4, 8])


@st.composite
def lanes(draw, name):
    crossing = draw(st.floats(0.0, 0.5))
    return Lane(name, draw(GRANULES), draw(st.floats(0.0, 2.0)), draw(st.floats(1e-3, 1.0)),
                draw(st.integers(0, 200)), tuple(crossing * (1 + 0.2 * n) for n in range(4)))


@settings(max_examples=EXAMPLES)
@given(st.lists(lanes("old"), min_size=1, max_size=3), lanes("new"), st.integers(1, 120))
def test_adding_a_partition_never_lowers_throughput(old, new, total):
    old = [Lane(f"p{i}", *(getattr(lane, f) for f in ("granule", "fixed", "per_item", "limit", "crossing")))
           for i, lane in enumerate(old)]
    before, after = split(total, old), split(total, old + [new])
    if before.status == "optimal":
        assert after.status == "optimal"
        assert after.step_time <= before.step_time * (1 + 1e-9) + 1e-12


@settings(max_examples=EXAMPLES)
@given(st.lists(lanes("x"), min_size=1, max_size=4), st.integers(1, 120))
def test_shares_sum_to_the_total_in_granules_within_limits(group, total):
    group = [Lane(f"p{i}", lane.granule, lane.fixed, lane.per_item, lane.limit, lane.crossing)
             for i, lane in enumerate(group)]
    result = split(total, group)
    if result.status != "optimal":
        return
    assert sum(result.items) == total
    for lane, items in zip(group, result.items):
        assert items % lane.granule == 0 and 0 <= items <= lane.limit
    busy = [lane.busy(i) for lane, i in zip(group, result.items)]
    assert result.compute_time == pytest.approx(max(busy))
    assert result.exchange == (max(lane.exchange(result.used) for lane, i in zip(group, result.items) if i)
                               if result.used > 1 else 0.0)


def brute_force(total, group):
    """The least step time over every way to make `total` of the lanes' granules."""
    best = None
    ranges = [range(0, min(lane.limit, total) // lane.granule + 1) for lane in group]
    for counts in itertools.product(*ranges):
        items = [k * lane.granule for k, lane in zip(counts, group)]
        if sum(items) != total:
            continue
        used = sum(1 for i in items if i)
        step = (max(lane.busy(i) for lane, i in zip(group, items))
                + max(lane.exchange(used) for lane, i in zip(group, items) if i))
        best = step if best is None else min(best, step)
    return best


@settings(max_examples=EXAMPLES)
@given(st.lists(lanes("x"), min_size=1, max_size=3), st.integers(1, 40))
def test_the_split_is_the_exhaustive_optimum(group, total):
    group = [Lane(f"p{i}", lane.granule, lane.fixed, lane.per_item, min(lane.limit, 40), lane.crossing)
             for i, lane in enumerate(group)]
    result, exact = split(total, group), brute_force(total, group)
    if exact is None:
        assert result.status == "infeasible"
    else:
        assert result.step_time == pytest.approx(exact, rel=1e-7, abs=1e-9)


def test_balanced_split_of_two_rates():
    fast, slow = Lane("fast", 1, 0.0, 1.0, 100), Lane("slow", 1, 0.0, 3.0, 100)
    result = split(100, [fast, slow])
    assert result.items == (75, 25) and result.step_time == pytest.approx(75.0)


def test_alternative_configurations_of_one_partition_are_exclusive():
    coarse, fine = Lane("a", 10, 0.0, 1.0, 100, group="a"), Lane("a", 1, 0.0, 1.5, 100, group="a")
    result = split(95, [coarse, fine])
    assert result.status == "optimal" and sum(1 for i in result.items if i) == 1
    assert result.items == (0, 95)


def test_an_exchange_that_costs_more_than_it_saves_keeps_one_partition():
    a, b = Lane("a", 1, 0.0, 1.0, 10, (100.0,)), Lane("b", 1, 0.0, 1.0, 10, (100.0,))
    result = split(10, [a, b])
    assert result.used == 1 and result.step_time == pytest.approx(10.0)


def test_impossible_granules_are_infeasible():
    result = split(7, [Lane("a", 2, 0.0, 1.0, 100), Lane("b", 4, 0.0, 1.0, 100)])
    assert result.status == "infeasible" and "granules" in result.message


# ----------------------------------------------------------------- the design


def test_the_design_spans_two_partitions():
    assert [job.partition.name for job in JOBS] == ["h100", "a100"]
    assert all(job.gpus == job.partition.gpus for job in JOBS)
    assert RESULT.status == "optimal" and RESULT.best is not None


@pytest.mark.parametrize("mode", ["data", "pipeline"])
def test_shares_and_utilization(mode):
    chosen = getattr(RESULT, mode)
    assert chosen.status == "optimal"
    used = [s for s in chosen.shares if s.items]
    total = JOBS[0].batch if mode == "data" else JOBS[0].shape.layers
    assert sum(s.items for s in chosen.shares) == total
    assert all(0 < s.utilization <= 1 + 1e-12 for s in used)
    assert max(s.utilization for s in used) == pytest.approx(1.0)
    assert chosen.step_time == pytest.approx(chosen.compute_time + chosen.exchange)
    assert chosen.tokens_per_s == pytest.approx(JOBS[0].batch * JOBS[0].seq / chosen.step_time)


def test_data_shares_are_whole_micro_batches_of_each_replica():
    for share in RESULT.data.shares:
        if share.items:
            assert share.items % (share.config.dp * share.config.microbatch) == 0 and share.fits


def test_both_partitions_beat_either_alone():
    alone = max(p.best.tokens_per_s for p in PLANS)
    assert RESULT.tokens_per_s >= alone * (1 - 1e-9)
    assert RESULT.best.step_time <= min(RESULT.data.step_time, RESULT.pipeline.step_time) + 1e-12


@pytest.mark.parametrize("index", [0, 1])
def test_a_single_partition_equals_its_own_plan(index):
    alone = plan_hetero([JOBS[index]], [PLANS[index]])
    assert alone.best.mode == "data" and alone.best.exchange == 0
    assert alone.tokens_per_s == pytest.approx(PLANS[index].best.tokens_per_s, rel=1e-9)
    assert alone.best.shares[0].config == PLANS[index].best.config


def test_reports():
    text = hetero_text(RESULT)
    assert "data split" in text and "pipeline split" in text and "alone on h100" in text
    data = json.loads(json.dumps(hetero_json(RESULT)))
    assert data["mode"] == RESULT.best.mode
    assert {p["partition"] for p in data["data"]["partitions"]} == {"h100", "a100"}
