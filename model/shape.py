"""A transformer's shape and the FLOPs and parameters it implies.

FLOP convention (Megatron-LM, NeMo, PaLM): a matrix multiply of (m x k) by (k x n) is
2mnk FLOPs; attention scores and values count the full s x s product (no causal
discount); training is forward + backward = 3 x forward.
"""

from __future__ import annotations

import attrs

from ..compiler.design import Entity, Symbol


@attrs.frozen(cache_hash=True)
class ModelShape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    seq: int
    mlp_matrices: int = 3          # 3 for gated MLPs (SwiGLU), 2 for GELU/ReLU
    routed: int = 0                # routed experts (0 = dense)
    shared: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    dense_layers: int = 0          # leading layers with a dense MLP in an MoE model
    tied_embeddings: bool = False
    kv_rank: int = 0               # MLA: the cached latent per token and layer (0 = GQA/MHA)
    rope_dim: int = 0              # MLA: the decoupled rotary key cached beside the latent

    @classmethod
    def from_entity(cls, model: Entity) -> ModelShape:
        hidden, heads = model.get("hidden"), model.get("heads")
        experts = model.get("experts")
        gated = model.get("mlp", Symbol("swiglu")) == Symbol("swiglu")
        moe = {} if experts is None else {
            "routed": experts.get("routed"), "shared": experts.get("shared", 0), "top_k": experts.get("top_k"),
            "expert_ffn": experts.get("ffn", model.get("ffn")), "dense_layers": experts.get("dense_layers", 0)}
        mla = model.get("mla")
        latent = {} if mla is None else {"kv_rank": mla.get("kv_rank"), "rope_dim": mla.get("rope_dim", 0)}
        return cls(model.get("layers"), hidden, heads, model.get("kv_heads", heads),
                   model.get("head_dim", hidden // heads), model.get("ffn"), model.get("vocab"), model.get("seq"),
                   3 if gated else 2, tied_embeddings=bool(model.get("tied_embeddings", False)), **moe, **latent)

    # ------------------------------------------------------------ structure
    @property
    def is_moe(self) -> bool:
        return self.routed > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def attention_params(self) -> int:
        return self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """One expert's MLP."""
        return self.mlp_matrices * self.hidden * self.expert_ffn

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    def layer_params(self, moe: bool) -> int:
        if not moe:
            return self.attention_params + self.dense_mlp_params + 2 * self.hidden
        experts = (self.routed + self.shared) * self.expert_params
        return self.attention_params + experts + self.hidden * self.routed + 2 * self.hidden

    @property
    def params(self) -> int:
        dense = (self.layers - self.moe_layers) * self.layer_params(False)
        return dense + self.moe_layers * self.layer_params(True) + self.embedding_params + self.hidden

    @property
    def active_params(self) -> int:
        """Parameters touched per token: top_k routed experts plus the shared ones."""
        if not self.is_moe:
            return self.params
        idle = (self.routed - self.top_k) * self.expert_params * self.moe_layers
        return self.params - idle

    # ------------------------------------------------------------ FLOPs per token
    def forward_flops_per_token(self, seq: int | None = None) -> float:
        """Matrix-multiply FLOPs of one token's forward pass, logits included."""
        s = seq or self.seq
        attention_core = 4 * s * self.heads * self.head_dim
        dense = 2 * (self.attention_params + self.dense_mlp_params) + attention_core
        moe = 2 * (self.attention_params + (self.top_k + self.shared) * self.expert_params
                   + self.hidden * self.routed) + attention_core
        layers = (self.layers - self.moe_layers) * dense + self.moe_layers * moe
        return layers + 2 * self.hidden * self.vocab

    def model_flops_per_token(self, seq: int | None = None) -> float:
        """Training FLOPs per token as MFU counts them: 3 x forward."""
        return 3 * self.forward_flops_per_token(seq)

    def attention_core_flops_per_token(self, seq: int | None = None) -> float:
        """Forward FLOPs of scores and values over all layers (what selective recompute redoes)."""
        return self.layers * 4 * (seq or self.seq) * self.heads * self.head_dim
