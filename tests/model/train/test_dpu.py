"""Host CPU work of a step and the DPU's network offload (model/train/dpu.py), on hand counts
and on a job built to be host-bound on its communication."""

from __future__ import annotations

import math

import pytest

from gclc.compiler.driver import check_text
from gclc.model.train import dpu
from gclc.model.job import pinned_config, train_job
from gclc.model.train.memory import params_per_gpu
from gclc.model.train.step import estimate

# 8 nodes of 8 GPUs, 4 host cores each (a thin host: half a core per GPU), tp = 16 across
# two nodes: every layer's all-reduces leave the node in small messages.
DESIGN = """
chip G {{ peak {{ bf16 = 2000 TFLOPS }} hbm {{ capacity = 192 GB  bandwidth = 8 TB/s }} power {{ tdp = 1000 W }} }}
cpu Cpu {{ cores = {cores} }}
dpu Dpu {{ bandwidth = 400 Gb/s  cores = 16 {offload} }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 900 GB/s }}
fabric Ib {{ kind = infiniband  topology = fat_tree(tiers = 2, radix = 64)  bandwidth = 400 Gb/s  latency = 1 us }}
node Box {{ gpus = 8 x G  cpus = 1 x Cpu  scaleup = Up {dpus} }}
cluster C {{ units = 8 x Box  scaleout = Ib }}
model M {{ arch = dense  layers = 16  hidden = 512  heads = 16  kv_heads = 16  ffn = 2048  vocab = 32000  seq = 512 }}
train t {{ model = M  on = C  batch = 64  parallelism {{ tp = {tp}  pp = 1  dp = {dp}  zero = 1 }} }}
"""


def job(cores=4, dpus="", offload="offload = [network]", tp=16, dp=4):
    result = check_text(DESIGN.format(cores=cores, dpus=dpus, offload=offload, tp=tp, dp=dp), "dpu.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def step(j):
    return estimate(j.shape, pinned_config(j), j.partition)


def test_a_job_host_bound_on_communication_is_faster_with_network_dpus():
    # one core for 8 GPUs: NCCL's per-call latency (model/collectives.py) makes the
    # 512 KB all-reduces across two nodes long enough to hide a half core per GPU's work
    plain = step(job(cores=1))
    assert plain.breakdown.host > 0  # the host's launches and proxy work outlast the GPUs
    offloaded = step(job(cores=1, dpus="dpus = 1 x Dpu"))
    assert offloaded.step_time < plain.step_time
    assert offloaded.breakdown.host < plain.breakdown.host


def test_a_dpu_that_does_not_offload_the_network_changes_nothing_here():
    plain = step(job())
    storage_only = step(job(dpus="dpus = 1 x Dpu", offload="offload = [storage, input]"))
    default = step(job(dpus="dpus = 1 x Dpu", offload=""))  # storage and input by default
    assert storage_only.step_time == plain.step_time == default.step_time


def test_enough_host_cores_remove_the_wait():
    assert step(job(cores=64)).breakdown.host == 0


def test_host_work_by_hand():
    j = job(tp=8, dp=8)  # tp inside the node: no proxy work for it
    cfg = pinned_config(j)
    work = dpu.host_work(j.shape, cfg, j.partition)
    m, layers = cfg.microbatches, 16
    kernels = dpu._kernels(j.shape, cfg, False)
    tp_calls = 4 + 0.5  # two all-reduces forward, two backward, half more with sequence parallelism
    assert cfg.sp and m == 8
    params = params_per_gpu(j.shape, cfg)
    grads = params * cfg.behaviour("grad_bytes")  # reduce-scattered, then the bf16 weights gathered
    buckets = math.ceil(grads / dpu.BUCKET_BYTES) + math.ceil(params * 2 / dpu.BUCKET_BYTES)
    assert work.launch == pytest.approx((m * layers * (kernels + tp_calls) + buckets) * dpu.LAUNCH_S)
    # dp = 8 spans the 8 nodes one GPU each: a ring of 8 over the network per bucket
    assert work.network_calls == buckets and work.network_only == buckets
    assert work.proxy > 0
    assert dpu.host_cores(j.partition.node) == 4 and dpu.dpu_cores(j.partition.node) == 0


def test_unknown_host_cores_constrain_nothing():
    text = DESIGN.format(cores=4, dpus="", offload="", tp=16, dp=4).replace("cpu Cpu { cores = 4 }", "cpu Cpu { }")
    result = check_text(text, "dpu.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    j = train_job(result.design)
    assert dpu.host_time(j.shape, pinned_config(j), j.partition) == 0.0


def test_explain_states_what_the_dpus_take_over_and_the_host_cores_per_gpu():
    from gclc.model.chip_metrics import chip_metrics

    rows = {m.key: m for m in chip_metrics(job(dpus="dpus = 2 x Dpu").graph)}
    assert rows["node.Box.host_cores_per_gpu"].value == 0.5  # 4 cores for 8 GPUs
    dpus = rows["node.Box.dpu.Dpu"]
    assert dpus.value == 2 and "taking over network" in dpus.label


def test_a_dpu_offloading_the_network_must_say_its_cores():
    text = DESIGN.format(cores=4, dpus="dpus = 1 x Dpu", offload="offload = [network]", tp=16, dp=4)
    result = check_text(text.replace("  cores = 16 offload", "  offload"), "dpu.gcl")
    (error,) = [d for d in result.diagnostics if d.code == "missing-field"]
    assert "`cores`" in error.summary and error.subject.line == 4
