"""Kueue's admission on the documented cases (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/):
borrowing unused quota within a cohort and the limits on it, reclaiming it by preemption,
StrictFIFO against BestEffortFIFO, preemption within a queue, topology-aware scheduling
required against preferred, and waitForPodsReady's blocked admission."""

import importlib.util
from pathlib import Path

import attrs

from gclc.solver.schedule.catalog import policy
from gclc.solver.schedule.records import Workload
from gclc.solver.schedule.settings import KueueSettings
from gclc.solver.schedule.simulate import simulate
from gclc.solver.schedule.tenants import Tenant

_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)
H = fx.HOUR


def job(name, tenant, gpus, **kw):
    return attrs.evolve(fx.job(name, gpus, partitions=("a",), **kw), tenant=tenant)


def run(jobs, settings=KueueSettings(), **tenants):
    """Partition a (32 GPUs); `tenants` maps a name to its Tenant fields."""
    queues = {n: Tenant(n, **f) for n, f in tenants.items()}
    work = Workload(fx.GRAPH, fx.CLUSTER, tuple(jobs), fx.RELIABILITY, (), queues)
    return {r.job.name: r for r in simulate(work, policy("kueue", settings), failures=False).runs}


COHORT = {"team_a": {"quota": {"a": 16}, "cohort": "lab"}, "team_b": {"quota": {"a": 16}, "cohort": "lab"}}


def test_a_queue_borrows_what_its_cohort_leaves_unused():
    runs = run([job("big", "team_a", 24, hours=2)], **COHORT)
    assert runs["big"].first_start == 0 and runs["big"].segments[0][7] == "admit, borrowing"
    alone = {"team_a": {"quota": {"a": 16}}, "team_b": {"quota": {"a": 16}}}     # no cohort: nothing to borrow
    assert run([job("big", "team_a", 24, hours=2)], **alone)["big"].phase == "pending"


def test_borrowing_and_lending_limits_bound_the_loan():
    capped = {"team_a": {**COHORT["team_a"], "borrowing_limit": {"a": 4}}, "team_b": COHORT["team_b"]}
    assert run([job("big", "team_a", 24, hours=2)], **capped)["big"].phase == "pending"
    lends = {"team_a": COHORT["team_a"], "team_b": {**COHORT["team_b"], "lending_limit": {"a": 8}}}
    runs = run([job("fits", "team_a", 24, hours=1), job("over", "team_a", 28, hours=1, submit=2)], **lends)
    assert runs["fits"].first_start == 0 and runs["over"].phase == "pending"


def test_a_queue_reclaims_its_lent_quota_only_where_its_policy_says():
    jobs = [job("borrower", "team_a", 24, hours=5, interval=1800.0), job("owner", "team_b", 16, hours=1, submit=1)]
    waits = run(jobs, **COHORT)
    assert waits["owner"].first_start == 5 * H and waits["borrower"].preemptions == 0
    runs = run(jobs, KueueSettings(reclaim_within_cohort="any"), **COHORT)
    assert runs["owner"].first_start == 1 * H and runs["owner"].segments[0][7] == "preempt"
    assert runs["borrower"].preemptions == 1 and runs["borrower"].phase == "done"


def test_strict_fifo_blocks_behind_its_head_and_best_effort_does_not():
    jobs = [job("hold", "team_a", 28, hours=2), job("head", "team_a", 8, hours=1, submit=0.1),
            job("small", "team_a", 4, hours=1, submit=0.2)]
    solo = {"team_a": {"quota": {"a": 32}}}
    best = run(jobs, **solo)
    assert best["small"].first_start == 0.2 * H and best["head"].first_start == 2 * H
    strict = run(jobs, KueueSettings(queueing="strict_fifo"), **solo)
    assert strict["small"].first_start == 2 * H


def test_preemption_within_a_queue_follows_its_policy():
    jobs = [job("low", "team_a", 32, hours=10, priority=1, interval=1800.0), job("high", "team_a", 16, hours=1,
                                                                                 priority=4, submit=1)]
    solo = {"team_a": {"quota": {"a": 32}}}
    assert run(jobs, **solo)["high"].first_start == 10 * H
    runs = run(jobs, KueueSettings(within_cluster_queue="lower_priority"), **solo)
    assert runs["high"].first_start == 1 * H and runs["low"].preemptions == 1


def test_required_topology_waits_for_one_leaf_where_preferred_spreads():
    # partition a: two leaves of 4 nodes (16 GPUs each). `a_fill` (first by name) holds leaf 0 for 1 h, so
    # `b` lands in leaf 1; after it ends, `c` lands in leaf 0: 24 GPUs free, 12 per leaf
    jobs = [job("a_fill", "team_a", 16, hours=1), job("b", "team_a", 4, hours=3),
            job("c", "team_a", 4, hours=3, submit=1.1), job("wide", "team_a", 16, hours=1, submit=1.2)]
    solo = {"team_a": {"quota": {"a": 32}}}
    preferred = run(jobs, **solo)
    assert preferred["wide"].first_start == 1.2 * H and preferred["wide"].segments[0][4] == 2   # across the spine
    required = run(jobs, KueueSettings(topology="required"), **solo)
    assert required["wide"].first_start == 3 * H and required["wide"].segments[0][4] == 1      # one leaf, once `b` ends


def test_wait_for_pods_ready_admits_one_workload_at_a_time():
    jobs = [job("first", "team_a", 8, hours=1, restart=600.0), job("second", "team_a", 8, hours=1, restart=600.0)]
    solo = {"team_a": {"quota": {"a": 32}}}
    free = run(jobs, **solo)
    assert free["first"].first_start == free["second"].first_start == 0
    blocked = run(jobs, KueueSettings(wait_for_pods_ready=1200.0), **solo)
    assert sorted(r.first_start for r in blocked.values()) == [0, 600.0]
    slow = run(jobs[:1], KueueSettings(wait_for_pods_ready=300.0), **solo)
    assert slow["first"].phase == "cancelled" and slow["first"].end == 300.0


def test_kube_least_allocated_uses_more_nodes_than_most_allocated():
    from gclc.solver.schedule.settings import KubeSettings
    from gclc.solver.schedule.simulate import Simulation

    jobs = [fx.job(f"p{i}", 2, hours=1, partitions=("b",)) for i in range(4)]
    seen = {}
    for scoring in ("least_allocated", "most_allocated"):
        nodes = set()

        def record(sim, nodes=nodes):
            for alloc in sim.state.allocations.values():
                nodes.update(alloc.domains)
        Simulation(fx.workload(jobs), policy("kube", KubeSettings(scoring=scoring)), failures=False, check=record,
                   epochs=0).run()
        seen[scoring] = len(nodes)
    assert seen == {"least_allocated": 4, "most_allocated": 2}


def test_a_trace_tenant_without_declared_tenants_is_queued_in_the_one_queue():
    """Accounts named by a trace's tenant column where the design declares no tenants share
    the cluster's one ClusterQueue (they raised a KeyError): its quota is the whole cluster,
    so two 20-GPU jobs of two accounts on 32 GPUs run one after the other."""
    runs = run([job("x", "acct_x", 20, hours=1), job("y", "acct_y", 20, hours=1)])
    assert runs["x"].first_start == 0 and runs["y"].first_start == 1 * H
    assert {runs[n].segments[0][7] for n in "xy"} == {"admit"}
