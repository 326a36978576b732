"""`gclc export --to kubernetes`, checked against published schemas and their CEL rules.

- Node and the JobSet's Job template: kubernetes-validate (Kubernetes' own OpenAPI
  schemas, strict: no unknown fields).
- Kueue Topology, ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass (v1beta2),
  JobSet (v1alpha2): the openAPIV3Schema of their CRDs, shipped in tests/data/exports/
  (descriptions stripped; NOTICE.md and LICENSE.Apache-2.0 there) from kubernetes-sigs/kueue
  config/components/crd/bases/ at ff69552e79ad21652c36caa97038382e55625cf7 and
  kubernetes-sigs/jobset config/components/crd/bases/ at 08dfbdfd682714a9ab929633eca8dc95315187e7.
- Every x-kubernetes-validations (CEL) rule of those CRDs, evaluated by cel-python
  (tests/views/kube_cel.py names its one stub, the API server's defaulting).
- A round trip: the tiers read back from the Topology and the node labels are the IR's.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections import Counter

import jsonschema
import kubernetes_validate
import pytest
import yaml

from gclc.views.export import kubernetes

try:
    from .kube_cel import cel_problems
except ImportError:   # imported by path, as test_export_serve.py shares this module's fixtures
    from kube_cel import cel_problems

K8S_VERSION = "1.33"


@pytest.fixture(scope="module")
def schemas():
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data" / "exports"
    load = lambda name, version: json.loads((data / name).read_text())["versions"][version]  # noqa: E731
    return {"Topology": load("kueue_topologies.crd.json", "v1beta2"),
            "ResourceFlavor": load("kueue_resourceflavors.crd.json", "v1beta2"),
            "ClusterQueue": load("kueue_clusterqueues.crd.json", "v1beta2"),
            "LocalQueue": load("kueue_localqueues.crd.json", "v1beta2"),
            "JobSet": load("jobset_jobsets.crd.json", "v1alpha2"),
            # kueue config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml at the same commit
            "WorkloadPriorityClass": load("kueue_workloadpriorityclasses.crd.json", "v1beta2")}


def _crd_validate(schema: dict, document: dict) -> None:
    jsonschema.Draft7Validator(schema).validate(document)  # OpenAPI v3 schemas are draft-4/7 JSON Schema


# The API server's checks of names and labels (k8s.io/apimachinery/pkg/util/validation):
# a node name is a DNS-1123 subdomain; a label key an optional DNS subdomain prefix and a
# qualified name of at most 63 characters; a label value at most 63 characters.
DNS1123_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^((?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def api_server_problems(metadata: dict) -> list[str]:
    problems = [] if DNS1123_SUBDOMAIN.match(metadata["name"]) else [f"name {metadata['name']!r}"]
    for key, value in metadata.get("labels", {}).items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or not QUALIFIED_NAME.match(name):
            problems.append(f"label key {key!r}")
        if not LABEL_VALUE.match(value):
            problems.append(f"label value {value!r}")
    return problems


def test_the_api_server_checks_reject_bad_names():
    assert api_server_problems({"name": "dgx-h100-001", "labels": {"topology.gclc.io/leaf": "leaf-01"}}) == []
    assert len(api_server_problems({"name": "DGX_1", "labels": {"a/b/c": "x" * 64}})) == 3


def test_the_cel_rules_reject_what_kueue_and_jobset_reject(schemas):
    """Negative controls for the CEL evaluation: each object breaks one rule of its CRD."""
    host, rack = {"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "topology.gclc.io/rack"}
    topology = lambda levels: {"spec": {"levels": levels}}  # noqa: E731
    assert cel_problems(schemas["Topology"], topology([rack, host])) == []
    assert cel_problems(schemas["Topology"], topology([rack, rack, host])) == [".spec.levels: must be unique"]
    assert cel_problems(schemas["Topology"], topology([host, rack])) == [
        ".spec.levels: the kubernetes.io/hostname label can only be used at the lowest level of topology"]
    gpu = {"name": "nvidia.com/gpu", "nominalQuota": 8}
    queue = {"spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                          "flavors": [{"name": "f", "resources": [gpu]}]}]}}
    assert cel_problems(schemas["ClusterQueue"], queue) == []
    queue["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    assert cel_problems(schemas["ClusterQueue"], queue) == [
        ".spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"]
    queue["spec"]["resourceGroups"][0]["coveredResources"].pop()
    gpu["borrowingLimit"] = 4
    queue["spec"]["preemption"] = {"borrowWithinCohort": {"policy": "LowerPriority"}}   # reclaim defaults to Never
    assert cel_problems(schemas["ClusterQueue"], queue) == [
        ".spec: borrowingLimit must be nil when cohort is empty",
        ".spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"]
    jobs = {"spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"},
                     "replicatedJobs": [{"name": "a", "template": {}}, {"name": "b", "template": {},
                                                                      "dependsOn": [{"name": "a", "status": "Ready"}]}]}}
    assert len(cel_problems(schemas["JobSet"], jobs)) == 1


def _documents(example) -> dict[str, list[dict]]:
    """The exported files, read back by a YAML parser (a fresh copy each call)."""
    return copy.deepcopy(_parsed(example))


@functools.cache
def _parsed(example) -> dict[str, list[dict]]:
    files = kubernetes.export(example.layout, example.job, example.name)
    return {name: [d for d in yaml.safe_load_all(text) if d is not None] for name, text in files.items()}


def test_every_object_passes_its_published_schema(example, schemas):
    documents = _documents(example)
    for document in documents["kueue.yaml"]:
        _crd_validate(schemas[document["kind"]], document)
        assert cel_problems(schemas[document["kind"]], document) == []
    nodes = documents["nodes.yaml"]
    for node in nodes[:: max(1, len(nodes) // 3)]:  # the objects differ only in names and label values,
        kubernetes_validate.validate(node, K8S_VERSION, strict=True)  # which the API server checks:
    for node in nodes:
        assert api_server_problems(node["metadata"]) == []
    for jobset in documents.get("jobset.yaml", []):
        _crd_validate(schemas[jobset["kind"]], jobset)
        assert cel_problems(schemas[jobset["kind"]], jobset) == []
        if jobset["kind"] != "JobSet":
            continue
        classes = {d["metadata"]["name"] for d in documents["kueue.yaml"] + documents["jobset.yaml"]
                   if d["kind"] == "WorkloadPriorityClass"}
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] in classes
        for replicated in jobset["spec"]["replicatedJobs"]:
            job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": replicated["name"]},
                   "spec": replicated["template"]["spec"]}
            kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_a_broken_object_fails_the_schema(schemas, named):
    """The checks above can fail: a level without its node label, a pod without containers."""
    documents = _documents(named("dgx_h100_superpod"))
    topology = documents["kueue.yaml"][0]
    topology["spec"]["levels"].append({"label": "rack"})
    with pytest.raises(jsonschema.ValidationError):
        _crd_validate(schemas["Topology"], topology)
    job = documents["jobset.yaml"][0]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
                                      "spec": job}, K8S_VERSION, strict=True)


def test_the_tiers_read_back_from_kueue_are_the_irs(example, ir_levels):
    documents = _documents(example)
    topologies = {d["metadata"]["name"]: d for d in documents["kueue.yaml"] if d["kind"] == "Topology"}
    flavors = [d for d in documents["kueue.yaml"] if d["kind"] == "ResourceFlavor"]
    queue = next(d for d in documents["kueue.yaml"] if d["kind"] == "ClusterQueue")
    quotas = {f["name"]: f["resources"][0]["nominalQuota"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}
    assert [quotas[f["metadata"]["name"]] for f in flavors] == [p.gpus for p in example.graph.partitions]
    nodes = documents["nodes.yaml"]
    assert len(flavors) == len(example.graph.partitions)
    for flavor, partition in zip(flavors, example.graph.partitions):
        selected = [n for n in nodes if all(n["metadata"]["labels"].get(k) == v
                                            for k, v in flavor["spec"]["nodeLabels"].items())]
        assert len(selected) == partition.nodes
        levels = [lv["nodeLabel"] for lv in topologies[flavor["spec"]["topologyName"]]["spec"]["levels"]]
        assert levels[-1] == "kubernetes.io/hostname"
        sizes = []
        for label in reversed(levels[:-1]):  # innermost first
            domains = Counter(n["metadata"]["labels"][label] for n in selected)
            sizes.append(max(domains.values()))
        assert sizes == ir_levels(partition)


def test_the_jobset_places_what_the_plan_keeps_together(example):
    if example.job is None:
        pytest.skip(f"{example.name} has no train job")
    documents = _documents(example)
    levels = {d["metadata"]["name"]: [lv["nodeLabel"] for lv in d["spec"]["levels"]]
              for d in documents["kueue.yaml"] if d["kind"] == "Topology"}
    known = {label for labels in levels.values() for label in labels}
    jobset = documents["jobset.yaml"][0]
    local = next(d for d in documents["kueue.yaml"] if d["kind"] == "LocalQueue")
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local["metadata"]["name"]
    assert jobset["metadata"]["namespace"] == local["metadata"]["namespace"]
    for replicated, share in zip(jobset["spec"]["replicatedJobs"], example.job.shares):
        group = example.layout.group(share.partition)
        spec = replicated["template"]["spec"]
        per_pod = next(iter(spec["template"]["spec"]["containers"][0]["resources"]["limits"].values()))
        assert replicated["replicas"] * spec["parallelism"] * per_pod == share.gpus
        assert per_pod == group.gpus_per_node or (example.job.serve and per_pod == share.together)
        annotations = spec["template"]["metadata"]["annotations"]
        assert annotations["kueue.x-k8s.io/podset-preferred-topology"] in known
        required = annotations.get("kueue.x-k8s.io/podset-slice-required-topology")
        pods_together = math.ceil(share.together / per_pod)
        if pods_together > 1:  # TP/EP groups wider than a node stay inside the tier the plan put them in
            size = int(annotations["kueue.x-k8s.io/podset-slice-size"])
            assert size == pods_together and spec["parallelism"] * replicated["replicas"] % size == 0
            level = next(lv for lv in group.levels if kubernetes.level_label(lv) == required)
            assert level.tier.name == share.together_tier and level.nodes_per_domain >= size
        else:
            assert required is None


def test_the_slice_tier_is_the_tier_the_plan_places_the_group_in():
    """Regression: at 64 NVL72 racks the plan keeps each 64-GPU expert group in one NVLink
    domain (NVL72 used in segments of 64), and the export must require that domain, not
    the campus spine (it placed the group in the raw 72-GPU domains, not the model's)."""
    import contextlib
    import io
    from pathlib import Path

    from gclc.cli.main import main

    example = Path(__file__).resolve().parents[2] / "tests" / "data" / "gb200_moe.gcl"   # DeepSeek-V3, ep 64 per rack

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["plan", str(example), "--set", "racks=64", "--json"]) == 0
    ep = json.loads(out.getvalue())["placement"]["ep"]
    assert ep["size"] == 64 and ep["tiers"] == ["NVLink5 (supernode)"]   # the plan: one NVLink domain
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["export", str(example), "--set", "racks=64", "--to", "kubernetes", "-o", "-"]) == 0
    assert "podset-slice-required-topology: topology.gclc.io/nvlink-domain" in out.getvalue()


def test_a_train_jobset_restarts_as_often_as_its_run_expects_to_fail(named, schemas):
    """The goodput model restarts a failed job from its checkpoint: the JobSet restarts as a
    whole up to Run.restarts times (Poisson's 99.9 % bound on the failures over its time)."""
    example = named("dgx_h100_superpod")
    jobset = next(d for d in _documents(example)["jobset.yaml"] if d["kind"] == "JobSet")
    run = example.job.run
    assert run.restarts >= 1 and jobset["spec"]["failurePolicy"] == {"maxRestarts": run.restarts}
    expected = run.time_limit / run.mtbf
    assert expected < run.restarts <= expected + 3 * expected ** 0.5 + 1
    jobset["spec"]["failurePolicy"]["maxRestarts"] = "many"
    with pytest.raises(jsonschema.ValidationError):   # negative control: the CRD types it
        _crd_validate(schemas["JobSet"], jobset)
    wpc = kubernetes.priority_classes()[0]
    del wpc["value"]
    with pytest.raises(jsonschema.ValidationError):
        _crd_validate(schemas["WorkloadPriorityClass"], wpc)
