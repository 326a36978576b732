"""From a checked `train` block to what the model evaluates: the model shape, the
partition it runs on, and the configuration with every pinned choice applied."""

from __future__ import annotations


from ..compiler.design import Design, Entity, Partition as PartitionRef, Symbol
from ..compiler.formats import block_scaled, family, generation
from ..compiler.ir import Accelerator, ClusterGraph, Partition
from ..compiler.lower import lower_cluster
from ..compiler.schema import MEGATRON_STACKS
from .config import DEFAULT_STACK, TrainConfig
from .shape import ModelShape
from ..dsl.records import frozen


class JobError(ValueError):
    """The job cannot be evaluated as written; the message says why."""

    usage = False  # True: the command line named a job that is not there (exit 2, not 1)


class UnknownJob(JobError):
    """`--job NAME` names no job of the kind the command wants: a usage error."""

    usage = True


@frozen
class Job:
    name: str
    entity: Entity
    shape: ModelShape
    graph: ClusterGraph
    partition: Partition
    gpus: int                     # GPUs available to the job
    batch: int
    seq: int
    precision: str
    stack: str
    pinned: dict[str, object]     # parallelism choices fixed in the file
    tokens: float | None
    sample_bytes: float = 0.0     # bytes read per sequence (model/train/host.py)
    checkpoint_every: float = 0.0  # seconds between checkpoints (0: none modelled)
    stack_stated: bool = True     # False when `software` is not written (the default stack is assumed)
    checkpoint_size: float = 0.0  # bytes, the `checkpoint { size }` stated (0: derived, model/train/host.py)
    checkpoint_bandwidth: float = 0.0  # bytes/s, the `checkpoint { bandwidth }` stated (0: the nodes' paths)
    optimizer_state: str = "fp32"  # Adam's moments as stored (model/train/optimizer.py)
    second_moment: str | None = None   # its second moment where stated apart (None: optimizer_state's)
    master_weights: str = "fp32"   # the master weights Adam updates, or `none`
    main_grads: str = "fp32"       # the main gradients Adam reads
    precision_aware_optimizer: bool | None = None   # Megatron's precision-aware optimizer stated (fp32 dtypes too; None: not stated)
    fp8_params: bool = False       # weights kept in the GEMMs' fp8 format only (model/train/memory.py)
    checkpoint_keep: int = 0       # checkpoints retained where they are written (`checkpoint { keep }`; 0: not stated)


def select_job(design: Design, name: str | None = None) -> tuple[str, Entity]:
    """What kind of job `name` is, and its entity: "hetero" (a train job across several
    partitions), "serve", "rl" or "train". Without a name: the root file's first train job, else
    its first serve job, else its first rl job. Raises `JobError` (`UnknownJob` for a name) when
    there is none.
    Every command that plans starts here, so that each loads only its kind's solver."""
    entity = hetero_entity(design, name)
    if entity is not None:
        return "hetero", entity
    entity = serve_entity(design, name)
    if entity is not None:
        return "serve", entity
    entity = rl_entity(design, name)
    if entity is not None:
        return "rl", entity
    if name is None and not any(e.kind in ("train", "serve", "rl") for e in design.entities):
        # every kind is planned here: "no `train` job" read as if a serve or rl job would not do
        raise JobError("the design has no job to plan: declare a `train`, `serve` or `rl` job")
    return "train", train_entity(design, name)


def rl_entity(design: Design, name: str | None = None) -> Entity | None:
    """The rl job `name`, or the root file's first when it has no train or serve job."""
    jobs = [e for e in design.entities if e.kind == "rl"]
    if name is not None:
        return next((e for e in jobs if e.name == name), None)
    if any(e.kind in ("train", "serve") and e.span.path == design.root for e in design.entities):
        return None
    local = [e for e in jobs if e.span.path == design.root] or jobs
    return local[0] if local else None


def train_job(design: Design, name: str | None = None) -> Job:
    """The train job `name` (default: the root file's first) as the model evaluates it."""
    return job_from_entity(train_entity(design, name))


def train_entity(design: Design, name: str | None = None) -> Entity:
    jobs = [e for e in design.entities if e.kind == "train"]
    named = name is not None and not any(j.name == name for j in jobs)
    other = next((e for e in design.entities if e.name == name), None) if named else None
    if other is not None:
        known = f"; the design's train jobs: {', '.join(j.name for j in jobs)}" if jobs else ""
        what = f"{other.kind} job" if other.kind == "serve" else other.kind
        raise UnknownJob(f"`{name}` is a {what}, not a train job{known}")
    if not jobs and name is not None:  # `--job NAME` names nothing at all: say so, and what there is
        others = [e.name for e in design.entities if e.kind in ("train", "serve", "rl")]
        raise UnknownJob(f"no job `{name}`; the design's jobs: {', '.join(others)}" if others
                         else f"no job `{name}`: the design declares none")
    if not jobs:
        raise JobError("the design has no `train` job")
    local = [j for j in jobs if j.span.path == design.root] or jobs
    if name is None:
        return local[0]
    entity = next((j for j in jobs if j.name == name), None)
    if entity is None:
        raise UnknownJob(f"no train job `{name}`; the design has: {', '.join(j.name for j in jobs)}")
    return entity


def partition_refs(entity: Entity) -> tuple[PartitionRef, ...]:
    """The partitions a job names in `on = [...]`, less those that hold no units (swept to 0)."""
    target = entity.get("on")
    return tuple(t for t in target if not (isinstance(t, PartitionRef) and t.empty)) if isinstance(target, tuple) else ()


def is_hetero(entity: Entity) -> bool:
    """True when a train job names two or more partitions in `on`."""
    return len(partition_refs(entity)) > 1


def hetero_entity(design: Design, name: str | None = None) -> Entity | None:
    """The train job `name` (or the root file's first) when it spans several partitions."""
    jobs = [e for e in design.entities if e.kind == "train"]
    local = [j for j in jobs if j.span.path == design.root] or jobs
    entity = next((j for j in jobs if j.name == name), None) if name else (local[0] if local else None)
    return entity if entity is not None and is_hetero(entity) else None


def serve_entity(design: Design, name: str | None = None) -> Entity | None:
    """The serve job `name`, or the root file's first when it has no train job."""
    serves = [e for e in design.entities if e.kind == "serve"]
    if name is not None:
        return next((e for e in serves if e.name == name), None)
    if any(e.kind == "train" and e.span.path == design.root for e in design.entities):
        return None
    local = [e for e in serves if e.span.path == design.root] or serves
    return local[0] if local else None


def job_from_entity(entity: Entity) -> Job:
    graph, partition = placement(entity)
    model = entity.get("model")
    shape = ModelShape.from_entity(model)
    seq = entity.get("seq") or shape.seq
    parallelism = entity.get("parallelism")
    pinned = {} if parallelism is None else {i.name: _plain(i.value) for i in parallelism.items}
    gpus = min(entity.get("gpus") or partition.gpus, partition.gpus)
    precision = _plain(entity.get("precision", Symbol("bf16")))
    tokens = entity.get("tokens")
    return Job(entity.name, entity, shape, graph, partition, gpus, entity.get("batch"), seq, precision,
               _plain(entity.get("software", Symbol(DEFAULT_STACK))), pinned,
               float(tokens) if tokens is not None else None,
               float(entity.get("sample_bytes") or 0), float(entity.get("checkpoint_every") or 0),
               entity.get("software") is not None, _stated(entity, "checkpoint.size"),
               _stated(entity, "checkpoint.bandwidth"), **optimizer_fields(entity),
               fp8_params=bool(entity.get("fp8_params", False)),
               precision_aware_optimizer=_stated_flag(entity, "precision_aware_optimizer"),
               second_moment=_second_moment(entity),
               checkpoint_keep=int(entity.get("checkpoint.keep") or 0))


# The optimizer's precisions a train job may state (model/train/optimizer.py), each fp32 when absent.
OPTIMIZER_FIELDS = ("optimizer_state", "master_weights", "main_grads")


def optimizer_fields(entity: Entity) -> dict[str, str]:
    """The job's `optimizer_state`, `master_weights` and `main_grads` (mixed-precision Adam's fp32
    when absent)."""
    return {k: str(_plain(entity.get(k, Symbol("fp32")))) for k in OPTIMIZER_FIELDS}


def stated_fields(job: Job) -> frozenset[str]:
    """The job's `parallelism` fields it states, those it asks the planner to search (`search =
    [offload]`: the plan's choice, not a default), and `fp8_params` where it states it: what
    model/train/guessed.py does not treat as a guess."""
    stated = set(job.pinned)
    asked = job.pinned.get("search") or ()
    stated |= {str(getattr(a, "name", a)) for a in (asked if isinstance(asked, (tuple, list)) else (asked,))}
    if job.entity is not None and job.entity.get("fp8_params") is not None:
        stated.add("fp8_params")
    return frozenset(stated)


def job_optimizer(job: Job) -> dict[str, object]:
    """The optimizer's precisions of a job, whether its weights are kept in fp8 and whether its chip runs
    its fp8 with MX block scaling (which decides who holds the master: model/train/optimizer.py), as
    TrainConfig fields."""
    return {**{k: getattr(job, k) for k in OPTIMIZER_FIELDS}, "fp8_params": job.fp8_params,
            "precision_aware_optimizer": job.precision_aware_optimizer, "second_moment": job.second_moment,
            "mx_fp8": mx_fp8(str(job.precision), job.partition.node.accelerator),
            "non_tn_fp8": non_tn_fp8(str(job.precision), job.partition.node.accelerator)}


def mx_fp8(precision: str, chip: Accelerator | None) -> bool:
    """TrainConfig.mx_fp8: the generic `fp8` on a chip that runs it with MX block scaling (an `mxfp8` job
    states it in its precision; no chip: none)."""
    return precision == "fp8" and chip is not None and block_scaled(precision, chip)


def non_tn_fp8(precision: str, chip: Accelerator | None) -> bool:
    """TrainConfig.non_tn_fp8: a per-tensor fp8 job (an fp8 format that is not block-scaled) on a chip whose
    fp8 GEMMs take any operand layout, Transformer Engine's `is_non_tn_fp8_gemm_supported` (compute
    capability 10.x, 11.x, 13 on): the Blackwell generation (compiler/formats.py). ASSUMPTION: a Blackwell
    part here is a data-center one; a GeForce / RTX PRO Blackwell (12.x) keeps Hopper's transposes."""
    return (chip is not None and family(precision) == "fp8" and not block_scaled(precision, chip)
            and generation(chip) == "blackwell")


def _stated_flag(entity: Entity, name: str) -> bool | None:
    value = entity.get(name)
    return None if value is None else bool(_plain(value))


def _second_moment(entity: Entity) -> str | None:
    value = entity.get("second_moment")
    return None if value is None else str(_plain(value))


def needs_distributed_optimizer(job: Job) -> bool:
    """Megatron's precision-aware optimizer, stated or implied by a narrower dtype on a Megatron-LM stack,
    runs only with the distributed optimizer or FSDP (OptimizerConfig asserts it), and NeMo narrows only in
    a distributed optimizer (NeMo 1.0: Apex's DistributedFusedAdam): compiler/rules/optimizer.py refuses a
    pinned ZeRO 0, and the search leaves it out."""
    narrower = any(getattr(job, k) != "fp32" for k in OPTIMIZER_FIELDS) or job.second_moment not in (None, "fp32")
    return job.precision_aware_optimizer or (narrower and job.stack in MEGATRON_STACKS)


def state_config(entity: Entity, chip: Accelerator | None = None) -> TrainConfig:
    """What the optimizer state's size reads of a train job on `chip`, without planning it
    (the checkpoint of a schedule: solver/schedule)."""
    precision = str(_plain(entity.get("precision", Symbol("bf16"))))
    return TrainConfig(batch=1, seq=1, precision=precision,
                       stack=str(_plain(entity.get("software", Symbol(DEFAULT_STACK)))), **optimizer_fields(entity),
                       precision_aware_optimizer=_stated_flag(entity, "precision_aware_optimizer"),
                       second_moment=_second_moment(entity), mx_fp8=mx_fp8(precision, chip),
                       non_tn_fp8=non_tn_fp8(precision, chip))


def _stated(entity: Entity, path: str) -> float:
    value = entity.get(path)
    return float(value.value) if value is not None else 0.0


def _plain(value: object) -> object:
    return value.name if isinstance(value, Symbol) else value


def placement(entity: Entity) -> tuple[ClusterGraph, Partition]:
    target = entity.get("on")
    if isinstance(target, tuple):
        target = partition_refs(entity) or target   # the partitions that hold units
        if len(target) != 1:
            raise JobError(f"`{entity.name}` spans {len(target)} partitions; evaluating one configuration "
                           "needs a single partition (the optimizer splits heterogeneous jobs)")
        target = target[0]
    if isinstance(target, PartitionRef):
        if target.empty:
            raise JobError(f"`{entity.name}` runs on `{target.cluster.name}.{target.name}`, which holds 0 units: "
                           "give it nodes, or the job another partition")
        graph = lower_cluster(target.cluster)
        return graph, graph.partition(target.name)
    graph = lower_cluster(target)
    if len(graph.partitions) != 1:
        names = ", ".join(f"{graph.name}.{p.name}" for p in graph.partitions)
        raise JobError(f"`{graph.name}` has several partitions; run `{entity.name}` on one of {names}")
    return graph, graph.partitions[0]


def pinned_config(job: Job) -> TrainConfig:
    """The configuration the file pins; unpinned tp/pp/cp/ep/vp default to 1 and dp fills the GPUs."""
    p = job.pinned
    tp, pp, cp = (int(p.get(k, 1)) for k in ("tp", "pp", "cp"))
    most = max(1, job.gpus // (tp * pp * cp))
    dp = int(p.get("dp") or next(d for d in range(most, 0, -1) if job.batch % d == 0))
    recompute = p.get("recompute", "none")
    return TrainConfig(
        batch=job.batch, seq=job.seq, tp=tp, pp=pp, dp=dp, cp=cp, ep=int(p.get("ep", 1)), vp=int(p.get("vp", 1)),
        microbatch=int(p.get("microbatch", 1)), recompute=str(recompute), sp=bool(p.get("sp", tp > 1)),
        zero=int(p.get("zero", 1)), precision=str(job.precision), stack=str(job.stack),
        gpipe=p.get("schedule") == "gpipe",
        sample_bytes=job.sample_bytes, checkpoint_every=job.checkpoint_every,
        **job_optimizer(job), **pinned_only(job))


def pinned_only(job: Job) -> dict[str, object]:
    """The choices the planner takes from the file: hybrid sharding's group, the recompute's
    modules and layer interval, the offloaded share of layers (these four searched instead
    where the job asks: `search = [...]`, solver/train/enumerate.py `variants`), the
    context-parallel balance, the MoE all-to-all, TP and DP overlaps, the loss's implementation, the gradient reduction's
    format and dropout, and the checkpoint's stated size,
    bandwidth and retained count, and the data the job reads (`dataset_bytes`)."""
    p = job.pinned
    modules = p.get("recompute_modules") or ()
    return {"shard": int(p.get("shard") or 0), "recompute_every": int(p.get("recompute_every") or 1),
            "recompute_modules": tuple(_plain(m) for m in modules), "offload": float(p.get("offload") or 0.0),
            "cp_balanced": bool(p.get("cp_balance", True)),
            "ep_overlap": None if p.get("ep_overlap") is None else bool(p["ep_overlap"]),
            "dispatcher": None if p.get("dispatcher") is None else _plain(p["dispatcher"]),
            "tp_overlap": None if p.get("tp_overlap") is None else bool(p["tp_overlap"]),
            "dp_overlap": None if p.get("dp_overlap") is None else bool(p["dp_overlap"]),
            "loss": None if p.get("loss") is None else str(p["loss"]),
            "grad_reduce": None if p.get("grad_reduce") is None else str(_plain(p["grad_reduce"])),
            "dropout": None if p.get("dropout") is None else bool(p["dropout"]),
            "checkpoint_size": job.checkpoint_size, "checkpoint_bandwidth": job.checkpoint_bandwidth,
            "checkpoint_keep": job.checkpoint_keep, "dataset_bytes": dataset_bytes(job)}


def dataset_bytes(job: Job) -> float:
    """Bytes of data the job reads over its run: its `tokens` in sequences of `seq`, `sample_bytes`
    each (ASSUMPTION: one pass over the data, as LLM pre-training reads its corpus about once);
    0 when either is not stated."""
    if not job.tokens or not job.sample_bytes:
        return 0.0
    return job.tokens / job.seq * job.sample_bytes
