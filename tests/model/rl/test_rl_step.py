"""The RL step model's laws: a step is its phases put together as the placement and the
staleness say; asynchronous is never slower than synchronous for the same pools at the same
staleness bound; a faster link between the pools never slows the weights' sync; each pool's
timeline covers the step."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import example, given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.rl import phases as ph
from gclc.model.rl.job import rl_job
from gclc.model.rl.step import COLOCATED, DISAGGREGATED, Phases, compose
from gclc.testing import load_profile

load_profile()
SMALL = Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl"
JOB = rl_job(check_file(str(SMALL)).design["grpo"])
H100, A100 = JOB.partition("h100"), JOB.partition("a100")

seconds = st.floats(0, 1e4, allow_nan=False, allow_infinity=False)


def _estimate():
    from gclc.solver.rl.pools import train_pool

    return train_pool(JOB, H100, 8, 600, JOB.memory_of(H100)).policy


_ESTIMATE = _estimate()


@st.composite
def phase_sets(draw):
    generate = draw(seconds)
    return Phases(generate, draw(st.floats(0, 1)) * generate, draw(seconds), draw(seconds), draw(seconds),
                  draw(seconds))


@given(phase_sets(), st.integers(1, 8))
def test_asynchronous_is_never_slower_than_synchronous(p, staleness):
    sync, overlapped = compose(p, DISAGGREGATED, 0), compose(p, DISAGGREGATED, staleness)
    assert overlapped.step_time <= sync.step_time * (1 + 1e-12) + 1e-12
    assert sync.step_time == p.generate + (p.offload + p.score + p.train) + p.sync
    trainer = p.offload + p.score + p.train
    assert overlapped.step_time == p.sync + max(p.stream, trainer, p.generate / staleness)
    # the version bound (the batch for step w + k starts once version w lands) never binds beyond them
    assert overlapped.step_time >= p.sync + (p.generate + trainer) / (staleness + 1) - 1e-9 * max(1, sync.step_time)


@given(phase_sets(), st.integers(1, 8))
def test_a_deeper_staleness_is_never_slower(p, staleness):
    """NeMo-RL's collector at age k keeps k batches of prompt groups in flight: a batch's latency
    spreads over k chains, so one step more of staleness never lengthens a step."""
    assert compose(p, DISAGGREGATED, staleness + 1).step_time <= compose(p, DISAGGREGATED, staleness).step_time


def test_one_step_off_pays_a_long_batch_whole():
    """At age 1 the collector's permits (one a prompt group, prompts of them, each held until the group's
    slowest sample) let the next batch start only as this one ends: a batch that outlasts training
    sets the step with the sync, training hidden under it (trajectory_collector.py `_inflight_sema`;
    pull 2779's DeepSeek-V3 pair: step = batch latency + 12.4-12.8 s)."""
    p = Phases(generate=60.0, stream=20.0, score=4.0, train=6.0, sync=10.0)
    assert compose(p, DISAGGREGATED, 1).step_time == 10.0 + 60.0
    assert compose(p, DISAGGREGATED, 2).step_time == 10.0 + 30.0   # two chains of batches
    short = attrs.evolve(p, generate=8.0, stream=5.0)   # training outlasts the batch: the step is training's
    assert compose(short, DISAGGREGATED, 1).step_time == 10.0 + 10.0


@given(phase_sets(), st.sampled_from([(COLOCATED, 0), (DISAGGREGATED, 0), (DISAGGREGATED, 1)]))
def test_each_pool_timeline_covers_the_step_without_gaps(p, mode):
    step = compose(p, *mode)
    pools = {s.pool for s in step.timeline}
    assert pools or step.step_time == 0
    for pool in pools:
        spans = [s for s in step.timeline if s.pool == pool]
        assert all(a.end == b.start for a, b in zip(spans, spans[1:]))
        assert spans[0].start == 0 and abs(spans[-1].end - step.step_time) <= 1e-9 * max(1, step.step_time)
        assert 0 <= step.busy(pool) <= 1


def test_colocated_pools_take_turns():
    p = Phases(10, 4, 2, 3, 0.5, 1.0)
    step = compose(p, COLOCATED, 1)   # a staleness bound buys nothing on shared GPUs
    assert step.step_time == 10 + 2 + 3 + 0.5 + 1.0 and not step.overlapped


bandwidths = st.floats(1e8, 1e13, allow_nan=False)


@given(st.floats(1e6, 1e12), st.integers(1, 512), st.sampled_from([1, 2, 4, 8, 16]), bandwidths, st.floats(1, 100))
@example(nbytes=1e12, senders=1, shard=16, bandwidth=1e8, faster=1.0)
def test_a_faster_link_between_the_pools_never_slows_the_sync(nbytes, senders, shard, bandwidth, faster):
    slow = ph.Link("slow", bandwidth, 5e-6)
    fast = attrs.evolve(slow, bandwidth=bandwidth * faster)
    assert ph.broadcast_time(nbytes, senders, shard, fast) <= ph.broadcast_time(nbytes, senders, shard, slow)


def test_the_link_between_pools_is_the_tier_that_joins_them():
    apart = ph.link_between(A100, H100, 16, 16)
    assert apart.bandwidth == min(ph.Link.of(A100.tiers[-1]).bandwidth, ph.Link.of(H100.tiers[-1]).bandwidth)
    inside = ph.link_between(H100, H100, 4, 4)          # both pools inside one NVLink domain
    assert inside.bandwidth == ph.Link.of(H100.tiers[0]).bandwidth > apart.bandwidth
    across = ph.link_between(H100, H100, 8, 8)          # two nodes of one partition: its scale-out
    assert across.bandwidth < inside.bandwidth


def test_the_sync_moves_the_policy_once_per_replica_shard():
    nbytes = ph.policy_bytes(JOB.policy, "bf16")
    assert nbytes == JOB.policy.params * 2 and ph.policy_bytes(JOB.policy, "fp8") == nbytes / 2
    link = ph.link_between(A100, H100, 16, 16)
    # each generation GPU receives its 1/shard; more training GPUs sending does not help past that
    assert ph.broadcast_time(nbytes, 16, 4, link) == ph.broadcast_time(nbytes, 64, 4, link)
    assert ph.broadcast_time(nbytes, 16, 8, link) < ph.broadcast_time(nbytes, 16, 4, link)


def test_scoring_is_the_training_stacks_forward_passes():
    """A forward pass is a third of the step's compute and bubble and half its model-parallel
    sends, none of its recomputation, gradient reduction or optimizer; each model scored adds its
    own (a model of the policy's shape one more forward), once a step over every mini-batch."""
    from gclc.model.train.step import Breakdown

    e = attrs.evolve(_ESTIMATE, breakdown=Breakdown(compute=3.0, recompute=5.0, tp=2.0, cp=0.0, ep=0.0, pp=0.0,
                                                     bubble=0.6, dp=7.0, optimizer=11.0))
    assert ph.forward_time(e) == 3.0 / 3 + 0.6 / 3 + 2.0 / 2
    one = ph.score_time(e, 4, (JOB.policy, None), JOB.policy, 600)
    assert one == 4 * ph.forward_time(e)
    assert ph.score_time(e, 4, (JOB.policy, JOB.policy), JOB.policy, 600) == 2 * one


def test_a_ratio_held_at_one_scores_without_the_policys_forward():
    """`old_logprobs = false` (NeMo-RL's force_on_policy_ratio) drops the policy's old-log-probability pass
    and nothing else: the reference's forward stays, and so does training."""
    from gclc.solver.rl.pools import train_pool

    one = attrs.evolve(JOB, minibatches=1, epochs=1)
    both, skipped = (train_pool(attrs.evolve(one, old_logprobs=flag), H100, 8, 600, JOB.memory_of(H100))
                     for flag in (True, False))
    assert skipped.train == both.train
    assert abs(skipped.score - both.score / 2) < 1e-9 * both.score   # the reference is the policy's shape


def test_resharding_follows_its_work():
    nbytes = ph.policy_bytes(JOB.policy, "bf16")
    gather = ph.reshard_time(nbytes, 8, 2, H100)      # training tp=8, generation tp=2: gather 4 pieces
    assert gather > ph.reshard_time(nbytes, 2, 8, H100) > 0   # a finer generation shard is a local slice


def test_the_weight_gathers_are_nccls_calls_by_hand():
    """The trainer's gathers run through torch.distributed, so NCCL, priced as the training step prices its calls
    (model/collectives.py). Resharding TP 8 -> 2 gathers 4 pieces inside an H100 node; an 8-byte piece is
    latency alone, NCCL's ring LL (tuning.cc, tag v2.28.7-1: baseLatencies ring LL 6.6 us, hwLatencies NVLink
    ring LL 0.6 us a step): 6.6 + 3 x 0.6 = 8.4 us, NVLS's 25 us Simple step far behind."""
    by_hand = (6.6 + 3 * 0.6) * 1e-6
    assert ph.reshard_time(8 * 2, 8, 2, H100) == pytest.approx(by_hand, rel=1e-4)


@given(st.floats(1, 1e10), st.sampled_from([2, 4, 8]), st.sampled_from([1, 2, 4]))
def test_the_weight_gathers_cost_what_nccl_charges_for_the_same_call(nbytes, held_over, shard):
    """Law: a resharding gather and a whole-tensor export are the all-gather collectives.py prices for the same
    group, and a gather of more bytes never takes less time."""
    from gclc.model import collectives, comms

    held = shard * held_over
    stages = comms.place(held_over, 1, H100.tiers)
    assert ph.reshard_time(nbytes * shard, held, shard, H100) == collectives.all_gather(nbytes, stages)
    assert ph.reshard_time(2 * nbytes * shard, held, shard, H100) >= ph.reshard_time(nbytes * shard, held, shard, H100)
    copy = 2 * nbytes / H100.node.accelerator.hbm_bandwidth
    assert ph.export_time(nbytes, held_over, H100) == pytest.approx(collectives.all_gather(nbytes, stages) + copy,
                                                                    rel=1e-12)


def _pools(gen_tp: int, precision: str = "bf16"):
    """A training pool of 16 H100s and a generation layout on the A100s, as sync_time takes them."""
    from gclc.model.serve.inference import ServeConfig
    from gclc.solver.rl.generation import GenLayout
    from gclc.solver.rl.pools import train_pool

    train = train_pool(JOB, H100, 16, 600, JOB.memory_of(H100))
    return train, GenLayout("a100", ServeConfig(tp=gen_tp, batch=64, precision=precision), 16 // gen_tp)


def test_whole_tensors_reach_every_generation_gpu():
    """NeMo-RL through v0.7 (WHOLE_TENSORS): one training GPU broadcasts each tensor whole on NCCL's
    ring over both pools, so the sync apart takes the policy's bytes at the ring's rate whatever the
    generation shard, and an fp8 engine receives the trainer's 16-bit weights (it casts them as it loads them)."""
    from gclc.solver.rl.pools import sync_time

    assert ph.WHOLE_TENSORS
    link = ph.broadcast_link(A100, H100, 16, 16)
    nbytes = ph.policy_bytes(JOB.policy, "bf16")
    times = [sync_time(JOB, gen, train, DISAGGREGATED, A100, H100)
             for train, gen in (_pools(2), _pools(8), _pools(8, "fp8"))]
    assert times[0] == times[1] == times[2] == nbytes / link.bandwidth + link.latency + ph.refit_overhead(JOB.policy)
    train, gen = _pools(8, "fp8")
    assert ph.sync_bytes(JOB.policy, "fp8", train.policy.config) == nbytes


def test_a_ring_broadcast_spreads_over_a_nodes_nics_within_its_scale_up():
    """NCCL's ring leaves each node once per channel, through that channel's NIC: a node's NICs carry the
    broadcast together, never faster than the node's scale-up, and one node's pools keep to its scale-up."""
    one = ph.link_between(A100, H100, 16, 16)
    ring = ph.broadcast_link(A100, H100, 16, 16)
    sides = [min(ph.Link.of(p.tiers[0]).bandwidth, one.bandwidth * p.tiers[0].group_gpus) for p in (A100, H100)]
    assert ring.bandwidth == min(sides) > one.bandwidth
    assert ring.bandwidth <= min(ph.Link.of(p.tiers[0]).bandwidth for p in (A100, H100))
    assert ph.broadcast_link(H100, H100, 4, 4) == ph.link_between(H100, H100, 4, 4)   # one NVLink domain
    # a pool of one GPU a node has one NIC to send through
    assert ph.broadcast_link(A100, H100, 1, 1).bandwidth == one.bandwidth


@given(st.floats(1e8, 1e12), st.floats(1, 100))
def test_a_faster_scale_out_never_slows_the_ring_broadcast(bandwidth, faster):
    def with_scale_out(p, rate):
        return attrs.evolve(p, tiers=(p.tiers[0], *(attrs.evolve(t, bandwidth=rate) for t in p.tiers[1:])))

    slow = ph.broadcast_link(with_scale_out(A100, bandwidth), with_scale_out(H100, bandwidth), 16, 16)
    fast = ph.broadcast_link(with_scale_out(A100, bandwidth * faster), with_scale_out(H100, bandwidth * faster), 16, 16)
    assert fast.bandwidth >= slow.bandwidth


def test_a_colocated_export_gathers_the_whole_policy_on_every_training_gpu():
    """Colocated, each training GPU gathers every tensor over the group one copy of the weights
    spans and copies it into its engine's buffer: more than a local slice, more over a wider group,
    at least the policy's HBM read and write."""
    nbytes = ph.policy_bytes(JOB.policy, "bf16")
    hbm = H100.node.accelerator.hbm_bandwidth
    alone = ph.export_time(nbytes, 1, H100)
    assert alone == 2 * nbytes / hbm > ph.reshard_time(nbytes, 2, 8, H100)
    assert alone < ph.export_time(nbytes, 8, H100) < ph.export_time(nbytes, 16, H100)


@given(st.floats(1e6, 1e13), st.sampled_from([1, 2, 4, 8, 16]), st.floats(1, 10))
def test_a_colocated_export_never_gets_cheaper_with_more_bytes_or_a_wider_group(nbytes, group, more):
    assert ph.export_time(nbytes, group, H100) <= ph.export_time(nbytes * more, group, H100)
    if group < 16:
        assert ph.export_time(nbytes, group, H100) <= ph.export_time(nbytes, 2 * group, H100)


def _layout(tp: int = 1, pp: int = 1, ep: int = 1):
    return attrs.evolve(_ESTIMATE.config, tp=tp, pp=pp, ep=ep, dp=16 // (tp * pp), cp=1, zero=1)


def test_megatron_bridge_export_of_a_tp_group_is_the_whole_group_gather():
    """A dense policy on a tensor-parallel layout alone: Megatron-Bridge's export is the TP all-gather of
    every tensor, the one group the whole-group export gathers over."""
    nbytes = ph.policy_bytes(JOB.policy, "bf16")
    assert ph.routed_share(JOB.policy) == 0
    for tp in (1, 2, 8):
        assert ph.bridge_export_time(JOB.policy, nbytes, _layout(tp=tp), H100) == ph.export_time(nbytes, tp, H100)


def test_a_pipeline_group_across_nodes_rides_each_gpus_own_nic():
    """Each GPU of a pipeline group one GPU a node receives the stages it lacks through its own NIC (one
    broadcast per tensor over its own group), no faster than the scale-out's per-GPU rate."""
    nbytes = ph.policy_bytes(JOB.policy, "bf16")
    out = ph.Link.of(H100.tiers[-1])
    assert _layout(pp=2).stride("pp") == 8            # the two stages sit on the two nodes
    piped = ph.bridge_export_time(JOB.policy, nbytes, _layout(pp=2), H100)
    assert piped >= nbytes / 2 / out.bandwidth + 2 * nbytes / H100.node.accelerator.hbm_bandwidth


@given(st.floats(1e6, 1e13), st.sampled_from([(1, 1), (2, 1), (8, 1), (1, 2), (2, 2), (8, 2)]), st.floats(1, 10),
       st.floats(1, 100))
def test_a_bridge_export_never_gets_cheaper_with_more_bytes_or_slower_with_a_faster_scale_out(nbytes, layout, more,
                                                                                               faster):
    cfg = _layout(*layout)
    base = ph.bridge_export_time(JOB.policy, nbytes, cfg, H100)
    assert base <= ph.bridge_export_time(JOB.policy, nbytes * more, cfg, H100)
    fast = attrs.evolve(H100, tiers=(H100.tiers[0], *(attrs.evolve(t, bandwidth=t.bandwidth * faster)
                                                      for t in H100.tiers[1:])))
    assert ph.bridge_export_time(JOB.policy, nbytes, cfg, fast) <= base
