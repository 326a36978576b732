"""An rl job on a shared cluster: one gang holding both pools, on one partition or generating on
one and training on another (bound, released and failed together), its work its steps; a job
without steps is a located problem, not a crash."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from pathlib import Path

import attrs
import jsonschema
import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.model.rl.job import rl_job
from gclc.solver.rl.schedule import placements
from gclc.solver.schedule.catalog import POLICIES
from gclc.solver.schedule.jobs import ScheduleError, build
from gclc.solver.schedule.simulate import simulate
from gclc.solver.schedule.state import ClusterState
from gclc.views.schedule import schedule_json

DATA = Path(__file__).resolve().parents[2] / "data" / "rl_shared.gcl"
SCHEMA = Path(__file__).resolve().parents[3] / "views" / "schedule.schema.json"


@functools.cache
def shared():
    return build(check_file(str(DATA)).design)


def test_an_rl_job_is_one_gang_with_an_option_per_partition():
    workload = shared()
    rl = next(j for j in workload.jobs if j.name == "grpo")
    assert rl.gang and rl.unit == "steps" and rl.work == 200 and rl.priority > 1
    assert {o.partition for o in rl.options if o.companion is None} == {"h100", "a100"}
    rates = [o.rate for o in rl.options]
    assert rates == sorted(rates, reverse=True) and all(0 < o.gpus <= 16 for o in rl.options)
    assert rl.submit == 600.0


def test_an_rl_job_without_steps_says_so_where_it_is():
    text = DATA.read_text().replace("  steps = 200  priority = high", "  priority = high")
    with pytest.raises(ScheduleError) as raised:
        build(check_text(text, str(DATA)).design)
    problem = raised.value.diagnostics[0]
    assert problem.code == "no-size" and "`grpo`" in problem.summary and problem.subject.line == 13


# --- a gang across two partitions (Option.companion), on the hand-made cluster: a has 32 GPUs, b 16
_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def _two_pools(name="rl", train=8, generate=16, hours=1.0, submit=0.0):
    """Training on `train` GPUs of a, generation on `generate` of b, bound together."""
    job = fx.job(name, train, hours=hours, partitions=("a",), submit=submit, unit="steps")
    return attrs.evolve(job, options=(attrs.evolve(job.options[0], companion=("b", generate)),))


@pytest.mark.parametrize("policy", ["fifo", "priority", "slurm", "kube", "kueue"])
def test_a_gang_across_partitions_waits_for_both_and_holds_both(policy):
    """The gang needs its companion's GPUs too: while `fill` holds all of b it waits, though a is
    free; once started it holds both partitions' GPUs for its whole run, and frees both."""
    fill = fx.job("fill", 16, hours=2, partitions=("b",))
    outcome = simulate(fx.workload([fill, _two_pools(submit=0.1)]), POLICIES[policy], failures=False)
    runs = {r.job.name: r for r in outcome.runs}
    rl, filled = runs["rl"], runs["fill"]
    assert rl.phase == filled.phase == "done"
    assert rl.first_start == pytest.approx(filled.end)          # b's 16 GPUs were the gang's too
    assert rl.held == pytest.approx((8 + 16) * (rl.end - rl.first_start))
    if policy == "priority":   # the schedule's JSON names both pools, as its schema says
        data = schedule_json(fx.workload([fill, _two_pools(submit=0.1)]), outcome, [])
        jsonschema.validate(data, json.loads(SCHEMA.read_text()))
        job = next(j for j in data["jobs"] if j["name"] == "rl")
        assert (job["partition"], job["gpus"], job["companion"], job["unit"]) == \
            ("a", 8, {"partition": "b", "gpus": 16}, "steps")


def test_a_failure_on_the_companion_partition_reaches_the_gang():
    state = ClusterState.of(fx.GRAPH)
    def take(name, gpus):
        part = state.partitions[name]
        top = len(part.group_domains) - 1
        return part.take("rl", gpus, top, part.best_group(gpus, top)[0])

    main, other = take("a", 8), take("b", 16)
    state.bind("rl", attrs.evolve(main, companion=other))
    assert state.free("a") == 24 and state.free("b") == 0 and state.used() == 24
    assert all("rl" in state.holders("b", d) for d in other.domains)   # a node of b down hits the gang
    state.release("rl")
    assert state.free("a") == 32 and state.free("b") == 16
    assert not any(held for domains in state.holding.values() for held in domains)   # no domain holds it


def test_an_rl_job_may_generate_on_one_partition_and_train_on_another():
    workload = shared()
    rl = next(j for j in workload.jobs if j.name == "grpo")
    apart = [o for o in rl.options if o.companion is not None]
    assert apart and all(o.companion[0] != o.partition and o.gpus + o.companion[1] <= 32 for o in apart)
    # the file's pins rule placements out: colocated keeps each partition alone, pinned pools one pair
    def pairs(edit):
        return placements(rl_job(check_text(edit(DATA.read_text()), str(DATA)).design["grpo"]))

    assert pairs(lambda t: t) == [("h100", "h100"), ("a100", "a100"), ("h100", "a100"), ("a100", "h100")]
    assert pairs(lambda t: t.replace("staleness = 1", "staleness = 1  placement = colocated")) == \
        [("h100", "h100"), ("a100", "a100")]
    assert pairs(lambda t: t.replace("staleness = 1", "staleness = 1\n  generate { on = Lab.a100 }"
                                                           "  train { on = Lab.h100 }")) == [("a100", "h100")]


# --- preemption and Kueue see both pools of a gang across partitions
def _preempting(name):
    """The policy with preemption on (Slurm's needs PreemptType=preempt/qos)."""
    from gclc.solver.schedule.catalog import policy
    from gclc.solver.schedule.settings import SlurmSettings

    return policy(name, SlurmSettings(preempt_type="qos")) if name == "slurm" else POLICIES[name]


@pytest.mark.parametrize("policy", ["priority", "slurm", "kube"])
def test_preemption_evicts_a_gang_for_its_companion_pool_and_frees_both(policy):
    """A high-priority job wanting all of b finds b held by a low-priority gang's generation pool
    (its training pool is on a): the gang is the victim, and both its pools come free."""
    low = attrs.evolve(_two_pools(train=8, generate=16, hours=5), priority=1)
    urgent = fx.job("urgent", 16, hours=1, priority=4, submit=1, partitions=("b",))
    runs = {r.job.name: r for r in simulate(fx.workload([low, urgent]), _preempting(policy), failures=False).runs}
    assert runs["urgent"].first_start == pytest.approx(fx.HOUR)
    assert runs["rl"].preemptions == 1 and runs["rl"].segments[0][1] == pytest.approx(fx.HOUR)


@pytest.mark.parametrize("policy", ["priority", "slurm", "kube"])
def test_a_high_priority_gang_evicts_what_holds_its_companion_partition(policy):
    """The gang's training pool fits on a as it stands; its generation pool needs b, which a
    low-priority job fills: preemption evicts that job, not something on a."""
    fill = fx.job("fill", 16, hours=5, priority=1, partitions=("b",), interval=1800.0)
    bystander = fx.job("bystander", 8, hours=5, priority=1, partitions=("a",))
    gang = attrs.evolve(_two_pools(train=8, generate=16, hours=1, submit=1), priority=4)
    runs = {r.job.name: r for r in simulate(fx.workload([fill, bystander, gang]), _preempting(policy),
                                            failures=False).runs}
    assert runs["rl"].first_start == pytest.approx(fx.HOUR)
    assert runs["fill"].preemptions == 1 and runs["bystander"].preemptions == 0


def _kueue(jobs, settings=None, **tenants):
    from gclc.solver.schedule.catalog import policy as chosen
    from gclc.solver.schedule.records import Workload
    from gclc.solver.schedule.settings import KueueSettings
    from gclc.solver.schedule.tenants import Tenant

    queues = {n: Tenant(n, **f) for n, f in tenants.items()}
    work = Workload(fx.GRAPH, fx.CLUSTER, tuple(jobs), fx.RELIABILITY, (), queues)
    outcome = simulate(work, chosen("kueue", settings or KueueSettings()), failures=False)
    return {r.job.name: r for r in outcome.runs}


def test_kueue_charges_a_gang_on_both_flavors():
    """Team quota: 32 of a, 16 of b. The gang's generation pool takes all of b's quota, so a
    second job of the team asking for b waits for the gang though the cluster has b's GPUs only
    through the gang, and a job on a alone is admitted beside it."""
    team = {"team": {"quota": {"a": 32, "b": 16}}}
    gang = attrs.evolve(_two_pools(train=8, generate=16, hours=2), tenant="team")
    on_b = attrs.evolve(fx.job("on_b", 4, hours=1, submit=0.1, partitions=("b",)), tenant="team")
    on_a = attrs.evolve(fx.job("on_a", 8, hours=1, submit=0.2, partitions=("a",)), tenant="team")
    runs = _kueue([gang, on_b, on_a], **team)
    assert runs["rl"].first_start == 0 and runs["on_a"].first_start == pytest.approx(0.2 * fx.HOUR)
    assert runs["on_b"].first_start == pytest.approx(runs["rl"].end)
    # a quota of b smaller than the generation pool never admits the gang, whatever a has
    tight = {"team": {"quota": {"a": 32, "b": 8}}}
    assert _kueue([gang], **tight)["rl"].phase == "pending"


def test_kueue_preempts_a_gang_holding_the_flavor_a_preemptor_needs():
    from gclc.solver.schedule.settings import KueueSettings

    team = {"team": {"quota": {"a": 32, "b": 16}}}
    gang = attrs.evolve(_two_pools(train=8, generate=16, hours=5), tenant="team", priority=1)
    urgent = attrs.evolve(fx.job("urgent", 8, hours=1, priority=4, submit=1, partitions=("b",)), tenant="team")
    runs = _kueue([gang, urgent], KueueSettings(within_cluster_queue="lower_priority"), **team)
    assert runs["urgent"].first_start == pytest.approx(fx.HOUR) and runs["urgent"].segments[0][7] == "preempt"
    assert runs["rl"].preemptions == 1


def test_slurm_keeps_a_gang_off_a_partition_a_higher_priority_job_waits_for():
    """b: `fill` holds 8 GPUs for 2 h (its limit); `big` (high) waits for all 16 of b. A low gang
    training on a and generating on 8 GPUs of b would fit now, but Slurm's main loop blocks b
    behind `big` and backfill sees its 3-hour limit cross big's reservation of b: it waits."""
    fill = fx.job("fill", 8, hours=2, partitions=("b",), limit=2)
    big = fx.job("big", 16, hours=1, priority=4, submit=0.1, partitions=("b",), limit=1)
    gang = attrs.evolve(_two_pools(train=8, generate=8, hours=3, submit=0.2), time_limit=3 * fx.HOUR)
    runs = {r.job.name: r for r in simulate(fx.workload([fill, big, gang]), POLICIES["slurm"], failures=False).runs}
    assert runs["big"].first_start == pytest.approx(2 * fx.HOUR)
    assert runs["rl"].first_start >= runs["big"].end - 1e-6


def _replayed(replay):
    """The schedule of a gang (training on 8 GPUs of a, generating on 16 of b) exported by `replay`."""
    work = fx.workload([_two_pools(train=8, generate=16, hours=1)])
    data = schedule_json(work, simulate(work, POLICIES["priority"], failures=False), [])
    seg = next(j for j in data["jobs"] if j["name"] == "rl")["segments"][0]
    assert seg["companion"]["partition"] == "b" and sum(g for _, g in seg["companion"]["domain_gpus"]) == 16
    return replay(fx._checked.design, work, data, "cluster.gcl")


def test_the_slurm_replay_places_both_pools_as_one_heterogeneous_job():
    from gclc.views.export.replay import slurm_replay
    from gclc.views.export.slurm_policy import qos_name

    script = next(text for name, text in _replayed(slurm_replay).items() if name.startswith("jobs/"))
    train, generate = script.split("#SBATCH hetjob")
    assert "--partition=a" in train and "--gpus=8" in train and "--nodes=2" in train
    assert "--partition=b" in generate and "--gpus=16" in generate and "--nodes=4" in generate
    assert script.count("#SBATCH hetjob") == 1 and "sleep" in generate.splitlines()[-1]
    # each component under the QOS of the job's priority (qos.sh's limits hold it), and an
    # account only where the job has a tenant
    qos = f"#SBATCH --qos={qos_name(fx.job('x', 1).label)}"
    assert qos in train.splitlines() and qos in generate.splitlines() and "--account" not in script
    tenant = attrs.evolve(_two_pools(train=8, generate=16, hours=1), tenant="research")
    work = fx.workload([tenant])
    data = schedule_json(work, simulate(work, POLICIES["priority"], failures=False), [])
    script = next(t for n, t in slurm_replay(fx._checked.design, work, data, "c.gcl").items() if n.startswith("jobs/"))
    assert [line for line in script.splitlines() if "--account" in line] == ["#SBATCH --account=research"] * 2


def test_the_kubernetes_replay_places_both_pools_in_one_jobset_valid_under_its_crd():
    import yaml
    from gclc.views.export.kube_replay import kubernetes_replay
    from tests.views.kube_cel import cel_problems
    from tests.views.test_export_kueue import schemas

    files = _replayed(kubernetes_replay)
    jobset = next(d for name, text in files.items() if name.startswith("jobs/")
                  for d in yaml.safe_load_all(text) if d and d["kind"] == "JobSet")
    schema = schemas()["JobSet"]
    jsonschema.Draft7Validator(schema).validate(jobset)
    assert cel_problems(schema, jobset) == []
    pools = {r["name"]: r["template"]["spec"] for r in jobset["spec"]["replicatedJobs"]}
    assert set(pools) == {"train", "generate"}
    for pool, partition, pods in (("train", "a", 2), ("generate", "b", 4)):
        spec = pools[pool]["template"]["spec"]
        assert spec["nodeSelector"]["gclc.io/partition"].endswith(partition) and pools[pool]["parallelism"] == pods
        hosts = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        assert len(hosts) == pods
    broken = copy.deepcopy(jobset)      # negative control: the generation pool asking for -1 replicas
    broken["spec"]["replicatedJobs"][1]["replicas"] = -1
    with pytest.raises(jsonschema.ValidationError, match="minimum"):
        jsonschema.Draft7Validator(schema).validate(broken)
