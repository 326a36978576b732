"""Activation checkpointing: what a configuration recomputes in backward, what that costs,
and what the layers keep for backward in exchange.

- `none`: every activation the backward needs is kept.
- `selective`: the modules in `recompute_modules` are recomputed from their kept input;
  without modules, the attention core (Korthikanti et al. 2022, Sec 5: scores, softmax,
  dropout and the value product). Modules, after Megatron-Core 0.13's `--recompute-modules`
  (CHANGELOG "Fine-grained recomputation"): `core_attention`, `norm` (the norms'
  outputs are recomputed from their inputs), `mlp` (the MLP's up projection and
  activation from its input; on MoE layers the routed and shared experts), `moe_act`
  (the routed experts' activation function from its input, MoE layers only: Megatron-Core's
  `moe_act`, megatron/core/transformer/moe/experts.py), and
  `op_level`, a whole policy listed alone: torchtitan's op-level selective AC
  (`selective_ac_option = "op"`; torchtitan/parallelisms/parallelize_llama.py `_save_list`
  and `_custom_policy`, 2024-12, commit 6b03ffa3): it saves the outputs of the matmuls and
  of the attention kernel except every second matmul of a block (counted in forward order),
  keeps the block's input, and recomputes everything else (norms, rotary, activation,
  residual adds). With separate q, k, v projections and a gated MLP the saved matmuls are
  q, v, the MLP's first up projection and the down projection; k, the output projection
  and the second up projection are recomputed.
- `full`: each layer keeps only its input and reruns its whole forward.
- `recompute_every = k`: the recompute applies to every k-th layer, the others keep
  everything (torchtitan's `selective_ac_option = "k"`; Megatron's `--recompute-method
  block` recomputes the same number of layers per stage, the first ones of each).
"""

from __future__ import annotations

from ..config import TrainConfig
from ..shape import ModelShape
from .workload import elementwise_parts

MODULES = ("core_attention", "norm", "mlp", "moe_act", "op_level")
# The forward ops of model/train/workload.py that belong to each module.
# `moe_act` reruns the experts' activation, with the clamp before its fused kernel (Megatron-Core
# TEGroupedMLP checkpoints `bias_act_func`, which clamps: model/train/moe.py `unfused_expert_ops`).
_OPS = {"core_attention": ("attention",),
        "mlp": ("mlp up", "mlp down", "router", "routing", "experts up", "experts down", "activation clamp"),
        "norm": (), "moe_act": ("activation clamp",), "op_level": ()}
# An op-level matmul of the MLP is the dense MLP's or, on an MoE layer, the experts'.
_MLP_OPS = {"mlp up": ("mlp up", "experts up"), "mlp down": ("mlp down", "experts down")}
# The elementwise work (model/train/workload.py `elementwise_parts`) each module reruns; op_level all of it.
_ELEMENTWISE = {"core_attention": (), "mlp": ("activation",), "norm": ("norm",), "moe_act": ("activation",),
                "op_level": None}


def op_level_matmuls(shape: ModelShape) -> tuple[tuple[str, float, bool], ...]:
    """A block's matmuls in forward order under torchtitan's op-level policy: (the op of
    model/train/workload.py it is part of, its share of that op, whether its output is saved).
    The policy saves the 1st, 3rd, 5th... (its count is odd). ASSUMPTION: an MoE layer's
    routed and shared experts count as one MLP of the same kind (the 2024 policy predates
    torchtitan's MoE; the router's matmul is left out), and MLA's projections as q, k, v."""
    a, kv = shape.heads, shape.kv_heads
    qkv = a + 2 * kv
    mms = [("qkv", a / qkv), ("qkv", kv / qkv), ("qkv", kv / qkv), ("attention out", 1.0)]
    if shape.mlp_matrices > 2:     # gated: gate and up projections, then down
        mms += [("mlp up", 0.5), ("mlp up", 0.5), ("mlp down", 1.0)]
    else:
        mms += [("mlp up", 1.0), ("mlp down", 1.0)]
    return tuple((op, share, i % 2 == 0) for i, (op, share) in enumerate(mms))


def _op_level_rerun(shape: ModelShape, ops: tuple[tuple[str, float], ...]) -> float:
    """Seconds of the matmuls op-level AC recomputes (experts ops go with the MLP's)."""
    times = dict(ops)
    return sum(share * sum(times.get(n, 0.0) for n in _MLP_OPS.get(op, (op,)))
               for op, share, saved in op_level_matmuls(shape) if not saved)


def op_level_kept(shape: ModelShape, cfg: TrainConfig, moe: bool) -> float:
    """Bytes per token a block keeps under op-level AC: its input, the saved matmuls'
    outputs (bf16), the attention output and its softmax statistics (fp32 per head).
    Column-parallel outputs are split by TP; the row-parallel ones (output and down
    projections) are partial sums of the full width (ASSUMPTION: torchtitan's TP saves
    the mm output before its reduction)."""
    t = cfg.tp
    h, d, a, kv = shape.hidden, shape.head_dim, shape.heads, shape.kv_heads
    ffn = shape.expert_ffn * (shape.top_k + shape.shared) if moe else shape.ffn
    width = {("qkv", 0): a * d / t, ("qkv", 1): kv * d / t, ("qkv", 2): kv * d / t, "attention out": h,
             "mlp up": ffn / t, "mlp down": h}
    kept = 2 * h / (t if cfg.sp else 1) + 2 * a * d / t + 4 * a / t   # input; attention output and statistics
    for i, (op, _, saved) in enumerate(op_level_matmuls(shape)):
        if saved:
            kept += 2 * width[(op, i) if op == "qkv" else op]
    return kept


def modules(cfg: TrainConfig) -> tuple[str, ...]:
    """The modules a selective recompute redoes."""
    return cfg.recompute_modules or ("core_attention",)


def layer_share(cfg: TrainConfig, recompute: str | None = None) -> float:
    """Share of the layers that recompute (0 without recompute), with `cfg`'s recompute or `recompute`."""
    recompute = cfg.recompute if recompute is None else recompute
    return 0.0 if recompute == "none" else 1.0 / max(1, cfg.recompute_every)


def time(shape: ModelShape, cfg: TrainConfig, moe: bool, forward: float, ops: tuple[tuple[str, float], ...]) -> float:
    """Seconds of recomputation per layer and micro-batch, averaged over the layers.

    A module's elementwise part is charged in proportion to its share of the layer's
    elementwise bytes (the elementwise work runs as one fused roofline op)."""
    share = layer_share(cfg)
    if share == 0:
        return 0.0
    if cfg.recompute == "full":
        return share * forward
    chosen = modules(cfg)
    if "op_level" in chosen:
        return share * (_op_level_rerun(shape, ops) + dict(ops).get("elementwise", 0.0))
    seconds = sum(t for name, t in ops if any(name in _OPS[m] for m in chosen))
    parts = elementwise_parts(shape, cfg, moe)
    rerun = sum(parts.get(p, 0.0) for m in chosen if moe or m != "moe_act" for p in _ELEMENTWISE[m])
    if rerun:
        seconds += dict(ops).get("elementwise", 0.0) * rerun / sum(parts.values())
    return share * seconds


def kernels(cfg: TrainConfig, counts: dict[str, float], op_level_rerun: float) -> float:
    """Kernels one layer's recompute launches per micro-batch, averaged over the layers, from
    the forward's kernels per op (`counts`, model/train/workload.py names): the whole forward (full);
    the chosen modules' ops and, where a module reruns elementwise work, the elementwise
    kernels; for op-level AC, the matmuls it does not save (`op_level_rerun`: `op_level_kernels`)
    and every elementwise kernel, but not the attention kernel, whose output it saves."""
    share = layer_share(cfg)
    if share == 0:
        return 0.0
    if cfg.recompute == "full":
        return share * sum(counts.values())
    chosen = modules(cfg)
    elementwise = counts.get("elementwise", 0.0)
    if "op_level" in chosen:
        return share * (op_level_rerun + elementwise)
    rerun = sum(n for name, n in counts.items() if any(name in _OPS[m] for m in chosen))
    return share * (rerun + (elementwise if any(_ELEMENTWISE[m] for m in chosen) else 0.0))


def op_level_kernels(shape: ModelShape, counts: dict[str, float]) -> float:
    """Kernels of the matmuls op-level AC recomputes: each unsaved matmul reruns as its own
    projection (torchtitan's wq, wk, wv, wo, w1, w2, w3 are separate linears), as many
    kernels as the forward op it is part of launches (an MoE layer's experts' and shared
    experts' GEMMs with the MLP's)."""
    return sum(sum(counts.get(n, 0.0) for n in _MLP_OPS.get(op, (op,)))
               for op, _, saved in op_level_matmuls(shape) if not saved)


def tp_collectives(cfg: TrainConfig) -> float:
    """Tensor-parallel collectives (in all-reduces) the recompute adds per layer: a full
    recompute reruns both of the forward's; recomputing the MLP under sequence parallelism
    gathers its input again (half an all-reduce), op-level AC both all-gathers (it saves
    the reduce-scatters' outputs, not the gathers'); the attention core and norms need none."""
    share = layer_share(cfg)
    if cfg.recompute == "full":
        return 2 * share
    if cfg.recompute == "selective" and "op_level" in modules(cfg) and cfg.sp and cfg.tp > 1:
        return 1.0 * share
    if cfg.recompute == "selective" and "mlp" in modules(cfg) and cfg.sp and cfg.tp > 1:
        return 0.5 * share
    return 0.0


def flops_per_token(shape: ModelShape, cfg: TrainConfig) -> float:
    """Extra forward FLOPs per token that recomputation adds (for HFU)."""
    share = layer_share(cfg)
    if share == 0:
        return 0.0
    if cfg.recompute == "full":
        # everything but the output heads (the main one and each MTP module's)
        return share * (shape.forward_flops_per_token(cfg.seq) - (1 + shape.mtp) * 2 * shape.hidden * shape.vocab)
    flops = 0.0
    chosen = modules(cfg)
    if "op_level" in chosen:    # the recomputed matmuls, the MLP's averaged over dense and routed layers
        h, d = shape.hidden, shape.head_dim
        dense = shape.layers - shape.moe_layers
        ffn = (dense * shape.ffn + shape.moe_layers * (shape.top_k + shape.shared) * shape.expert_ffn) / shape.layers
        k = {"qkv": (shape.heads + 2 * shape.kv_heads) * d * h, "attention out": shape.heads * d * h,
             "mlp up": (shape.mlp_matrices - 1) * ffn * h, "mlp down": ffn * h}
        per_layer = sum(2 * share * k[op] for op, share, saved in op_level_matmuls(shape) if not saved)
        return layer_share(cfg) * shape.layers * per_layer
    if "core_attention" in chosen:
        flops += shape.attention_core_flops_per_token(cfg.seq)
    if "mlp" in chosen:   # an MTP module's layer is like the last one (routed when the model is)
        dense = shape.layers - shape.moe_layers + (0 if shape.is_moe else shape.mtp)
        routed = shape.moe_layers + (shape.mtp if shape.is_moe else 0)
        flops += 2 * (dense * shape.dense_mlp_params + routed * (shape.top_k + shape.shared) * shape.expert_params)
    return share * flops


def kept_bytes(parts: dict[str, float], cfg: TrainConfig, layer_input: float, recompute: str | None = None,
               op_level: float = 0.0, moe: bool = False) -> float:
    """Bytes per token a layer keeps for backward, averaged over the layers: `parts` are
    what it keeps without recompute (model/train/memory.py), `layer_input` what full keeps,
    `op_level` what op-level AC keeps (`op_level_kept`); with `cfg`'s recompute or
    `recompute` (the modules and interval are `cfg`'s)."""
    recompute = cfg.recompute if recompute is None else recompute
    whole = sum(parts.values())
    share = layer_share(cfg, recompute)
    if share == 0:
        return whole
    if recompute == "full":
        recomputed = layer_input
    elif "op_level" in modules(cfg):
        recomputed = op_level
    else:
        # (moe_act checkpoints the experts' activation, the clamp inside it: Megatron-Core experts.py
        # CheckpointWithoutOutput around bias_act_func)
        dropped = {"core_attention": ("scores",), "norm": ("norm out",), "mlp": ("mlp up", "mlp act", "expert clamp"),
                   "moe_act": ("mlp act", "expert clamp") if moe else ()}
        recomputed = whole - sum(parts.get(p, 0.0) for m in modules(cfg) for p in dropped[m])
    return share * recomputed + (1 - share) * whole
