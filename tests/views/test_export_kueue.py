"""Kueue's queues from the design's tenants and its `scheduler kueue` block: a ClusterQueue
per tenant (quota per flavor = partition, cohort, borrowing and lending limits, preemption,
queueing strategy, fair-sharing weight), LocalQueues, the manager's waitForPodsReady and fair
sharing, TAS required where the policy says, each object valid under its CRD schema and every
CEL rule of it (cel-python); what Kueue would refuse is refused with the reason."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from gclc.compiler.driver import check_text
from gclc.views.export import ExportError, export

from .kube_cel import cel_problems

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "examples" / "shared_cluster.gcl"
DATA = ROOT / "tests" / "data" / "exports"
TENANTS = """
tenant research {
  on     = Shared
  shares = 3
  cohort = "lab"
  quota { h100 = 192  a100 = 128 }
  borrowing_limit { h100 = 64 }
}

tenant production {
  on     = Shared
  shares = 1
  cohort = "lab"
  quota { h100 = 64  a100 = 128 }
  lending_limit { a100 = 64 }
}
"""
KUEUE = """
scheduler kueue {
  on                    = Shared
  queueing              = strict_fifo
  within_cluster_queue  = lower_priority
  reclaim_within_cohort = any
  borrow_within_cohort  = lower_priority
  fair_sharing          = true
  wait_for_pods_ready   = 10 min
  topology              = required
}
"""


def bare() -> str:
    """The shared example without its own tenants and `scheduler kueue` block (its jobs keep
    naming `production` and `research`)."""
    return re.sub(r"\n(tenant \w+|scheduler kueue) \{.*?\n\}\n", "\n", SHARED.read_text(), flags=re.S)


def design(extra: str = TENANTS + KUEUE):
    result = check_text(bare() + extra, str(SHARED))
    assert result.design is not None, result.diagnostics
    return result.design


@functools.cache
def schemas() -> dict:
    load = lambda name, version: json.loads((DATA / name).read_text())["versions"][version]  # noqa: E731
    return {"Topology": load("kueue_topologies.crd.json", "v1beta2"),
            "ResourceFlavor": load("kueue_resourceflavors.crd.json", "v1beta2"),
            "ClusterQueue": load("kueue_clusterqueues.crd.json", "v1beta2"),
            "LocalQueue": load("kueue_localqueues.crd.json", "v1beta2"),
            "WorkloadPriorityClass": load("kueue_workloadpriorityclasses.crd.json", "v1beta2"),
            "JobSet": load("jobset_jobsets.crd.json", "v1alpha2")}


@functools.cache
def exported(job: str = "finetune_8b") -> dict[str, list[dict]]:
    files = export("kubernetes", design(), job, None, "shared.gcl")
    return {name: [d for d in yaml.safe_load_all(text) if d] for name, text in files.items()}


def _valid(document: dict) -> None:
    schema = schemas()[document["kind"]]
    jsonschema.Draft7Validator(schema).validate(document)
    assert cel_problems(schema, document) == [], document["metadata"]


def test_a_cluster_queue_per_tenant_with_its_quota_cohort_limits_and_the_policy():
    documents = exported()
    kueue = documents["kueue.yaml"]
    for document in kueue + documents["jobset.yaml"]:
        _valid(document)
    queues = {d["metadata"]["name"]: d["spec"] for d in kueue if d["kind"] == "ClusterQueue"}
    assert set(queues) == {"research", "production"}
    flavors = {d["spec"]["nodeLabels"]["gclc.io/partition"]: d["metadata"]["name"]
               for d in kueue if d["kind"] == "ResourceFlavor"}
    for name, quota, shares in (("research", {"h100": 192, "a100": 128}, 3), ("production", {"h100": 64, "a100": 128}, 1)):
        spec = queues[name]
        assert spec["cohortName"] == "lab" and spec["fairSharing"] == {"weight": shares}
        assert spec["queueingStrategy"] == "StrictFIFO"
        assert spec["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                      "borrowWithinCohort": {"policy": "LowerPriority"}}
        resources = {f["name"]: f["resources"][0] for g in spec["resourceGroups"] for f in g["flavors"]}
        assert {p: resources[flavors[p]]["nominalQuota"] for p in quota} == quota
    research = {f["name"]: f["resources"][0] for g in queues["research"]["resourceGroups"] for f in g["flavors"]}
    product = {f["name"]: f["resources"][0] for g in queues["production"]["resourceGroups"] for f in g["flavors"]}
    assert research[flavors["h100"]]["borrowingLimit"] == 64 and "borrowingLimit" not in research[flavors["a100"]]
    assert product[flavors["a100"]]["lendingLimit"] == 64 and "lendingLimit" not in product[flavors["h100"]]
    local = {d["metadata"]["name"]: d["spec"]["clusterQueue"] for d in kueue if d["kind"] == "LocalQueue"}
    assert local == {"research": "research", "production": "production"}

    jobset = next(d for d in documents["jobset.yaml"] if d["kind"] == "JobSet")
    labels = jobset["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "production" and labels["kueue.x-k8s.io/priority-class"] == "critical"
    for replicated in jobset["spec"]["replicatedJobs"]:
        annotations = replicated["template"]["spec"]["template"]["metadata"]["annotations"]
        assert "kueue.x-k8s.io/podset-required-topology" in annotations
        assert "kueue.x-k8s.io/podset-preferred-topology" not in annotations


def test_the_manager_waits_for_pods_and_shares_fairly_as_the_design_says():
    config = exported()["kueue-config.yaml"][0]
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and config["kind"] == "Configuration"
    assert config["waitForPodsReady"] == {"timeout": "10m0s", "blockAdmission": True}
    assert "preemptionStrategies" in config["fairSharing"]
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]
    plain = export("kubernetes", design(TENANTS), "finetune_8b", None, "shared.gcl")   # Kueue's defaults
    config = yaml.safe_load(plain["kueue-config.yaml"].split("\n", 2)[2])
    assert "waitForPodsReady" not in config and "fairSharing" not in config


def test_the_jobset_runs_as_long_as_slurm_is_asked_for():
    """One answer: Kueue ends the workload at the time limit the Slurm export asks for."""
    from gclc.views.export.slurm import slurm_time

    jobset = next(d for d in exported("ablation_b")["jobset.yaml"] if d["kind"] == "JobSet")
    seconds = int(jobset["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"])
    script = export("slurm", design(), "ablation_b", None, "shared.gcl")["job.sbatch"]
    assert f"#SBATCH --time={slurm_time(seconds)}\n" in script and seconds % 3600 == 0


def test_without_tenants_one_queue_holds_the_cluster():
    untenanted = re.sub(r"\n  tenant +=[^\n]*", "", bare())
    files = export("kubernetes", check_text(untenanted, str(SHARED)).design, "pretrain_70b", None, "shared.gcl")
    kueue = [d for d in yaml.safe_load_all(files["kueue.yaml"]) if d]
    queues = [d for d in kueue if d["kind"] == "ClusterQueue"]
    assert len(queues) == 1 and "cohortName" not in queues[0]["spec"]
    quotas = sorted(f["resources"][0]["nominalQuota"] for g in queues[0]["spec"]["resourceGroups"] for f in g["flavors"])
    assert quotas == [256, 256]
    for document in kueue:
        _valid(document)


@pytest.mark.parametrize("extra, refusal", [
    (TENANTS.replace('  cohort = "lab"\n  quota { h100 = 192', '  quota { h100 = 192'),
     "tenant `research` states a borrowing_limit but no cohort"),
    (TENANTS + KUEUE.replace("reclaim_within_cohort = any", "reclaim_within_cohort = never"),
     "never reclaims"),
])
def test_what_kueue_refuses_is_refused_with_the_reason(extra, refusal):
    """Negative controls: the export refuses, and the object it would have written breaks the
    same CEL rule of the ClusterQueue CRD."""
    with pytest.raises(ExportError, match=refusal):
        export("kubernetes", design(extra), "finetune_8b", None, "shared.gcl")
    queue = {"spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1, "borrowingLimit": 1}]}]}]}}
    if "never reclaims" in refusal:
        queue = {"spec": {"cohortName": "lab", "preemption": {"reclaimWithinCohort": "Never",
                                                              "borrowWithinCohort": {"policy": "LowerPriority"}}}}
    assert len(cel_problems(schemas()["ClusterQueue"], queue)) == 1
