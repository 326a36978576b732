"""Exports to the software stack: the plan as Megatron-LM or torchtitan settings (or the step as
a Chrome trace or per-rank Chakra execution traces for ASTRA-sim), a serve plan
as a serving engine's launch settings (vLLM, SGLang, NVIDIA Dynamo's frontend and workers;
TensorRT-LLM is refused with the reason: views/export/trtllm.py), the cluster (and the job) as Slurm or
Kubernetes/Kueue configuration.

`export(kind, design, ...)` returns {file name: text} (bytes for binary files: Chakra's); pure functions of the design and
the plan. A plan the target cannot express raises `ExportError` saying what it lacks.
"""

from __future__ import annotations

import attrs

from ...compiler.design import Design, Entity, Partition as PartitionRef
from ...compiler.lower import lower_cluster, pick_cluster
from . import chakra, dynamo, kubernetes, megatron, rl, sglang, slurm, torchtitan, trace, trtllm, vllm
from .jobs import Infeasible, job_entity, job_plan
from .layout import layout
from .target import ExportError, JobPlan

KINDS = ("megatron", "torchtitan", "slurm", "kubernetes", "trace", "chakra", "vllm", "sglang", "dynamo", "trtllm")
NEEDS_JOB = ("megatron", "torchtitan", "trace", "chakra")
SERVING_ENGINES = {"vllm": vllm, "sglang": sglang, "dynamo": dynamo,   # a serve job's launch (views/export/<engine>.py)
                   "trtllm": trtllm}
RL_POOLS = {"vllm": rl.generation, "megatron": rl.training}   # an rl job's generation and training pools


def export(kind: str, design: Design, job: str | None = None, cluster: str | None = None,
           source: str = "") -> dict[str, str | bytes]:
    """`cluster` names a cluster, or one partition of it as `Cluster.part`."""
    if kind == "trtllm":   # refused whatever the plan: nothing here can check a TensorRT-LLM launch
        return trtllm.export(None, source)
    entity = job_entity(design, job, "serve" if kind in SERVING_ENGINES else "train")
    if entity is not None and entity.kind == "rl":
        if kind in RL_POOLS:
            return RL_POOLS[kind](entity, source)
        if job is not None or kind in NEEDS_JOB or kind in SERVING_ENGINES:
            raise ExportError(f"`{entity.name}` is an rl job: its generation pool exports as `vllm` and its training "
                              f"pool as `megatron`; `gclc schedule` places both as one gang")
        entity = None   # the cluster alone
    if kind in SERVING_ENGINES:
        if entity is None or entity.kind != "serve":
            what = f"`{entity.name}` is a train job" if job is not None else "the design has no `serve` job"
            raise ExportError(f"{kind} settings describe a serve job, and {what}")
        return SERVING_ENGINES[kind].export(job_plan(entity).served, source)
    if kind in NEEDS_JOB:
        if entity is None or entity.kind != "train":
            what = f"`{entity.name}` is a serve job" if entity is not None else "the design has no `train` job"
            raise ExportError(f"{kind} settings describe a training job, and {what}")
        plan = job_plan(entity, timed=False)
        if kind in ("trace", "chakra"):
            return (trace if kind == "trace" else chakra).export(plan, source)
        chip = _accelerator(plan)
        return (megatron if kind == "megatron" else torchtitan).export(plan, chip, source)
    name, _, part = (cluster or "").partition(".")
    target = pick_cluster(design, name) if cluster else (_job_cluster(entity) or pick_cluster(design))
    if entity is not None and _job_cluster(entity).name != target.name:
        if job is not None:
            raise ExportError(f"`{entity.name}` runs on `{_job_cluster(entity).name}`, not on `{target.name}`")
        entity = None  # exporting another cluster than the job's: the cluster alone
    plan = job_plan(entity) if entity is not None else None
    nodes = layout(lower_cluster(target), design)
    if part:
        nodes = attrs.evolve(nodes, groups=tuple(g for g in nodes.groups if g.partition.name == part))
        if plan is not None and any(s.partition != part for s in plan.shares):
            where = ", ".join(s.partition for s in plan.shares)
            if job is not None:
                raise ExportError(f"the plan of `{plan.name}` runs on {target.name}.{where}, not on {cluster}")
            plan = None
    if kind == "slurm":
        return slurm.export(nodes, design, plan, source, target)
    return kubernetes.export(nodes, plan, source, design=design, cluster=target)


def _job_cluster(entity: Entity | None) -> Entity | None:
    if entity is None:
        return None
    target = entity.get("on")
    target = target[0] if isinstance(target, tuple) else target
    return target.cluster if isinstance(target, PartitionRef) else target


def _accelerator(plan: JobPlan):
    """The job's chip (the first partition's, for a job over several)."""
    from ...solver.split.plan import partition_jobs

    return partition_jobs(plan.entity)[0].partition.node.accelerator


__all__ = ["KINDS", "ExportError", "Infeasible", "export"]
