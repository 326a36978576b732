"""Local NVMe as a bound on the checkpoints a job retains (model/train/host.py `nvme_need`):
the need by hand, a plan the NVMe makes infeasible with a located reason, and what relieves
it (fewer kept, remote storage, storage DPUs that write past the host, more nodes)."""

from __future__ import annotations

import math

import pytest

from gclc.compiler.driver import check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.train import dpu, host
from gclc.model.train.step import estimate
from gclc.solver.train.plan import plan

DESIGN = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
dpu Dpu {{ bandwidth = 400 Gb/s  cores = 16 }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
fabric Out {{ kind = infiniband  topology = fat_tree(tiers = 2, radix = 64)  bandwidth = 400 Gb/s }}
node Box {{ gpus = 8 x G  scaleup = Up  nvme = 300 GB  nvme_bandwidth = 10 GB/s {extra} }}
cluster C {{ units = {nodes} x Box  scaleout = Out }}
model M {{ arch = dense  layers = 32  hidden = 4096  heads = 32  ffn = 16384  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = 64  checkpoint_every = 1 h  {checkpoint} {pins} }}
"""


def job(keep=None, extra="", nodes=1, pins=""):
    checkpoint = f"checkpoint {{ keep = {keep} }}" if keep is not None else ""
    text = DESIGN.format(extra=extra, nodes=nodes, checkpoint=checkpoint, pins=pins)
    result = check_text(text, "nvme.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def test_the_retained_shares_by_hand():
    j = job(keep=3)
    cfg = pinned_config(j)
    share = host.CHECKPOINT_BYTES_PER_PARAM * j.shape.params   # one node writes the whole checkpoint
    assert host.nvme_need(j.shape, cfg, j.partition.node) == pytest.approx(3 * share)
    assert host.nvme_need(j.shape, pinned_config(job()), j.partition.node) == pytest.approx(share)  # one by default
    remote = job(keep=3, extra="storage = 5 GB/s")                 # written to remote storage: the NVMe holds none
    assert host.nvme_need(remote.shape, pinned_config(remote), remote.partition.node) == 0
    with_dpu = job(keep=3, extra="dpus = 1 x Dpu")                 # the DPU writes 50 of every 60 GB/s remotely
    node = with_dpu.partition.node
    assert host.nvme_need(with_dpu.shape, pinned_config(with_dpu), node) == pytest.approx(3 * share * 10 / 60)


def test_a_node_without_declared_nvme_bounds_nothing():
    j = job(keep=100)
    e = estimate(j.shape, pinned_config(j), j.partition)
    assert e.nvme_need > 300e9 and e.nvme == 300e9 and not e.nvme_fits
    undeclared = check_text(DESIGN.format(extra="", nodes=1, checkpoint="checkpoint { keep = 100 }", pins="")
                            .replace("nvme = 300 GB  ", ""), "nvme.gcl")
    j = train_job(undeclared.design)
    e = estimate(j.shape, pinned_config(j), j.partition)
    assert math.isinf(e.nvme) and e.nvme_fits


def test_retention_beyond_the_nvme_is_a_located_infeasibility():
    # a pinned layout: an infeasible search otherwise estimates its whole space
    result = plan(job(keep=3, pins="gpus = 8  parallelism { tp = 1  pp = 1  dp = 8  microbatch = 1  recompute = full "
                                   "zero = 1 }"))
    assert result.best is None
    reason = result.infeasibility
    assert reason.constraint == "host_nvme"
    assert reason.span.path == "nvme.gcl" and reason.span.line == 6   # the node's `nvme`
    assert "keep fewer checkpoints (`keep`, nvme.gcl:9" in reason.message and "remote `storage`" in reason.message
    assert reason.needs > reason.limit == 300e9


@pytest.mark.parametrize("relief", [dict(keep=2), dict(keep=3, extra="storage = 5 GB/s"),
                                    dict(keep=3, extra="dpus = 1 x Dpu"), dict(keep=3, nodes=2)])
def test_what_relieves_it(relief):
    result = plan(job(**relief))
    assert result.best is not None and result.best.nvme_fits


def staging(tokens="1 B", extra="", nodes=1):
    """The job reading 4 MB per sequence of 2,048 tokens from its nodes' NVMe, no checkpoints."""
    text = (DESIGN.format(extra=extra, nodes=nodes, checkpoint="", pins=f"tokens = {tokens}  sample_bytes = 4 MB")
            .replace("checkpoint_every = 1 h", ""))
    result = check_text(text, "nvme.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def test_the_staged_data_by_hand():
    j = staging(tokens="1 B", nodes=2)
    cfg = pinned_config(j)
    data = 1e9 / 2048 * 4e6                         # one pass: sequences x bytes each
    assert cfg.dataset_bytes == pytest.approx(data)
    assert host.nvme_need(j.shape, cfg, j.partition.node) == pytest.approx(data * 8 / cfg.gpus)  # a node's share
    with_dpu = staging(tokens="1 B", nodes=2, extra="dpus = 1 x Dpu")   # the DPU reads its share remotely
    node = with_dpu.partition.node
    host_path = 10e9 / (10e9 + dpu.input_rate(node))   # the NVMe's 10 GB/s beside the DPU's input rate
    assert 0 < host_path < 1
    assert host.staged_data(pinned_config(with_dpu), node) == pytest.approx(data * 8 / cfg.gpus * host_path)
    no_tokens = check_text(DESIGN.format(extra="", nodes=1, checkpoint="", pins="sample_bytes = 4 MB"), "nvme.gcl")
    assert pinned_config(train_job(no_tokens.design)).dataset_bytes == 0   # no `tokens`: nothing to stage


def test_data_beyond_the_nvme_is_a_located_infeasibility_that_dpus_relieve():
    pins = "  parallelism { tp = 1  pp = 1  dp = 8  microbatch = 1  recompute = full  zero = 1 }"
    result = plan(staging_pinned(pins))   # 1 B tokens: 1.95 TB of data on one node's 300 GB
    reason = result.infeasibility
    assert result.best is None and reason.constraint == "host_nvme" and reason.span.line == 6
    assert "of staged training data" in reason.message and "input DPUs" in reason.message
    assert "checkpoint" not in reason.message
    assert plan(staging_pinned(pins, tokens="0.1 B")).best is not None   # 195 GB fits


def staging_pinned(pins, tokens="1 B"):
    text = (DESIGN.format(extra="", nodes=1, checkpoint="", pins=f"tokens = {tokens}  sample_bytes = 4 MB" + pins)
            .replace("checkpoint_every = 1 h", ""))
    result = check_text(text, "nvme.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)
