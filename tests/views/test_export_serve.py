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
from gclc.compiler.hostlist import compress
from gclc.compiler.lower import lower
from gclc.views.export import kubernetes, slurm
from gclc.views.export.jobs import job_entity, job_plan
from gclc.views.export.layout import layout

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the real consumers' harnesses, shared
from test_export_kubernetes import K8S_VERSION, _crd_validate, api_server_problems, schemas  # noqa: F401 (fixture)
from test_export_slurm import _records, slurmctld  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ["nodes=4", "demand=2"]   # 32 H100: two pools of 16-GPU DeepSeek-V3 replicas


def _example_with(directory: str, name: str, old: str, new: str):
    """The DeepSeek-V3 serve example with `old` replaced by `new`, checked at SETTINGS."""
    text = (ROOT / "examples" / "deepseek_v3_serve.gcl").read_text()
    assert old in text
    path = Path(directory) / f"{name}.gcl"
    path.write_text(text.replace(old, new))
    result = check_file(str(path), SETTINGS)
    assert result.design is not None, result.diagnostics
    return result.design


@functools.cache
def _design(directory: str):
    return _example_with(directory, "disaggregated", "kv_precision = fp8", "kv_precision = fp8\n    mode = disaggregated")


def _planned(design):
    """The design, its layout and its serve plan."""
    return design, layout(lower(design), design), job_plan(job_entity(design, None))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return _planned(_design(str(tmp_path_factory.mktemp("serve"))))


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


@functools.cache
def _vllm_planned(directory: str):
    """The example planned for vLLM (aggregated): one replica of 16 GPUs over two 8-GPU nodes."""
    return _example_with(directory, "aggregated", "profile      = sglang", "profile      = vllm_v1")


@pytest.fixture(scope="module")
def vllm_served(tmp_path_factory):
    return _planned(_vllm_planned(str(tmp_path_factory.mktemp("vllm_serve"))))


def _vllm_stub(tmp_path: Path, design):
    """The design's vllm.args written to `tmp_path`, and a STUB `vllm` (in tmp_path/bin) that
    prints its words NUL-separated: what a node's launch would start the engine with."""
    from gclc.views.export import export
    from .test_export_vllm import bash_array

    (tmp_path / "vllm.args").write_text(export("vllm", design, source="aggregated.gcl")["vllm.args"])
    stub = tmp_path / "bin" / "vllm"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nprintf "%s\\0" "$@"\n')
    stub.chmod(0o755)
    return stub, bash_array(tmp_path / "vllm.args", "VLLM_SERVING_ARGS")


def _node_launch(script: str) -> str:
    """The `bash -c` body of the script's srun line (one task per node)."""
    import shlex

    (line,) = [l for l in script.splitlines() if l.startswith("srun ")]
    words = shlex.split(line)
    assert words[:3] == ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"] and words[3:5] == ["bash", "-c"]
    return words[5]


def test_a_replica_over_two_nodes_runs_one_task_per_node_with_its_rank_and_head(tmp_path, slurmctld, vllm_served):
    """The vLLM plan's 16-GPU replica on 8-GPU nodes: slurmctld places the script (sbatch
    --test-only) as two nodes of one task each; each task, run with the variables Slurm gives a
    step's task (SLURM_NODEID, SLURM_STEP_NODELIST; the host list expanded by the real scontrol),
    calls the exported vllm.args' node function with its rank in the replica and the replica's
    first node, and starts `vllm serve` with the pool's flags and the node's (`vllm` is a named
    stub on PATH that prints its words; test_export_vllm.py hands the same words to vLLM). On four
    nodes (two replicas' worth) the third node is rank 0 of its own replica, its own head. The
    controls: slurmctld refuses the script asking 9 GPUs of 8-GPU nodes, and a task without
    Slurm's variables stops before it starts the engine."""
    design, nodes, job = vllm_served
    files = slurm.export(nodes, design, job, "aggregated")
    script = files["job.sbatch"]
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    hosts = [n for group in nodes.groups for n in group.nodes]
    daemon = slurmctld(files, hosts)
    placed = daemon.sbatch_test_only(script)
    assert placed.returncode == 0 and f"on nodes {compress(hosts[:2])}" in placed.stderr, placed.stderr
    held = subprocess.run(["sbatch", "--hold", str(daemon.directory / "job.sbatch")], env=daemon.env,
                          capture_output=True, text=True, timeout=30)
    assert held.returncode == 0, held.stderr
    (job,) = _records(daemon.scontrol("show", "job"))
    assert (job["NumNodes"], job["NumTasks"]) == ("2-2", "2")    # one task per node
    refused = daemon.sbatch_test_only(script.replace(":8\n", ":9\n", 1))
    assert refused.returncode != 0 and "Requested node configuration is not available" in refused.stderr, refused.stderr
    stub, pool = _vllm_stub(tmp_path, design)
    env = dict(daemon.env, PATH=f"{stub.parent}:{daemon.env['PATH']}", GCLC_ARGS_DIR=str(tmp_path),
               CHECKPOINT="/models/DeepSeek-V3", SLURM_STEP_NODELIST=compress(hosts[:4]))
    body = _node_launch(script)
    for node, (rank, head) in enumerate([(0, 0), (1, 0), (0, 2), (1, 2)]):
        run = subprocess.run(["bash", "-c", body, "serve"], env=dict(env, SLURM_NODEID=str(node)), capture_output=True,
                             text=True, timeout=30)
        assert run.returncode == 0, run.stderr
        words = run.stdout.split("\0")[:-1]
        flags = ["--nnodes", "2", "--node-rank", str(rank), "--master-addr", hosts[head], "--master-port", "29501"]
        assert words == ["serve", "/models/DeepSeek-V3", *pool, *flags, *(["--headless"] if rank else [])], node
    unset = subprocess.run(["bash", "-c", body, "serve"], env=env, capture_output=True, text=True, timeout=30)
    assert unset.returncode != 0 and "SLURM_NODEID: unbound variable" in unset.stderr and not unset.stdout


def test_a_replica_over_two_nodes_gets_a_pod_per_node_with_its_rank_and_head(tmp_path, schemas, vllm_served):
    """The vLLM plan's 16-GPU replica as a JobSet: its Job has a pod per node (Indexed), valid
    by JobSet's CRD schema and CEL rules and Kubernetes' Job schema; a pod's NODE_RANK is its
    completion index, HEAD_ADDR the DNS name JobSet gives the Job's pod 0 (DNS hostnames on, the
    JobSet's subdomain); the container, run with what the API server would set (the index, and
    `$(GCLC_JOB_INDEX)` expanded for Job 0), calls the exported vllm.args' node function and starts
    `vllm serve` with the pool's flags and the node's (`vllm` a named stub printing its words).
    The controls: the CRD schema refuses DNS hostnames as a string, and a pod without its rank
    stops before it starts the engine."""
    from kube_cel import cel_problems

    design, nodes, job = vllm_served
    files = kubernetes.export(nodes, job, "aggregated")
    (jobset,) = [d for d in yaml.safe_load_all(files["jobset.yaml"]) if d]
    _crd_validate(schemas["JobSet"], jobset)
    assert cel_problems(schemas["JobSet"], jobset) == [] and api_server_problems(jobset["metadata"]) == []
    name, (replicated,) = jobset["metadata"]["name"], jobset["spec"]["replicatedJobs"]
    spec = replicated["template"]["spec"]
    kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": replicated["name"]},
                                  "spec": spec}, K8S_VERSION, strict=True)
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (2, 2, "Indexed")
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": name}
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    head = env["HEAD_ADDR"]["value"].replace("$(GCLC_JOB_INDEX)", "0")   # Job 0's pod 0
    assert head == f"{name}-{replicated['name']}-0-0.{name}" and api_server_problems({"name": head}) == []
    stub, pool = _vllm_stub(tmp_path, design)
    pod = dict(PATH=f"{stub.parent}:/usr/bin:/bin", GCLC_ARGS_DIR=str(tmp_path), CHECKPOINT="/models/DeepSeek-V3",
               HEAD_ADDR=head)
    for rank in (0, 1):
        run = subprocess.run(container["command"], env=dict(pod, NODE_RANK=str(rank)), capture_output=True, text=True,
                             timeout=30)
        assert run.returncode == 0, run.stderr
        flags = ["--nnodes", "2", "--node-rank", str(rank), "--master-addr", head, "--master-port", "29501"]
        assert run.stdout.split("\0")[:-1] == ["serve", "/models/DeepSeek-V3", *pool, *flags, *(["--headless"] * rank)]
    unranked = subprocess.run(container["command"], env=pod, capture_output=True, text=True, timeout=30)
    assert unranked.returncode != 0 and "NODE_RANK: unbound variable" in unranked.stderr and not unranked.stdout
    jobset["spec"]["network"]["enableDNSHostnames"] = "yes"
    with pytest.raises(Exception, match="'yes' is not of type 'boolean'"):
        _crd_validate(schemas["JobSet"], jobset)
