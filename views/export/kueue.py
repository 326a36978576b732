"""Kueue's queues for the exported cluster, from the design's `tenant`s and its
`scheduler kueue { ... }` block (solver/schedule/settings.py `settings_of`, Kueue's defaults
for what it leaves out): the same settings the plan's schedule reads.

- a `ClusterQueue` per tenant: a flavor per partition with the tenant's `quota` as its
  nominalQuota (0 where it states none), its `borrowing_limit` / `lending_limit`, its
  `cohort` as cohortName, the policy's preemption and queueing strategy, and with
  `fair_sharing` its `shares` as fairSharing.weight; without tenants one ClusterQueue
  holding every accelerator of the cluster;
- a `LocalQueue` per ClusterQueue (a job's `kueue.x-k8s.io/queue-name`: its tenant's);
- a `WorkloadPriorityClass` per priority class;
- `kueue-config.yaml`: the manager's Configuration (config.kueue.x-k8s.io/v1beta2) with the
  JobSet integration, `waitForPodsReady` when the policy states it, and fair sharing.
"""

from __future__ import annotations


from ...compiler.design import Design, Entity
from ...solver.schedule.settings import KueueSettings, settings_of
from ...solver.schedule.tenants import Tenant, tenants_of
from .layout import Layout, slug
from .target import ExportError
from ...dsl.records import frozen

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "default"
# The design's priority classes (compiler/trace.py's weights) as Kueue WorkloadPriorityClasses
PRIORITIES = {"low": 1000, "normal": 2000, "high": 4000, "critical": 8000}
QUEUEING = {"strict_fifo": "StrictFIFO", "best_effort_fifo": "BestEffortFIFO"}
POLICY = {"never": "Never", "lower_priority": "LowerPriority", "any": "Any",
          "lower_or_newer_equal_priority": "LowerOrNewerEqualPriority"}


@frozen
class Flavor:
    """A partition as Kueue sees it: its ResourceFlavor's name, its accelerator resource, its GPUs."""

    partition: str
    name: str
    resource: str
    gpus: int


def settings(design: Design | None, cluster: Entity | None) -> KueueSettings:
    return settings_of(design, cluster, "kueue") if design is not None and cluster is not None else KueueSettings()


def tenants(design: Design | None, cluster: Entity | None) -> dict[str, Tenant]:
    return tenants_of(design, cluster) if design is not None and cluster is not None else {}


def queue_name(layout: Layout, tenant: str) -> str:
    """The ClusterQueue and LocalQueue a job is queued in: its tenant's, else the cluster's."""
    return slug(tenant) if tenant else layout.slug


def queues(layout: Layout, flavors: list[Flavor], s: KueueSettings, by_tenant: dict[str, Tenant]) -> list[dict]:
    """The ClusterQueues and their LocalQueues."""
    if not by_tenant:
        whole = {f.partition: f.gpus for f in flavors}
        cluster_queues = [_cluster_queue(layout.slug, flavors, s, Tenant(layout.cluster, quota=whole))]
    else:
        cluster_queues = [_cluster_queue(slug(t.name), flavors, s, t) for t in by_tenant.values()]
    local = [{"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": q["metadata"]["name"], "namespace": NAMESPACE},
              "spec": {"clusterQueue": q["metadata"]["name"]}} for q in cluster_queues]
    return cluster_queues + local


def _cluster_queue(name: str, flavors: list[Flavor], s: KueueSettings, tenant: Tenant) -> dict:
    _check(tenant, s, flavors)
    groups: dict[str, list[dict]] = {}
    for f in flavors:
        quota = {"name": f.resource, "nominalQuota": tenant.quota.get(f.partition, 0)}
        for key, limits in (("borrowingLimit", tenant.borrowing_limit), ("lendingLimit", tenant.lending_limit)):
            if limits.get(f.partition) is not None:
                quota[key] = limits[f.partition]
        groups.setdefault(f.resource, []).append({"name": f.name, "resources": [quota]})
    spec: dict = {"namespaceSelector": {}, "queueingStrategy": QUEUEING[s.queueing],
                  "preemption": {"withinClusterQueue": POLICY[s.within_cluster_queue],
                                 "reclaimWithinCohort": POLICY[s.reclaim_within_cohort],
                                 "borrowWithinCohort": {"policy": POLICY[s.borrow_within_cohort]}},
                  "resourceGroups": [{"coveredResources": [r], "flavors": fl} for r, fl in groups.items()]}
    if tenant.cohort:
        spec["cohortName"] = slug(tenant.cohort)
    if s.fair_sharing:
        spec["fairSharing"] = {"weight": tenant.shares}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _check(tenant: Tenant, s: KueueSettings, flavors: list[Flavor]) -> None:
    """What Kueue refuses, refused here with the reason (its CRD's CEL rules say the same)."""
    known = {f.partition for f in flavors}
    for block in ("quota", "borrowing_limit", "lending_limit"):
        unknown = set(getattr(tenant, block)) - known
        if unknown:
            raise ExportError(f"tenant `{tenant.name}`'s {block} names {', '.join(sorted(unknown))}, which is no "
                              f"partition of the exported cluster ({', '.join(sorted(known))})")
    if not tenant.cohort and any(v is not None for v in tenant.borrowing_limit.values()):
        raise ExportError(f"tenant `{tenant.name}` states a borrowing_limit but no cohort; Kueue borrows only "
                          "within a cohort: give it `cohort = \"...\"` or drop the limit")
    if s.reclaim_within_cohort == "never" and s.borrow_within_cohort != "never":
        raise ExportError("`scheduler kueue` borrows within the cohort by preemption (borrow_within_cohort = "
                          f"{s.borrow_within_cohort}) but never reclaims (reclaim_within_cohort = never); Kueue "
                          "refuses that ClusterQueue: set reclaim_within_cohort too")


def priority_classes() -> list[dict]:
    return [{"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
             "value": value, "description": f"gclc priority `{name}`"} for name, value in PRIORITIES.items()]


def priority_class(priority: object) -> tuple[str, dict | None]:
    """The class of a design priority, and a class to add for a whole number (`p<N>`)."""
    if priority is None or str(priority) in PRIORITIES:
        return str(priority or "normal"), None
    name = f"p{int(priority)}"
    return name, {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                  "value": int(priority) * 1000}


def configuration(s: KueueSettings) -> dict:
    """Kueue's manager Configuration: JobSets managed, waitForPodsReady (a gang whose pods are
    not all ready within the timeout is evicted and requeued), fair sharing."""
    config: dict = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                    "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}}
    if s.wait_for_pods_ready is not None:
        config["waitForPodsReady"] = {"timeout": duration(s.wait_for_pods_ready), "blockAdmission": True}
    if s.fair_sharing:
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    return config


def duration(seconds: float) -> str:
    """A Go duration (metav1.Duration): `1h30m0s`."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60}m{rest % 60}s" if hours else f"{rest // 60}m{rest % 60}s"
