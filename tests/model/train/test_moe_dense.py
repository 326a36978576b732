"""Where the MoE work (expert replicas, MLA, MTP, context parallelism) meets the dense
variants (hybrid sharding, recompute modules, sliding-window attention): hand calculations
and laws for the combination, and the layer cache's key."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.train import context, layer_cost, recompute, sharding, step
from gclc.model.config import TrainConfig
from gclc.model.job import pinned_config, train_job
from gclc.model.train.memory import dense_params_per_gpu, expert_params_per_gpu, model_state
from gclc.model.shape import attended_keys
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()
JOB = train_job(check_file(str(Path(__file__).parent.parent.parent / "data" / "moe.gcl"), {"nodes": "4"}).design)
CFG = pinned_config(JOB)          # tp1 pp1 cp2 ep16 dp16 mb1, bf16, 32 GPUs
SHAPE = JOB.shape                 # DeepSeek-V3-like, 8 layers, MLA, mtp 1
PART = JOB.partition


# ------------------------------------------------------------------ hybrid sharding x experts

def test_an_experts_state_is_sharded_over_its_replicas_inside_one_shard_group():
    # ep 4 over tp 1 x cp 2 x dp 16 = 32 ranks: each expert has 8 replicas; shard groups of
    # 8 dp x cp ranks make 4 instances, each holding 2 of an expert's replicas
    c = attrs.evolve(CFG, ep=4, shard=8, zero=3)
    assert (sharding.expert_dp(c), sharding.expert_shards(c)) == (8, 2)
    dense, experts = dense_params_per_gpu(SHAPE, c), expert_params_per_gpu(SHAPE, c)
    grad = int(c.behaviour("grad_bytes"))
    assert model_state(SHAPE, c) == pytest.approx((2 * (dense / 8 + experts / 2), grad * (dense / 8 + experts / 2),
                                                   12 * (dense / 8 + experts / 2)))
    # without hybrid sharding: dense over all 32 dp x cp ranks, an expert over its 8 replicas
    plain = attrs.evolve(c, shard=0)
    assert model_state(SHAPE, plain)[2] == pytest.approx(12 * (dense / 32 + experts / 8))


def test_an_ep_group_wider_than_a_shard_group_leaves_each_expert_whole_in_it():
    # ep 16 spans two shard groups of 8: one replica of an expert per group
    c = attrs.evolve(CFG, shard=8, zero=1)
    assert sharding.expert_shards(c) == 1
    inner, outer = sharding.groups(c, PART.tiers, expert=True)
    assert inner == ()
    peers = 1
    for s in outer:
        peers *= s.peers
    assert peers == sharding.expert_dp(c) == 2   # the all-reduce still spans both replicas


def test_a_shard_group_of_every_replica_is_plain_zero_for_experts_too():
    for zero in (1, 3):
        c = attrs.evolve(CFG, zero=zero)
        full = attrs.evolve(c, shard=c.dp * c.cp)
        assert estimate(SHAPE, full, PART).breakdown.dp == estimate(SHAPE, c, PART).breakdown.dp
        assert estimate(SHAPE, full, PART).breakdown.optimizer == estimate(SHAPE, c, PART).breakdown.optimizer


def test_hybrid_sharding_keeps_more_expert_state_and_a_slower_adam_step():
    c = attrs.evolve(CFG, ep=4, zero=1)
    hybrid = attrs.evolve(c, shard=8)
    assert model_state(SHAPE, hybrid)[2] > model_state(SHAPE, c)[2]
    assert estimate(SHAPE, hybrid, PART).breakdown.optimizer > estimate(SHAPE, c, PART).breakdown.optimizer


# ------------------------------------------------------------------ windows x MLA x MTP

def test_attention_flops_use_mlas_widths_over_the_windows_mean_keys():
    shape = attrs.evolve(SHAPE, window=1024, global_every=2)
    s = 4096
    # 8 layers, every 2nd global: 4 local layers seeing w (2s - w) / s keys, 4 seeing s
    mean = (4 * 1024 * (2 * s - 1024) / s + 4 * s) / 8
    assert shape.mean_keys(s) == pytest.approx(mean)
    per_layer = 2 * mean * 128 * ((128 + 64) + 128)     # scores over qk_dim 192, values over 128
    assert shape.attention_core_flops_per_token(s) == pytest.approx((8 + 1) * per_layer)   # MTP's layer too


def test_recomputing_the_mlp_redoes_the_mtp_layers_experts():
    c = attrs.evolve(CFG, recompute="selective", recompute_modules=("mlp",))
    routed = (SHAPE.top_k + SHAPE.shared) * SHAPE.expert_params
    expected = 2 * (1 * SHAPE.dense_mlp_params + (7 + 1) * routed)   # 1 dense layer; 7 MoE + 1 MTP layer
    assert recompute.flops_per_token(SHAPE, c) == pytest.approx(expected)
    full = attrs.evolve(CFG, recompute="full")
    logits = 2 * SHAPE.hidden * SHAPE.vocab
    assert recompute.flops_per_token(SHAPE, full) == pytest.approx(SHAPE.forward_flops_per_token(4096) - 2 * logits)


# ------------------------------------------------------------------ context parallelism x windows

def test_a_window_shorter_than_a_chunk_balances_contiguous_chunks():
    c = TrainConfig(batch=8, seq=8192, cp=4, cp_balanced=False)
    assert context.causal_imbalance(c) == pytest.approx(2 - 1 / 4)
    assert context.causal_imbalance(c, 8192) == pytest.approx(2 - 1 / 4)
    # window 1024: the last rank's 2048 queries each see 1024 keys; the mean rank a quarter
    # of all the pairs, 1024 x 8192 - 1024^2 / 2
    assert context.causal_imbalance(c, 1024) == pytest.approx(2048 * 1024 / ((1024 * 8192 - 1024 ** 2 / 2) / 4))


@given(cp=st.sampled_from([2, 4, 8, 16]), small=st.integers(1, 8192), large=st.integers(1, 8192))
def test_the_causal_imbalance_grows_with_the_window_up_to_the_full_one(cp, small, large):
    small, large = sorted((small, large))
    c = TrainConfig(batch=8, seq=8192, cp=cp, cp_balanced=False)
    low, high = context.causal_imbalance(c, small), context.causal_imbalance(c, large)
    assert 1.0 - 1e-9 <= low <= high + 1e-9 <= 2 - 1 / cp + 2e-9


def test_attention_in_a_local_layer_does_the_windows_share_of_the_work():
    shape = attrs.evolve(SHAPE, window=512)
    from gclc.model.train.workload import layer_forward
    full = next(op for op in layer_forward(shape, CFG, True) if op.kind == "attention")
    local = next(op for op in layer_forward(shape, CFG, True, True) if op.kind == "attention")
    assert local.flops == pytest.approx(full.flops * attended_keys(4096, 512) / 4096)
    assert (full.k, local.n) == (shape.qk_dim, 512)


# ------------------------------------------------------------------ the layer cache

_NEW = {int: lambda v: v + 1, float: lambda v: v + 0.5, bool: lambda v: not v, str: lambda v: v + "x",
        tuple: lambda v: (*v, "x"), type(None): lambda v: True}


def test_the_layer_cache_key_holds_every_field_a_layer_reads():
    args = (SHAPE, CFG, PART, True, False)
    base = layer_cost.layer_key(*args)
    for field in attrs.fields(TrainConfig):
        if field.name in layer_cost.LAYER_NEUTRAL or field.name in layer_cost.PLACEMENT:
            continue
        value = getattr(CFG, field.name)
        changed = attrs.evolve(CFG, **{field.name: _NEW[type(value)](value)})
        assert layer_cost.layer_key(SHAPE, changed, PART, True, False) != base, field.name
    assert layer_cost.layer_key(SHAPE, CFG, PART, True, True) != base
    assert layer_cost.layer_key(SHAPE, CFG, PART, False, False) != base


def test_placement_reaches_the_layer_key_through_the_tp_and_cp_strides():
    """pp, dp and the order are in the key only as the strides of the TP and CP groups:
    a change that moves a group changes the key, one that moves neither shares the entry."""
    cfg = attrs.evolve(CFG, tp=2, order=("tp", "dp", "cp", "pp"))   # CP's stride is tp x dp
    key = lambda c: layer_cost.layer_key(SHAPE, c, PART, True, False)  # noqa: E731
    assert key(attrs.evolve(cfg, dp=8)) != key(cfg)                      # CP's groups move
    assert key(attrs.evolve(cfg, order=("dp", "tp", "cp", "pp"))) != key(cfg)   # TP's groups move
    assert key(attrs.evolve(cfg, pp=4)) == key(cfg)                      # the outermost dimension moves nothing
    assert key(attrs.evolve(CFG, dp=8, pp=4)) == key(CFG)                # CP inside dp and pp: nothing moves
    for moved in (attrs.evolve(cfg, dp=8), attrs.evolve(cfg, order=("dp", "tp", "cp", "pp"))):
        warm = estimate(SHAPE, cfg, PART).breakdown, estimate(SHAPE, moved, PART).breakdown
        step.clear_caches()
        assert estimate(SHAPE, moved, PART).breakdown == warm[1]
        assert (warm[1].tp, warm[1].cp) != (warm[0].tp, warm[0].cp)    # the move changed the layer's cost


@pytest.mark.parametrize("change", [dict(cp_balanced=False), dict(ep_overlap=True), dict(ep=8), dict(tp=2, sp=True),
                                    dict(recompute="selective", recompute_modules=("mlp",)),
                                    dict(recompute="full", recompute_every=2)])
def test_a_warm_cache_answers_like_a_cold_one(change):
    shape = attrs.evolve(SHAPE, window=1024, global_every=2)
    base = attrs.evolve(CFG, recompute="selective") if "recompute_modules" in change else CFG
    variant = attrs.evolve(base, **change)
    warm_base = estimate(shape, base, PART).step_time      # fills the cache with the base's layers
    warm = estimate(shape, variant, PART).step_time
    step.clear_caches()
    cold = estimate(shape, variant, PART).step_time
    assert warm == cold
    assert warm != warm_base        # the field matters, so a stale entry would show


@pytest.mark.parametrize("change", [{}, dict(ep=8, pp=2, dp=8), dict(tp=2, sp=True, recompute="full"),
                                    dict(microbatch=2, zero=3, cp=1, dp=32), dict(precision="fp8", ep_overlap=True)])
def test_the_search_bound_terms_are_the_estimates_own(change):
    """The search bounds a branch with `bound_terms` instead of a whole estimate: the
    same floats, to the last bit, or the search would prune differently."""
    cfg = attrs.evolve(CFG, **change)
    for shape in (SHAPE, attrs.evolve(SHAPE, window=1024, global_every=2)):
        b = estimate(shape, cfg, PART).breakdown
        step.clear_caches()
        assert step.bound_terms(shape, cfg, PART) == (b.compute, b.tp, b.ep, b.optimizer)


def test_a_warm_cache_answers_like_a_cold_one_when_only_sequence_parallelism_changes():
    """Sequence parallelism splits an MoE layer's elementwise work over the TP ranks: the
    memoized work after the routed experts (model/train/layer_cost.py) must tell sp apart."""
    base = attrs.evolve(CFG, tp=2, dp=8, sp=True)
    variant = attrs.evolve(base, sp=False)
    step.clear_caches()
    warm_base = estimate(SHAPE, base, PART).breakdown.compute
    warm = estimate(SHAPE, variant, PART).breakdown.compute
    step.clear_caches()
    assert estimate(SHAPE, variant, PART).breakdown.compute == warm
    assert warm != warm_base
