"""FLOPs and parameters against hand calculations."""

import pytest

from gclc.model.shape import ModelShape

GPT3 = ModelShape(layers=96, hidden=12288, heads=96, kv_heads=96, head_dim=128, ffn=49152, vocab=51200,
                  seq=2048, mlp_matrices=2, tied_embeddings=True)


def test_gpt3_params_are_175b():
    assert GPT3.params == pytest.approx(175e9, rel=0.005)


def test_model_flops_match_megatron_formula():
    # Narayanan et al. (SC21) eq. 3 without recomputation: 72 B s l h^2 (1 + s/6h + V/12lh)
    # per batch of B sequences of s tokens; per token divide by B s.
    l, h, s, v = 96, 12288, 2048, 51200
    megatron = 72 * l * h**2 * (1 + s / (6 * h) + v / (12 * l * h))
    assert GPT3.model_flops_per_token() == pytest.approx(megatron, rel=1e-3)


def test_six_n_plus_attention():
    # 6 N (non-embedding weights) + 12 l h s (attention) + 6 h V (logits)
    n = GPT3.layers * (GPT3.attention_params + GPT3.dense_mlp_params)
    expected = 6 * n + 12 * GPT3.layers * GPT3.hidden * GPT3.seq + 6 * GPT3.hidden * GPT3.vocab
    assert GPT3.model_flops_per_token() == pytest.approx(expected)


def test_attention_term_grows_with_sequence():
    short, long = GPT3.model_flops_per_token(2048), GPT3.model_flops_per_token(8192)
    assert long - short == pytest.approx(12 * 96 * 12288 * (8192 - 2048))


def test_moe_active_params():
    # DeepSeek-V3: 671 B total, 37 B activated (DeepSeek-V3 technical report, abstract).
    # The shape treats MLA attention as MHA, so allow a few percent.
    ds = ModelShape(61, 7168, 128, 128, 128, 18432, 129280, 4096, routed=256, shared=1, top_k=8,
                    expert_ffn=2048, dense_layers=3)
    assert ds.params == pytest.approx(671e9, rel=0.03)
    assert ds.active_params == pytest.approx(37e9 + 17e9, rel=0.1)  # + the MHA-vs-MLA difference
    assert ds.model_flops_per_token() < 6 * ds.active_params * 1.2


def test_stated_positions_and_norms_count_their_weights():
    """GPT-3 as published: learned positions (2,048 x 12,288, Megatron's max_position_embeddings x
    hidden) and LayerNorm (a scale and a bias per norm: 2 per layer and the final one)."""
    import attrs

    gpt3 = attrs.evolve(GPT3, position_embedding="learned", normalization="layernorm")
    norms = (2 * GPT3.layers + 1) * GPT3.hidden
    assert gpt3.params - GPT3.params == 2048 * 12288 + norms
    assert attrs.evolve(GPT3, position_embedding="rope", normalization="rmsnorm").params == GPT3.params
