"""Pipeline engines' sends by stack (model/train/pipeline.py): DeepSpeed's PipelineEngine
moves each micro-batch with blocking transfers one after another, Megatron's with one
batched exchange per direction. The closed form the model charges is checked against a
simulation of both engines' per-stage programs with rendezvous sends (NAMED STUB: the
programs are transcribed from Megatron-LM `forward_backward_pipelining_without_interleaving`
and DeepSpeed `deepspeed/runtime/pipe/schedule.py` TrainSchedule at 1fc74cb9c, 2021-10;
DeepSpeed itself needs torch, which the suite does not install)."""

import functools

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.train import pipeline
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()


def megatron_program(p, m, s):
    warm, ops = min(p - s - 1, m), []
    for _ in range(warm):
        ops += [("recv", "f", s - 1), ("F",), ("send", "f", s + 1)]
    if m > warm:
        ops.append(("recv", "f", s - 1))
    for i in range(m - warm):
        ops += [("F",), ("batch", (("send", "f", s + 1), ("recv", "b", s + 1))), ("B",)]
        last = i == m - warm - 1
        ops.append(("send", "b", s - 1) if last else ("batch", (("send", "b", s - 1), ("recv", "f", s - 1))))
    for _ in range(warm):
        ops += [("recv", "b", s + 1), ("B",), ("send", "b", s - 1)]
    return ops


def deepspeed_program(p, m, s):
    """TrainSchedule.steps: 2 (m + p - 1) steps; a stage runs forwards on the steps of its
    parity; the exchange of a step comes before its compute, one blocking transfer at a time."""
    ops, prev = [], -1
    for step in range(2 * (m + p - 1)):
        forward = (step % 2) == (s % 2)
        mb = (step - s) // 2 if forward else (step - (2 * p - 1 - s)) // 2
        valid, was = 0 <= mb < m, 0 <= prev < m
        if forward:
            ops += [("send", "b", s - 1)] * was + [("recv", "f", s - 1)] * valid + [("F",)] * valid
        else:
            ops += [("recv", "b", s + 1)] * valid + [("send", "f", s + 1)] * was + [("B",)] * valid
        prev = mb
    return ops


def simulate(program, p, m, cost):
    """Finish time of every stage's program: a transfer completes `cost[direction]` after both
    ends posted it; a batched exchange waits for all of its transfers."""
    progs = []
    for s in range(p):
        ops = []
        for op in program(p, m, s):
            items = op[1] if op[0] == "batch" else (op,) if op[0] in ("send", "recv") else None
            if items is None:
                ops.append(op)
            elif kept := tuple(i for i in items if 0 <= i[2] < p):
                ops.append(("batch", kept))
        progs.append(ops)
    pc, clock, posted, seen = [0] * p, [0.0] * p, {}, {}
    while any(pc[s] < len(progs[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while pc[s] < len(progs[s]):
                op = progs[s][pc[s]]
                if op[0] in ("F", "B"):
                    clock[s] += 1.0 if op[0] == "F" else 3.0   # a backward with full recompute
                    pc[s] += 1
                    moved = True
                    continue
                key = (s, pc[s])
                if key not in posted:
                    posted[key] = []
                    for kind, d, peer in op[1]:
                        channel = ((s, peer) if kind == "send" else (peer, s)) + (d,)
                        n = seen.get((channel, kind), 0)
                        seen[(channel, kind)] = n + 1
                        posted[key].append((channel, n))
                        posted.setdefault((channel, n, kind), clock[s])
                ends = [(posted.get((c, n, "send")), posted.get((c, n, "recv")), c[2]) for c, n in posted[key]]
                if any(a is None or b is None for a, b, _ in ends):
                    break
                clock[s] = max([clock[s]] + [max(a, b) + cost[d] for a, b, d in ends])
                pc[s] += 1
                moved = True
        assert moved, "deadlock"
    return max(clock)


@pytest.mark.parametrize("p,m", [(4, 16), (6, 24)])
def test_sequential_transfers_add_up_where_batched_exchanges_pair(p, m):
    ideal = (m + p - 1) * 4.0
    # no transfer cost: both engines run the 1F1B schedule's (m + p - 1)(F + B)
    assert simulate(megatron_program, p, m, {"f": 0, "b": 0}) == ideal
    assert simulate(deepspeed_program, p, m, {"f": 0, "b": 0}) == ideal
    cf, cb = 0.01, 0.04
    mega = (simulate(megatron_program, p, m, {"f": cf, "b": cb}) - ideal) / (m + p - 1)
    deep = (simulate(deepspeed_program, p, m, {"f": cf, "b": cb}) - ideal) / (m + p - 1)
    # per micro-batch slot: two exchanges paired by direction against all four transfers in turn
    assert mega <= 2 * max(cf, cb) + 1e-9
    assert 0.8 * 2 * (cf + cb) <= deep <= 2 * (cf + cb) + 1e-9
    assert deep > mega


DESIGN = """import "std/nvidia"
fabric Scaleout extends HDR_FatTree { topology = fat_tree(tiers = 2, radix = 40) }
model M {
  arch = dense  layers = 24  hidden = 8192  heads = 64  ffn = 32768  vocab = 51200  seq = 2048
}
cluster C { units = 16 x DGX_A100  scaleout = Scaleout }
train job {
  model = M  on = C  batch = 256  precision = bf16  software = STACK
  parallelism { tp = 8 pp = PP dp = DP microbatch = 1 recompute = full zero = 1 }
}
"""


@functools.lru_cache(maxsize=None)
def _job(stack, pp):
    design = DESIGN.replace("STACK", stack).replace("PP", str(pp)).replace("DP", str(16 // pp))
    result = check_text(design, "pipe.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def _estimate(stack, pp=8):
    job = _job(stack, pp)
    cfg = pinned_config(job)
    return job, cfg, estimate(job.shape, cfg, job.partition)


def test_the_breakdown_charges_each_micro_batch_the_engines_sends():
    for stack in ("megatron", "deepspeed", "deepspeed_2022"):
        job, cfg, est = _estimate(stack)
        sends = pipeline.micro_batch_sends(job.shape, cfg, job.partition.tiers)
        assert sends > 0
        assert est.breakdown.pp == pytest.approx(cfg.microbatches * sends)


def test_old_deepspeed_engine_is_slower_than_its_successor_and_than_megatron():
    steps = {s: _estimate(s)[2].step_time for s in ("megatron", "deepspeed", "deepspeed_2022")}
    # the same model, layout and kernels: only the pipeline sends differ between the two DeepSpeed eras
    assert steps["deepspeed"] > steps["deepspeed_2022"]
    sends = {s: _estimate(s)[2].breakdown.pp for s in steps}
    assert sends["deepspeed"] > sends["deepspeed_2022"] > sends["megatron"]


@given(st.sampled_from(["deepspeed", "deepspeed_2022", "megatron"]), st.sampled_from([1, 2, 4]),
       st.sampled_from([1, 2, 4]), st.sampled_from([512, 2048, 8192]))
def test_sends_never_fall_as_the_engine_ages_and_vanish_without_a_pipeline(stack, pp, mb, seq):
    job = _job("megatron", pp)
    cfg = attrs.evolve(pinned_config(job), stack=stack, microbatch=mb, seq=seq)
    tiers = job.partition.tiers
    costs = {s: pipeline.micro_batch_sends(job.shape, attrs.evolve(cfg, stack=s), tiers)
             for s in ("megatron", "deepspeed_2022", "deepspeed")}
    if pp == 1:
        assert set(costs.values()) == {0.0}
    else:
        assert 0 < costs["megatron"] <= costs["deepspeed_2022"] <= costs["deepspeed"]
