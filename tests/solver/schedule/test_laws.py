"""Laws of the scheduler, checked after every scheduling cycle of random workloads (with
failures): no GPU is allocated twice or beyond capacity; a gang job holds all its GPUs
or none; the totals kept as changes happen equal the per-domain counts; under the
priority policy no job waits while lower priorities it could preempt hold enough GPUs;
the MILP optimum is never below the scheduler's value and equals an
exhaustive search on small mixes; goodput never exceeds throughput and falls with MTBF."""

import importlib.util
import itertools
import math
from pathlib import Path

import attrs
import numpy as np
from hypothesis import given, strategies as st

from gclc.solver.schedule import milp
from gclc.solver.schedule.goodput import Checkpoint, goodput
from gclc.solver.schedule.catalog import POLICIES, policy
from gclc.solver.schedule.settings import KueueSettings, SlurmSettings
from gclc.solver.schedule.simulate import Epoch, Simulation

_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


@st.composite
def jobs(draw, most: int = 8, companions: bool = False):
    """Random jobs; `companions`: some gangs on one partition also hold GPUs of the other at once
    (an rl job generating on one partition and training on another)."""
    count = draw(st.integers(1, most))
    out = []
    for i in range(count):
        partitions = draw(st.sampled_from((("a",), ("b",), ("a", "b"))))
        gpus = draw(st.sampled_from((1, 2, 4, 6, 8, 12, 16)))
        job = fx.job(f"j{i}", gpus, hours=draw(st.floats(0.5, 30)), priority=draw(st.integers(1, 4)),
                     submit=draw(st.floats(0, 10)), partitions=partitions, gang=draw(st.booleans()),
                     interval=draw(st.sampled_from((math.inf, 1800.0))), restart=600.0)
        if companions and job.gang and len(partitions) == 1 and draw(st.booleans()):
            other = "b" if partitions == ("a",) else "a"
            pair = (other, draw(st.sampled_from((1, 4, 8, 16))))
            job = attrs.evolve(job, options=tuple(attrs.evolve(o, companion=pair) for o in job.options))
        out.append(job)
    return out


def laws(sim: Simulation) -> None:
    held: dict[tuple[str, int], int] = {}
    for name, alloc in sim.state.allocations.items():
        job = sim.runs[name].job
        sizes = {o.gpus for o in job.options if o.partition == alloc.partition}
        if job.gang:
            assert alloc.gpus in sizes, f"gang {name} holds {alloc.gpus} of {sizes}"
            companion = sim.runs[name].option.companion   # held with it, all of it, or nothing
            assert (alloc.companion.partition, alloc.companion.gpus) == companion if companion else \
                alloc.companion is None
        else:
            assert 1 <= alloc.gpus <= max(sizes)
        for part in alloc.parts():
            for d, n in zip(part.domains, part.counts):
                held[(part.partition, d)] = held.get((part.partition, d), 0) + n
    for pname, part in sim.state.partitions.items():
        assert (part.free >= 0).all() and (part.free <= part.capacity).all()
        for d in range(part.domains):
            assert held.get((pname, d), 0) == part.capacity[d] - part.free[d]    # each GPU held once
        totals_are_kept(part)
    if sim.policy.name == "priority":
        for job in sim.pending.values():
            for o in job.options:
                if o.companion and sim.state.free(o.companion[0]) < o.companion[1]:
                    continue   # a gang across partitions short on its companion partition: not this check's case
                lower = sum(a.gpus for n, a in sim.state.allocations.items()
                            if a.partition == o.partition and sim.runs[n].job.priority < job.priority)
                need = o.gpus if job.gang else 1
                assert sim.state.free(o.partition) + lower < need, f"{job.name} waits behind lower priorities"


def totals_are_kept(part) -> None:
    """What the state keeps as changes happen equals what it would recompute from the
    per-domain counts: the totals, the free GPUs per group of every level, and the
    domain of each working GPU (the failed node's draw)."""
    assert part.working_gpus == part.capacity.sum() and part.free_gpus == part.free.sum()
    assert part.whole_free_gpus == part.free[part.free == part.domain_gpus].sum()
    for level, per in enumerate(part.group_domains):
        assert (part.group_free(level) == np.add.reduceat(part.free, np.arange(0, part.domains, per))).all()
    working = np.cumsum(part.capacity)
    assert [part.domain_of_working(u) for u in range(part.working_gpus)] == \
        np.searchsorted(working, np.arange(part.working_gpus), side="right").tolist()


@given(jobs(companions=True), st.sampled_from(tuple(POLICIES)), st.integers(0, 5))
def test_laws_hold_after_every_cycle(drawn, policy, seed):
    outcome = Simulation(fx.workload(drawn), POLICIES[policy], seed=seed, check=laws, epochs=2).run()
    assert all(r.phase == "done" for r in outcome.runs)
    for run in outcome.runs:
        assert run.useful <= run.held + 1e-6
    for epoch in outcome.epochs:
        best = milp.solve(epoch)
        assert best.value is not None and best.value >= best.heuristic - 1e-6


def _exhaustive(epoch: Epoch) -> float:
    """The best value by trying every choice (none, or one option) of every gang job."""
    best = 0.0
    choices = [[None] + list(j.options) for j in epoch.jobs]
    for pick in itertools.product(*choices):
        used: dict[str, int] = {}
        for o in pick:
            if o is not None:
                used[o.partition] = used.get(o.partition, 0) + o.gpus
        if all(used.get(p, 0) <= sum(cap) for p, cap in epoch.capacity.items()):
            best = max(best, sum(milp.worth(j, o.partition, o.gpus) for j, o in zip(epoch.jobs, pick) if o))
    return best


@given(jobs(most=5))
def test_milp_equals_the_exhaustive_optimum(drawn):
    gang = [j for j in drawn]
    gang = [fx.job(j.name, j.options[0].gpus * 2, priority=j.priority, partitions=j.partitions) for j in gang]
    capacity = {"a": (16, 16), "b": (16,)}
    epoch = Epoch(0.0, tuple(gang), (), capacity)
    assert math.isclose(milp.solve(epoch).value, _exhaustive(epoch), abs_tol=1e-6)


@given(size=st.floats(1e9, 1e13), bandwidth=st.floats(1e9, 1e12), restart=st.floats(0, 3600),
       mtbf=st.floats(600, 1e8), factor=st.floats(0.01, 1))
def test_goodput_below_throughput_and_falls_with_mtbf(size, bandwidth, restart, mtbf, factor):
    ckpt = Checkpoint(size, bandwidth, restart)
    high, low = goodput(ckpt, 1 / mtbf), goodput(ckpt, 1 / (mtbf * factor))
    assert 0 <= low.efficiency <= high.efficiency <= 1


PREEMPTING = {"priority": POLICIES["priority"], "kube": POLICIES["kube"],
              "slurm qos": policy("slurm", SlurmSettings(preempt_type="qos")),
              "kueue within": policy("kueue", KueueSettings(within_cluster_queue="lower_priority"))}


@given(jobs(companions=True), st.sampled_from(tuple(PREEMPTING)), st.integers(0, 5))
def test_preemption_never_evicts_without_placing(drawn, name, seed):
    """Every eviction is followed, at the same instant, by the preemptor's start (the
    placement was dry-run with the victims gone before anyone was evicted), gangs holding GPUs
    on a second partition included."""
    _evictions_place(drawn, name, seed)


def _evictions_place(drawn, name, seed):
    outcome = Simulation(fx.workload(drawn), PREEMPTING[name], seed=seed, epochs=0).run()
    starts = {(s[0], s[7]) for r in outcome.runs for s in r.segments}
    for run in outcome.runs:
        for seg in run.segments:
            if seg[6] == "preempted":
                assert (seg[1], "preempt") in starts or (seg[1], "preempted lower priorities") in starts, (run.job.name, seg)


def test_slurm_preemption_dry_runs_the_placement_the_start_applies():
    """The deep profile's counterexample: a node of a down, j3 and j0 fill the rest; j2 (priority 2,
    one GPU, not a gang) arrives. Slurm's dry run found it a place with j3 gone, but the start keeps
    a new job to one leaf (`--switches`) until max_switch_wait, where a job that is not a gang has
    no place: j3 was evicted for nothing. The dry run now places as the start does."""
    kw = {"partitions": ("a",), "gang": False, "restart": 600.0}
    drawn = [fx.job("j0", 16, hours=1, submit=2, **kw), fx.job("j1", 1, hours=1, **kw),
             fx.job("j2", 1, hours=1, priority=2, submit=3, **kw), fx.job("j3", 12, hours=1, submit=2, **kw)]
    _evictions_place(drawn, "slurm qos", 0)


def test_a_gang_that_waits_for_its_companion_pool_does_not_hold_back_a_job_of_its_shape():
    """The deep profile's counterexample (priority policy): j0, a gang of 1 GPU of b with 16 of a
    as its companion, waits for a (full); j7, 1 GPU of b alone, arrived with it and found b's room
    refused because the queue took j0's failure for its shape's. The companion is part of the shape."""
    kw = {"restart": 600.0}
    j0 = fx.job("j0", 1, hours=1, submit=0.5, partitions=("b",), **kw)
    j0 = attrs.evolve(j0, options=(attrs.evolve(j0.options[0], companion=("a", 16)),))
    drawn = [j0] + [fx.job(f"j{i}", 1, hours=1, partitions=("a",), gang=False, **kw) for i in range(1, 6)] + [
        fx.job("j6", 12, hours=1, partitions=("a",), gang=False, **kw),
        fx.job("j7", 1, hours=1, submit=0.5, partitions=("b",), **kw)]
    Simulation(fx.workload(drawn), POLICIES["priority"], seed=0, check=laws, epochs=2).run()
