"""The cluster as Kueue topology-aware scheduling objects, and the job as a JobSet.

Documents (Kueue v1beta2 `Topology` and `ResourceFlavor`, JobSet v1alpha2, core v1 `Node`):
- `kueue.yaml`: per partition, a `Topology` whose levels are the fabric tiers that span
  several nodes, outermost first, `kubernetes.io/hostname` last, and a `ResourceFlavor`
  selecting the partition's nodes and naming that topology; the ClusterQueues (one per
  tenant, else one for the cluster), their LocalQueues in the `default` namespace, and a
  `WorkloadPriorityClass` per priority class of the design (kueue.py).
- `kueue-config.yaml`: Kueue's manager Configuration (kueue.py).
- `nodes.yaml`: every node with its labels: the partition, the accelerator, and one label
  per level holding the node's domain (`topology.gclc.io/nvlink-domain: gb200-nvl72-0007`).
- `jobset.yaml` (when the design has a job): for a train job one replicated job per
  partition share, one pod per node; for a serve job one Job per replica (a disaggregated
  plan: two replicated jobs, `prefill` and `decode`, each its pool's replicas); with Kueue's
  topology annotations: the whole share preferred inside the smallest level that holds it,
  and each TP/EP group or replica (a slice of pods) required inside the level the plan
  keeps it in (with `scheduler kueue { topology = required }`, the whole share required
  there). The JobSet is queued in its tenant's LocalQueue, names its priority's class, may
  run as long as its time limit (`kueue.x-k8s.io/max-exec-time-seconds`, the time the Slurm
  export asks for), and a train JobSet restarts as a whole (`failurePolicy.maxRestarts`) as
  often as its run is expected to fail.
"""

from __future__ import annotations

import math

import yaml

from ...compiler.design import Design, Entity
from ...solver.schedule.settings import KueueSettings
from .kueue import (NAMESPACE, Flavor, configuration as kueue_configuration, priority_class,
                    priority_classes, queue_name, queues, settings as kueue_settings, tenants as kueue_tenants)
from .layout import Group, Layout, Level, slug
from .environment import environment
from .serve_launch import node_command, spans
from .target import JobPlan, Share, header

LABEL_PREFIX = "topology.gclc.io/"
HOSTNAME = "kubernetes.io/hostname"
PARTITION_LABEL = "gclc.io/partition"
ACCELERATOR_LABEL = "gclc.io/accelerator"
RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}  # the vendors' device plugins


def export(layout: Layout, job: JobPlan | None, source: str, image: str = "REPLACE/with-your-image:tag",
           design: Design | None = None, cluster: Entity | None = None) -> dict[str, str]:
    """`design` and `cluster`: where the tenants and the `scheduler kueue` settings come from
    (without them, one ClusterQueue and Kueue's defaults)."""
    settings = kueue_settings(design, cluster)
    tenants = kueue_tenants(design, cluster)
    files = {
        "kueue.yaml": as_yaml(header(source, f"Kueue topology and queues of cluster {layout.cluster}"),
                            kueue_objects(layout, settings, tenants)),
        "kueue-config.yaml": as_yaml(header(source, "Kueue's manager configuration (its controller_manager_config.yaml)"),
                                   [kueue_configuration(settings)]),
        "nodes.yaml": as_yaml(header(source, f"node labels of cluster {layout.cluster}"), node_objects(layout)),
    }
    if job is not None:
        extra = priority_class(job.run.priority)[1]
        files["jobset.yaml"] = as_yaml(header(source, f"JobSet for job {job.name}"),
                                     ([extra] if extra else []) + [jobset(layout, job, image, settings)])
    return files


# libyaml's emitter when PyYAML has it: a 25,000-node cluster's labels in a second, not a minute
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def as_yaml(head: str, documents: list[dict]) -> str:
    return head + "\n" + yaml.dump_all(documents, Dumper=_DUMPER, sort_keys=False, explicit_start=True, width=120)


def level_label(level: Level) -> str:
    return LABEL_PREFIX + level.key[:63].rstrip("-")


def topology_name(layout: Layout, group: Group) -> str:
    return layout.slug if len(layout.groups) == 1 else f"{layout.slug}-{group.slug}"


def kueue_objects(layout: Layout, settings: KueueSettings = KueueSettings(), tenants: dict | None = None) -> list[dict]:
    out, flavors = [], []
    for group in layout.groups:
        name = topology_name(layout, group)
        levels = [{"nodeLabel": level_label(level)} for level in reversed(group.levels)]
        out.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
                    "spec": {"levels": levels + [{"nodeLabel": HOSTNAME}]}})
        out.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
                    "spec": {"nodeLabels": {PARTITION_LABEL: group.slug}, "topologyName": name}})
        flavors.append(Flavor(group.partition.name, name, gpu_resource(group), group.partition.gpus))
    return out + queues(layout, flavors, settings, tenants or {}) + priority_classes()


def node_labels(group: Group, index: int) -> dict[str, str]:
    labels = {PARTITION_LABEL: group.slug,
              ACCELERATOR_LABEL: slug(group.partition.node.accelerator.name)}
    for level in group.levels:
        labels[level_label(level)] = level.domains[index // level.nodes_per_domain].name
    return labels


def node_objects(layout: Layout) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels(group, i)}}
            for group in layout.groups for i, name in enumerate(group.nodes)]


def gpu_resource(group: Group) -> str:
    vendor = group.partition.node.accelerator.vendor.lower()
    return next((r for key, r in RESOURCE.items() if key in vendor), f"{slug(vendor) or 'example'}.com/accelerator")


def jobset(layout: Layout, job: JobPlan, image: str, settings: KueueSettings = KueueSettings()) -> dict:
    """The JobSet, queued in its tenant's LocalQueue with its priority's class and its time
    limit; a train job restarts as a whole (from its checkpoint) up to the failures its run
    expects (target.py Run.restarts), as the goodput model assumes."""
    labels = {"kueue.x-k8s.io/queue-name": queue_name(layout, job.run.tenant),
              "kueue.x-k8s.io/priority-class": priority_class(job.run.priority)[0]}
    if job.run.time_limit:
        labels["kueue.x-k8s.io/max-exec-time-seconds"] = str(math.ceil(job.run.time_limit))
    name = slug(job.name)[:40].rstrip("-")
    spec: dict = {"replicatedJobs": [_replicated(layout.group(share.partition), share, job, image, settings.topology)
                                     for share in job.shares]}
    if not job.serve and job.run.restarts:
        spec["failurePolicy"] = {"maxRestarts": job.run.restarts}
    for share, replicated in zip(job.shares, spec["replicatedJobs"]):
        _span_nodes(layout.group(share.partition), share, job, name, replicated)
    if any("command" in r["template"]["spec"]["template"]["spec"]["containers"][0] for r in spec["replicatedJobs"]):
        spec["network"] = {"enableDNSHostnames": True, "subdomain": name}   # the heads' DNS names
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels}, "spec": spec}


def _span_nodes(group: Group, share: Share, plan: JobPlan, jobset_name: str, replicated: dict) -> None:
    """A serve pool whose replica spans nodes: each replica's Job has a pod per node; a pod's rank
    in the replica is its completion index, the replica's head its Job's pod 0, reached by the
    hostname JobSet gives it (`<jobset>-<replicated job>-<job index>-<pod index>.<subdomain>`);
    the container calls the engine args' node function and starts the plan's engine
    (views/export/serve_launch.py)."""
    if not plan.serve or spans(share, group.gpus_per_node) == 1:
        return
    container = replicated["template"]["spec"]["template"]["spec"]["containers"][0]
    head = f"{jobset_name}-{replicated['name']}-$(GCLC_JOB_INDEX)-0.{jobset_name}"
    container.setdefault("env", []).extend([
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
        {"name": "GCLC_JOB_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}},
        {"name": "HEAD_ADDR", "value": head}])
    container["command"] = ["bash", "-c", "set -eu; " + node_command(plan, share), "serve"]


def _replicated(group: Group, share: Share, plan: JobPlan, image: str, topology: str = "preferred") -> dict:
    """A train share: one Job of a pod per node. A serve pool: one Job per replica, its pods
    holding the replica's GPUs (fewer than a node's when the replica is narrower); a
    disaggregated plan's prefill and decode pools are two replicated jobs named by role,
    their containers told their role (GCLC_SERVE_ROLE)."""
    serve = plan.serve
    replicas = share.items if serve else 1
    per_pod = min(group.gpus_per_node, share.together) if serve else group.gpus_per_node
    pods = math.ceil(share.gpus / replicas / per_pod)
    resource = {gpu_resource(group): per_pod}
    template = {"metadata": {"annotations": _placement(group, share, pods * replicas, per_pod, topology)},
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


def _placement(group: Group, share: Share, pods: int, per_pod: int, topology: str = "preferred") -> dict[str, str]:
    """Kueue TAS annotations: the share preferred (or, with `topology = required`, required)
    in the smallest level holding it; each TP/EP group (each serve replica) of pods required
    in the level the plan keeps it inside."""
    out = {}
    nodes = math.ceil(pods * per_pod / group.gpus_per_node)
    holding = next((lv for lv in group.levels if lv.nodes_per_domain >= nodes), None)
    if topology == "required" and holding is None:   # no level holds it: any node of the partition
        topology = "preferred"
    out[f"kueue.x-k8s.io/podset-{topology}-topology"] = level_label(holding) if holding else HOSTNAME
    slice_pods = math.ceil(share.together / per_pod)
    level = next((lv for lv in group.levels if lv.tier.name == share.together_tier), None)
    if slice_pods > 1 and level is not None and pods % slice_pods == 0:
        out["kueue.x-k8s.io/podset-slice-required-topology"] = level_label(level)
        out["kueue.x-k8s.io/podset-slice-size"] = str(slice_pods)
    return out
