"""Memory per GPU against Korthikanti et al. (2022) and the ZeRO paper."""

import pytest

from gclc.model.config import TrainConfig
from gclc.model.train.memory import activation_bytes_per_layer, memory, model_state, params_per_gpu
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
