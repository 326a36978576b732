"""Planning a `serve` job: the tensor/expert-parallel width inside the scale-up domain and
the decode batch that give the most output tokens per second within the SLOs and memory.

The space is small (widths x batch sizes), so it is searched exhaustively.
"""

from __future__ import annotations

import itertools

import attrs

from ..compiler.design import Design, Entity
from ..compiler.ir import ClusterGraph, Partition
from ..dsl.units import NONE
from ..model.inference import ServeConfig, ServeEstimate, estimate_serve
from ..model.job import placement
from ..model.power import job_power
from ..model.shape import ModelShape

BATCHES = tuple(2**i for i in range(13))   # 1 .. 4096 sequences per replica


@attrs.frozen
class ServePlan:
    name: str
    graph: ClusterGraph
    partition: Partition
    gpus: int
    best: ServeEstimate | None
    replicas: int
    runners_up: tuple[ServeEstimate, ...]
    considered: int
    binding: tuple[str, ...]
    power_w: float | None

    @property
    def tokens_per_s(self) -> float:
        return self.best.tokens_per_s * self.replicas if self.best else 0.0

    @property
    def energy_per_token(self) -> float | None:
        return self.power_w / self.tokens_per_s if self.best and self.power_w else None


def serve_entity(design: Design, name: str | None = None) -> Entity | None:
    """The serve job `name`, or the root file's first when it has no train job."""
    serves = [e for e in design.entities if e.kind == "serve"]
    if name is not None:
        return next((e for e in serves if e.name == name), None)
    if any(e.kind == "train" and e.span.path == design.root for e in design.entities):
        return None
    local = [e for e in serves if e.span.path == design.root] or serves
    return local[0] if local else None


def plan_serve(entity: Entity, top: int = 3) -> ServePlan:
    graph, partition = placement(entity)
    shape = ModelShape.from_entity(entity.get("model"))
    gpus = min(entity.get("gpus") or partition.gpus, partition.gpus)
    precision = getattr(entity.get("precision"), "name", "bf16")
    limits = _limits(entity)
    candidates = [estimate_serve(shape, cfg, partition, entity.get("prompt"), entity.get("output"))
                  for cfg in _configs(shape, partition, gpus, precision, entity)]
    valid = sorted((c for c in candidates if _violations(c, limits) == ()), key=lambda c: -c.tokens_per_s * (gpus // c.gpus))
    if not valid:
        return ServePlan(entity.name, graph, partition, gpus, None, 0, (), len(candidates),
                         _why_not(candidates, limits), None)
    best = valid[0]
    replicas = gpus // best.gpus
    power = job_power(graph, partition, replicas * best.gpus, best.busy).total
    return ServePlan(entity.name, graph, partition, gpus, best, replicas, tuple(valid[1 : 1 + top]),
                     len(candidates), _binding(best, candidates, limits, gpus), power)


def _configs(shape: ModelShape, partition: Partition, gpus: int, precision: str, entity: Entity):
    domain = max((t.group_gpus for t in partition.tiers if t.scope != "scaleout"), default=partition.node.gpus)
    pinned = entity.get("parallelism")
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= min(domain, gpus) and shape.heads % t == 0]
    eps = [e for e in range(1, domain + 1) if shape.is_moe and shape.routed % e == 0] or [1]
    if pinned is not None:
        tps = [pinned.get("tp")] if pinned.get("tp") else tps
        eps = [pinned.get("ep")] if pinned.get("ep") else eps
    batches = [entity.get("batch")] if entity.get("batch") else BATCHES
    for tp, ep, batch in itertools.product(tps, eps, batches):
        if tp * ep <= min(domain, gpus):
            yield ServeConfig(tp, batch, precision, ep)


def _limits(entity: Entity) -> dict[str, float]:
    out: dict[str, float] = {}
    for block in ("slo", "subject to"):
        record = entity.get(block)
        for item in getattr(record, "items", ()):
            bound = item.value
            value = bound.value
            # `memory <= 90%` is a share of HBM, `memory <= 60 GB` bytes: the dimension says which,
            # not the size (`memory <= 1 byte` is one byte, not 100 %)
            key = "memory_share" if bound.target == "memory" and getattr(value, "dim", None) == NONE else bound.target
            out[key] = float(value.value) if hasattr(value, "value") else float(value)
    return out


def _violations(e: ServeEstimate, limits: dict[str, float]) -> tuple[str, ...]:
    memory_limit = limits.get("memory", limits.get("memory_share", 1.0) * e.hbm)
    checks = (("memory", e.memory > memory_limit), ("ttft", e.ttft > limits.get("ttft", float("inf"))),
              ("tpot", e.tpot > limits.get("tpot", float("inf"))))
    return tuple(name for name, broken in checks if broken)


def _binding(best: ServeEstimate, candidates, limits, gpus: int) -> tuple[str, ...]:
    """The limits that stop the next larger batch of the chosen width."""
    bigger = [c for c in candidates if c.config.tp == best.config.tp and c.config.ep == best.config.ep
              and c.config.batch > best.config.batch]
    if not bigger:
        return ("batch: the largest considered",)
    nxt = min(bigger, key=lambda c: c.config.batch)
    return tuple(f"{name}: batch {nxt.config.batch} would break it" for name in _violations(nxt, limits)) or (
        "throughput: larger batches are slower per GPU",)


def _why_not(candidates, limits) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for c in candidates:
        for name in _violations(c, limits):
            counts[name] = counts.get(name, 0) + 1
    return tuple(f"{name}: broken by {n} of {len(candidates)} configurations" for name, n in sorted(counts.items()))
