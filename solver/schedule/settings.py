"""The settings of each scheduling policy, as the real scheduler names them, with its
defaults: what a design's `scheduler slurm { ... }` (or `kueue`, `kube`) states, and
the real default for everything it leaves out.

Slurm: slurm.conf(5) (https://slurm.schedmd.com/slurm.conf.html) SchedulerParameters
(bf_interval 30 s, bf_window 1440 min, bf_resolution 60 s, bf_max_job_test 500, max_switch_wait 300 s),
PriorityMaxAge and PriorityDecayHalfLife (7 days each), PriorityCalcPeriod (5 minutes:
how often the priorities of pending jobs are recomputed; a new job's is computed when it
arrives), PreemptType (preempt/none) and PreemptMode. The PriorityWeight* defaults are 0 in slurm.conf; gclc takes the
multifactor page's own configuration example (https://slurm.schedmd.com/priority_multifactor.html
"Configuration Example": age 1000, fairshare 10000, job size 1000, partition 1000) and
adds QOS 100000 so that a design's priority classes, which gclc runs as QOSes, come first
(ASSUMPTION: a site that states priorities means them to dominate).

Kueue: the ClusterQueue API (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/):
queueingStrategy BestEffortFIFO, preemption withinClusterQueue Never,
reclaimWithinCohort Never, borrowWithinCohort Never; fair sharing off; waitForPodsReady
off (https://kueue.sigs.k8s.io/docs/tasks/manage/setup_wait_for_pods_ready/); topology-aware
scheduling `preferred` (podset-preferred-topology).

kube-scheduler: the default profile's NodeResourcesFit scoring, LeastAllocated
(https://kubernetes.io/docs/reference/scheduling/config/); gangs are all or nothing, as the
coscheduling plugin's PodGroups (scheduler-plugins) make them.
"""

from __future__ import annotations

import attrs

from ...compiler.design import Design, Entity, Symbol
from .backfill import BackfillParams
from ...dsl.records import frozen

DAY = 86_400.0


@frozen
class PriorityWeights:
    age: int = 1000
    fairshare: int = 10000
    job_size: int = 1000
    partition: int = 1000
    qos: int = 100000


@frozen
class QosLimits:
    """Limits of Slurm QOSes on running jobs (https://slurm.schedmd.com/qos.html, "QOS
    specific limits"; https://slurm.schedmd.com/resource_limits.html): per QOS name, GrpTRES
    on gres/gpu (all its running jobs together), MaxTRESPerUser on gres/gpu and
    MaxJobsPerUser. A job that a limit holds stays pending (reason QOSGrpGRES,
    QOSMaxGRESPerUser, QOSMaxJobsPerUserLimit) without blocking its partition, and backfill
    reserves nothing for it. No QOS is limited by default."""

    grp_gpus: dict[str, int] = attrs.field(factory=dict, hash=False)
    max_gpus_per_user: dict[str, int] = attrs.field(factory=dict, hash=False)
    max_jobs_per_user: dict[str, int] = attrs.field(factory=dict, hash=False)

    def __bool__(self) -> bool:
        return bool(self.grp_gpus or self.max_gpus_per_user or self.max_jobs_per_user)


@frozen
class SlurmSettings:
    backfill: BackfillParams = BackfillParams()
    max_switch_wait: float = 300.0
    max_age: float = 7 * DAY               # PriorityMaxAge
    decay_half_life: float = 7 * DAY       # PriorityDecayHalfLife
    weights: PriorityWeights = PriorityWeights()
    preempt_type: str = "none"             # none | qos (PreemptType=preempt/qos)
    preempt_mode: str = "requeue"          # requeue | cancel
    calc_period: float = 300.0             # PriorityCalcPeriod
    qos_limits: QosLimits = QosLimits()


@frozen
class KueueSettings:
    queueing: str = "best_effort_fifo"
    within_cluster_queue: str = "never"
    reclaim_within_cohort: str = "never"
    borrow_within_cohort: str = "never"
    fair_sharing: bool = False
    wait_for_pods_ready: float | None = None
    topology: str = "preferred"


@frozen
class KubeSettings:
    scoring: str = "least_allocated"


DEFAULTS = {"slurm": SlurmSettings(), "kueue": KueueSettings(), "kube": KubeSettings()}


def settings_of(design: Design, cluster: Entity, policy: str):
    """The settings of `policy` on `cluster`: its `scheduler` block's, the rest defaults."""
    default = DEFAULTS.get(policy)
    block = next((e for e in design.of_kind("scheduler") if e.name == policy and _on(e, cluster)), None)
    if default is None or block is None:
        return default
    if policy == "slurm":
        return _slurm(block, default)
    values = {k: _plain(block.get(k)) for k in attrs.fields_dict(type(default)) if block.get(k) is not None}
    return attrs.evolve(default, **values)


def _slurm(block: Entity, d: SlurmSettings) -> SlurmSettings:
    bf = d.backfill
    bf = BackfillParams(_plain(block.get("bf_window")) or bf.window, _plain(block.get("bf_resolution")) or bf.resolution,
                        block.get("bf_max_job_test") or bf.max_job_test, _plain(block.get("bf_interval")) or bf.interval)
    weights = block.get("priority_weight")
    w = attrs.evolve(d.weights, **{k: v for k, v in ((i.name, i.value) for i in weights.items)}) if weights else d.weights
    return SlurmSettings(bf, _or(block, "max_switch_wait", d.max_switch_wait), _or(block, "priority_max_age", d.max_age),
                         _or(block, "priority_decay_half_life", d.decay_half_life), w,
                         _or(block, "preempt_type", d.preempt_type), _or(block, "preempt_mode", d.preempt_mode),
                         _or(block, "priority_calc_period", d.calc_period),
                         QosLimits(*(_counts(block, f"qos_{k}") for k in ("grp_gpus", "max_gpus_per_user",
                                                                          "max_jobs_per_user"))))


def _counts(block: Entity, name: str) -> dict[str, int]:
    record = block.get(name)
    return {item.name: int(item.value) for item in getattr(record, "items", ())}


def _or(block: Entity, key: str, default):
    value = block.get(key)
    return default if value is None else _plain(value)


def _plain(value):
    """A checked value as the settings hold it: seconds for times, the word for choices."""
    if isinstance(value, Symbol):
        return value.name
    return float(value.value) if hasattr(value, "value") and hasattr(value, "dim") else value


def _on(scheduler: Entity, cluster: Entity) -> bool:
    target = scheduler.get("on")
    return target is None or getattr(target, "cluster", target).name == cluster.name
