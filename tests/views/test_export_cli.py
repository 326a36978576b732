"""`gclc export`: every example to every kind that applies; what does not apply is an
error naming what the target lacks, exit 1, and no file written; atomic files, `-`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.views.export import KINDS, export

ROOT = Path(__file__).resolve().parents[2]

FILES = {
    "megatron": {"megatron.args", "megatron.yaml"},
    "torchtitan": {"torchtitan.toml", "torchtitan.args"},
    "slurm": {"slurm.conf", "gres.conf", "topology.conf", "topology-block.conf", "qos.sh", "job.sbatch"},
    "kubernetes": {"kueue.yaml", "kueue-config.yaml", "nodes.yaml", "jobset.yaml"},
    "trace": {"trace.json"},
    "vllm": {"vllm.args", "vllm-serving.yaml"},
    "sglang": {"sglang.args", "sglang-serving.yaml"},
    "dynamo": {"dynamo.args"},
}
# (example, kind) -> what the refusal says; everything else must export.
REFUSED = {
    ("custom_dsa", "megatron"): "`chat_405b` is a serve job",
    ("custom_dsa", "torchtitan"): "`chat_405b` is a serve job",
    ("hetero_h100_a100", "megatron"): "no heterogeneous split",
    ("hetero_h100_a100", "torchtitan"): "no heterogeneous split",
    ("custom_dsa", "trace"): "`chat_405b` is a serve job",
    ("custom_dsa", "chakra"): "`chat_405b` is a serve job",
    ("hetero_h100_a100", "chakra"): "the heterogeneous split runs several",
    ("gb200_nvl72_100k", "chakra"): "one trace file per rank, and the plan has 4,536 ranks",   # racks=64
    # a serving engine's settings need a serve job on a chip the engine runs on
    ("custom_dsa", "vllm"): "vLLM serves on NVIDIA and AMD GPUs",
    ("a100_cluster", "vllm"): "the design has no `serve` job",
    ("dgx_h100_superpod", "vllm"): "the design has no `serve` job",
    ("gb200_nvl72_100k", "vllm"): "the design has no `serve` job",
    ("hetero_h100_a100", "vllm"): "the design has no `serve` job",
    ("mi300x_roce", "vllm"): "the design has no `serve` job",
    ("custom_dsa", "sglang"): "made for the `vllm_v1` engine",   # planned with vLLM's profile
    ("a100_cluster", "sglang"): "the design has no `serve` job",
    ("dgx_h100_superpod", "sglang"): "the design has no `serve` job",
    ("gb200_nvl72_100k", "sglang"): "the design has no `serve` job",
    ("hetero_h100_a100", "sglang"): "the design has no `serve` job",
    ("mi300x_roce", "sglang"): "the design has no `serve` job",
    ("custom_dsa", "dynamo"): "vLLM serves on NVIDIA and AMD GPUs",   # Dynamo runs the plan's engine: vLLM
    **{(name, "dynamo"): "the design has no `serve` job" for name in ("a100_cluster", "dgx_h100_superpod",
                                                                       "gb200_nvl72_100k", "hetero_h100_a100", "mi300x_roce")},
    # nothing here can check a TensorRT-LLM launch (views/export/trtllm.py): refused for every design
    **{(name, "trtllm"): "TensorRT-LLM settings are not exported" for name in ("a100_cluster", "custom_dsa",
        "dgx_h100_superpod", "gb200_nvl72_100k", "hetero_h100_a100", "mi300x_roce")},
    ("hetero_h100_a100", "trace"): "the heterogeneous split runs several",
    # the SC21 run the example pins had no sequence parallelism, which torchtitan always uses with TP
    ("a100_cluster", "torchtitan"): "tp 8 without sequence parallelism",
}


def _run(example, *args: str) -> int:
    settings = [word for s in example.settings for word in ("--set", s)]
    return main(["export", example.path, *args, *settings])


@pytest.mark.parametrize("kind", KINDS)
def test_every_example_exports_to_every_kind_that_applies(example, kind, tmp_path, capsys):
    out = tmp_path / "out"
    if kind == "chakra" and (example.name, kind) not in REFUSED:
        # a trace per rank: about a thousand files, each fsynced by the CLI's atomic writes (seconds
        # of wall clock on CI's disk); their names and format come from the exporter itself here,
        # the CLI's writing of them from test_export_chakra.py
        files = export("chakra", example.design, source=example.path)
        ranks = len(files) - 1
        assert set(files) == {f"workload.{r}.et" for r in range(ranks)} | {"comm_group.json"} and ranks > 1
        assert all(v[:2] == b"\x1f\x8b" for k, v in files.items() if k.endswith(".et"))
        return
    status = _run(example, "--to", kind, "-o", str(out))
    err = capsys.readouterr().err
    refusal = REFUSED.get((example.name, kind))
    if refusal is not None:
        assert status == 1 and refusal in err and f"cannot export to {kind}" in err
        assert not out.exists()
        return
    assert status == 0, err
    expected = FILES[kind] - ({"job.sbatch", "jobset.yaml"} if example.job is None else set())
    assert {p.name for p in out.iterdir()} == expected
    if kind == "trace":   # JSON has no comments: the design stands in the trace's own metadata
        assert json.loads((out / "trace.json").read_text())["otherData"]["design"] == example.path
        return
    assert all(p.read_text().startswith("#") for p in out.iterdir())


def test_stdout_holds_every_file_after_its_name(named, capsys):
    assert _run(named("dgx_h100_superpod"), "--to", "slurm", "-o", "-") == 0
    out = capsys.readouterr().out
    assert [line[6:-4] for line in out.splitlines() if line.startswith("# ==> ")] == sorted(
        FILES["slurm"], key=["slurm.conf", "gres.conf", "topology.conf", "topology-block.conf", "qos.sh", "job.sbatch"].index)


def test_files_are_replaced_whole_and_keep_their_mode(named, tmp_path, capsys):
    target = tmp_path / "slurm.conf"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    assert _run(named("dgx_h100_superpod"), "--to", "slurm", "-o", str(tmp_path)) == 0
    assert target.read_text().startswith("# Slurm node") and target.stat().st_mode & 0o777 == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_usage_errors(named, tmp_path, capsys):
    example = named("dgx_h100_superpod")
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    assert _run(example, "--to", "slurm", "-o", str(a_file)) == 2 and a_file.read_text() == "keep"
    assert "names a directory" in capsys.readouterr().err
    assert _run(example, "--to", "slurm", "--cluster", "Nope") == 2
    assert "no cluster `Nope`" in capsys.readouterr().err


def test_an_unknown_job_is_an_error(named, capsys):
    assert _run(named("dgx_h100_superpod"), "--to", "megatron", "--job", "nope") == 1
    assert "no job `nope`" in capsys.readouterr().err


def test_an_infeasible_plan_exits_3_and_writes_nothing(named, tmp_path, capsys):
    out = tmp_path / "out"
    path = str(ROOT / "tests" / "data" / "gb200_moe.gcl")   # pp 16 x ep 64 cannot split the batch on 8 racks
    assert main(["export", path, "--to", "megatron", "-o", str(out), "--set", "racks=8"]) == 3
    assert "infeasible" in capsys.readouterr().err and not out.exists()


SHARED = os.path.join("examples", "shared_cluster.gcl")


@pytest.fixture(scope="module")
def shared_design():
    from gclc.compiler.driver import check_file

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return check_file(os.path.join(root, SHARED)).design


def test_every_train_job_of_a_shared_cluster_exports_on_the_partition_its_plan_chose(shared_design):
    """ablation_a and ablation_b run `on = Shared` (two partitions): the plan takes the one it
    prefers (ablation_a: `prefer = Shared.a100`) or the faster one, and the script asks for it."""
    import re

    from gclc.views.export import export
    from gclc.views.export.jobs import job_plan

    for entity in shared_design.of_kind("train"):
        plan = job_plan(entity)
        files = export("slurm", shared_design, entity.name, None, SHARED)
        asked = re.findall(r"^#SBATCH --partition=(\S+)", files["job.sbatch"], re.M)
        assert asked == [s.partition for s in plan.shares], entity.name
    assert job_plan(shared_design["ablation_a"]).shares[0].partition == "a100"


def test_a_partition_of_a_cluster_exports_alone(capsys, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["export", SHARED, "--to", "slurm", "--cluster", "Shared.h100", "--job", "pretrain_70b",
                     "-o", str(tmp_path)]) == 0
        conf = (tmp_path / "slurm.conf").read_text()
        assert "PartitionName=h100 " in conf and "PartitionName=a100" not in conf
        # the header names the design as given on the command line, never an absolute path
        assert f"from {SHARED};" in conf and root not in conf
        capsys.readouterr()
        assert main(["export", SHARED, "--to", "slurm", "--cluster", "Shared.b200"]) == 2
        assert "no partition `b200`; its partitions: h100, a100" in capsys.readouterr().err
        assert main(["export", SHARED, "--to", "slurm", "--cluster", "Shared.a100", "--job", "pretrain_70b"]) == 1
        assert "runs on Shared.h100, not on Shared.a100" in capsys.readouterr().err
    finally:
        os.chdir(cwd)
