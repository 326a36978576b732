"""A simulated schedule as the objects that make Kubernetes with Kueue take the same
decisions (`gclc schedule FILE --export kubernetes DIR`): the cluster's objects as `gclc
export --to kubernetes` writes them (Kueue's topologies, flavors, ClusterQueues per tenant,
LocalQueues, WorkloadPriorityClasses, its manager configuration, the nodes and their
labels), one JobSet per run of a job, and a `submit.sh` that applies each at the time the
simulation submitted it.

Each JobSet carries what decided its run in the simulation: its tenant's LocalQueue, its
priority's WorkloadPriorityClass, its time limit (`max-exec-time-seconds`), and where it
ran: one pod per node it held, each pod pinned to its node by a required node affinity on
`kubernetes.io/hostname` (inside a domain of several nodes, the domain's first ones: the
simulation counts GPUs per domain, not which of its nodes). A run the simulation cut short
(preempted, failed, ended at a resize) is replayed as the run it was: its pods sleep as
long as the run lasted, and a later run of the same job is applied when it started. An rl
job generating on one partition and training on another is one JobSet of two replicated jobs
(`train`, `generate`): Kueue admits it as one workload whose two pod sets take their own
flavors, and each pool's pods are pinned to the nodes the simulation gave it.
"""

from __future__ import annotations

import math

from ...compiler.design import Design
from ...dsl.numbers import duration
from .kueue import NAMESPACE, priority_class, queue_name
from .kubernetes import HOSTNAME, PARTITION_LABEL, as_yaml, export as cluster_objects, gpu_resource
from .layout import Layout, layout, slug
from .replay import nodes_of, runs_in_order
from .target import header

IMAGE = "busybox:1.36"   # the replayed pods only sleep


def kubernetes_replay(design: Design, workload, data: dict, source: str) -> dict[str, str]:
    """{file name: text} for the schedule JSON `data` (views/schedule.py) of `workload`."""
    lay = layout(workload.graph, design)
    cluster = workload.cluster
    files = cluster_objects(lay, None, source, design=design, cluster=cluster)
    # a trace's tenant names a queue only where the design declares tenants (else one queue)
    tenants = {j.name: j.tenant for j in workload.jobs} if workload.tenants else {}
    names = []
    for rank, (name, index, seg, job) in enumerate(runs_in_order(data)):
        file = f"jobs/{rank + 1:04d}-{slug(name)}{'-' + str(index + 1) if index else ''}.yaml"
        objects = _jobset(lay, workload, job, seg, index, rank, tenants.get(name, ""))
        files[file] = as_yaml(header(source, f"replay of {name}, run {index + 1}: {seg['gpus']} GPUs from "
                                           f"{duration(seg['start_s'])}, ended {seg['ended']}"), objects)
        names.append((file, job["submit_s"] if index == 0 else seg["start_s"]))
    files["submit.sh"] = _submit(names, source)
    return files


def _jobset(lay: Layout, workload, job: dict, seg: dict, index: int, rank: int, tenant: str) -> list[dict]:
    cls, extra = priority_class(job["priority_label"])
    name = f"r{rank + 1:04d}-{slug(job['name'])[:30].rstrip('-')}"
    labels = {"kueue.x-k8s.io/queue-name": queue_name(lay, tenant),
              "kueue.x-k8s.io/priority-class": cls}
    if job["time_limit_s"]:
        labels["kueue.x-k8s.io/max-exec-time-seconds"] = str(math.ceil(job["time_limit_s"]))
    length = max(0, math.ceil(seg["end_s"] - seg["start_s"]))
    # an rl gang across two partitions: one JobSet (one Kueue workload, admitted whole) of two
    # replicated jobs, each a pod set on its own flavor, pinned where the simulation put its pool
    replicated = [{"name": "run", "replicas": 1, "template": {"spec": _pods(lay, workload, job, seg, seg, name, length)}}]
    if seg.get("companion"):
        replicated[0]["name"] = "train"
        replicated.append({"name": "generate", "replicas": 1, "template": {
            "spec": _pods(lay, workload, job, seg, seg["companion"], name, length)}})
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
              "spec": {"replicatedJobs": replicated}}
    return ([extra] if extra else []) + [jobset]


def _pods(lay: Layout, workload, job: dict, seg: dict, part: dict, name: str, length: int) -> dict:
    """The Job spec of one pool of a run: a pod per node it held, pinned there, sleeping the run out."""
    group = lay.group(part["partition"])
    nodes = nodes_of(group, workload, job["name"], part)
    per_pod = math.ceil(part["gpus"] / len(nodes))
    resource = {gpu_resource(group): per_pod}
    pod = {"metadata": {"annotations": {"gclc.io/simulated-rule": seg["rule"]}},
           "spec": {"restartPolicy": "Never", "nodeSelector": {PARTITION_LABEL: group.slug},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": HOSTNAME, "operator": "In", "values": list(nodes)}]}]}},
                        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": name}},
                             "topologyKey": HOSTNAME}]}},
                    "containers": [{"name": "run", "image": IMAGE, "command": ["sleep", str(length)],
                                    "resources": {"requests": dict(resource), "limits": dict(resource)}}]}}
    return {"parallelism": len(nodes), "completions": len(nodes), "completionMode": "Indexed",
            "backoffLimit": 0, "template": pod}


def _submit(files: list[tuple[str, float]], source: str) -> str:
    """Apply the cluster's objects, then each run when the simulation submitted it."""
    lines = ["#!/bin/bash", header(source, "apply the cluster's objects, then every run when the simulation "
                                           "submitted it"),
             "set -euo pipefail", 'cd "$(dirname "$0")"',
             "kubectl apply -f nodes.yaml -f kueue.yaml", "start=$(date +%s)",
             "# apply FILE once SECONDS have passed since the start",
             'at() { local wait=$(( $1 - ($(date +%s) - start) )); if (( wait > 0 )); then sleep "$wait"; fi; '
             'kubectl apply -f "$2"; }']
    for file, begin in files:
        lines.append(f"at {math.ceil(begin)} {file}")
    return "\n".join(lines) + "\n"
