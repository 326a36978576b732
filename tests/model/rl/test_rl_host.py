"""The training pool's copies to and from host memory (model/rl/host.py): a faster host link never
slows them, nor a colocated step; more bytes never make them faster; colocated pools copy what
apart ones do and more; pageable copies never beat pinned ones of the same bytes."""

from __future__ import annotations

from pathlib import Path

import attrs
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.rl import host
from gclc.model.rl.job import rl_job
from gclc.model.rl.stacks import STACKS
from gclc.model.rl.step import COLOCATED, Phases, compose
from gclc.testing import load_profile

load_profile()
SMALL = Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl"
JOB = rl_job(check_file(str(SMALL)).design["grpo"])
H100 = JOB.partition("h100")


def _estimate():
    from gclc.solver.rl.pools import train_pool

    return train_pool(JOB, H100, 8, 600, JOB.memory_of(H100)).policy


ESTIMATE = _estimate()
links = st.floats(1e9, 1e12, allow_nan=False)
shares = st.sampled_from([0.0, 0.5, 1.0])


def _with_link(link: float):
    node = attrs.evolve(H100.node, host_link=link)
    return attrs.evolve(H100, node=node)


@given(links, st.floats(1, 100), st.floats(0, 1e11), shares, st.booleans(), st.booleans())
def test_a_faster_host_link_never_slows_the_copies_nor_a_colocated_step(link, faster, engine, share, colocated,
                                                                         shared):
    slow = host.host_moves(ESTIMATE, engine, share, colocated, shared, _with_link(link))
    fast = host.host_moves(ESTIMATE, engine, share, colocated, shared, _with_link(link * faster))
    assert 0 <= fast <= slow
    p = Phases(10.0, 5.0, 2.0, 3.0, 1.0, slow)
    assert compose(attrs.evolve(p, offload=fast), COLOCATED, 0).step_time <= compose(p, COLOCATED, 0).step_time


@given(links, st.floats(0, 1e11), st.floats(1, 10), shares, st.booleans())
def test_more_engine_bytes_or_a_reference_never_make_the_copies_faster(link, engine, more, share, shared):
    partition = _with_link(link)
    base = host.host_moves(ESTIMATE, engine, share, True, shared, partition)
    assert base <= host.host_moves(ESTIMATE, engine * more, share, True, shared, partition)
    assert host.host_moves(ESTIMATE, engine, 0.0, True, shared, partition) <= base


@given(links, st.floats(0, 1e11), shares, st.booleans())
def test_colocated_pools_copy_what_apart_ones_do_and_more(link, engine, share, shared):
    partition = _with_link(link)
    apart = host.host_moves(ESTIMATE, engine, share, False, shared, partition)
    together = host.host_moves(ESTIMATE, engine, share, True, shared, partition)
    moved = ESTIMATE.memory.optimizer
    assert together >= apart + moved / host.PAGEABLE_OUT * (1 - 1e-12)


def test_the_copies_follow_the_software():
    """NeMo-RL's colocated step: the optimizer state through pageable memory (out at the measured
    1.8 GB/s, in at 16.1 GB/s), both sides' weights out and back pinned, the gradients freed
    uncopied; apart, only the reference's swap (three weight copies)."""
    e, link = ESTIMATE, host.host_link(H100)
    assert link == 64e9 * 0.85       # DGX H100's PCIe Gen5 x16 (std/nvidia.gcl) at the pinned efficiency
    engine = 3e9
    moved = e.memory.optimizer     # precision-aware Adam's state as the training model holds it (10 B a parameter)
    optimizer = moved / 1.8e9 + moved / 16.1e9
    colocated = host.host_moves(e, engine, 1.0, True, False, H100)
    assert abs(colocated - (optimizer + 2 * (e.memory.weights + engine) / link + 3 * e.memory.weights / link)) \
        <= 1e-9 * colocated
    assert host.host_moves(e, engine, 1.0, False, False, H100) == 3 * e.memory.weights / link
    assert host.host_moves(e, engine, 0.0, False, False, H100) == 0.0
    # the engine reading the trained weights in place moves neither side's weights
    assert host.host_moves(e, engine, 0.0, True, True, H100) == optimizer


def test_pageable_copies_never_beat_pinned_ones():
    slow_link = _with_link(1e9)     # a link slower than the pageable rates caps them
    e = ESTIMATE
    moved = e.memory.optimizer
    assert host.optimizer_round_trip(e, host.host_link(slow_link)) == 2 * moved / host.host_link(slow_link)
    assert host.optimizer_round_trip(e, host.host_link(H100)) >= host.weights_round_trip(moved, host.host_link(H100))


def test_a_reference_of_the_policys_shape_waits_in_host_memory_and_is_swapped():
    """NeMo-RL loads the reference into the policy's own buffers for its log-probabilities: it takes
    no GPU memory of its own (the pool keeps only other models' weights) and costs the swap; a
    reference of another shape is kept on the GPUs, sharded, as the reward model is."""
    from gclc.solver.rl.pools import other_weights, swaps_reference

    assert JOB.reference == JOB.policy and swaps_reference(JOB)
    assert other_weights(JOB, 8) == 0.0
    smaller = attrs.evolve(JOB.policy, layers=JOB.policy.layers // 2)
    other = attrs.evolve(JOB, reference=smaller)
    assert not swaps_reference(other)
    assert other_weights(other, 8) == smaller.params * 2 / 8
    assert not swaps_reference(attrs.evolve(JOB, reference=None))


def test_the_optimizer_moves_as_nemo_rl_keeps_it():
    """NeMo-RL runs Megatron's precision-aware optimizer with fp32 dtypes (grpo_math_1B.yaml), which keeps
    the fp32 master as 16-bit remainders: the training pool states it (its default), so the training model
    holds 10 bytes a parameter, not 12, and that is what moves; a pool that states it off holds 12."""
    from gclc.model.train import optimizer
    from gclc.model.train.memory import memory
    from gclc.solver.rl.pools import train_pool

    e = ESTIMATE
    c = e.config
    assert c.optimizer_state == c.master_weights == "fp32" and c.precision_aware_optimizer and c.zero in (1, 2)
    assert optimizer.state_bytes(c) == 10
    whole = memory(JOB.policy, attrs.evolve(c, precision_aware_optimizer=False)).optimizer
    assert abs(whole - e.memory.optimizer * 12 / 10) <= 1e-9 * whole
    trip = host.optimizer_round_trip(e, host.host_link(H100))
    assert trip == e.memory.optimizer / host.PAGEABLE_OUT + e.memory.optimizer / host.PAGEABLE_IN
    text = SMALL.read_text().replace("  generate {", "  train { precision_aware_optimizer = false }\n  generate {", 1)
    off = rl_job(check_file(str(SMALL), text=text).design["grpo"])
    pool = train_pool(off, off.partition("h100"), 8, 600, off.memory_of(off.partition("h100"))).policy
    assert not pool.config.precision_aware_optimizer and optimizer.state_bytes(pool.config) == 12


@given(links, st.floats(0, 1e11), shares, st.booleans(), st.booleans())
def test_a_release_before_pull_1404_moves_the_optimizer_apart_too(link, engine, share, shared, colocated):
    """NeMo-RL v0.4 (`stack = nemo_rl_0_4`) moves Adam's state out and back before scoring whatever the
    placement; later releases only colocated: the old release never copies less, and apart it copies
    exactly the optimizer's round trip more."""
    partition = _with_link(link)
    new = host.host_moves(ESTIMATE, engine, share, colocated, shared, partition, STACKS["nemo_rl"])
    old = host.host_moves(ESTIMATE, engine, share, colocated, shared, partition, STACKS["nemo_rl_0_4"])
    trip = host.optimizer_round_trip(ESTIMATE, host.host_link(partition))
    assert old == new if colocated else abs(old - (new + trip)) <= 1e-9 * old


def test_a_pool_that_pins_plain_data_parallelism_runs_without_the_precision_aware_optimizer():
    """The precision-aware optimizer needs the distributed one (Megatron's OptimizerConfig asserts it), so
    NeMo-RL's default gives way where the training pool pins ZeRO 0: the pool plans at 12 bytes a
    parameter (the search had no ZeRO stage left and raised an internal error)."""
    from gclc.model.train import optimizer
    from gclc.solver.rl.pools import train_pool

    text = SMALL.read_text().replace("  generate {", "  train { parallelism { zero = 0 } }\n  generate {", 1)
    pinned = rl_job(check_file(str(SMALL), text=text).design["grpo"])
    pool = train_pool(pinned, pinned.partition("h100"), 8, 600, pinned.memory_of(pinned.partition("h100"))).policy
    assert pool.config.zero == 0 and not pool.config.precision_aware_optimizer
    assert optimizer.state_bytes(pool.config) == 12
