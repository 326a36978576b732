"""Host DRAM and the GPU-host link as constraints (model/train/offload_host.py): the checkpoint
staging buffer by hand, a plan that host DRAM makes infeasible with a located reason, and
DPUs that write checkpoints past the host and so make it feasible."""

from __future__ import annotations

import math

import pytest

from gclc.compiler.driver import check_text
from gclc.model.train import host, offload_host
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.solver.train.plan import plan

DESIGN = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
cpu Cpu {{ cores = 32 }}
cpu Grace_Like {{ cores = 72 }}
dpu Dpu {{ bandwidth = 400 Gb/s  cores = 16 }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
node Box {{ gpus = 8 x G  cpus = 2 x {cpu}  scaleup = Up  {dram}  nvme_bandwidth = 10 GB/s {dpus} }}
cluster C {{ units = 1 x Box }}
model M {{ arch = dense  layers = 32  hidden = 4096  heads = 32  ffn = 16384  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = 16  {checkpoint} }}
"""


def job(dram="dram = 64 GB", dpus="", checkpoint="checkpoint_every = 1 h", cpu="Cpu"):
    result = check_text(DESIGN.format(dram=dram, dpus=dpus, checkpoint=checkpoint, cpu=cpu), "dram.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def test_the_staging_buffer_by_hand():
    j = job()
    cfg = pinned_config(j)
    need = offload_host.host_memory(j.shape, cfg, j.partition)
    # one node holds the whole checkpoint, 14 bytes per parameter, and its host path writes all of it
    assert need.staging == pytest.approx(host.CHECKPOINT_BYTES_PER_PARAM * j.shape.params)
    assert need.available == pytest.approx(64e9 * (1 - offload_host.HOST_RESERVE))
    with_dpu = job(dpus="dpus = 1 x Dpu")
    node = with_dpu.partition.node
    share = host.host_checkpoint_rate(node) / host.checkpoint_rate(node)  # 10 / (10 + 50) GB/s
    assert share == pytest.approx(10 / 60)
    staged = offload_host.host_memory(with_dpu.shape, cfg, with_dpu.partition).staging
    assert staged == pytest.approx(need.staging * share)
    none = job(checkpoint="")
    assert offload_host.host_memory(none.shape, pinned_config(none), none.partition).staging == 0  # no checkpoints


def test_a_node_without_declared_dram_constrains_nothing():
    j = job(dram="")
    e = estimate(j.shape, pinned_config(j), j.partition)
    assert math.isinf(e.host_dram) and e.host_fits


def test_host_dram_too_small_for_the_staging_buffer_is_a_located_infeasibility():
    result = plan(job())
    assert result.best is None
    reason = result.infeasibility
    assert reason.constraint == "host_dram"
    assert reason.span.line == 7 and reason.span.path == "dram.gcl"  # the node's `dram`
    assert "stage its checkpoint share" in reason.message and "57.6 GB" in reason.message
    assert reason.needs > reason.limit


def test_dpus_that_take_storage_make_it_fit():
    result = plan(job(dpus="dpus = 1 x Dpu"))
    assert result.best is not None and result.best.host_fits
    assert plan(job(dram="dram = 2 TB")).best is not None  # or enough DRAM


def test_offloaded_tensors_count_against_the_nodes_dram():
    pcie = job().partition.node
    none = job(checkpoint="")
    need = offload_host.host_memory(none.shape, pinned_config(none), none.partition, offload_bytes=10e9)
    assert need.offload == 80e9 and not need.fits
    assert "80 GB of offloaded tensors" in offload_host.shortfall(need, pcie)
