"""Hybrid sharding, recompute variants, activation offload, sliding-window attention and
parallel blocks against hand calculations (each expected value is written out from the
formula, not read back from the model)."""

import math
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.model.train import recompute, sharding
from gclc.model.config import TrainConfig
from gclc.model.job import pinned_config, train_job
from gclc.model.train.offload_host import HOST_RESERVE
from gclc.model.train.memory import activation_bytes_per_layer, memory, model_state, params_per_gpu
from gclc.model.shape import ModelShape, attended_keys
from gclc.model.train.layer_cost import blend
from gclc.model.train.step import estimate
from gclc.model.train.workload import layer_forward
from gclc.solver.train.plan import plan

DESIGN = Path(__file__).parent.parent.parent / "data" / "dense_variants.gcl"
JOB = train_job(check_file(str(DESIGN)).design)
PART = JOB.partition
MISTRAL = JOB.shape                     # 32 layers, d 4096, 32 heads, 8 KV heads, window 4096
GPT = ModelShape(layers=48, hidden=6144, heads=64, kv_heads=64, head_dim=96, ffn=24576, vocab=51200, seq=2048,
                 mlp_matrices=2, tied_embeddings=True)


def cfg(**kw) -> TrainConfig:
    base = dict(batch=64, seq=2048, tp=8, dp=1, microbatch=4, stack="megatron")
    base.update(kw)
    return TrainConfig(**base)


# ------------------------------------------------------------------ hybrid sharding

def test_the_pinned_plan_reads_every_variant_from_the_file():
    c = pinned_config(JOB)
    assert (c.shard, c.recompute, c.recompute_every, c.offload, c.zero) == (8, "full", 2, 0.5, 3)


def test_hybrid_sharding_divides_the_state_by_the_group_not_by_all_replicas():
    c = cfg(tp=1, dp=32, zero=3, shard=8, stack="fsdp")
    params = params_per_gpu(GPT, c)
    weights, grads, optimizer = model_state(GPT, c)
    # bf16 weights and gradients (FSDP reduces in the parameter dtype), 12-byte Adam state, over 8
    assert (weights, grads, optimizer) == pytest.approx((params * 2 / 8, params * 2 / 8, params * 12 / 8))
    assert sum(model_state(GPT, attrs.evolve(c, shard=0))) == pytest.approx(params * 16 / 32)


def test_hybrid_sharding_gathers_inside_the_node_and_all_reduces_shards_across_nodes():
    # megatron stack: no overlap, fp32 gradients, hierarchical rings
    c = TrainConfig(batch=64, seq=8192, tp=1, dp=32, microbatch=2, zero=3, shard=8, stack="megatron")
    inner, outer = sharding.groups(c, PART.tiers)
    nvlink, leaf = PART.tiers[0], PART.tiers[1]
    assert [(s.tier.name, s.peers) for s in inner] == [(nvlink.name, 8)]
    assert [(s.tier.name, s.peers) for s in outer] == [(leaf.name, 4)]
    p = params_per_gpu(MISTRAL, c)
    rate = lambda t: t.bandwidth * t.efficiency  # noqa: E731
    # ring reduce-scatter / all-gather over 8: 7/8 of the bytes at the NVLink rate, and NCCL's
    # ring/Simple latency on one node (tuning.cc: base 8.4 us + 7 steps of 3.4 us)
    ring_latency = (8.4 + 7 * 3.4) * 1e-6
    rs = 7 / 8 * p * 4 / rate(nvlink) + ring_latency
    ag = 7 / 8 * p * 2 / rate(nvlink) + ring_latency
    # all-reduce of the 1/8 shard across 4 groups, one GPU a node, reduced in the NDR switches
    # (SHARP, NCCL's CollNet): the shard once through the link; with one GPU a node NCCL
    # steps the network as a tree (tuning.cc: 14 us, tree/Simple), and the wire both ways
    assert leaf.in_network_reduction
    ar = (p * 4 / 8) / rate(leaf) + 14e-6 + 2 * leaf.latency
    e = estimate(MISTRAL, c, PART)
    assert e.breakdown.dp == pytest.approx(c.microbatches * (rs + 2 * ag) + ar)


def test_plain_fsdp_is_the_shard_group_of_every_replica():
    c = TrainConfig(batch=64, seq=8192, tp=1, dp=32, microbatch=2, zero=3, stack="fsdp")
    assert sharding.groups(c, PART.tiers)[1] == ()
    assert estimate(MISTRAL, c, PART).breakdown.dp == estimate(MISTRAL, attrs.evolve(c, shard=32), PART).breakdown.dp


# ------------------------------------------------------------------ recompute variants

def test_every_second_layer_keeps_the_mean_of_full_and_none():
    s, b, h = 2048, 4, 6144
    none = activation_bytes_per_layer(GPT, cfg())
    assert activation_bytes_per_layer(GPT, cfg(recompute="full", recompute_every=2)) == \
        pytest.approx((2 * s * b * h + none) / 2)


def test_recomputing_the_mlp_drops_its_up_projection_and_activation_outputs():
    s, b, f, t = 2048, 4, 24576, 8
    none = activation_bytes_per_layer(GPT, cfg(stack="fsdp"))
    mlp = activation_bytes_per_layer(GPT, cfg(stack="fsdp", recompute="selective", recompute_modules=("mlp",)))
    assert none - mlp == pytest.approx(s * b * (2 * f + 2 * f) / t)   # GeLU: one up output, one activation
    norm = activation_bytes_per_layer(GPT, cfg(stack="fsdp", sp=True, recompute="selective",
                                               recompute_modules=("norm",)))
    # two norm outputs of 2 bytes per element, split over tp by sequence parallelism
    assert activation_bytes_per_layer(GPT, cfg(stack="fsdp", sp=True)) - norm == pytest.approx(s * b * 2 * 2 * 6144 / t)


def test_recompute_every_k_layers_costs_one_kth_of_recomputing_all():
    c = cfg(stack="megatron_core", seq=8192, tp=1, dp=8, microbatch=1, recompute="full")
    full = estimate(MISTRAL, c, PART).breakdown.recompute
    assert estimate(MISTRAL, attrs.evolve(c, recompute_every=4), PART).breakdown.recompute == pytest.approx(full / 4)


def test_recomputed_modules_add_their_forward_flops_and_collectives():
    h, f, layers = 6144, 24576, 48
    c = cfg(recompute="selective", recompute_modules=("mlp",), sp=True)
    assert recompute.flops_per_token(GPT, c) == pytest.approx(layers * 2 * 2 * h * f)
    assert recompute.tp_collectives(c) == 0.5           # the MLP input gathered again
    assert recompute.tp_collectives(cfg(recompute="full", recompute_every=2)) == 1.0


# ------------------------------------------------------------------ offload

def test_offload_moves_a_share_of_activations_to_host_and_keeps_one_layer():
    c = TrainConfig(batch=64, seq=8192, tp=1, dp=32, microbatch=1, zero=3, shard=8, stack="fsdp")
    kept = memory(MISTRAL, c).activations
    half = memory(MISTRAL, attrs.evolve(c, offload=0.5))
    assert half.offloaded == pytest.approx(kept / 2)
    assert half.activations == pytest.approx(kept / 2 + activation_bytes_per_layer(MISTRAL, c))
    assert half.total < memory(MISTRAL, c).total


def test_offload_copies_are_exposed_only_beyond_the_layers_compute():
    c = TrainConfig(batch=64, seq=8192, tp=1, dp=32, microbatch=1, zero=3, stack="fsdp", offload=0.5)
    c2c = attrs.evolve(PART, node=attrs.evolve(PART.node, host_link=450e9))   # NVLink-C2C class
    assert estimate(MISTRAL, c, c2c).breakdown.offload == 0.0
    # PCIe Gen5 (the DGX H100's 64 GB/s): ~1.1 GB per layer takes longer than a layer's forward
    layer = blend(MISTRAL, c, PART, False)
    copy = activation_bytes_per_layer(MISTRAL, c) / (64e9 * 0.85)
    expected = c.microbatches * 0.5 * 32 * (max(copy - layer.forward, 0) + max(copy - layer.backward, 0))
    assert copy > layer.forward
    assert estimate(MISTRAL, c, PART).breakdown.offload == pytest.approx(expected)


def test_offload_beyond_host_memory_is_infeasible_at_the_offload_pin():
    text = DESIGN.read_text().replace("units    = nodes x DGX_H100", "units    = nodes x DGX_H100 { dram = 64 GB }")
    text = text.replace("tp = 1 pp = 1", "tp = 1 pp = 1 cp = 1 microbatch = 1")   # 9.7 GB offloaded per GPU
    result = check_text(text, str(DESIGN))
    assert result.ok, result.diagnostics
    chosen = plan(train_job(result.design))
    assert chosen.best is None
    assert chosen.infeasibility.constraint == "host_dram"
    assert chosen.infeasibility.span.line == text.splitlines().index(
        next(line for line in text.splitlines() if "offload = offload" in line)) + 1
    assert chosen.infeasibility.limit == pytest.approx(64e9 * (1 - HOST_RESERVE))   # the node's DRAM, less its reserve
    assert "offloaded tensors" in chosen.infeasibility.message


# ------------------------------------------------------------------ local attention and parallel blocks

def test_a_window_counts_the_keys_each_query_sees():
    assert attended_keys(8192, 4096) == 4096 * (2 * 8192 - 4096) / 8192 == 6144
    assert attended_keys(8192, 8192) == attended_keys(8192, 0) == 8192
    full = attrs.evolve(MISTRAL, window=0)
    dropped = 32 * 4 * (8192 - 6144) * 32 * 128
    assert full.forward_flops_per_token() - MISTRAL.forward_flops_per_token() == pytest.approx(dropped)
    alternating = attrs.evolve(MISTRAL, global_every=2)     # Gemma 2 / GPT-OSS: local, global, ...
    assert alternating.local_layers == 16 and alternating.mean_keys() == (16 * 6144 + 16 * 8192) / 32


def test_flash_kernels_skip_what_the_window_masks_and_unfused_ones_do_not():
    c = TrainConfig(batch=64, seq=8192, tp=1, dp=8, microbatch=1, stack="megatron_core")
    attention = lambda cfg_, local: next(o for o in layer_forward(MISTRAL, cfg_, False, local)  # noqa: E731
                                         if o.kind == "attention")
    assert attention(c, True).flops / attention(c, False).flops == pytest.approx(6144 / 8192)
    assert attention(c, True).n == 4096 and attention(c, True).window and not attention(c, False).window
    # a window as long as the call's keys is a causal call, not a band
    assert not attention(attrs.evolve(c, seq=4096), True).window
    unfused = attrs.evolve(c, stack="megatron")
    assert attention(unfused, True) == attention(unfused, False)


def test_a_window_kernel_runs_at_the_share_its_tiles_give():
    # GPT-OSS: 128-key windows (config.json sliding_window). A query block of 128 rows computes
    # two 128-key tiles for one tile's worth of kept scores, plus the prologue the causal law
    # implies: N (1 + 2P) = 430 gives P = 151 / 128 tiles, so 128 / (128 + 128 + 151)
    from gclc.model import compute
    assert compute.attention_length_factor(128, window=True) == pytest.approx(128 / (128 + 128 + 151))
    # less waste than a causal call of the same length (its diagonal wastes half its one tile
    # and pays the whole prologue for it), and the window's share grows with the window
    assert compute.attention_length_factor(128) < compute.attention_length_factor(128, window=True)
    assert compute.attention_length_factor(256, window=True) > compute.attention_length_factor(128, window=True)


def test_unfused_attention_recomputes_nothing_in_its_backward():
    # flash kernels recompute the scores in the backward (2.5x the forward); unfused ones
    # (the scores through HBM, Megatron-LM 2021-22) differentiate two batched GEMMs (2x their
    # FLOPs) and move ~19 bytes per score against 13: 2x, like a GEMM
    from gclc.model.train.workload import backward_factor

    c = TrainConfig(batch=64, seq=2048, tp=8, dp=1, microbatch=1, stack="megatron_core")
    flash = next(o for o in layer_forward(GPT, c, False) if o.kind == "attention")
    unfused = next(o for o in layer_forward(GPT, attrs.evolve(c, stack="megatron"), False) if o.kind == "attention")
    assert unfused.m == 2048 and flash.m == 0
    assert (backward_factor(flash), backward_factor(unfused)) == (2.5, 2.0)


def test_a_parallel_block_halves_the_tensor_parallel_reductions():
    c = TrainConfig(batch=64, seq=8192, tp=8, dp=1, microbatch=1, sp=False, stack="megatron")
    sequential = attrs.evolve(MISTRAL, window=0)
    parallel = attrs.evolve(sequential, parallel_block=True)
    assert estimate(parallel, c, PART).breakdown.tp == pytest.approx(estimate(sequential, c, PART).breakdown.tp / 2)
    assert sequential.params - parallel.params == 32 * 4096       # one norm per layer fewer
    ops = [o.name for o in layer_forward(parallel, c, False)]
    assert "qkv + mlp up" in ops and "mlp up" not in ops
    assert math.isclose(parallel.forward_flops_per_token(), sequential.forward_flops_per_token(), rel_tol=1e-9)
