"""Rules of a `model` declaration: a consistent shape, and stated params against the shape."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterator

from ...dsl import codes
from ..design import Entity, Symbol
from ...dsl.diagnostics import Diagnostic
from ...dsl.numbers import percent
from ...dsl.units import Quantity, format_quantity

PARAMS_TOLERANCE = Fraction(3, 100)


def model_rules(model: Entity) -> Iterator[Diagnostic]:
    yield from _model_shape(model)
    stated = model.get("params")
    computed = model_params(model)
    if stated is not None and computed and abs(stated.value - computed) > PARAMS_TOLERANCE * computed:
        off = percent(float(abs(stated.value - computed) / computed))
        yield codes.PARAMS_MISMATCH.make(model.span_of("params"), stated=format_quantity(stated),
                                         computed=format_quantity(Quantity(Fraction(computed))), percent=off,
                                         notes=["the shape gives " + params_formula(model)])


def _model_shape(model: Entity) -> Iterator[Diagnostic]:
    arch, experts = model.get("arch"), model.get("experts")
    hidden, heads, kv = model.get("hidden"), model.get("heads"), model.get("kv_heads")
    if arch == Symbol("moe") and experts is None:
        yield codes.MISSING_FIELD.make(model.span_of("arch"), field="`experts`", where=f"MoE model `{model.name}`",
                                       notes=["help: add `experts { routed = 64  top_k = 2 }`"])
    if arch == Symbol("dense") and experts is not None:
        yield codes.SHAPE.make(model.span_of("experts"), what="a dense model has no `experts`",
                               notes=["help: set `arch = moe`"])
    if heads and hidden and "head_dim" not in model.record and hidden % heads:
        yield codes.SHAPE.make(model.span_of("heads"), what=f"{heads} heads do not divide hidden = {hidden}",
                               notes=["help: set `head_dim` if the heads are not hidden / heads wide"])
    if heads and kv and heads % kv:
        yield codes.SHAPE.make(model.span_of("kv_heads"), what=f"kv_heads = {kv} does not divide heads = {heads}")
    if model.get("mla") is not None and kv is not None and kv != heads:
        yield codes.SHAPE.make(model.span_of("kv_heads"),
                               what=f"with `mla`, every head gets its own key and value from the latent: kv_heads = {kv} "
                                    f"is not heads = {heads}",
                               notes=["help: remove `kv_heads` (MLA's cache size comes from `kv_rank` and `rope_dim`)"])
    if experts is not None and experts.get("top_k", 0) > experts.get("routed", 0):
        yield codes.SHAPE.make(model.span_of("experts.top_k"), what="top_k exceeds the number of routed experts")
    if experts is not None:
        yield from _expert_groups(experts, model)
    if experts is not None and experts.get("dense_layers", 0) > model.get("layers", 0):
        yield codes.SHAPE.make(model.span_of("experts.dense_layers"), what="more dense layers than layers")


def _expert_groups(experts, model: Entity) -> Iterator[Diagnostic]:
    """Group-limited routing: the groups split the routed experts evenly, a token picks at most
    all of them, and the groups it picks hold at least its top_k experts."""
    routed, top_k = experts.get("routed", 0), experts.get("top_k", 0)
    groups = experts.get("groups")
    picked = experts.get("group_top_k")
    if groups is None:
        if picked is not None:
            yield codes.SHAPE.make(model.span_of("experts.group_top_k"), what="`group_top_k` without `groups`",
                                   notes=["help: state `groups`, the number of expert groups it picks from"])
        return
    if routed and routed % groups:
        yield codes.SHAPE.make(model.span_of("experts.groups"), what=f"{groups} groups do not divide {routed} routed experts")
    elif picked is not None and picked > groups:
        yield codes.SHAPE.make(model.span_of("experts.group_top_k"), what=f"group_top_k = {picked} exceeds groups = {groups}")
    elif picked is not None and top_k and picked > top_k:
        # Megatron-Core scores each group by the sum of its top (top_k // group_top_k) experts
        # (moe_utils.py `group_limited_topk`): more groups than top_k scores every group 0
        yield codes.SHAPE.make(model.span_of("experts.group_top_k"), what=f"group_top_k = {picked} exceeds top_k = {top_k}",
                               notes=["help: a token picks at most top_k groups (each group is scored by its top "
                                      "top_k / group_top_k experts)"])
    elif picked is not None and routed and top_k > picked * (routed // groups):
        yield codes.SHAPE.make(model.span_of("experts.group_top_k"),
                               what=f"{picked} groups of {routed // groups} experts cannot hold top_k = {top_k}",
                               notes=["help: pick more groups (`group_top_k`)"])


def model_params(model: Entity) -> int:
    """Parameters implied by the shape: attention, MLP or experts, norms, embeddings."""
    shape = _shape(model)
    if shape is None:
        return 0
    h, layers, vocab, attention, dense_mlp, moe_mlp, moe_layers = shape
    norms = 2 * h
    per_dense = attention + dense_mlp + norms
    per_moe = attention + moe_mlp + norms
    embeddings = vocab * h * (1 if model.get("tied_embeddings") else 2)
    return (layers - moe_layers) * per_dense + moe_layers * per_moe + embeddings + h


def _shape(model: Entity):
    try:
        h, layers, heads, ffn, vocab = (model.get(k) for k in ("hidden", "layers", "heads", "ffn", "vocab"))
        kv = model.get("kv_heads", heads)
        head_dim = model.get("head_dim", h // heads)
    except TypeError:
        return None
    if None in (h, layers, heads, ffn, vocab):
        return None
    attention = h * head_dim * (2 * heads + 2 * kv)
    mla = model.get("mla")
    if mla is not None:  # the same projections as model/shape.py's attention_params
        q_rank, kv_rank, rope = mla.get("q_rank", 0), mla.get("kv_rank"), mla.get("rope_dim", 0)
        qk = head_dim + rope
        query = q_rank * (h + heads * qk) if q_rank else h * heads * qk
        attention = query + h * (kv_rank + rope) + kv_rank * heads * 2 * head_dim + heads * head_dim * h
    matrices = 3 if model.get("mlp", Symbol("swiglu")) == Symbol("swiglu") else 2
    dense_mlp = matrices * h * ffn
    experts = model.get("experts")
    if experts is None:
        return h, layers, vocab, attention, dense_mlp, 0, 0
    count = experts.get("routed") + experts.get("shared", 0)
    moe_mlp = count * matrices * h * experts.get("ffn", ffn) + h * experts.get("routed")
    return h, layers, vocab, attention, dense_mlp, moe_mlp, layers - experts.get("dense_layers", 0)


def params_formula(model: Entity) -> str:
    shape = _shape(model)
    if shape is None:
        return "nothing (incomplete shape)"
    h, layers, vocab, attention, dense_mlp, moe_mlp, moe_layers = shape
    parts = [f"{layers - moe_layers} dense layers x {format_quantity(Quantity(attention + dense_mlp))}"]
    if moe_layers:
        parts.append(f"{moe_layers} MoE layers x {format_quantity(Quantity(attention + moe_mlp))}")
    parts.append(f"embeddings {format_quantity(Quantity(vocab * h))} each")
    return " + ".join(parts)

