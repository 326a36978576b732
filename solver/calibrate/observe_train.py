"""Training runs as observations: the configuration a log ran (the design's job, with
whatever the log states over it: Megatron-LM's argument dump, torchtitan's mesh and batch)
and its steady throughput per GPU beside the step-time model's."""

from __future__ import annotations

from typing import Callable

import attrs

from ...compiler.ir import Partition
from ...compiler.measure.records import TrainRun
from ...dsl.plain_number import PlainNumberError, parse_plain
from ...model.config import TrainConfig
from ...model.job import Job, pinned_config
from ...model.shape import ModelShape
from ...model.train.step import estimate
from .observe import Observation
from .params import gemm_key

# Megatron-LM argument -> TrainConfig field (megatron/training/arguments.py names).
MEGATRON = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
            "context_parallel_size": "cp", "expert_model_parallel_size": "ep", "micro_batch_size": "microbatch",
            "global_batch_size": "batch", "seq_length": "seq", "data_parallel_size": "dp"}
# torchtitan's mesh dimensions -> TrainConfig field (dp_shard x dp_replicate make dp).
TITAN = {"mesh_tp": "tp", "mesh_pp": "pp", "mesh_cp": "cp", "global_batch_size": "batch", "seq_len": "seq"}
# The model shape a log may state, and the design's field it must agree with.
SHAPE = {"num_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads",
         "ffn_hidden_size": "ffn", "num_experts": "routed"}


class RunMismatch(ValueError):
    """A log whose run the design cannot stand for (another model, more GPUs)."""


def train_config(job: Job, run: TrainRun) -> tuple[TrainConfig, list[str]]:
    """The configuration of `run`: the job's pinned configuration with what the log states
    over it, and notes on what was assumed."""
    _same_model(job.shape, run)
    cfg, stated = pinned_config(job), {}
    table = MEGATRON if run.framework == "megatron" else TITAN if run.framework == "torchtitan" else {}
    for name, field in table.items():
        value = _integer(run.setting(name))
        if value is not None:
            stated[field] = value
    if run.framework == "torchtitan":
        shards = [_integer(run.setting(k)) or 1 for k in ("mesh_dp_shard", "mesh_dp_replicate")]
        if any(run.setting(k) for k in ("mesh_dp_shard", "mesh_dp_replicate")):
            stated["dp"] = shards[0] * shards[1]
        stated.setdefault("zero", 3)
    stated.update(_megatron_flags(run))
    world = _integer(run.setting("world_size"))
    if world and "dp" not in stated:
        tp, pp, cp = (stated.get(k, getattr(cfg, k)) for k in ("tp", "pp", "cp"))
        stated["dp"] = max(1, world // (tp * pp * cp))
    cfg = attrs.evolve(cfg, **stated)
    notes = [] if {"tp", "pp", "dp"} <= set(stated) or {"tp", "pp", "dp"} <= set(job.pinned) else [
        f"{run.span}: the log does not state its layout; modelled as the job pins it "
        f"(tp {cfg.tp}, pp {cfg.pp}, dp {cfg.dp}, micro-batch {cfg.microbatch})"]
    if cfg.gpus > job.partition.gpus:
        raise RunMismatch(f"the run uses {cfg.gpus} GPUs; the design's partition has {job.partition.gpus}")
    return cfg, notes


def _integer(text: str | None) -> int | None:
    """A count the log states (a parallel size, a world size), through the one plain-number
    parser: ASCII digits, at least 1 (a size of 0 would divide by zero); None where the log
    states none or something else."""
    try:
        return parse_plain(text, whole=True, low=1, digits_only=True) if text not in (None, "None") else None
    except PlainNumberError:
        return None


def _megatron_flags(run: TrainRun) -> dict[str, object]:
    """Precision, recompute, sequence parallelism, the distributed optimizer and the MoE token
    dispatcher a Megatron dump states."""
    out: dict[str, object] = {}
    fp8 = run.setting("fp8")
    if fp8 not in (None, "None", "False"):
        out["precision"] = "fp8"
    elif run.setting("bf16") == "True":
        out["precision"] = "bf16"
    elif run.setting("fp16") == "True":
        out["precision"] = "fp16"
    granularity = run.setting("recompute_granularity")
    if granularity in ("full", "selective"):
        out["recompute"] = granularity
    elif granularity == "None":
        out["recompute"] = "none"
    for name, field in (("sequence_parallel", "sp"),):
        if run.setting(name) in ("True", "False"):
            out[field] = run.setting(name) == "True"
    if run.setting("use_distributed_optimizer") in ("True", "False"):
        out["zero"] = 1 if run.setting("use_distributed_optimizer") == "True" else 0
    dispatcher = run.setting("moe_token_dispatcher_type")
    if dispatcher in ("alltoall", "allgather"):
        out["dispatcher"] = dispatcher
    elif dispatcher == "flex" and run.setting("moe_flex_dispatcher_backend") in ("deepep", "hybridep"):
        out["dispatcher"] = run.setting("moe_flex_dispatcher_backend")
    return out


def _same_model(shape: ModelShape, run: TrainRun) -> None:
    for name, field in SHAPE.items():
        value = _integer(run.setting(name))
        mine = getattr(shape, field)
        if value is not None and (mine or field != "routed") and value != mine:
            raise RunMismatch(f"the log's {name} is {value}; the design's model has {field} = {mine}")


def measured_throughput(run: TrainRun, cfg: TrainConfig) -> float | None:
    """Tokens/s per GPU of the run's steady steps: as logged (torchtitan's tps is per GPU),
    else the configuration's tokens per step over the logged step time."""
    tokens = run.median("tokens_per_s")
    if tokens:
        return tokens
    seconds = run.median("seconds")
    return cfg.batch * cfg.seq / (seconds * cfg.gpus) if seconds else None


def train_observation(group: str, what: str, job_shape: ModelShape, cfg: TrainConfig, measured: float,
                      partition: Partition, span) -> Observation:
    """A run of `cfg` measured at `measured` tokens/s per GPU: it informs the chip's GEMM
    efficiency at the run's precision and the efficiency of each fabric its ranks span (the
    exposed tensor-, pipeline-, expert- and data-parallel traffic crosses them: a run at twice
    the GPUs of another on one cluster tells the fabric's share apart from the chip's)."""
    chip = partition.node.accelerator.name
    predict: Callable[[Partition], float] = lambda p: estimate(job_shape, cfg, p).tokens_per_s_per_gpu
    model = architecture(job_shape)
    informs = (("chip", chip, gemm_key(cfg.precision)),) + tuple(
        ("fabric", fabric, "efficiency") for fabric in spanned_fabrics(partition, cfg.gpus)) + (
        ("model", model, "offset"),)
    return Observation("train", group, what, measured, "tokens/s", informs,
                       predict, partition, span, end_to_end=True,
                       covers=(cfg.precision, cfg.gpus, job_shape.is_moe), model=model,
                       step_tokens=cfg.batch * cfg.seq / cfg.gpus,
                       step_flops=job_shape.model_flops_per_token(cfg.seq) * cfg.batch * cfg.seq / cfg.gpus)


def architecture(shape: ModelShape) -> str:
    """A model's architecture in words, the same for every run of it whatever its sequence
    length or layout: the identity its offset is kept by (params.model_param)."""
    moe = f", {shape.routed} experts top {shape.top_k}" if shape.routed else ""
    return f"{shape.layers} layers x {shape.hidden}, ffn {shape.ffn}, {shape.heads}/{shape.kv_heads} heads, " \
           f"vocab {shape.vocab}{moe}"


def spanned_fabrics(partition: Partition, gpus: int) -> tuple[str, ...]:
    """The fabrics of the tiers `gpus` ranks reach, lowest first: the first tier, and each
    tier above one whose group holds fewer GPUs than the run."""
    tiers = partition.tiers
    spanned = [t.fabric for i, t in enumerate(tiers) if i == 0 or tiers[i - 1].group_gpus < gpus]
    return tuple(dict.fromkeys(spanned))


def run_observation(job: Job, run: TrainRun) -> tuple[Observation | None, list[str]]:
    """The observation of one training log, or why it cannot be one."""
    try:
        cfg, notes = train_config(job, run)
    except RunMismatch as problem:
        return None, [f"{run.span}: {problem}"]
    measured = measured_throughput(run, cfg)
    if measured is None:
        return None, [f"{run.span}: no step time or throughput among its steady steps"]
    what = (f"{run.framework} run, tp {cfg.tp} pp {cfg.pp} dp {cfg.dp} on {cfg.gpus} GPUs, "
            f"{cfg.precision}, {len(run.steady)} steady steps")
    return train_observation(f"{run.span.path}:{run.span.line}", what, job.shape, cfg, measured,
                             job.partition, run.span), notes
