"""In-network reduction (SHARP, NVLS) for the collectives ZeRO runs, not only all-reduce."""

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import collectives, comms
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train import dp_sync
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()


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


def _plan(sharp: str):
    from gclc.solver.train.plan import plan

    result = check_text(DESIGN.format(sharp=sharp), "sharp.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return plan(train_job(result.design), top=0)


def test_a_plan_with_sharp_says_its_zero_collectives_run_in_the_switches_and_take_less():
    from gclc.views.plan_json import plan_json
    from gclc.views.plan_text import plan_text

    on, off = _plan("true"), _plan("false")
    calls = {name: {c["collective"]: c for c in plan_json(p)["dp_collectives"]} for name, p in (("on", on), ("off", off))}
    assert on.best.config.zero >= 1 and set(calls["on"]) >= {"reduce_scatter", "all_gather"}
    for collective in ("reduce_scatter", "all_gather"):
        with_sharp, without = calls["on"][collective], calls["off"][collective]
        assert with_sharp["in_network"] and with_sharp["algorithm"] == "collnet" and not without["in_network"]
        # without SHARP the ring leaves each 2:1 leaf over all 8 of its node's NICs (200 GB/s
        # of uplink a node): SHARP's switches save 11 % here, summing the NVLink and network
        # stages (NCCL's CollNet pipelines them, so this is SHARP's least gain)
        assert with_sharp["seconds"] < 0.9 * without["seconds"]
    assert "reduced in the switches" in plan_text(on) and "reduced in the switches" not in plan_text(off)
    assert on.best.step_time <= off.best.step_time


def test_the_calls_a_plan_lists_are_the_seconds_its_step_prices():
    job = train_job(check_text(DESIGN.format(sharp="true"), "sharp.gcl").design)
    for zero in (0, 1, 3):
        cfg = TrainConfig(batch=256, seq=4096, tp=8, dp=16, microbatch=1, zero=zero)
        t = dp_sync.traffic(job.shape, cfg, job.partition)
        listed = sum(c.seconds for c in dp_sync.calls(job.shape, cfg, job.partition))
        assert listed == pytest.approx(t.all_reduces if zero == 0 else t.reduces + t.gathers + t.across)


# ------------------------------------------------------------------ laws on any hierarchy


def hierarchy(up, out, leaf, oversubscription, nvls, sharp):
    """8-GPU nodes on `leaf`-GPU leaves under a spine at `oversubscription`, NVLS and SHARP as stated."""
    node = Tier(0, "nvl", "nvl", "nvlink", "node", 8, up, 0.5e-6, 1.0, nvls, 1.0, span=no_span())
    return node, tier(1, leaf, out, reduction=sharp), tier(2, 4096, out / oversubscription, oversubscription, sharp)


def stated(tiers, nvls, sharp):
    return tuple(Tier(*(getattr(t, f) for f in ("level", "name", "fabric", "kind", "scope", "group_gpus", "bandwidth",
                                                "latency", "oversubscription")),
                      nvls if t.scope == "node" else sharp, t.efficiency, span=no_span()) for t in tiers)


@given(st.sampled_from([150e9, 450e9, 900e9]), st.sampled_from([12.5e9, 50e9]), st.sampled_from([16, 64]),
       st.sampled_from([1.0, 2.0, 4.0]), st.booleans(), st.booleans(),
       st.tuples(st.sampled_from([2, 8, 16, 64, 256]), st.sampled_from([1, 8])),
       st.sampled_from(["reduce_scatter", "all_gather", "all_reduce"]), st.floats(1.0, 2.0**34))
def test_switches_that_reduce_never_lengthen_zeros_collectives(up, out, leaf, over, nvls, sharp, group, collective, n):
    # stating NVLS or SHARP only adds a path NCCL may take: ZeRO's reduce-scatter and
    # all-gather, and DDP's all-reduce, never take longer for it
    plain = hierarchy(up, out, leaf, over, False, False)
    call = getattr(collectives, collective)
    with_switches = call(n, comms.place(*group, stated(plain, nvls, sharp)))
    assert with_switches <= call(n, comms.place(*group, plain)) * (1 + 1e-12)


@given(st.sampled_from([12.5e9, 50e9]), st.sampled_from([2.0, 4.0]), st.sampled_from([16, 64, 256]),
       st.sampled_from(["reduce_scatter", "all_gather"]), st.floats(2.0**30, 2.0**34))
def test_sharp_takes_at_most_three_quarters_of_a_large_zero_collective_over_an_oversubscribed_spine(
        out, over, nodes, collective, n):
    # one GPU a node, each node alone on its leaf under a spine at 2:1 or worse: the ring
    # crosses the spine at a fraction of the port, the switches' path goes through the port alone
    plain = hierarchy(450e9, out, 8, over, False, False)
    call = getattr(collectives, collective)
    ring = call(n, comms.place(nodes, 8, plain))
    assert call(n, comms.place(nodes, 8, stated(plain, False, True))) <= 0.75 * ring


def test_two_gpus_on_a_reducing_nvswitch_all_reduce_by_ring_when_its_bytes_are_fewer():
    # the law's first counterexample: 2 GPUs, NVLS at 0.74 of the port moves the whole buffer,
    # the ring half of it each way; NCCL's NVLS gives no more than the ring for n <= 4
    # (NVIDIA/nccl#1455: 365-370 GB/s either way), so the ring's bytes and label win
    nvswitch = Tier(0, "nvl", "nvl", "nvlink", "node", 8, 150e9, 0.5e-6, 1.0, True, 1.0, span=no_span())
    stages = comms.place(2, 1, (nvswitch,))
    assert collectives.choice("all_reduce", 6.6e6, stages).algorithm == "ring"
    assert collectives.all_reduce(6.6e6, stages) < 6.6e6 / (150e9 * 0.74)
