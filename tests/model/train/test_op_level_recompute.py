"""torchtitan's op-level selective AC (recompute_modules = [op_level]) against hand counts of
its policy: torchtitan/parallelisms/parallelize_llama.py `_save_list` (2024-12) saves the
outputs of matmuls and of the attention kernel, except every second matmul of a block."""

import pytest

from gclc.model.train import recompute
from gclc.model.config import TrainConfig
from gclc.model.train.memory import activation_bytes_per_layer
from gclc.model.shape import ModelShape
from gclc.model.train.workload import layer_forward

# Llama 3.1 8B (Meta's params.json): 32 layers, hidden 4096, 32 heads, 8 KV heads, SwiGLU 14336
LLAMA8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256,
                     seq=8192, mlp_matrices=3)
GPT = ModelShape(layers=48, hidden=6144, heads=64, kv_heads=64, head_dim=96, ffn=24576, vocab=51200, seq=2048,
                 mlp_matrices=2, tied_embeddings=True)


def cfg(**kw):
    base = dict(batch=16, seq=8192, dp=8, microbatch=2, zero=3, stack="fsdp", recompute="selective",
                recompute_modules=("op_level",))
    base.update(kw)
    return TrainConfig(**base)


def test_saved_matmuls_alternate_in_forward_order():
    # gated: q k v o w1 w3 w2 -> q, v, w1 and w2 saved; ungated: q k v o up down -> q, v, up
    assert [saved for _, _, saved in recompute.op_level_matmuls(LLAMA8B)] == [True, False, True, False, True, False, True]
    assert [saved for _, _, saved in recompute.op_level_matmuls(GPT)] == [True, False, True, False, True, False]


def test_llama_8b_keeps_its_input_q_v_attention_w1_and_w2_outputs():
    h, kvd, ffn, heads = 4096, 8 * 128, 14336, 32
    # bf16: input, q, attention output, w2 output (h each), v, w1; fp32 softmax statistics per head
    per_token = 2 * (4 * h + kvd + ffn) + 4 * heads
    assert per_token == 63616
    tokens = 2 * 8192
    assert activation_bytes_per_layer(LLAMA8B, cfg()) == pytest.approx(tokens * per_token)


def test_op_level_keeps_less_than_the_attention_core_recompute_and_more_than_full():
    op = activation_bytes_per_layer(LLAMA8B, cfg())
    core = activation_bytes_per_layer(LLAMA8B, cfg(recompute_modules=()))
    full = activation_bytes_per_layer(LLAMA8B, cfg(recompute="full", recompute_modules=()))
    assert full < op < core


def test_recomputed_flops_are_k_o_and_the_second_up_projection():
    h, kvd, ffn = 4096, 8 * 128, 14336
    per_layer = 2 * (h * kvd + h * h + h * ffn)   # k, o (32 x 128 = h) and w3, 2 FLOPs a multiply-add
    assert recompute.flops_per_token(LLAMA8B, cfg()) == pytest.approx(32 * per_layer)
    # every other layer: half
    assert recompute.flops_per_token(LLAMA8B, cfg(recompute_every=2)) == pytest.approx(16 * per_layer)


def test_recompute_time_is_the_recomputed_matmuls_and_all_elementwise_work():
    c = cfg()
    ops = tuple((op.name, float(i + 1)) for i, op in enumerate(layer_forward(LLAMA8B, c, False)))
    t = dict(ops)
    kv_share = 8 / (32 + 16)
    expected = kv_share * t["qkv"] + t["attention out"] + 0.5 * t["mlp up"] + t["elementwise"]
    assert recompute.time(LLAMA8B, c, False, 99.0, ops) == pytest.approx(expected)


def test_sequence_parallel_op_level_gathers_both_inputs_again():
    assert recompute.tp_collectives(cfg(tp=8, dp=1, sp=True)) == 1.0
    assert recompute.tp_collectives(cfg(tp=8, dp=1, sp=False)) == 0.0


def test_op_level_relaunches_the_unsaved_matmuls_and_the_elementwise_kernels_not_attention():
    from gclc.model.train import dpu
    # one layer's forward: qkv, attention, attention out, mlp up, mlp down, elementwise (one kernel
    # each as model/train/workload.py counts them); backward twice that: 3 x 6 = 18 before any recompute
    base = 18
    op = dpu._kernels(LLAMA8B, cfg(), False)
    assert op == base + 3 + 1                  # k, o, w3 (the second up projection) and the elementwise work
    assert dpu._kernels(GPT, cfg(), False) == base + 3 + 1   # ungated: k, o and the down projection
    assert dpu._kernels(LLAMA8B, cfg(recompute_modules=()), False) == base + 1      # the attention kernel alone
    assert dpu._kernels(LLAMA8B, cfg(recompute_modules=("norm",)), False) == base + 1   # the norms' elementwise
    assert dpu._kernels(LLAMA8B, cfg(recompute_modules=("core_attention", "mlp")), False) == base + 1 + 2 + 1
    assert dpu._kernels(LLAMA8B, cfg(recompute_every=2), False) == base + (3 + 1) / 2
    assert dpu._kernels(LLAMA8B, cfg(recompute="full", recompute_modules=()), False) == base + 6
    assert dpu._kernels(LLAMA8B, cfg(recompute="none", recompute_modules=()), False) == base
