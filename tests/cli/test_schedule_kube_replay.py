"""`gclc schedule --export kubernetes DIR`: every object valid under its CRD's schema and
CEL rules (the real JobSet and Kueue CRDs, cel-python), each run pinned to the nodes it held
in the simulation, in its tenant's queue with its priority's class and time limit, applied in
the order the simulation started the runs; and no two runs ever hold one node at once (the
replay is feasible as written). A negative control: the JobSet CRD refuses a broken run."""

import contextlib
import copy
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from gclc.cli.main import main
from tests.views.kube_cel import cel_problems
from tests.views.test_export_kueue import schemas

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "examples" / "shared_cluster.gcl"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("kube") / "replay"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["schedule", str(SHARED), "--policy", "kueue", "--json", "--epochs", "0", "--export", "kubernetes",
                     str(out)]) == 0
    data = json.loads(buffer.getvalue())
    objects = {str(p.relative_to(out)): [d for d in yaml.safe_load_all(p.read_text()) if d]
               for p in sorted(out.rglob("*.yaml"))}
    return data, objects, (out / "submit.sh").read_text()


def _valid(document: dict) -> None:
    schema = schemas()[document["kind"]]
    jsonschema.Draft7Validator(schema).validate(document)
    assert cel_problems(schema, document) == [], document["metadata"]


def _pod(jobset: dict) -> dict:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _runs(data: dict) -> list[tuple[float, str, int, dict, dict]]:
    return sorted(((s["start_s"], j["name"], i, s, j) for j in data["jobs"] for i, s in enumerate(j["segments"])),
                  key=lambda r: r[:3])


def test_every_object_is_valid_under_its_crd_and_every_run_is_replayed(exported):
    data, objects, _ = exported
    jobs = {name: docs for name, docs in objects.items() if name.startswith("jobs/")}
    for document in objects["kueue.yaml"] + [d for docs in jobs.values() for d in docs]:
        if document["kind"] in schemas():
            _valid(document)
    assert len(jobs) == len(_runs(data)) > 5


def test_each_run_is_pinned_to_nodes_of_its_partition_with_its_queue_priority_and_limit(exported):
    data, objects, _ = exported
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in objects["nodes.yaml"]}
    queues = {d["metadata"]["name"] for d in objects["kueue.yaml"] if d["kind"] == "LocalQueue"}
    classes = {d["metadata"]["name"] for d in objects["kueue.yaml"] if d["kind"] == "WorkloadPriorityClass"}
    files = sorted(name for name in objects if name.startswith("jobs/"))
    for file, (_, name, index, seg, job) in zip(files, _runs(data)):
        jobset = next(d for d in objects[file] if d["kind"] == "JobSet")
        assert re.sub(r"^jobs/\d+-", "", file).startswith(re.sub(r"[^a-z0-9]+", "-", name.lower()))
        labels = jobset["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/queue-name"] in queues
        assert labels["kueue.x-k8s.io/priority-class"] in classes
        assert labels["kueue.x-k8s.io/priority-class"] == job["priority_label"]
        if job["time_limit_s"]:
            assert int(labels["kueue.x-k8s.io/max-exec-time-seconds"]) >= job["time_limit_s"]
        pod = _pod(jobset)
        term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        pinned = term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        assert all(nodes[n]["gclc.io/partition"] == pod["nodeSelector"]["gclc.io/partition"] for n in pinned)
        spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert spec["parallelism"] == len(pinned)
        per_pod = next(iter(pod["containers"][0]["resources"]["limits"].values()))
        assert per_pod * len(pinned) >= seg["gpus"] > per_pod * (len(pinned) - 1)
        assert pod["containers"][0]["command"] == ["sleep", str(max(0, -int(-(seg["end_s"] - seg["start_s"]) // 1)))]


def test_no_node_is_held_by_two_runs_at_once(exported):
    data, objects, _ = exported
    held: dict[str, list[tuple[float, float]]] = {}
    files = sorted(name for name in objects if name.startswith("jobs/"))
    for file, (_, _, _, seg, _) in zip(files, _runs(data)):
        pod = _pod(next(d for d in objects[file] if d["kind"] == "JobSet"))
        term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        for node in term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]:
            held.setdefault(node, []).append((seg["start_s"], seg["end_s"]))
    for spans in held.values():
        spans.sort()
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_submit_applies_the_runs_in_the_simulated_order_at_their_submit_times(exported):
    data, _, submit = exported
    applied = re.findall(r"^at (\d+) (jobs/\S+)$", submit, flags=re.M)
    runs = _runs(data)
    assert [f for _, f in applied] == sorted(f for _, f in applied)
    assert len(applied) == len(runs)
    for (begin, _), (start, _, index, seg, job) in zip(applied, runs):
        assert int(begin) == -int(-(job["submit_s"] if index == 0 else start) // 1)


def test_the_jobset_crd_refuses_a_broken_run(exported):
    """Negative control: a run asking for -1 replicas breaks the CRD's own schema."""
    _, objects, _ = exported
    jobset = copy.deepcopy(next(d for d in objects[sorted(n for n in objects if n.startswith("jobs/"))[0]]
                                if d["kind"] == "JobSet"))
    jobset["spec"]["replicatedJobs"][0]["replicas"] = -1
    with pytest.raises(jsonschema.ValidationError, match="minimum"):
        _valid(jobset)
