"""A part of the cluster slow or down (model/network/degrade.py, solver/train/degraded.py,
`gclc degrade`): the shares written out by hand from the cluster's counts, the laws that a
degradation never speeds a step and that re-planning never does worse than keeping the plan,
and the errors a degradation that cannot apply gives."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_text
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.network.degrade import Degradation, DegradeError, degrade
from gclc.model.train.step import estimate
from gclc.solver.train.degraded import degraded
from gclc.testing import load_profile

load_profile()

# 8 nodes of 8 GPUs, 4 NICs of 2 ports each a node, on a two-tier radix-16 fat tree at 1:1:
# 8 ports down and 8 up a leaf (one node a leaf), 64 uplinks into 4 spine switches of 16 ports
DESIGN = """
chip G { peak { bf16 = 1000 TFLOPS } hbm { capacity = 80 GB  bandwidth = 3 TB/s } power { tdp = 700 W } }
nic Card { bandwidth = 400 Gb/s  ports = 2 }
fabric Up { kind = nvlink  topology = switched  bandwidth = 450 GB/s }
fabric Out { kind = infiniband  topology = fat_tree(tiers = 2, radix = 16)  bandwidth = 200 Gb/s  latency = 1 us }
node Box { gpus = 8 x G  scaleup = Up  nics = 4 x Card }
cluster C { units = 8 x Box  scaleout = Out }
model M { arch = dense  layers = 8  hidden = 2048  heads = 16  kv_heads = 8  ffn = 8192  vocab = 32000  seq = 2048 }
train t { model = M  on = C  batch = 64 }
"""


def _job():
    result = check_text(DESIGN, "degrade.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


JOB = _job()
# layouts whose groups cross the node, the leaf and the spine in turn (64 GPUs)
CONFIGS = [TrainConfig(batch=64, seq=2048, tp=tp, pp=pp, dp=64 // (tp * pp), microbatch=1, zero=zero)
           for tp, pp in ((8, 1), (8, 2), (4, 4), (2, 1), (1, 8), (8, 8)) for zero in (0, 1, 3)]


@pytest.fixture(scope="module")
def job():
    return JOB


def scaleout(partition):
    return [t.bandwidth for t in partition.tiers if t.scope == "scaleout"]


def test_the_shares_by_hand(job):
    healthy = scaleout(job.partition)
    leaf, spine = healthy
    # a NIC port down: the node's 8 ports become 7
    assert scaleout(degrade(job.graph, job.partition, Degradation("nic", 0.0))) == pytest.approx([leaf * 7 / 8,
                                                                                               spine * 7 / 8])
    # a NIC at half its rate paces the rings that leave the node
    assert scaleout(degrade(job.graph, job.partition, Degradation("nic", 0.5))) == pytest.approx([leaf / 2, spine / 2])
    # a leaf's uplink down: 7 of its 8 uplinks; a spine switch down: 3 of 4 spines; the leaf tier untouched
    assert scaleout(degrade(job.graph, job.partition, Degradation("link", 0.0))) == pytest.approx([leaf, spine * 7 / 8])
    assert scaleout(degrade(job.graph, job.partition, Degradation("spine", 0.0))) == pytest.approx([leaf, spine * 3 / 4])
    slow = degrade(job.graph, job.partition, Degradation("gpu", 0.8)).node.accelerator
    assert dict(slow.peak)["bf16"] == pytest.approx(0.8 * 1000e12)


few = settings(max_examples=max(8, settings.default.max_examples // 6), deadline=None)


@few
@given(st.sampled_from(["nic", "link", "spine", "gpu"]), st.floats(0.0, 1.0), st.sampled_from(CONFIGS))
def test_a_degraded_part_never_speeds_the_step(part, share, cfg):
    if part == "gpu":
        share = max(share, 0.05)
    slowed = degrade(JOB.graph, JOB.partition, Degradation(part, share))
    before = estimate(JOB.shape, cfg, JOB.partition).step_time
    assert estimate(JOB.shape, cfg, slowed).step_time >= before * (1 - 1e-9)


@pytest.mark.parametrize("part", ["nic", "link", "spine", "gpu"])
def test_a_part_at_its_full_rate_changes_nothing(job, part):
    assert degrade(job.graph, job.partition, Degradation(part, 1.0)) == job.partition


def test_re_planning_never_does_worse_than_keeping_the_plan(job):
    r = degraded(job, Degradation("nic", 0.25))
    assert r.slowdown > 1
    assert r.replanned.best.tokens_per_s >= r.same.tokens_per_s * (1 - 1e-9)


def test_what_cannot_be_degraded_says_why(job):
    with pytest.raises(DegradeError, match="fewer GPUs"):
        degrade(job.graph, job.partition, Degradation("gpu", 0.0))
    one_tier = attrs.evolve(job.partition, tiers=job.partition.tiers[:2])
    with pytest.raises(DegradeError, match="one tier"):
        degrade(job.graph, one_tier, Degradation("spine", 0.5))


def test_the_cli(tmp_path, capsys):
    path = tmp_path / "degrade.gcl"
    path.write_text(DESIGN)
    assert main(["degrade", str(path), "link=down", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["degradation"] == {"part": "link", "share": 0.0}
    assert out["same_plan"]["step_time_s"] >= out["healthy"]["step_time_s"]
    assert out["replanned"]["tokens_per_s"] >= out["same_plan"]["tokens_per_s"] * (1 - 1e-9)
    assert main(["degrade", str(path), "gpu=80%"]) == 0
    assert "re-planned" in capsys.readouterr().out
    assert main(["degrade", str(path), "disk=0.5"]) == 2
    assert "nic, link, spine, gpu" in capsys.readouterr().err
    assert main(["degrade", str(path), "nic=1.5"]) == 2
