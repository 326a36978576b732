"""Laws of the chip, the scale-up torus and the host, over generated designs:

- more cores, a higher clock, more L2 (capacity or bandwidth) or more HBM stacks never
  slow a step;
- a torus is never slower than a ring of the same chips and links (that a full switch with
  the same per-link bandwidth is never slower than the torus holds per call, on the bytes
  and within the collective libraries' floors: tests/model/test_collectives.py);
- DPUs never slow a step, and speed up one that is data- or checkpoint-bound.

Each law holds per configuration (the same tp/pp/dp/... and placement order on both
designs), so it holds for the planner's optimum too: feasibility only grows (more stacks
give more HBM) and the optimum is the least step over the same configurations.
"""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import train_job
from gclc.model.train.step import estimate
from gclc.solver.train.enumerate import configurations

few = settings(max_examples=max(10, settings.default.max_examples // 3))
REL = 1e-9

MODEL = """
model M {{ arch = dense  layers = 2  hidden = 1024  heads = 16  kv_heads = 4  ffn = 4096  vocab = 32000  seq = {seq} }}
train t {{ model = M  on = C  batch = 16 {job} }}
"""

CHIP = """
chip Dsa {{
  clock = {clock} MHz
  cores = {cores}
  ops_per_clock {{ bf16 = 8192 }}
  l2 = {l2} MB
  l2_bandwidth = {l2_bw} TB/s
  hbm {{ stacks = {stacks}  stack_capacity = 16 GB  stack_bandwidth = 800 GB/s }}
  power {{ tdp = 600 W  idle = 80 W }}
}}
fabric Up {{ kind = ethernet  topology = switched  bandwidth = 300 GB/s }}
node Box {{ gpus = 8 x Dsa  scaleup = Up }}
cluster C {{ units = 1 x Box }}
"""


def job_of(text: str):
    result = check_text(text, "law.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def steps(job, configs) -> list[float]:
    return [estimate(job.shape, cfg, job.partition).step_time for cfg in configs]


def never_slower(faster, slower) -> None:
    assert all(f <= s * (1 + REL) for f, s in zip(faster, slower)), (faster, slower)


chip_fields = st.fixed_dictionaries({"clock": st.integers(500, 2000), "cores": st.integers(8, 160),
                                     "l2": st.integers(1, 300), "l2_bw": st.integers(1, 50),
                                     "stacks": st.integers(2, 8)})


@few
@given(chip_fields, st.sampled_from(["clock", "cores", "l2", "l2_bw", "stacks"]), st.integers(1, 300),
       st.sampled_from([512, 2048, 8192]), st.data())
def test_more_cores_clock_cache_or_stacks_never_slow_a_step(fields, knob, more, seq, data):
    base = job_of(CHIP.format(**fields) + MODEL.format(seq=seq, job=""))
    bigger = job_of(CHIP.format(**{**fields, knob: fields[knob] + more}) + MODEL.format(seq=seq, job=""))
    configs = data.draw(st.lists(st.sampled_from(list(configurations(base))), min_size=1, max_size=4))
    never_slower(steps(bigger, configs), steps(base, configs))


# ----------------------------------------------------------------- torus, switch, ring

SCALEUP = """
chip G {{ peak {{ bf16 = 400 TFLOPS }} hbm {{ capacity = 96 GB  bandwidth = 2 TB/s }} power {{ tdp = 500 W }} }}
fabric Up {{ kind = ici  topology = {topology}  bandwidth = {bandwidth} GB/s  latency = {latency} us }}
node Box {{ gpus = {gpus} x G  scaleup = Up }}
cluster C {{ units = 1 x Box }}
"""


@few
@given(st.lists(st.integers(2, 5), min_size=1, max_size=3), st.integers(10, 200), st.integers(0, 5),
       st.booleans(), st.data())
def test_a_torus_plans_no_slower_than_a_ring(dims, link, latency, wrap, data):
    chips = math.prod(dims)
    links = 2 * len(dims)
    wraparound = "true" if wrap else "false"
    torus = f"torus(dims = [{', '.join(map(str, dims))}], wraparound = {wraparound})"
    model = MODEL.format(seq=2048, job="")
    designs = {
        "torus": SCALEUP.format(topology=torus, bandwidth=links * link, latency=latency, gpus=chips),
        "ring": SCALEUP.format(topology=f"torus(dims = [{chips}], wraparound = {wraparound})", bandwidth=2 * link,
                               latency=latency, gpus=chips),
    }
    jobs = {name: job_of(text + model) for name, text in designs.items()}
    configs = data.draw(st.lists(st.sampled_from(list(configurations(jobs["torus"]))), min_size=1, max_size=6))
    times = {name: steps(job, configs) for name, job in jobs.items()}
    # The switch half (a full switch never slower than the torus) holds per call on the bytes
    # and within the two libraries' floors (tests/model/test_collectives.py): a switch's calls
    # pay NCCL's floor (tuning.cc: linear in the ranks on one node), a torus's its runtime's
    # (model/collectives.py TORUS_CALL_S, ~5 us measured on TPU, and a hop latency a ring
    # step), and NCCL's is the larger, so a step of many calls can trail on the switch.
    never_slower(times["torus"], times["ring"])


# ----------------------------------------------------------------- hosts and DPUs

HOST = """
chip G {{ peak {{ bf16 = 400 TFLOPS }} hbm {{ capacity = 96 GB  bandwidth = 2 TB/s }} power {{ tdp = 500 W }} }}
cpu Cpu {{ cores = {cores} }}
dpu Dpu {{ bandwidth = {dpu} Gb/s  cores = 16 }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 300 GB/s }}
node Box {{ gpus = 8 x G  cpus = 2 x Cpu  scaleup = Up  nvme_bandwidth = {nvme} GB/s {dpus} }}
cluster C {{ units = 1 x Box }}
"""


@few
@given(st.integers(1, 64), st.integers(100, 800), st.integers(1, 20), st.integers(1, 2000), st.integers(1, 600),
       st.data())
def test_dpus_never_slow_a_step_and_speed_up_host_bound_ones(cores, dpu, nvme, sample_mb, minutes, data):
    job = f"sample_bytes = {sample_mb} MB  checkpoint_every = {minutes} min"
    host = lambda dpus: HOST.format(cores=cores, dpu=dpu, nvme=nvme, dpus=dpus)  # noqa: E731
    without = job_of(host("") + MODEL.format(seq=2048, job=job))
    with_dpus = job_of(host("dpus = 2 x Dpu") + MODEL.format(seq=2048, job=job))
    configs = data.draw(st.lists(st.sampled_from(list(configurations(without))), min_size=1, max_size=4))
    for cfg in configs:
        slow = estimate(without.shape, cfg, without.partition)
        fast = estimate(with_dpus.shape, cfg, with_dpus.partition)
        assert fast.step_time <= slow.step_time * (1 + REL)
        if slow.breakdown.data > 0 or slow.breakdown.checkpoint > 0:  # host- or checkpoint-bound
            assert fast.step_time < slow.step_time


# ----------------------------------------------------------------- DPUs that take the network

NETWORK = """
chip G {{ peak {{ bf16 = 2000 TFLOPS }} hbm {{ capacity = 192 GB  bandwidth = 8 TB/s }} power {{ tdp = 1000 W }} }}
cpu Cpu {{ cores = {cores} }}
dpu Dpu {{ bandwidth = 400 Gb/s  cores = {arm}  offload = [{offload}] }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 900 GB/s }}
fabric Ib {{ kind = infiniband  topology = fat_tree(tiers = 2, radix = 64)  bandwidth = 400 Gb/s  latency = 1 us
             in_network_reduction = {sharp} }}
node Box {{ gpus = 8 x G  cpus = 1 x Cpu  scaleup = Up {dpus} }}
cluster C {{ units = 4 x Box  scaleout = Ib }}
model M {{ arch = dense  layers = 8  hidden = {hidden}  heads = 16  kv_heads = 16  ffn = 2048  vocab = 32000  seq = 512 }}
train t {{ model = M  on = C  batch = 32 }}
"""


@few
@given(st.integers(1, 32), st.integers(1, 16), st.sampled_from(["network", "network, storage", "storage, input"]),
       st.booleans(), st.sampled_from([256, 512, 2048]), st.data())
def test_network_dpus_never_slow_a_step_and_speed_up_host_bound_ones(cores, arm, offload, sharp, hidden, data):
    from gclc.model.train import dpu

    fields = dict(cores=cores, arm=arm, offload=offload, sharp="true" if sharp else "false", hidden=hidden)
    without = job_of(NETWORK.format(dpus="", **fields))
    with_dpus = job_of(NETWORK.format(dpus="dpus = 2 x Dpu", **fields))
    configs = data.draw(st.lists(st.sampled_from(list(configurations(without))), min_size=1, max_size=4))
    for cfg in configs:
        slow = estimate(without.shape, cfg, without.partition)
        fast = estimate(with_dpus.shape, cfg, with_dpus.partition)
        assert fast.step_time <= slow.step_time * (1 + REL)
        # host-bound on communication, and the DPUs take that work faster than the host does it
        offloaded = dpu.host_time(with_dpus.shape, cfg, with_dpus.partition)
        if slow.breakdown.host > 0 and offloaded < dpu.host_time(without.shape, cfg, without.partition) * (1 - 1e-6):
            assert fast.step_time < slow.step_time
