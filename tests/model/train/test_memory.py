"""Memory per GPU against Korthikanti et al. (2022) and the ZeRO paper."""

import pytest

from gclc.model.config import TrainConfig
from gclc.model.train.memory import (activation_bytes_per_layer, gathered_bytes, memory, model_state, params_per_gpu,
                                     weight_bytes)
from gclc.model.shape import ModelShape

GPT = ModelShape(layers=48, hidden=6144, heads=64, kv_heads=64, head_dim=96, ffn=24576, vocab=51200, seq=2048,
                 mlp_matrices=2, tied_embeddings=True)


def cfg(**kw):
    base = dict(batch=8, seq=2048, tp=8, microbatch=4, stack="megatron")
    base.update(kw)
    return TrainConfig(**base)


def test_activations_without_recompute_match_korthikanti_eq2():
    # s b h (10 + 24/t + 5 a s / (h t)) bytes per layer with tensor parallelism
    s, b, h, a, t = 2048, 4, 6144, 64, 8
    expected = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert activation_bytes_per_layer(GPT, cfg()) == pytest.approx(expected)


def test_sequence_parallel_and_selective_recompute_match_korthikanti():
    s, b, h, t = 2048, 4, 6144, 8
    assert activation_bytes_per_layer(GPT, cfg(sp=True, recompute="selective")) == pytest.approx(s * b * h * 34 / t)


def test_full_recompute_keeps_the_layer_input():
    s, b, h, t = 2048, 4, 6144, 8
    assert activation_bytes_per_layer(GPT, cfg(recompute="full")) == pytest.approx(2 * s * b * h)
    assert activation_bytes_per_layer(GPT, cfg(recompute="full", sp=True)) == pytest.approx(2 * s * b * h / t)


def test_mixed_precision_adam_is_18_bytes_per_param_without_sharding():
    weights, grads, optimizer = model_state(GPT, cfg(tp=1, zero=0))
    assert (weights + grads + optimizer) / params_per_gpu(GPT, cfg(tp=1)) == pytest.approx(18)


def test_zero_stages_shard_progressively():
    totals = [sum(model_state(GPT, cfg(tp=1, dp=8, zero=z))) for z in range(4)]
    assert totals == sorted(totals, reverse=True)
    weights, grads, optimizer = model_state(GPT, cfg(tp=1, dp=8, zero=3))
    assert (weights + grads + optimizer) * 8 / params_per_gpu(GPT, cfg(tp=1)) == pytest.approx(18)


def test_memory_total_is_the_sum_of_its_rows():
    m = memory(GPT, cfg(pp=4, dp=2, batch=64))
    assert m.total == pytest.approx(sum(v for _, v in m.rows()))


@pytest.mark.parametrize("stack", ["fsdp", "fsdp_compiled"])
def test_fsdps_reduction_dtype_moves_through_the_collective_and_holds_no_buffer(stack):
    # FSDP casts the reduced gradient shard to its flat parameter's dtype (torch FSDP1
    # `_cast_grad_to_param_dtype`): an fp32 reduction holds what a bf16 one holds; Megatron's
    # fp32 gradient buffer is held (its 4 bytes a gradient, model/train/optimizer.py grad_bytes)
    import attrs

    cfg = TrainConfig(batch=64, seq=2048, dp=8, zero=3, stack=stack)
    assert model_state(GPT, attrs.evolve(cfg, grad_reduce="fp32")) == model_state(GPT, cfg)
    mcore = TrainConfig(batch=64, seq=2048, dp=8, zero=1, stack="megatron_core")
    wide = model_state(GPT, attrs.evolve(mcore, grad_reduce="fp32"))
    assert wide[1] == pytest.approx(2 * model_state(GPT, attrs.evolve(mcore, grad_reduce="bf16"))[1])


@pytest.mark.parametrize("fp8_params, per_tensor, mx", [
    # bf16 weights and the GEMMs' rowwise and columnwise copies across micro-batches (Transformer
    # Engine "Handling transposes"; model/train/quantized.py): 2 + 2 x 1 (Hopper: the fp8 data and
    # its transpose), 2 + 2 x (1 + 1/32) in MXFP8 (one E8M0 scale per 32 values, OCP MX v1.0)
    (False, 2 + 2 * 1, 2 + 2 * (1 + 1 / 32)),
    # fp8 weights alone (--fp8-param-gather), both usages: 2 x 1, and 2 x (1 + 1/32) in MXFP8
    (True, 2 * 1, 2 * (1 + 1 / 32)),
])
def test_fp8_weights_hold_both_usages_and_an_mx_chip_their_block_scales(fp8_params, per_tensor, mx):
    hopper = cfg(precision="fp8", fp8_params=fp8_params, stack="megatron_core")
    blackwell = cfg(precision="fp8", fp8_params=fp8_params, stack="megatron_core", mx_fp8=True)
    assert weight_bytes(hopper) == per_tensor and weight_bytes(blackwell) == pytest.approx(mx)
    # the generic fp8 on an MX chip holds what a job stating mxfp8 holds
    assert weight_bytes(blackwell) == weight_bytes(cfg(precision="mxfp8", fp8_params=fp8_params, stack="megatron_core"))
    assert model_state(GPT, blackwell)[0] == pytest.approx(model_state(GPT, hopper)[0] * mx / per_tensor)
    # ZeRO-3's gathered layer: Hopper holds the gathered data and the transpose made from it, an MX
    # chip one usage at a time (Megatron-FSDP gathers the columnwise buffer for the backward)
    sharded = dict(precision="fp8", fp8_params=True, stack="megatron_core", tp=1, dp=8, zero=3)
    assert gathered_bytes(GPT, cfg(**sharded, mx_fp8=True)) < gathered_bytes(GPT, cfg(**sharded))
