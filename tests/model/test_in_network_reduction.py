"""In-network reduction (SHARP, NVLS) for the collectives ZeRO runs, not only all-reduce."""

import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import comms
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train import dp_sync
from gclc.model.train.step import estimate


def tier(level, group, bandwidth, oversubscription=1.0, reduction=False, latency=1e-6):
    return Tier(level, f"t{level}", "f", "infiniband", "scaleout", group, bandwidth, latency, oversubscription,
                reduction, 1.0, span=no_span())


def test_sharp_reduce_scatter_sends_the_share_through_the_port_not_the_oversubscribed_spine():
    # 16 GPUs, one a node, under a 2:1 spine that reduces: 50 GB/s ports, 25 GB/s a GPU above the leaf
    spine = tier(1, 16, 25e9, oversubscription=2.0, reduction=True)
    stages = comms.place(16, 1, (tier(0, 1, 50e9), spine))
    ring = 15 / 16 * 1e9 / 25e9 + 4 * spine.latency
    switches = 1e9 / 50e9 + 2 * spine.latency
    assert comms.reduce_scatter(1e9, stages) == pytest.approx(min(ring, switches)) == pytest.approx(switches)
    assert comms.all_gather(1e9, stages) == comms.reduce_scatter(1e9, stages)


def test_on_one_nvswitch_nccl_keeps_the_ring_for_reduce_scatter():
    # NVLS sends the whole share and receives 1/8; the ring moves 7/8 each way: the ring wins
    # for bandwidth (NVIDIA/nccl#1047, #1083), NVLS only for all-reduce
    nvswitch = Tier(0, "nvl", "nvl", "nvlink", "node", 8, 450e9, 1e-6, 1.0, True, 1.0, span=no_span())
    stages = comms.place(8, 1, (nvswitch,))
    assert comms.reduce_scatter(8e9, stages) == pytest.approx(7 / 8 * 8e9 / 450e9 + 3e-6)
    assert comms.all_reduce(8e9, stages) == pytest.approx(8e9 / 450e9 + 2e-6)


DESIGN = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
nic Card {{ bandwidth = 400 Gb/s }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
fabric Out {{ kind = infiniband  topology = fat_tree(tiers = 2, radix = 16, oversubscription = 2:1)
             bandwidth = 400 Gb/s  latency = 1 us  in_network_reduction = {sharp} }}
node Box {{ gpus = 8 x G  scaleup = Up  nics = 8 x Card }}
cluster C {{ units = 16 x Box  scaleout = Out }}
model M {{ arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 32000  seq = 4096 }}
train t {{ model = M  on = C  batch = 256 }}
"""


@pytest.mark.parametrize("zero", [0, 1, 3])
def test_sharp_shortens_zeros_step_on_a_2_to_1_fabric(zero):
    """Issue #33's report: at 2:1, SHARP on = off with ZeRO-1 (only the all-reduce of ZeRO-0
    used the switches). Radix-16 leaves at 2:1 hold one 8-port node each, so a data-parallel
    ring over the 16 nodes (TP 8 inside them) climbs to the spine at every hop, at half the
    port's rate; with the switches reducing, every ZeRO stage's collectives run at the port's."""
    times = {}
    for sharp in ("true", "false"):
        result = check_text(DESIGN.format(sharp=sharp), "sharp.gcl")
        assert result.ok, [str(d) for d in result.diagnostics]
        job = train_job(result.design)
        cfg = TrainConfig(batch=256, seq=4096, tp=8, dp=16, microbatch=1, zero=zero)
        traffic = dp_sync.traffic(job.shape, cfg, job.partition)
        run = (traffic.all_reduces,) if zero == 0 else (traffic.reduces, traffic.gathers, traffic.fsdp)
        times[sharp] = (run, estimate(job.shape, cfg, job.partition).step_time)
    for on, off in zip(times["true"][0], times["false"][0]):
        assert on < 0.6 * off
    assert times["true"][1] <= times["false"][1]
