"""Slurm's multifactor priority: decayed usage equals its integral, Fair Tree ranks the
least served tenant first, the factors order jobs as slurm.conf's weights say, and QOS
preemption evicts lower QOS only when it is configured."""

import importlib.util
import math
from pathlib import Path

import attrs
from hypothesis import given, strategies as st

from gclc.solver.schedule.catalog import policy
from gclc.solver.schedule.records import Workload
from gclc.solver.schedule.multifactor import FairShare, priorities
from gclc.solver.schedule.settings import SlurmSettings
from gclc.solver.schedule.simulate import simulate
from gclc.solver.schedule.tenants import Tenant
from gclc.testing import load_profile

load_profile()
_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)
H = fx.HOUR


@given(st.floats(1e3, 1e7), st.floats(0, 1e6), st.floats(1, 1e6), st.floats(0, 1e6), st.integers(1, 64))
def test_decayed_usage_is_the_integral_of_the_decay(half_life, start, length, after, gpus):
    fair = FairShare(half_life, {})
    end, now = start + length, start + length + after
    fair.add("t", gpus, start, end)
    # midpoint rule over the run's seconds, each decayed to `now`, steps finer than the half-life
    steps = min(200_000, 2000 + int(50 * length / half_life))
    numeric = sum(gpus * length / steps * 2 ** (-(now - (start + (i + 0.5) * length / steps)) / half_life)
                  for i in range(steps))
    assert math.isclose(fair.usage(now)["t"], numeric, rel_tol=1e-4)
    # a run still going (its running sums) counts the same as one banked at `end`, and once
    # stopped it is banked
    going = FairShare(half_life, {})
    going.started("t", gpus, start)
    assert math.isclose(going.usage(end)["t"], fair.usage(end)["t"], rel_tol=1e-6)
    going.stopped("t", gpus, start, end)
    assert not going.going and math.isclose(going.usage(now)["t"], fair.usage(now)["t"], rel_tol=1e-12)


def test_decayed_usage_of_a_run_a_thousand_half_lives_long():
    """The deep run's counterexample (half-life 1000 s, a run of 1e6 s): the numeric check's
    steps were coarser than the half-life; the closed form was right."""
    fair = FairShare(1000.0, {})
    fair.add("t", 1, 0.0, 1e6)
    assert math.isclose(fair.usage(1e6)["t"], 1000.0 / math.log(2), rel_tol=1e-12)


def test_fair_tree_ranks_the_least_served_first_and_ties_share_a_rank():
    fair = FairShare(7 * 86400, {"a": 1, "b": 1, "c": 2, "d": 1})
    factors = fair.factors({"a": 100.0, "b": 300.0, "c": 200.0})   # d has used nothing
    assert factors["d"] == 1.0                                     # S/U infinite: the least served
    assert factors["c"] == factors["a"] == 0.75                    # c: 2/5 over 1/3 = a: 1/5 over 1/6
    assert factors["b"] == 0.25


def _two_tenants(fresh_first: bool):
    """Tenant `busy` ran 16 GPUs for 10 h; then one job of each tenant, same QOS and size."""
    history = fx.job("history", 16, hours=10, partitions=("a",), limit=10)
    busy = attrs.evolve(fx.job("busy", 32, hours=1, submit=10, partitions=("a",), limit=1), tenant="busy")
    fresh = attrs.evolve(fx.job("fresh", 32, hours=1, submit=10, partitions=("a",), limit=1), tenant="fresh")
    history = attrs.evolve(history, tenant="busy")
    jobs = [history, busy, fresh] if fresh_first else [history, fresh, busy]
    return Workload(fx.GRAPH, fx.CLUSTER, tuple(jobs), fx.RELIABILITY, (), {"busy": Tenant("busy"), "fresh": Tenant("fresh")})


def test_fair_share_puts_the_tenant_that_used_less_first():
    for order in (True, False):     # whatever the names and order of the queue
        runs = {r.job.name: r for r in simulate(_two_tenants(order), policy("slurm"), failures=False).runs}
        assert runs["fresh"].first_start == 10 * H and runs["busy"].first_start == 11 * H
    no_fair = SlurmSettings(weights=attrs.evolve(SlurmSettings().weights, fairshare=0))
    runs = {r.job.name: r for r in simulate(_two_tenants(True), policy("slurm", no_fair), failures=False).runs}
    assert runs["busy"].first_start == 10 * H       # then `busy` < `fresh` by name, as Slurm's job ids


def test_age_outweighs_size_only_as_the_weights_say():
    old = fx.job("old", 4, submit=0.0)
    big = fx.job("big", 32, submit=0.0)
    s = SlurmSettings()
    p = priorities([old, big], 7 * 86400.0, {}, 48, 1, s)
    assert math.isclose(p["big"] - p["old"], s.weights.job_size * (32 - 4) / 48)


def test_qos_preemption_only_when_configured_and_cancel_ends_the_victim():
    jobs = [fx.job("low", 32, hours=10, priority=1, partitions=("a",), interval=1800.0, restart=60.0, limit=10),
            fx.job("high", 16, hours=1, priority=8, submit=1, partitions=("a",), limit=1)]
    plain = {r.job.name: r for r in simulate(fx.workload(jobs), policy("slurm"), failures=False).runs}
    assert plain["high"].first_start == 10 * H and plain["low"].preemptions == 0
    qos = SlurmSettings(preempt_type="qos")
    runs = {r.job.name: r for r in simulate(fx.workload(jobs), policy("slurm", qos), failures=False).runs}
    assert runs["high"].first_start == 1 * H and runs["high"].segments[0][7] == "preempt"
    assert runs["low"].preemptions == 1 and runs["low"].phase == "done" and runs["low"].end > 10 * H
    cancel = SlurmSettings(preempt_type="qos", preempt_mode="cancel")
    runs = {r.job.name: r for r in simulate(fx.workload(jobs), policy("slurm", cancel), failures=False).runs}
    assert runs["low"].phase == "cancelled" and runs["low"].end == 1 * H


@given(st.lists(st.tuples(st.integers(1, 32), st.floats(0.1, 6), st.sampled_from([1, 2, 4, 8]), st.floats(0, 4)),
                min_size=2, max_size=12),
       st.sampled_from([0.0, 300.0, 3600.0]))
def test_the_queue_held_between_recomputations_is_the_priority_order(rows, period):
    """With PriorityCalcPeriod 0 the queue the main loop walks is `order` of the pending jobs at
    every cycle; with a longer period it stays sorted by the priorities it holds."""
    from gclc.solver.schedule.slurm import _in_order

    jobs = [fx.job(f"j{i}", g, hours=h, priority=p, submit=s, limit=h) for i, (g, h, p, s) in enumerate(rows)]
    slurm = policy("slurm", SlurmSettings(calc_period=period))

    def check(sim):
        memo = sim.memory.get("queue")
        if memo is None:
            return
        assert memo["keys"] == sorted(memo["keys"])
        if period == 0:        # every cycle recomputed; between cycles nothing became pending
            got = [j.name for j in _in_order(sim, memo["keys"])]
            want = [j.name for j in slurm.order(sim.pending.values(), memo["at"], memo["fair"], sim.state.total(),
                                                sim.memory["top_qos"])]
            assert got == want

    simulate(fx.workload(jobs), slurm, failures=False, check=check)
