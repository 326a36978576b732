"""A transformer's shape and the FLOPs and parameters it implies.

FLOP convention (Megatron-LM, NeMo, PaLM): a matrix multiply of (m x k) by (k x n) is
2mnk FLOPs; attention scores and values count the full s x s product (no causal
discount); training is forward + backward = 3 x forward.
"""

from __future__ import annotations

import functools


from ..compiler.design import Entity, Symbol
from ..dsl.records import frozen


@frozen(cache_hash=True)
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
    q_rank: int = 0                # MLA: the query's low-rank latent (0 = a full query projection)
    capacity_factor: float = 0.0   # MoE token dropping: each expert takes c x its mean share (0 = dropless)
    # group-limited routing: the routed experts in `expert_groups` contiguous groups, a token's top_k
    # chosen inside the `group_top_k` groups it picks first (DeepSeek-V3: 8 and 4; 1 and 1: no limit)
    expert_groups: int = 1
    group_top_k: int = 1
    # GPT-OSS's experts: biases and a clamped gated activation. Training prices the eager passes
    # Megatron-Core (and an eager stack) runs for them (model/train/moe.py `unfused_expert_ops`);
    # serving does not: vLLM clamps inside its activation kernel (csrc/activation_kernels.cu
    # `swigluoai_and_mul`) and adds the experts' biases inside its fused-MoE GEMM (ASSUMPTION:
    # fused_moe.py's bias path, not read line by line here)
    expert_bias: bool = False      # the experts' projections carry biases
    expert_clamp: float = 0.0      # the experts' gated activation clamps its inputs to c (GPT-OSS: 7; 0 = none)
    mtp: int = 0                   # multi-token-prediction depth: extra layers and logits (DeepSeek-V3: 1)
    window: int = 0                # sliding-window (local) attention: keys each query sees (0: global)
    global_every: int = 0          # with a window: every k-th layer attends globally (0: none does)
    parallel_block: bool = False   # attention and MLP in parallel on one normed input (GPT-J, PaLM)
    # as the design states them ("" unstated: rotary-like, no position weights; RMSNorm-like norms)
    position_embedding: str = ""   # rope | learned (a seq x hidden table beside the embedding) | none
    normalization: str = ""        # rmsnorm (a scale) | layernorm (a scale and a bias)

    @classmethod
    def from_entity(cls, model: Entity) -> ModelShape:
        hidden, heads = model.get("hidden"), model.get("heads")
        experts = model.get("experts")
        gated = model.get("mlp", Symbol("swiglu")) == Symbol("swiglu")
        moe = {} if experts is None else {
            "routed": experts.get("routed"), "shared": experts.get("shared", 0), "top_k": experts.get("top_k"),
            "expert_ffn": experts.get("ffn", model.get("ffn")), "dense_layers": experts.get("dense_layers", 0),
            "capacity_factor": float(experts.get("capacity_factor") or 0.0),
            "expert_groups": experts.get("groups", 1), "group_top_k": experts.get("group_top_k", experts.get("groups", 1)),
            "expert_bias": bool(experts.get("bias", False)), "expert_clamp": float(experts.get("clamp") or 0.0)}
        mla = model.get("mla")
        latent = {} if mla is None else {"kv_rank": mla.get("kv_rank"), "rope_dim": mla.get("rope_dim", 0),
                                         "q_rank": mla.get("q_rank", 0)}
        blocks = {"window": model.get("window", 0), "global_every": model.get("global_every", 0),
                  "parallel_block": model.get("block", Symbol("sequential")) == Symbol("parallel"),
                  "position_embedding": _word(model.get("position_embedding")),
                  "normalization": _word(model.get("normalization"))}
        # MLA expands its latent into every head's key and value
        kv_heads = heads if mla is not None else model.get("kv_heads", heads)
        return cls(model.get("layers"), hidden, heads, kv_heads,
                   model.get("head_dim", hidden // heads), model.get("ffn"), model.get("vocab"), model.get("seq"),
                   3 if gated else 2, tied_embeddings=bool(model.get("tied_embeddings", False)),
                   mtp=model.get("mtp", 0), **moe, **latent, **blocks)

    # ------------------------------------------------------------ structure
    # is_moe and moe_layers: read for every cost and memory figure of a search, so computed once
    @functools.cached_property
    def is_moe(self) -> bool:
        return self.routed > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_rank > 0

    @functools.cached_property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def qk_dim(self) -> int:
        """Width of one head's query and key (MLA adds the decoupled rotary part)."""
        return self.head_dim + self.rope_dim

    @property
    def attention_params(self) -> int:
        if not self.is_mla:
            return self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        # MLA (DeepSeek-V2 Sec 2.1): query down (h x q_rank) and up (q_rank x heads x qk),
        # or one h x heads x qk projection; the joint KV latent and rotary key (h x (kv_rank +
        # rope)); key and value up-projections (kv_rank x heads x 2 d); the output (heads d x h)
        h, a, d = self.hidden, self.heads, self.head_dim
        query = self.q_rank * (h + a * self.qk_dim) if self.q_rank else h * a * self.qk_dim
        return query + h * (self.kv_rank + self.rope_dim) + self.kv_rank * a * 2 * d + a * d * h

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """One expert's MLP."""
        return self.mlp_matrices * self.hidden * self.expert_ffn

    @property
    def embedding_params(self) -> int:
        """Token embedding and output head, and a learned position table (max positions = seq)."""
        positions = self.seq * self.hidden if self.position_embedding == "learned" else 0
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2) + positions

    @property
    def norm_width(self) -> int:
        """Weights of one norm: a scale (RMSNorm), and a bias (LayerNorm)."""
        return self.hidden * (2 if self.normalization == "layernorm" else 1)

    @property
    def norm_params(self) -> int:
        """The layer's norm weights: two, one for a parallel block's shared input."""
        return self.norm_width * (1 if self.parallel_block else 2)

    def layer_params(self, moe: bool) -> int:
        if not moe:
            return self.attention_params + self.dense_mlp_params + self.norm_params
        experts = (self.routed + self.shared) * self.expert_params
        return self.attention_params + experts + self.hidden * self.routed + self.norm_params

    @property
    def params(self) -> int:
        """The main model's parameters (published counts leave the MTP modules out)."""
        dense = (self.layers - self.moe_layers) * self.layer_params(False)
        return dense + self.moe_layers * self.layer_params(True) + self.embedding_params + self.norm_width

    @property
    def mtp_params(self) -> int:
        """Each MTP module: a projection of [h; embedding] (2h x h), two norms and one layer
        like the last (DeepSeek-V3 Sec 2.2); embedding and output head are shared."""
        return self.mtp * (2 * self.hidden * self.hidden + 2 * self.norm_width + self.layer_params(self.is_moe))

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
        dense, moe = self.layer_flops_per_token(False, s), self.layer_flops_per_token(True, s)
        layers = (self.layers - self.moe_layers) * dense + self.moe_layers * moe
        logits = 2 * self.hidden * self.vocab
        # each MTP module: its projection, one more layer and the shared output head again
        mtp = self.mtp * (2 * 2 * self.hidden * self.hidden + (moe if self.is_moe else dense) + logits)
        return layers + logits + mtp

    def layer_flops_per_token(self, moe: bool, seq: int | None = None) -> float:
        """Forward matrix-multiply FLOPs of one mean layer per token: projections, scores over
        qk_dim and values over head_dim (the local/global mix's mean keys, full s x s
        convention), the MLP or the routed experts."""
        core = self._core_flops(seq)
        if not moe:
            return 2 * (self.attention_params + self.dense_mlp_params) + core
        return 2 * (self.attention_params + (self.top_k + self.shared) * self.expert_params
                    + self.hidden * self.routed) + core

    def model_flops_per_token(self, seq: int | None = None) -> float:
        """Training FLOPs per token as MFU counts them: 3 x forward."""
        return 3 * self.forward_flops_per_token(seq)

    def attention_core_flops_per_token(self, seq: int | None = None) -> float:
        """Forward FLOPs of scores and values over all layers (what selective recompute redoes)."""
        return (self.layers + self.mtp) * self._core_flops(seq)

    def _core_flops(self, seq: int | None = None) -> float:
        """One layer's scores (over qk_dim) and values (over head_dim) per token, over the
        mean keys per query of the local/global mix; an MTP module's layer counts as that
        mean layer too (the step model gives it the blended layer's time)."""
        return 2 * self.mean_keys(seq) * self.heads * (self.qk_dim + self.head_dim)

    # ------------------------------------------------------------ local attention
    @property
    def local_layers(self) -> int:
        """Layers with sliding-window attention: all but every `global_every`-th one."""
        if not self.window:
            return 0
        return self.layers - (self.layers // self.global_every if self.global_every else 0)

    def mean_keys(self, seq: int | None = None) -> float:
        """Keys per query, averaged over layers, under the full s x s convention."""
        s = seq or self.seq
        if not self.layers:
            return float(s)
        local = self.local_layers
        return (local * attended_keys(s, self.window) + (self.layers - local) * s) / self.layers


def _word(value) -> str:
    return value.name if isinstance(value, Symbol) else ""


def attended_keys(seq: int, window: int) -> float:
    """Keys per query of a layer that sees `window` keys, counted like full attention's s x s
    product (twice the causal pairs): sum over positions p of min(p, w), times 2 / s, which
    is s for w >= s and w (2s - w) / s below it (Mistral 7B's and Gemma 2's local layers)."""
    if not window or window >= seq:
        return float(seq)
    return window * (2 * seq - window) / seq
