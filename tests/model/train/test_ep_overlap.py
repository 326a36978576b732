"""The overlapped expert all-to-all (`ep_overlap`): what it hides and what its kernels take
from the compute beside it (model/train/layer_cost.py `overlap_contention`)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.ranks import rank_partition
from gclc.model.train import layer_cost, moe
from gclc.model.train.layer_cost import EP_COMM_SM_SHARE, overlap_contention

seconds = st.floats(0.0, 1.0)


def exposed(exchange: float, compute: float) -> float:
    """`_ep_exposed`'s overlapped branch for an exchange and the compute it overlaps."""
    return max(exchange - compute, 0.0) + overlap_contention(exchange, compute)


def test_the_compute_runs_on_the_sms_the_exchange_leaves_it():
    # DeepSeek-V3 Sec 3.2.2: 20 of H800's 132 SMs for dispatch and combine
    assert EP_COMM_SM_SHARE == pytest.approx(20 / 132)
    # 10 ms of compute beside 4 ms of exchange: those 4 ms of compute run on 112 / 132 of the SMs
    assert overlap_contention(0.004, 0.010) == pytest.approx(0.004 * 132 / 112 - 0.004)
    # an exchange longer than the compute: the whole compute is slowed, the rest of the exchange is bare
    assert exposed(0.010, 0.004) == pytest.approx(0.006 + 0.004 * 20 / 112)
    assert overlap_contention(0.0, 0.010) == 0.0 == overlap_contention(0.010, 0.0)


@given(seconds, seconds)
def test_overlapping_never_exposes_more_than_the_bare_exchange(exchange, compute):
    assert exposed(exchange, compute) <= exchange * (1 + 1e-12)


@given(seconds, seconds, st.floats(0.0, 0.5))
def test_a_faster_link_or_faster_compute_never_lengthens_the_layer(exchange, compute, cut):
    layer = compute + exposed(exchange, compute)
    assert compute + exposed(exchange * (1 - cut), compute) <= layer * (1 + 1e-12)
    assert compute * (1 - cut) + exposed(exchange, compute * (1 - cut)) <= layer * (1 + 1e-12)


DESIGN = """import "std/nvidia"
cluster Pod {
  units    = 2 x DGX_H100
  scaleout = NDR_FatTree
}
model M {
  arch = moe  layers = 8  hidden = 2048  heads = 16  ffn = 6144  vocab = 32000  seq = 4096
  experts { routed = 64  shared = 0  top_k = 8  ffn = 768 }
}
train job {
  model = M  on = Pod  batch = 64  precision = bf16  software = nemo
  parallelism { tp = 1 pp = 1 dp = 16 ep = 16 microbatch = MB zero = 1 recompute = none ep_overlap = true }
}
"""


@pytest.mark.parametrize("microbatch", [1, 4])
def test_an_moe_layer_charges_the_bare_rest_and_the_contention(microbatch):
    result = check_text(DESIGN.replace("MB", str(microbatch)), "overlap.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    job = train_job(result.design)
    cfg = pinned_config(job)
    partition = rank_partition(job.partition, cfg.gpus)
    layer = layer_cost.layer(job.shape, cfg, partition, True)
    exchange = layer_cost.ep_exchange(job.shape, cfg, partition)
    # the all-to-all crosses InfiniBand and outlasts the layer's compute: the compute is all slowed
    assert exchange > layer.forward + layer.backward
    assert layer.ep == pytest.approx(exposed(exchange, layer.forward + layer.backward)
                                     + moe.host_exposed(job.shape, cfg))
