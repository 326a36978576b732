"""Rules of `train` and `serve` jobs and workloads: one objective that the planner
implements, pins that agree with each other, the model and the batch, a precision the
chips run, shared-cluster fields."""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from .. import chip as chip_numbers
from ..design import Entity, Partition, Record, Symbol
from ..formats import runs
from ...dsl.diagnostics import Diagnostic, Label
from ...dsl.numbers import number


def job_rules(job: Entity) -> Iterator[Diagnostic]:
    yield from one_objective(job)
    yield from _objective(job)
    yield from _pins(job)
    yield from _shared(job)
    yield from _goodput(job)
    yield from _schedule(job)
    yield from batch_split(job)


def one_objective(job: Entity) -> Iterator[Diagnostic]:
    """A job (train or RL) states `maximize` or `minimize`, not both."""
    if "maximize" in job.record and "minimize" in job.record:
        yield codes.SHAPE.make(job.span_of("minimize"), what="a job has one objective: `maximize` or `minimize`",
                               labels=[Label(job.span_of("maximize"), "the other objective")])


def _goodput(job: Entity) -> Iterator[Diagnostic]:
    """Goodput is planned for a train job on one partition; elsewhere it would be ignored. A
    job split across partitions is planned for throughput alone (solver/split/plan.py
    `plan_partitions`), which `minimize = time` means too: mfu, energy and cost would be ignored."""
    on = job.get("on")
    split = isinstance(on, tuple) and len([t for t in on if not (isinstance(t, Partition) and t.empty)]) > 1
    if split and job.kind == "train":
        for key in ("maximize", "minimize"):
            value = job.get(key)
            if isinstance(value, Symbol) and value.name not in ("throughput", "time", "goodput"):
                yield codes.SHAPE.make(job.span_of(key), what=f"`{key} = {value.name}` is not planned for a job split "
                                       "across partitions", notes=[
                                           "help: a split is planned for throughput (and so for the time to train): "
                                           "use `maximize = throughput`, or run the job `on` one partition"])
    if job.get("maximize") != Symbol("goodput"):
        return
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
    if job.get("checkpoint_every") is not None and job.get("checkpoint.interval") is not None:
        yield codes.SHAPE.make(job.span_of("checkpoint.interval"),
                               what="a job's checkpoint interval is one of `checkpoint_every` or `checkpoint { interval }`",
                               labels=[Label(job.span_of("checkpoint_every"), "already given here")])
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


def workload_rules(workload: Entity) -> Iterator[Diagnostic]:
    from ..trace import workload_jobs

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
                   f"the model counts {number(layers / (pp * (vp or 1)))} per stage",
                   "help: pick stages that divide the layers, or keep it if the first and last stages are "
                   "lightened on purpose (embedding and output layers; Megatron-LM's "
                   "`--pipeline-model-parallel-layout` or `--decoder-first/last-pipeline-num-layers`)"])


def batch_split(job: Entity) -> Iterator[Diagnostic]:
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

