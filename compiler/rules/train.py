"""Checks of a train job's sharding, activation checkpointing and offload pins, and of a
model's attention and block layout: each pin the model reads must mean something as
written (an accepted field the model would ignore is an error here, with its fix)."""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from ..formats import family
from ..schema import (DEFAULT_STACK, MAX_VP, MEGATRON_STACKS, OFFLOAD_ALL_OR_NONE, OFFLOAD_NEEDS_FULL_RECOMPUTE,
                      OFFLOAD_SWITCHES, offload_possible, offload_refusal, overlap_refusal)
from ...dsl.diagnostics import Diagnostic, Label
from ..design import Design, Entity, Partition, Record
from ..lower import lower_cluster
from .optimizer import optimizer_problems
from .rl import rl_train_pool


def train_pin_problems(design: Design) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for entity in design.local():
        if entity.kind == "rl":  # its training pool is planned as a train job: the same pins, the same checks
            pool = rl_train_pool(entity)   # its batch and experts are checked in rl.py and limits.py
            if pool is not None:
                found += _train_pins(pool)
            elif isinstance(entity.get("train"), Record):   # no pins: its optimizer's precisions all the same
                found += optimizer_problems(Entity("train", f"{entity.name}.train", entity.get("train"), entity.span))
        elif entity.kind == "train":
            found += _train_pins(entity)
        elif entity.kind == "model":
            found += _attention(entity)
    return found


def _train_pins(job: Entity) -> list[Diagnostic]:
    return [*_shard(job), *_recompute(job), *_offload(job), *_search(job), *_fp8_params(job), *_moe_act(job),
            *_dispatcher(job), *_ep_overlap(job), *optimizer_problems(job)]


def _pins(job: Entity):
    return job.get("parallelism")


def _shard(job: Entity) -> Iterator[Diagnostic]:
    """Hybrid sharding splits the state a ZeRO stage shards; its groups tile dp x cp."""
    pins = _pins(job)
    shard = pins.get("shard") if pins is not None else None
    if not shard:
        return
    here = job.span_of("parallelism.shard")
    zero = pins.get("zero")
    if zero == 0:
        yield codes.PIN_MEANINGLESS.make(here, pin=f"shard = {shard}", why="ZeRO stage 0 replicates the whole "
                                         "model state: there is nothing to shard over a group",
                                         labels=[Label(job.span_of("parallelism.zero"), "zero = 0")],
                                         notes=["help: pin `zero = 1` (optimizer state, Megatron's distributed "
                                                "optimizer instances) or `zero = 3` (HSDP), or remove `shard`"])
        return
    dp, cp = pins.get("dp"), pins.get("cp") or 1
    if dp and (dp * cp) % shard:
        yield codes.PARALLELISM.make(here, what=f"shard groups of {shard} ranks do not tile the dp x cp = "
                                     f"{dp} x {cp} = {dp * cp} data-parallel ranks",
                                     labels=[Label(job.span_of("parallelism.dp"), f"dp = {dp}")],
                                     notes=[f"help: pick a shard group that divides {dp * cp} (a scale-up domain's "
                                            "GPUs over tp, typically)"])


def _recompute(job: Entity) -> Iterator[Diagnostic]:
    """Module selections belong to a selective recompute; an interval to some recompute."""
    pins = _pins(job)
    if pins is None:
        return
    mode = getattr(pins.get("recompute"), "name", None)
    modules, every = pins.get("recompute_modules"), pins.get("recompute_every")
    if modules is not None and mode != "selective":
        label = [Label(job.span_of("parallelism.recompute"), f"recompute = {mode}")] if mode else []
        yield codes.PIN_MEANINGLESS.make(
            job.span_of("parallelism.recompute_modules"), pin="recompute_modules",
            why="it selects what a selective recompute redoes" + (f", and this job's recompute is {mode}" if mode
                                                                   else ", and the job does not pin `recompute`"),
            labels=label, notes=["help: pin `recompute = selective` beside it, or remove `recompute_modules`"])
    elif modules is not None and len({getattr(m, "name", m) for m in modules}) != len(modules):
        yield codes.SHAPE.make(job.span_of("parallelism.recompute_modules"), what="a module is listed twice",
                               notes=["help: list each of `core_attention`, `norm`, `mlp` at most once"])
    elif modules is not None and len(modules) > 1 and "op_level" in {getattr(m, "name", m) for m in modules}:
        yield codes.SHAPE.make(job.span_of("parallelism.recompute_modules"),
                               what="`op_level` is a whole policy (torchtitan's op-level selective AC) and "
                                    "combines with no other module",
                               notes=["help: list `op_level` alone, or the modules without it"])
    if every is not None and every > 1 and mode not in ("selective", "full"):
        yield codes.PIN_MEANINGLESS.make(
            job.span_of("parallelism.recompute_every"), pin=f"recompute_every = {every}",
            why="it spaces out the layers that recompute" + (", and this job recomputes nothing" if mode else
                                                             ", and the job does not pin `recompute`"),
            notes=["help: pin `recompute = full` (or `selective`) beside it, or remove `recompute_every`"])
    layers = getattr(job.get("model"), "get", lambda _: None)("layers")
    if every and layers and every > layers:
        yield codes.PARALLELISM.make(job.span_of("parallelism.recompute_every"),
                                     what=f"recompute_every = {every} exceeds the model's {layers} layers",
                                     notes=[f"help: pick at most {layers}"])


def _searched(pins) -> list[str]:
    return [str(getattr(m, "name", m)) for m in (pins.get("search") or ())] if pins is not None else []


def _search(job: Entity) -> Iterator[Diagnostic]:
    """A choice the planner is asked to search must be free, listed once, and able to apply."""
    pins = _pins(job)
    asked = _searched(pins)
    if not asked:
        return
    here = job.span_of("parallelism.search")
    if len(set(asked)) != len(asked):
        yield codes.SHAPE.make(here, what="a choice is listed twice in `search`",
                               notes=["help: list each of `shard`, `recompute_modules`, `recompute_every`, "
                                      "`offload` at most once"])
    for name in dict.fromkeys(asked):
        if pins.get(name) is not None:
            yield codes.PARALLELISM.make(here, what=f"`{name}` is both pinned and listed in `search`",
                                         labels=[Label(job.span_of(f"parallelism.{name}"), f"`{name}` pinned")],
                                         notes=[f"help: remove `{name}` from `search` to keep the pin, or remove "
                                                "the pin to have the planner choose it"])
    mode = getattr(pins.get("recompute"), "name", None)
    needs = {"recompute_modules": ("selective",), "recompute_every": ("selective", "full")}
    for name, modes in needs.items():
        if name in asked and mode is not None and mode not in modes:
            yield codes.PIN_MEANINGLESS.make(
                here, pin=f"search = [{name}]", why=f"`{name}` applies to a {' or '.join(modes)} recompute, and this "
                f"job pins `recompute = {mode}`", labels=[Label(job.span_of("parallelism.recompute"), f"recompute = {mode}")],
                notes=[f"help: remove `{name}` from `search`, or unpin `recompute`"])
    if "shard" in asked and pins.get("zero") == 0:
        yield codes.PIN_MEANINGLESS.make(
            here, pin="search = [shard]", why="ZeRO stage 0 replicates the whole model state: there is nothing to "
            "shard over a group", labels=[Label(job.span_of("parallelism.zero"), "zero = 0")],
            notes=["help: remove `shard` from `search`, or unpin `zero`"])


def _offload(job: Entity) -> Iterator[Diagnostic]:
    """Offloaded activations travel over the node's host link, which must be declared."""
    pins = _pins(job)
    if pins is None or not (pins.get("offload") or "offload" in _searched(pins)):
        return
    where = "parallelism.offload" if pins.get("offload") else "parallelism.search"
    yield from _offload_stack(job, pins, where)
    for node in _nodes(job.get("on")):
        if not offload_possible(node.host_link):
            yield codes.PARALLELISM.make(
                job.span_of(where),
                what=f"activation offload needs the host link of `{node.name}`, which declares no `host_link`",
                labels=[Label(node.span, f"`{node.name}`")],
                notes=[f"help: give `{node.name}` its GPU-to-host bandwidth per direction, e.g. `host_link = "
                       "64 GB/s` for PCIe Gen5 x16 or `host_link = 450 GB/s` for NVLink-C2C, or remove `offload`"])
            return


def _offload_stack(job: Entity, pins: Record, where: str) -> Iterator[Diagnostic]:
    """A stated offload needs a stack that has a switch for it (compiler/schema.py OFFLOAD_SWITCHES), beside
    the pipeline, recompute and share that switch runs with (`offload_refusal`)."""
    stated = job.get("software")
    stack = str(getattr(stated, "name", stated)) if stated is not None else DEFAULT_STACK
    label = [Label(job.span_of("software"), f"software = {stack}")] if stated is not None else []
    switches = ", ".join(f"{name} ({switch})" for name, switch in OFFLOAD_SWITCHES.items())
    if stack not in OFFLOAD_SWITCHES:
        yield codes.PARALLELISM.make(
            job.span_of(where), labels=label,
            what=f"activation offload has no switch in `{stack}`: the stacks that offload activations to host "
                 f"memory are {switches}",
            notes=["help: run the job on one of them (`software = megatron_core`: Megatron-Core 0.5+), or remove "
                   "`offload`"])
        return
    offload = pins.get("offload")
    pp, recompute = pins.get("pp"), getattr(pins.get("recompute"), "name", pins.get("recompute"))
    if recompute is None and stack in OFFLOAD_NEEDS_FULL_RECOMPUTE:
        recompute = "unpinned"      # DeepSpeed's switch needs the full recompute stated beside it
    refusal = offload_refusal(stack, float(offload) if offload else None, int(pp) if pp is not None else None,
                              str(recompute) if recompute is not None else None)
    if refusal is None:
        return
    field, why = refusal
    if field != "offload" and pins.get(field) is not None:
        value = pins.get(field)
        label.append(Label(job.span_of(f"parallelism.{field}"), f"{field} = {getattr(value, 'name', value)}"))
    helps = {"pp": "help: pin `pp = 1` beside `offload`, or remove `offload`",
             "recompute": ("help: pin `recompute = full` beside `offload`, or run the job on megatron_core, nemo, "
                           "maxtext or fsdp, which offload any layer's activations"
                           if stack in OFFLOAD_NEEDS_FULL_RECOMPUTE else
                           "help: pin `recompute = none` beside `offload` (offloading is the recipes' other way to "
                           "free activation memory), or remove `offload`"),
             "offload": ("help: offload 100% of the checkpointed layers, or remove `offload`"
                         if stack in OFFLOAD_ALL_OR_NONE else "help: offload a smaller share, or remove `offload`")}
    yield codes.PARALLELISM.make(job.span_of(where), labels=label, what=why, notes=[helps[field]])


def _fp8_params(job: Entity) -> Iterator[Diagnostic]:
    """fp8 parameters are the GEMMs' fp8 weights: they need an fp8 precision."""
    if not job.get("fp8_params"):
        return
    precision = str(getattr(job.get("precision"), "name", job.get("precision") or "bf16"))
    if family(precision) != "fp8":
        yield codes.PIN_MEANINGLESS.make(
            job.span_of("fp8_params"), pin="fp8_params = true",
            why=f"it keeps the weights in the GEMMs' fp8 format, and this job's GEMMs run in {precision}",
            notes=["help: set an fp8 `precision` (fp8, mxfp8) beside it, or remove `fp8_params`"])


def _moe_act(job: Entity) -> Iterator[Diagnostic]:
    """`moe_act` recomputes the routed experts' activation: a dense model has none."""
    pins = _pins(job)
    modules = pins.get("recompute_modules") if pins is not None else None
    model = job.get("model")
    if not modules or "moe_act" not in {getattr(m, "name", m) for m in modules} or not hasattr(model, "get"):
        return
    if getattr(model.get("arch"), "name", model.get("arch")) != "moe":
        yield codes.PIN_MEANINGLESS.make(
            job.span_of("parallelism.recompute_modules"), pin="recompute_modules = [..., moe_act]",
            why="it recomputes the routed experts' activation function, and this job's model has no routed experts",
            notes=["help: list `mlp` to recompute a dense MLP's activation, or remove `moe_act`"])


def _dispatcher(job: Entity) -> Iterator[Diagnostic]:
    """A token dispatcher needs routed experts, and Megatron-Core runs each only where it can:
    the all-to-all overlap with alltoall or flex (TransformerConfig: overlap_moe_expert_parallel_comm),
    padding to a capacity not with DeepEP (flex + deepep refuses moe_pad_expert_input_to_capacity)
    nor allgather (its MoEAllGatherTokenDispatcher never pads)."""
    pins = _pins(job)
    chosen = pins.get("dispatcher") if pins is not None else None
    if chosen is None:
        return
    name, model, span = getattr(chosen, "name", chosen), job.get("model"), job.span_of("parallelism.dispatcher")
    pin = f"dispatcher = {name}"
    if not hasattr(model, "get"):
        return
    if getattr(model.get("arch"), "name", model.get("arch")) != "moe":
        yield codes.PIN_MEANINGLESS.make(span, pin=pin, why="it picks how routed tokens are exchanged, and this job's "
                                         "model has no routed experts", notes=["help: remove `dispatcher`"])
        return
    if name == "allgather" and pins.get("ep_overlap"):
        yield codes.PIN_MEANINGLESS.make(span, pin=pin, why="`ep_overlap = true` overlaps all-to-alls, and Megatron-Core "
                                         "overlaps them only with the alltoall or a flex dispatcher",
                                         notes=["help: use `dispatcher = alltoall` (or deepep, hybridep), or remove `ep_overlap`"])
    experts = model.get("experts")
    capacity = experts.get("capacity_factor") if hasattr(experts, "get") else None
    if capacity and name in ("deepep", "allgather"):
        yield codes.PIN_MEANINGLESS.make(span, pin=pin, why=f"the model pads every expert to `capacity_factor = {capacity}`, "
                                         f"and Megatron-Core's {name} dispatcher does not pad to a capacity",
                                         notes=["help: use `dispatcher = alltoall` or `dispatcher = hybridep` with a capacity "
                                                "factor, or remove `capacity_factor` (dropless)"])


def _ep_overlap(job: Entity) -> Iterator[Diagnostic]:
    """`ep_overlap = true` hides the MoE layers' all-to-all: a dense model has none to hide, and
    Megatron's stacks run it only where Megatron-Core's TransformerConfig lets them (`_megatron_overlap`)."""
    pins, model = _pins(job), job.get("model")
    if pins is None or not pins.get("ep_overlap") or not hasattr(model, "get"):
        return
    if getattr(model.get("arch"), "name", model.get("arch")) != "moe":
        yield codes.PIN_MEANINGLESS.make(job.span_of("parallelism.ep_overlap"), pin="ep_overlap = true",
                                         why="it overlaps the routed experts' all-to-all with compute, and this job's "
                                             "model has no routed experts", notes=["help: remove `ep_overlap`"])
        return
    yield from _megatron_overlap(job, pins)


def _megatron_overlap(job: Entity, pins: Record) -> Iterator[Diagnostic]:
    """Megatron-Core overlaps the all-to-all in its combined 1F1B schedule, interleaved on a
    pipeline, and refuses a full recompute beside it (core_r0.15.0 transformer_config.py
    `__post_init__`: "virtual_pipeline_model_parallel_size must be specified when
    pipeline_model_parallel_size > 1", "disable full recomputation when enabling
    overlap_moe_expert_parallel_comm"). Checked where both sides are pinned."""
    stated = job.get("software")
    stack = str(getattr(stated, "name", stated)) if stated is not None else DEFAULT_STACK
    if stack not in MEGATRON_STACKS:
        return
    here = job.span_of("parallelism.ep_overlap")
    label = [Label(job.span_of("software"), f"software = {stack}")] if stated is not None else []
    pp, vp = pins.get("pp"), pins.get("vp")
    schedule = getattr(pins.get("schedule"), "name", pins.get("schedule"))
    layers = job.get("model").get("layers") if hasattr(job.get("model"), "get") else None
    if pp is not None and int(pp) > 1 and vp is None and schedule in ("one_f_one_b", "gpipe"):
        yield codes.PARALLELISM.make(
            here, labels=label + [Label(job.span_of("parallelism.pp"), f"pp = {pp}"),
                                  Label(job.span_of("parallelism.schedule"), f"schedule = {schedule}")],
            what=f"`ep_overlap = true` on a pipeline needs the interleaved schedule in `{stack}`: Megatron-Core "
                 f"overlaps the all-to-all only in its interleaved 1F1B schedule, not `{schedule}`",
            notes=["help: pin `schedule = interleaved` beside `ep_overlap`, or remove `ep_overlap`"])
    elif (pp is not None and int(pp) > 1 and vp is None and isinstance(layers, int)
          and not any(layers % (int(pp) * v) == 0 for v in range(2, MAX_VP + 1))):
        yield codes.PARALLELISM.make(
            here, labels=label + [Label(job.span_of("parallelism.pp"), f"pp = {pp}")],
            what=f"`ep_overlap = true` on a pipeline needs virtual stages in `{stack}`, and no count from 2 to "
                 f"{MAX_VP} splits the model's {layers} layers evenly over pp = {pp}",
            notes=["help: pin `vp` (Megatron's layout flags run uneven chunks), change `pp`, or remove `ep_overlap`"])
    refused = overlap_refusal(stack, None if pp is None else int(pp), None if vp is None else int(vp), None)
    if refused:
        yield codes.PARALLELISM.make(
            here, labels=label + [Label(job.span_of("parallelism.pp"), f"pp = {pp}"),
                                  Label(job.span_of("parallelism.vp"), f"vp = {vp}")],
            what=f"`ep_overlap = true` on a pipeline needs virtual stages in `{stack}`: {refused[1]}",
            notes=["help: pin `vp = 2` or more beside `ep_overlap`, or remove `ep_overlap`"])
    recompute = getattr(pins.get("recompute"), "name", pins.get("recompute"))
    refused = overlap_refusal(stack, None, None, recompute)
    if refused:
        yield codes.PARALLELISM.make(
            here, labels=label + [Label(job.span_of("parallelism.recompute"), "recompute = full")],
            what=f"`ep_overlap = true` with a full recompute: {refused[1]}",
            notes=["help: pin `recompute = selective` (or `none`), or remove `ep_overlap`"])


def _nodes(target: object) -> list:
    targets = target if isinstance(target, tuple) else (target,)
    nodes = []
    for one in targets:
        if isinstance(one, Partition):
            nodes.append(lower_cluster(one.cluster).partition(one.name).node)
        elif isinstance(one, Entity) and one.kind == "cluster":
            nodes += [p.node for p in lower_cluster(one).partitions]
    return nodes


def _attention(model: Entity) -> Iterator[Diagnostic]:
    window, every, layers = model.get("window"), model.get("global_every"), model.get("layers")
    if every is not None and window is None:
        yield codes.PIN_MEANINGLESS.make(model.span_of("global_every"), pin=f"global_every = {every}",
                                         why="without a `window` every layer attends globally",
                                         notes=["help: add `window = ...` (the local layers' keys), or remove "
                                                "`global_every`"])
    elif every is not None and layers and every > layers:
        yield codes.SHAPE.make(model.span_of("global_every"),
                               what=f"global_every = {every} exceeds the model's {layers} layers: no layer is global",
                               notes=["help: remove `global_every` for a model whose every layer is local"])
