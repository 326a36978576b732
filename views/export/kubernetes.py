"""The cluster as Kueue topology-aware scheduling objects, and the job as a JobSet.

Documents (Kueue v1beta2 `Topology` and `ResourceFlavor`, JobSet v1alpha2, core v1 `Node`):
- `kueue.yaml`: per partition, a `Topology` whose levels are the fabric tiers that span
  several nodes, outermost first, `kubernetes.io/hostname` last, and a `ResourceFlavor`
  selecting the partition's nodes and naming that topology; a `ClusterQueue` whose quota is
  every accelerator of each flavor, a `LocalQueue` for it in the `default` namespace, and a
  `WorkloadPriorityClass` per priority class of the design.
- `nodes.yaml`: every node with its labels: the partition, the accelerator, and one label
  per level holding the node's domain (`topology.gclc.io/nvlink-domain: gb200-nvl72-0007`).
- `jobset.yaml` (when the design has a job): for a train job one replicated job per
  partition share, one pod per node; for a serve job one Job per replica (a disaggregated
  plan: two replicated jobs, `prefill` and `decode`, each its pool's replicas); with Kueue's
  topology annotations: the whole share preferred inside the smallest level that holds it,
  and each TP/EP group or replica (a slice of pods) required inside the level the plan
  keeps it in. The JobSet names its priority's class, and a train JobSet restarts as a whole
  (`failurePolicy.maxRestarts`) as often as its run is expected to fail.
"""

from __future__ import annotations

import math

import yaml

from .layout import Group, Layout, Level, slug
from .environment import environment
from .target import JobPlan, Share, header

LABEL_PREFIX = "topology.gclc.io/"
HOSTNAME = "kubernetes.io/hostname"
PARTITION_LABEL = "gclc.io/partition"
ACCELERATOR_LABEL = "gclc.io/accelerator"
RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}  # the vendors' device plugins
NAMESPACE = "default"


def export(layout: Layout, job: JobPlan | None, source: str, image: str = "REPLACE/with-your-image:tag") -> dict[str, str]:
    files = {
        "kueue.yaml": _yaml(header(source, f"Kueue topology of cluster {layout.cluster}"), kueue_objects(layout)),
        "nodes.yaml": _yaml(header(source, f"node labels of cluster {layout.cluster}"), node_objects(layout)),
    }
    if job is not None:
        extra = priority_class(job.run.priority)[1]
        files["jobset.yaml"] = _yaml(header(source, f"JobSet for job {job.name}"),
                                     ([extra] if extra else []) + [jobset(layout, job, image)])
    return files


# libyaml's emitter when PyYAML has it: a 25,000-node cluster's labels in a second, not a minute
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _yaml(head: str, documents: list[dict]) -> str:
    return head + "\n" + yaml.dump_all(documents, Dumper=_DUMPER, sort_keys=False, explicit_start=True, width=120)


def level_label(level: Level) -> str:
    return LABEL_PREFIX + level.key[:63].rstrip("-")


def topology_name(layout: Layout, group: Group) -> str:
    return layout.slug if len(layout.groups) == 1 else f"{layout.slug}-{group.slug}"


def kueue_objects(layout: Layout) -> list[dict]:
    out = []
    for group in layout.groups:
        name = topology_name(layout, group)
        levels = [{"nodeLabel": level_label(level)} for level in reversed(group.levels)]
        out.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
                    "spec": {"levels": levels + [{"nodeLabel": HOSTNAME}]}})
        out.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
                    "spec": {"nodeLabels": {PARTITION_LABEL: group.slug}, "topologyName": name}})
    return out + _queues(layout) + priority_classes()


# The design's priority classes (compiler/trace.py's weights) as Kueue WorkloadPriorityClasses
PRIORITIES = {"low": 1000, "normal": 2000, "high": 4000, "critical": 8000}


def priority_classes() -> list[dict]:
    return [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
             "value": value, "description": f"gclc priority `{name}`"} for name, value in PRIORITIES.items()]


def priority_class(priority: object) -> tuple[str, dict | None]:
    """The class of a design priority, and a class to add for a whole number (`p<N>`)."""
    if priority is None or str(priority) in PRIORITIES:
        return str(priority or "normal"), None
    name = f"p{int(priority)}"
    return name, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                  "metadata": {"name": name}, "value": int(priority) * 1000}


def _queues(layout: Layout) -> list[dict]:
    """One ClusterQueue over every flavor (one resource group per accelerator resource) and its LocalQueue."""
    groups: dict[str, list[dict]] = {}
    for group in layout.groups:
        resource = _resource(group)
        groups.setdefault(resource, []).append(
            {"name": topology_name(layout, group),
             "resources": [{"name": resource, "nominalQuota": group.partition.gpus}]})
    resource_groups = [{"coveredResources": [resource], "flavors": flavors} for resource, flavors in groups.items()]
    return [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": layout.slug},
             "spec": {"namespaceSelector": {}, "resourceGroups": resource_groups}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": layout.slug, "namespace": NAMESPACE}, "spec": {"clusterQueue": layout.slug}}]


def node_labels(group: Group, index: int) -> dict[str, str]:
    labels = {PARTITION_LABEL: group.slug,
              ACCELERATOR_LABEL: slug(group.partition.node.accelerator.name)}
    for level in group.levels:
        labels[level_label(level)] = level.domains[index // level.nodes_per_domain].name
    return labels


def node_objects(layout: Layout) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels(group, i)}}
            for group in layout.groups for i, name in enumerate(group.nodes)]


def _resource(group: Group) -> str:
    vendor = group.partition.node.accelerator.vendor.lower()
    return next((r for key, r in RESOURCE.items() if key in vendor), f"{slug(vendor) or 'example'}.com/accelerator")


def jobset(layout: Layout, job: JobPlan, image: str) -> dict:
    """The JobSet, queued in Kueue with its priority's class; a train job restarts as a whole
    (from its checkpoint) up to the failures its run expects (target.py Run.restarts), as the
    goodput model assumes."""
    labels = {"kueue.x-k8s.io/queue-name": layout.slug,
              "kueue.x-k8s.io/priority-class": priority_class(job.run.priority)[0]}
    spec: dict = {"replicatedJobs": [_replicated(layout.group(share.partition), share, job, image)
                                     for share in job.shares]}
    if not job.serve and job.run.restarts:
        spec["failurePolicy"] = {"maxRestarts": job.run.restarts}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": slug(job.name)[:40].rstrip("-"), "namespace": NAMESPACE, "labels": labels},
            "spec": spec}


def _replicated(group: Group, share: Share, plan: JobPlan, image: str) -> dict:
    """A train share: one Job of a pod per node. A serve pool: one Job per replica, its pods
    holding the replica's GPUs (fewer than a node's when the replica is narrower); a
    disaggregated plan's prefill and decode pools are two replicated jobs named by role,
    their containers told their role (GCLC_SERVE_ROLE)."""
    serve = plan.serve
    replicas = share.items if serve else 1
    per_pod = min(group.gpus_per_node, share.together) if serve else group.gpus_per_node
    pods = math.ceil(share.gpus / replicas / per_pod)
    resource = {_resource(group): per_pod}
    template = {"metadata": {"annotations": _placement(group, share, pods * replicas, per_pod)},
                "spec": {"restartPolicy": "Never", "nodeSelector": {PARTITION_LABEL: group.slug},
                         "containers": [_container(share, plan, image, resource)]}}
    job = {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
           "template": template}
    disaggregated = serve and share.role in ("prefill", "decode")
    name = share.role if disaggregated else group.slug[:20].rstrip("-")
    return {"name": name, "replicas": replicas, "template": {"spec": job}}


def _container(share: Share, plan: JobPlan, image: str, resource: dict) -> dict:
    serve = plan.serve
    container = {"name": share.role if serve and share.role in ("prefill", "decode") else
                 ("server" if serve else "trainer"), "image": image,
                 "resources": {"requests": dict(resource), "limits": dict(resource)}}
    env = [{"name": v.name, "value": v.value} for v in environment(plan)]
    if serve and share.role:
        env += [{"name": "GCLC_SERVE_ROLE", "value": share.role},
                {"name": "GCLC_REPLICA_GPUS", "value": str(share.together)}]
    if env:
        container["env"] = env
    return container


def _placement(group: Group, share: Share, pods: int, per_pod: int) -> dict[str, str]:
    """Kueue TAS annotations: the share preferred in the smallest level holding it; each
    TP/EP group (each serve replica) of pods required in the level the plan keeps it inside."""
    out = {}
    nodes = math.ceil(pods * per_pod / group.gpus_per_node)
    holding = next((lv for lv in group.levels if lv.nodes_per_domain >= nodes), None)
    out["kueue.x-k8s.io/podset-preferred-topology"] = level_label(holding) if holding else HOSTNAME
    slice_pods = math.ceil(share.together / per_pod)
    level = next((lv for lv in group.levels if lv.tier.name == share.together_tier), None)
    if slice_pods > 1 and level is not None and pods % slice_pods == 0:
        out["kueue.x-k8s.io/podset-slice-required-topology"] = level_label(level)
        out["kueue.x-k8s.io/podset-slice-size"] = str(slice_pods)
    return out
