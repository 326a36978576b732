"""Exports of a disaggregated serve plan: its prefill and decode pools as a JobSet of two
replicated jobs (checked against the JobSet CRD schema and Kubernetes' Job schema) and as
a Slurm heterogeneous job of two components (submitted, held, to Debian's real slurmctld
and read back with scontrol)."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower
from gclc.views.export import kubernetes, slurm
from gclc.views.export.jobs import job_entity, job_plan
from gclc.views.export.layout import layout

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the real consumers' harnesses, shared
from test_export_kubernetes import K8S_VERSION, _crd_validate, api_server_problems, schemas  # noqa: F401 (fixture)
from test_export_slurm import _records, slurmctld  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ["nodes=4", "demand=2"]   # 32 H100: two pools of 16-GPU DeepSeek-V3 replicas


@functools.cache
def _design(directory: str):
    text = (ROOT / "examples" / "deepseek_v3_serve.gcl").read_text()
    assert "kv_precision = fp8" in text
    path = Path(directory) / "disaggregated.gcl"
    path.write_text(text.replace("kv_precision = fp8", "kv_precision = fp8\n    mode = disaggregated"))
    result = check_file(str(path), SETTINGS)
    assert result.design is not None, result.diagnostics
    return result.design


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    design = _design(str(tmp_path_factory.mktemp("serve")))
    return design, layout(lower(design), design), job_plan(job_entity(design, None))


def test_the_plan_exports_a_prefill_and_a_decode_pool(served):
    _, nodes, job = served
    assert job.serve and [s.role for s in job.shares] == ["prefill", "decode"]
    for share in job.shares:
        assert share.gpus == share.items * share.together and share.together >= 16  # 671 GB fp8 > one node
    assert sum(s.gpus for s in job.shares) <= nodes.groups[0].partition.gpus


def test_the_jobset_has_two_replicated_jobs_that_pass_their_schemas(served, schemas):
    _, nodes, job = served
    files = kubernetes.export(nodes, job, "disaggregated")
    (jobset,) = [d for d in yaml.safe_load_all(files["jobset.yaml"]) if d]
    _crd_validate(schemas["JobSet"], jobset)
    assert api_server_problems(jobset["metadata"]) == []
    replicated = jobset["spec"]["replicatedJobs"]
    assert [r["name"] for r in replicated] == ["prefill", "decode"]
    for entry, share in zip(replicated, job.shares):
        spec = entry["template"]["spec"]
        kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": entry["name"]},
                                      "spec": spec}, K8S_VERSION, strict=True)
        (container,) = spec["template"]["spec"]["containers"]
        gpus = container["resources"]["limits"]["nvidia.com/gpu"]
        assert entry["replicas"] == share.items and spec["parallelism"] * gpus == share.together
        assert {"name": "GCLC_SERVE_ROLE", "value": share.role} in container["env"]


def test_slurmctld_takes_the_heterogeneous_job(served, slurmctld, tmp_path):
    design, nodes, job = served
    files = slurm.export(nodes, design, job, "disaggregated")
    daemon = slurmctld(files, [n for group in nodes.groups for n in group.nodes])
    script = tmp_path / "job.sbatch"
    script.write_text(files["job.sbatch"])
    done = subprocess.run(["sbatch", "--hold", str(script), "serve"], env=daemon.env, capture_output=True, text=True,
                          timeout=30, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    components = sorted(_records(daemon.scontrol("show", "job")), key=lambda r: int(r["HetJobOffset"]))
    assert [int(c["HetJobOffset"]) for c in components] == [0, 1]
    for component, share in zip(components, job.shares):
        per_node = nodes.groups[0].gpus_per_node
        assert component["NumNodes"] == f"{share.gpus // per_node}-{share.gpus // per_node}"
        assert component["TresPerNode"] == f"gres:gpu:{slurm.gres_type(nodes.groups[0])}:{per_node}"
    for index, share in enumerate(job.shares):
        assert re.search(rf"^GCLC_SERVE_ROLE={share.role} srun --het-group={index} ", files["job.sbatch"], re.M)


def test_a_replica_over_part_of_a_node_is_refused_and_whole_nodes_are_counted():
    """The engines put an equal share of a replica on each of its nodes (vLLM: --nnodes must
    divide the replica's world; SGLang: tp x pp a multiple of nnodes): 12 GPUs on 8-GPU nodes
    cannot be laid out as the plan places them."""
    from gclc.views.export.replica_nodes import nodes_per_replica
    from gclc.views.export.target import ExportError

    assert (nodes_per_replica(4, 8, "serving"), nodes_per_replica(8, 8, "serving"),
            nodes_per_replica(32, 8, "decode")) == (1, 1, 4)
    with pytest.raises(ExportError, match="takes 12 GPUs on nodes of 8"):
        nodes_per_replica(12, 8, "prefill")
