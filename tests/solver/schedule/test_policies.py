"""Each policy on hand-built cases: FIFO's head-of-line blocking, Slurm's backfill and
lowest-switch best fit, the priority policy's topology-aware fit and preemption."""

import importlib.util
from pathlib import Path

import attrs

from gclc.solver.schedule.policies import victims
from gclc.solver.schedule.catalog import POLICIES
from gclc.solver.schedule.simulate import simulate
from gclc.solver.schedule.state import Allocation, ClusterState

_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)
H = fx.HOUR


def _runs(outcome):
    return {r.job.name: r for r in outcome.runs}


def _blocked_queue():
    # partition a has 32 GPUs: `wide` holds 24 for 2 h; `big` (16) cannot start; `small` (4) could
    return [fx.job("wide", 24, hours=2, partitions=("a",)), fx.job("big", 16, hours=1, submit=0.1, partitions=("a",)),
            fx.job("small", 4, hours=1, submit=0.2, partitions=("a",))]


def test_fifo_blocks_behind_the_head_of_the_queue():
    runs = _runs(simulate(fx.workload(_blocked_queue()), POLICIES["fifo"], failures=False))
    assert runs["big"].first_start == 2 * H
    assert runs["small"].first_start == 2 * H      # waited behind `big` though it fit at 0.2 h


def test_slurm_backfills_a_job_that_fits():
    runs = _runs(simulate(fx.workload(_blocked_queue()), POLICIES["slurm"], failures=False))
    assert runs["small"].first_start == 0.2 * H
    assert runs["big"].first_start == 2 * H


def test_priority_preempts_the_lower_job_and_slurm_does_not():
    jobs = [fx.job("low", 32, hours=10, priority=1, partitions=("a",), interval=1800.0, restart=60.0),
            fx.job("high", 16, hours=1, priority=4, submit=1, partitions=("a",))]
    runs = _runs(simulate(fx.workload(jobs), POLICIES["priority"], failures=False))
    assert runs["high"].first_start == 1 * H and runs["low"].preemptions == 1
    low = runs["low"]
    assert low.segments[0][6] == "preempted" and low.end > 10 * H    # lost work and a restart
    assert 0 < low.useful < low.held
    runs = _runs(simulate(fx.workload(jobs), POLICIES["slurm"], failures=False))
    assert runs["high"].first_start == 10 * H and runs["low"].preemptions == 0


def test_priority_places_a_job_in_the_lowest_tier_that_holds_it():
    state = ClusterState.of(fx.GRAPH)
    policy = POLICIES["priority"]
    for gpus, level, domains in ((4, 0, 1), (16, 1, 4), (32, 2, 8)):
        job = fx.job(f"j{gpus}", gpus, partitions=("a",))
        best = max(policy.filter(job, state), key=lambda c: policy.score(job, c, state))
        alloc = policy.bind(job, best, state)
        assert (alloc.level, len(alloc.domains), alloc.gpus) == (level, domains, gpus)


def test_slurm_best_fit_picks_the_fullest_leaf_that_holds_the_job():
    state = ClusterState.of(fx.GRAPH)
    # leaf 0 (domains 0-3) keeps 8 free GPUs, leaf 1 (domains 4-7) keeps 12
    state.bind("x", Allocation("a", (0, 1), (4, 4), 1))
    state.bind("y", Allocation("a", (4,), (4,), 0))
    job = fx.job("j", 8, partitions=("a",))
    policy = POLICIES["slurm"]
    best = max(policy.filter(job, state), key=lambda c: policy.score(job, c, state))
    alloc = policy.bind(job, best, state)
    assert alloc.level == 1 and set(alloc.domains) == {2, 3}


def test_preemption_evicts_the_fewest_least_important_jobs():
    state = ClusterState.of(fx.GRAPH)
    lows = {"p1": 1, "p2": 2, "p3": 3}
    running = {}
    for i, (name, priority) in enumerate(lows.items()):   # b: 16 GPUs, three jobs hold 4, 4 and 8
        counts = (4,) if i < 2 else (4, 4)
        domains = (i,) if i < 2 else (2, 3)
        state.bind(name, Allocation("b", domains, counts, 0 if i < 2 else 1))
        running[name] = (fx.job(name, sum(counts), priority=priority, partitions=("b",)), float(i))
    need4 = fx.job("new", 4, priority=5, partitions=("b",))
    assert victims(need4, state, running) == ["p1"]
    need8 = fx.job("new", 8, priority=5, partitions=("b",))
    assert victims(need8, state, running) == ["p1", "p2"]
    equal = fx.job("new", 4, priority=1, partitions=("b",))
    assert victims(equal, state, running) is None       # never evicts its own priority


def test_an_elastic_job_shrinks_for_a_critical_one_and_grows_back_when_it_ends():
    """`day` (critical, 16 GPUs) holds half of partition a from 1 h to 9 h; the elastic job
    (16 or 32 GPUs, checkpoints every 30 min) gives way by restarting at 16 and restarts at
    32 once the GPUs idle again, because that ends it sooner than staying at 16."""
    elastic = fx.job("elastic", 32, hours=20, partitions=("a",), interval=1800.0, restart=600.0)
    elastic = attrs.evolve(elastic, options=elastic.options + (attrs.evolve(elastic.options[0], gpus=16, rate=16.0),))
    day = fx.job("day", 16, hours=8, priority=8, submit=1, partitions=("a",))
    runs = _runs(simulate(fx.workload([elastic, day]), POLICIES["priority"], failures=False))
    sizes = [(s[0] / H, s[1] / H, s[3], s[6]) for s in runs["elastic"].segments]
    assert [(g, why) for *_, g, why in sizes] == [(32, "preempted"), (16, "resized"), (32, "finished")]
    assert sizes[1][0] == 1 and sizes[2][0] == 9                 # shrank when `day` came, grew when it left
    # without the growth it would have stayed at 16 GPUs to the end, later
    stay = attrs.evolve(POLICIES["priority"], grows=False)
    slow = _runs(simulate(fx.workload([elastic, day]), stay, failures=False))["elastic"]
    assert slow.end > runs["elastic"].end
