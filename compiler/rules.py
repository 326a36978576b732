"""Checks that relate several fields of one declaration: idle < tdp, model shapes,
stated params against the shape, suspicious per-direction bandwidths."""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Iterator

from ..dsl import codes
from . import chip as chip_numbers
from .hostlist import HOSTNAME, HostlistError, expand_all
from .design import Entity, Partition, Record, Symbol
from .formats import runs
from ..dsl.diagnostics import Diagnostic, Label
from ..dsl.units import BANDWIDTH, BYTES, FLOPS, Quantity, format_quantity
from .part_rules import chip_formats, dpu_rules
from .serve_rules import serve_rules

PARAMS_TOLERANCE = Fraction(3, 100)

# The fastest per-direction bandwidth per GPU each link kind offers today; a figure above
# it is most likely a bidirectional number. NVLink 5: 900 GB/s per direction (NVIDIA
# NVLink page, via stas00/ml-engineering network/README.md); InfiniBand XDR: 800 Gb/s
# per port (IBTA rates, same source) — 8 rails of it per GPU at most.
PER_DIRECTION_CEILING = {
    "nvlink": Quantity(Fraction(900 * 10**9), BANDWIDTH),
    "infiniband": Quantity(Fraction(8 * 100 * 10**9), BANDWIDTH),
}


def check_entity(entity: Entity, complete: bool = True) -> list[Diagnostic]:
    """The rules of the entity's kind; those that need every field only when none was invalid."""
    rules = (RULES.get(entity.kind), COMPLETE_RULES.get(entity.kind) if complete else None)
    return [d for rule in rules if rule for d in rule(entity)]


def _chip(chip: Entity) -> Iterator[Diagnostic]:
    tdp, idle, cap = chip.get("power.tdp"), chip.get("power.idle"), chip.get("power.min_cap")
    for low, value in (("idle", idle), ("min_cap", cap)):
        if tdp is not None and value is not None and not value < tdp:
            yield codes.ORDER.make(chip.span_of(f"power.{low}"), low=f"power.{low}", high="power.tdp",
                                   low_value=format_quantity(value), high_value=format_quantity(tdp),
                                   labels=[Label(chip.span_of("power.tdp"), "the TDP")])
    yield from _chip_derivations(chip)
    yield from _chip_clocks(chip)
    yield from chip_formats(chip)


def _chip_derivations(chip: Entity) -> Iterator[Diagnostic]:
    """Peaks and HBM figures: stated or derivable, and the two agreeing within 5 %."""
    peak = chip.get("peak")
    if isinstance(peak, Record) and not peak.items and not chip_numbers.peaks(chip):
        yield codes.MISSING_FIELD.make(chip.span_of("peak"), field="a precision", where="`peak`",
                                       notes=["help: for example `peak { bf16 = 989 TFLOPS }`"])
    for d in chip_numbers.disagreements(chip):
        yield codes.DERIVED_MISMATCH.make(
            chip.span_of(d.key), field=d.key, stated=_quantity(d.stated, d.unit), derived=_quantity(d.value, d.unit),
            percent=f"{abs(d.stated - d.value) / d.stated:.1%}",
            notes=[f"derived: {d.formula} = {_quantity(d.value, d.unit)}",
                   "the stated figure is used; fix whichever is wrong"])


def _chip_clocks(chip: Entity) -> Iterator[Diagnostic]:
    clock = chip.get("clock")
    for low, value, high, bound in (("base_clock", chip.get("base_clock"), "clock", clock),
                                    ("power.min_clock", chip.get("power.min_clock"), "clock", clock),
                                    ("power.idle", chip.get("power.idle"), "power.cap", chip.get("power.cap"))):
        if value is not None and bound is not None and not value < bound:
            yield codes.ORDER.make(chip.span_of(low), low=low, high=high, low_value=format_quantity(value),
                                   high_value=format_quantity(bound), labels=[Label(chip.span_of(high), "here")])
    cap, tdp, least = chip.get("power.cap"), chip.get("power.tdp"), chip.get("power.min_cap")
    if cap is not None and least is not None and cap < least:
        yield codes.ORDER.make(chip.span_of("power.min_cap"), low="power.min_cap", high="power.cap",
                               low_value=format_quantity(least), high_value=format_quantity(cap),
                               labels=[Label(chip.span_of("power.cap"), "the cap")],
                               notes=["help: the firmware accepts no cap below `min_cap`"])
    if cap is not None and tdp is not None and tdp < cap:
        yield codes.ORDER.make(chip.span_of("power.cap"), low="power.cap", high="power.tdp",
                               low_value=format_quantity(cap), high_value=format_quantity(tdp),
                               notes=["help: a power cap limits the chip below its TDP"])


def _quantity(value: float, unit: str) -> str:
    dim = {"FLOPS": FLOPS, "B": BYTES, "B/s": BANDWIDTH}[unit]
    return format_quantity(Quantity(Fraction(repr(value)), dim))


def _fabric(fabric: Entity) -> Iterator[Diagnostic]:
    kind, bandwidth = fabric.get("kind"), fabric.get("bandwidth")
    ceiling = PER_DIRECTION_CEILING.get(getattr(kind, "name", ""))
    if ceiling is not None and bandwidth is not None and ceiling < bandwidth:
        yield codes.BIDIR_HINT.make(
            fabric.span_of("bandwidth"), field="bandwidth", value=format_quantity(bandwidth),
            notes=[f"the fastest {kind.name} today carries {format_quantity(ceiling)} per GPU per direction",
                   f"help: if this is the sum of both directions, write `{format_quantity(bandwidth)} bidir`"
                   f" (= {format_quantity(bandwidth.scaled(Fraction(1, 2)))} per direction)"])


def _cluster(cluster: Entity) -> Iterator[Diagnostic]:
    has_units, partitions = "units" in cluster.record, cluster.get("partition")
    if has_units == bool(partitions):
        what = "both `units` and partitions" if has_units else "neither `units` nor a partition"
        labels = [Label(cluster.span_of("units"), "the units"),
                  Label(cluster.span_of("partition"), "a partition")] if has_units else []
        yield codes.SHAPE.make(cluster.span, what=f"cluster `{cluster.name}` has {what}", labels=labels,
                               notes=["help: give `units = N x Unit` for one kind of unit, or "
                                      "`partition name { units = ... }` blocks for several"])
    yield from _hostnames(cluster)
    if partitions and "scaleout" not in cluster.record:
        for item in partitions.items:
            if "scaleout" not in item.value and item.value.get("units").count > 1:
                yield codes.MISSING_FIELD.make(item.span, field="`scaleout`", where=f"partition `{item.name}`",
                                               notes=["help: set `scaleout` on the cluster or on each partition"])


def _hostnames(cluster: Entity) -> Iterator[Diagnostic]:
    """Each `hostnames` list expands to valid, distinct host names, one per node of its units."""
    partitions = cluster.get("partition")
    if "hostnames" in cluster.record and partitions:
        yield codes.HOSTNAMES.make(cluster.span_of("hostnames"), what="a cluster of partitions lists `hostnames` "
                                   "per partition", notes=["help: move the list into each `partition` block"])
        return
    places = [(cluster.record, cluster.span_of("hostnames"), "the cluster")] if partitions is None else [
        (item.value, item.value.span_of("hostnames"), f"partition `{item.name}`") for item in partitions.items]
    seen: set[str] = set()  # host names of the partitions before, which must not repeat either
    for record, span, where in places:
        expressions, units = record.get("hostnames"), record.get("units")
        if not expressions or units is None:
            continue
        try:
            names = expand_all(expressions)
        except HostlistError as error:
            yield codes.HOSTNAMES.make(span, what=str(error))
            continue
        nodes = units.count * (units.part.get("nodes").count if units.part.kind == "supernode" else 1)
        bad = next((n for n in names if not HOSTNAME.match(n)), None)
        repeated = _first_repeat(names, seen)
        seen.update(names)
        if bad is not None:
            yield codes.HOSTNAMES.make(span, what=f"`{bad}` is not a host name",
                                       notes=["help: lowercase letters, digits and `-`, dot-separated labels "
                                              "of at most 63 characters (RFC 1123, as Kubernetes node names)"])
        elif repeated is not None:
            yield codes.HOSTNAMES.make(span, what=f"`{repeated}` is listed twice")
        elif len(names) != nodes:
            yield codes.HOSTNAMES.make(span, what=f"`hostnames` names {len(names)} hosts; {where} has {nodes} nodes",
                                       labels=[Label(record.span_of("units"), f"{nodes} nodes")],
                                       notes=["help: list one host name per node, in order, e.g. "
                                              f"[\"gpu[{1:03d}-{nodes:03d}]\"]"])


def _first_repeat(names: list[str], seen: set[str]) -> str | None:
    mine: set[str] = set()
    for name in names:
        if name in mine or name in seen:
            return name
        mine.add(name)
    return None


def _model(model: Entity) -> Iterator[Diagnostic]:
    yield from _model_shape(model)
    stated = model.get("params")
    computed = model_params(model)
    if stated is not None and computed and abs(stated.value - computed) > PARAMS_TOLERANCE * computed:
        percent = f"{float(abs(stated.value - computed) / computed):.1%}"
        yield codes.PARAMS_MISMATCH.make(model.span_of("params"), stated=format_quantity(stated),
                                         computed=format_quantity(Quantity(Fraction(computed))), percent=percent,
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
    if experts is not None and experts.get("top_k", 0) > experts.get("routed", 0):
        yield codes.SHAPE.make(model.span_of("experts.top_k"), what="top_k exceeds the number of routed experts")
    if experts is not None and experts.get("dense_layers", 0) > model.get("layers", 0):
        yield codes.SHAPE.make(model.span_of("experts.dense_layers"), what="more dense layers than layers")


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


def _job(job: Entity) -> Iterator[Diagnostic]:
    if "maximize" in job.record and "minimize" in job.record:
        yield codes.SHAPE.make(job.span_of("minimize"), what="a job has one objective: `maximize` or `minimize`",
                               labels=[Label(job.span_of("maximize"), "the other objective")])
    yield from _objective(job)
    yield from _pins(job)
    yield from _shared(job)
    yield from _goodput(job)
    yield from _schedule(job)
    yield from _batch_split(job)


def _goodput(job: Entity) -> Iterator[Diagnostic]:
    """Goodput is planned for a train job on one partition; elsewhere it would be ignored."""
    if job.get("maximize") != Symbol("goodput"):
        return
    on = job.get("on")
    split = isinstance(on, tuple) and len(on) > 1
    if job.kind == "serve" or split:
        what = "a serve job" if job.kind == "serve" else "a job split across partitions"
        yield codes.SHAPE.make(job.span_of("maximize"), what=f"`maximize = goodput` is not planned for {what}",
                               notes=["help: goodput (training time lost to failures and checkpoints) is planned for "
                                      "a train job on one partition; use `maximize = throughput` here"])


def _shared(job: Entity) -> Iterator[Diagnostic]:
    """A job on a shared cluster: one amount of work, a GPU range in order, a preferred
    partition among those it runs on."""
    sizes = [k for k in ("tokens", "steps", "duration") if k in job.record]
    if len(sizes) > 1:
        yield codes.SHAPE.make(job.span_of(sizes[1]), what="a job's work is one of `tokens`, `steps` or `duration`",
                               labels=[Label(job.span_of(sizes[0]), "already given here")])
    low, high = job.get("min_gpus"), job.get("gpus")
    if low is not None and high is not None and low > high:
        yield codes.ORDER.make(job.span_of("min_gpus"), low="min_gpus", high="gpus", low_value=str(low),
                               high_value=str(high), labels=[Label(job.span_of("gpus"), "the most it may use")])
    prefer, on = job.get("prefer"), job.get("on")
    if prefer is None or on is None:
        return
    allowed = _targets(on)
    for target in (prefer if isinstance(prefer, tuple) else (prefer,)):
        for name in _targets(target):
            if name not in allowed:
                yield codes.SHAPE.make(job.span_of("prefer"), what=f"`{name}` is not among the partitions the job "
                                       "runs `on`", labels=[Label(job.span_of("on"), "where it may run")])
                return


def _targets(target) -> set[str]:
    """`Cluster.part` names a target covers (every partition of a whole cluster)."""
    if isinstance(target, tuple):
        return set().union(*(_targets(t) for t in target))
    if hasattr(target, "cluster"):
        return {f"{target.cluster.name}.{target.name}"}
    parts = target.get("partition")
    names = [i.name for i in parts.items] if isinstance(parts, Record) else [target.name]
    return {f"{target.name}.{n}" if isinstance(parts, Record) else n for n in names}


def _workload(workload: Entity) -> Iterator[Diagnostic]:
    from .trace import workload_jobs

    yield from workload_jobs(workload)[1]


# Objectives the language reserves but the planner does not model yet: rejected rather
# than planned as throughput behind the user's back.
UNIMPLEMENTED_OBJECTIVES = {"minimize": ("cost",)}


def _objective(job: Entity) -> Iterator[Diagnostic]:
    for key, names in UNIMPLEMENTED_OBJECTIVES.items():
        value = job.get(key)
        if isinstance(value, Symbol) and value.name in names:
            yield codes.NOT_IMPLEMENTED.make(
                job.span_of(key), what=f"`{key} = {value.name}`",
                notes=["help: plan with `maximize = throughput`, `maximize = mfu`, `minimize = time` "
                       "or `minimize = energy`"])


def _schedule(job: Entity) -> Iterator[Diagnostic]:
    """A pinned schedule and pinned virtual stages must agree: only the interleaved
    schedule runs more than one virtual stage per GPU, and it needs at least two."""
    pins = job.get("parallelism")
    if pins is None:
        return
    schedule, vp, pp = pins.get("schedule"), pins.get("vp"), pins.get("pp")
    name = getattr(schedule, "name", None)
    if vp and vp > 1 and name in ("gpipe", "one_f_one_b"):
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.vp"), what=f"vp = {vp} virtual stages need the interleaved schedule, not {name}",
            labels=[Label(job.span_of("parallelism.schedule"), "the schedule")],
            notes=["help: set `schedule = interleaved`, or remove `vp` (it is 1 under " + name + ")"])
    elif vp == 1 and name == "interleaved":
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.schedule"), what="the interleaved schedule needs vp >= 2 virtual stages",
            labels=[Label(job.span_of("parallelism.vp"), "vp = 1")],
            notes=["help: set `vp = 2` or more, or `schedule = one_f_one_b`"])
    elif vp and vp > 1 and pp == 1:
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.vp"), what=f"vp = {vp} virtual stages need a pipeline; pp = 1",
            labels=[Label(job.span_of("parallelism.pp"), "pp = 1")],
            notes=["help: remove `vp`, or pin pp >= 2"])
    layers = getattr(job.get("model"), "get", lambda _: None)("layers")
    if pp and layers and pp > 1 and layers % (pp * (vp or 1)):
        split = f"pp x vp = {pp} x {vp}" if vp and vp > 1 else f"pp = {pp}"
        yield codes.UNEVEN_PIPELINE.make(
            job.span_of("parallelism.pp"), what=f"{split} stages do not split the model's {layers} layers evenly",
            notes=[f"the largest stage holds {-(-layers // (pp * (vp or 1)))} layers and sets the pace; "
                   f"the model counts {layers / (pp * (vp or 1)):g} per stage",
                   "help: pick stages that divide the layers, or keep it if the first and last stages are "
                   "lightened on purpose (embedding and output layers)"])


def _batch_split(job: Entity) -> Iterator[Diagnostic]:
    """The global batch must split into the pinned replicas and micro-batches, and expert
    groups must fold over the pinned data x context ranks."""
    pins, batch = job.get("parallelism"), job.get("batch")
    if pins is None or not isinstance(batch, int) or job.kind != "train":
        return
    dp, mb, count = pins.get("dp"), pins.get("microbatch"), pins.get("microbatches")
    here = Label(job.span_of("batch"), f"batch = {batch}")
    if dp and dp > batch:
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.dp"), what=f"dp = {dp} replicas need at least {dp} sequences per step; "
            f"the batch is {batch}", labels=[here],
            notes=[f"help: pin dp to a divisor of {batch}, or raise the batch to a multiple of {dp}"])
        return
    parts = [(k, v) for k, v in (("dp", dp), ("microbatch", mb), ("microbatches", count)) if v]
    unit = 1
    for _, v in parts:
        unit *= v
    if parts and batch % unit:
        names = " x ".join(f"{k} = {v}" for k, v in parts) if len(parts) > 1 else f"{parts[0][0]} = {parts[0][1]}"
        yield codes.PARALLELISM.make(
            job.span_of(f"parallelism.{parts[-1][0]}"),
            what=f"the batch of {batch} sequences does not split into {names}" + (f" = {unit}" if len(parts) > 1 else ""),
            labels=[here], notes=[f"help: make the batch a multiple of {unit}, or change the pins"])
        return
    if dp and mb and count and dp * mb * count != batch:
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.microbatches"),
            what=f"dp x microbatch x microbatches = {dp} x {mb} x {count} = {dp * mb * count} sequences, "
                 f"but the batch is {batch}", labels=[here],
            notes=["help: drop one of the three pins; the batch fixes it"])
        return
    # Megatron-Core's MoE parallel folding (expert TP = 1) builds expert groups from the
    # tp x cp x dp ranks of a stage, so ep must divide them; certain only when all are pinned.
    ep, tp, cp = pins.get("ep"), pins.get("tp"), pins.get("cp")
    if ep and dp and tp and cp and (tp * cp * dp) % ep:
        yield codes.PARALLELISM.make(
            job.span_of("parallelism.ep"),
            what=f"ep = {ep} expert groups fold over the tp x cp x dp = {tp} x {cp} x {dp} = {tp * cp * dp} ranks "
                 f"of a stage, which {ep} does not divide",
            labels=[Label(job.span_of("parallelism.dp"), f"dp = {dp}")],
            notes=[f"help: pin ep to a divisor of {tp * cp * dp}, or tp x cp x dp to a multiple of {ep}"])


def job_precision(job: Entity) -> Iterator[Diagnostic]:
    """The job's number format must be one its chips run: never a silent fallback. Run by
    the driver once the declarations are clean (a chip with a broken peak would mislead)."""
    precision = getattr(job.get("precision", Symbol("bf16")), "name", "bf16")
    for chip in _chips_of(job.get("on")):
        formats = chip_numbers.formats(chip)
        if formats and not runs(formats, precision):
            at = job.span_of("precision") if "precision" in job.record else job.span
            yield codes.UNSUPPORTED_PRECISION.make(
                at, chip=chip.name, precision=precision, formats=", ".join(formats),
                labels=[Label(chip.span_of("formats") or chip.span_of("peak") or chip.span, "its formats")],
                notes=[chip_numbers.format_help(chip, precision, formats, "precision")])
            return



def _chips_of(target: object) -> list[Entity]:
    """The chip declarations a job's `on` reaches: clusters, partitions, lists of them."""
    targets = target if isinstance(target, tuple) else (target,)
    repeats = []
    for t in targets:
        if isinstance(t, Partition):
            partition = (t.cluster.get("partition") or Record()).get(t.name)
            repeats.append(partition.get("units") if isinstance(partition, Record) else None)
        elif isinstance(t, Entity):
            repeats.append(t.get("units"))
            repeats += [item.value.get("units") for item in getattr(t.get("partition"), "items", ())]
    chips: list[Entity] = []
    for repeat in repeats:
        unit = getattr(repeat, "part", None)
        node = unit.get("nodes").part if unit is not None and unit.kind == "supernode" and unit.get("nodes") else unit
        chip = getattr(node.get("gpus"), "part", None) if node is not None else None
        if chip is not None and chip not in chips:
            chips.append(chip)
    return chips


def _pins(job: Entity) -> Iterator[Diagnostic]:
    """Pinned widths must split what they split: heads by tp, routed experts by ep."""
    model, pins = job.get("model"), job.get("parallelism")
    if model is None or pins is None:
        return
    experts = model.get("experts")
    splits = (("tp", model.get("heads"), "attention heads"), ("tp", model.get("kv_heads") or model.get("heads"), "KV heads"),
              ("ep", experts.get("routed") if experts is not None else None, "routed experts"))
    for dim, total, what in splits:
        width = pins.get(dim)
        if width and total and total % width and not (what == "KV heads" and width % total == 0):
            yield codes.SHAPE.make(job.span_of(f"parallelism.{dim}"),
                                   what=f"{dim} = {width} does not divide the model's {total} {what}",
                                   labels=[Label(model.span_of("heads" if dim == "tp" else "experts.routed"), "here")],
                                   notes=[f"help: pick a {dim} that divides {total}"])
            return


RULES: dict[str, Callable[[Entity], Iterator[Diagnostic]]] = {
    "dpu": dpu_rules, "chip": _chip, "fabric": _fabric, "cluster": _cluster, "model": _model, "train": _job, "serve": _job,
    "workload": _workload,
}
# Rules that would misreport a field whose value was invalid (and so is absent) as missing.
COMPLETE_RULES: dict[str, Callable[[Entity], Iterator[Diagnostic]]] = {"serve": serve_rules}
