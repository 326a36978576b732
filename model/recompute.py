"""Activation checkpointing: what a configuration recomputes in backward, what that costs,
and what the layers keep for backward in exchange.

- `none`: every activation the backward needs is kept.
- `selective`: the modules in `recompute_modules` are recomputed from their kept input;
  without modules, the attention core (Korthikanti et al. 2022, Sec 5: scores, softmax,
  dropout and the value product). Modules, after Megatron-Core 0.13's `--recompute-modules`
  (CHANGELOG "Fine-grained recomputation"): `core_attention`, `norm` (the norms'
  outputs are recomputed from their inputs) and `mlp` (the MLP's up projection and
  activation from its input; on MoE layers the routed and shared experts).
- `full`: each layer keeps only its input and reruns its whole forward.
- `recompute_every = k`: the recompute applies to every k-th layer, the others keep
  everything (torchtitan's `selective_ac_option = "k"`; Megatron's `--recompute-method
  block` recomputes the same number of layers per stage, the first ones of each).
"""

from __future__ import annotations

from .config import TrainConfig
from .shape import ModelShape
from .workload import elementwise_parts

MODULES = ("core_attention", "norm", "mlp")
# The forward ops of model/workload.py that belong to each module.
_OPS = {"core_attention": ("attention",),
        "mlp": ("mlp up", "mlp down", "router", "routing", "experts up", "experts down"),
        "norm": ()}
# The elementwise work (model/workload.py `elementwise_parts`) each module reruns.
_ELEMENTWISE = {"core_attention": (), "mlp": ("activation",), "norm": ("norm",)}


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
    seconds = sum(t for name, t in ops if any(name in _OPS[m] for m in chosen))
    parts = elementwise_parts(shape, cfg, moe)
    rerun = sum(parts.get(p, 0.0) for m in chosen for p in _ELEMENTWISE[m])
    if rerun:
        seconds += dict(ops).get("elementwise", 0.0) * rerun / sum(parts.values())
    return share * seconds


def tp_collectives(cfg: TrainConfig) -> float:
    """Tensor-parallel collectives (in all-reduces) the recompute adds per layer: a full
    recompute reruns both of the forward's; recomputing the MLP under sequence parallelism
    gathers its input again (half an all-reduce); the attention core and norms need none."""
    share = layer_share(cfg)
    if cfg.recompute == "full":
        return 2 * share
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
    if "core_attention" in chosen:
        flops += shape.attention_core_flops_per_token(cfg.seq)
    if "mlp" in chosen:   # an MTP module's layer is like the last one (routed when the model is)
        dense = shape.layers - shape.moe_layers + (0 if shape.is_moe else shape.mtp)
        routed = shape.moe_layers + (shape.mtp if shape.is_moe else 0)
        flops += 2 * (dense * shape.dense_mlp_params + routed * (shape.top_k + shape.shared) * shape.expert_params)
    return share * flops


def kept_bytes(parts: dict[str, float], cfg: TrainConfig, layer_input: float, recompute: str | None = None) -> float:
    """Bytes per token a layer keeps for backward, averaged over the layers: `parts` are
    what it keeps without recompute (model/memory.py), `layer_input` what full keeps; with
    `cfg`'s recompute or `recompute` (the modules and interval are `cfg`'s)."""
    recompute = cfg.recompute if recompute is None else recompute
    whole = sum(parts.values())
    share = layer_share(cfg, recompute)
    if share == 0:
        return whole
    if recompute == "full":
        recomputed = layer_input
    else:
        dropped = {"core_attention": ("scores",), "norm": ("norm out",), "mlp": ("mlp up", "mlp act")}
        recomputed = whole - sum(parts.get(p, 0.0) for m in modules(cfg) for p in dropped[m])
    return share * recomputed + (1 - share) * whole
