"""What a serve job asks for, read from its block: the engine options, the SLOs and
limits, and the replica configurations the planner may choose from."""

from __future__ import annotations

import itertools
import math

import attrs

from ...compiler.design import Bound, Entity
from ...compiler.ir import ClusterGraph, Partition
from ...model.serve.inference import Engine, ServeConfig
from ...dsl.units import NONE, Quantity
from ...model.shape import ModelShape

BATCHES = tuple(2**i for i in range(13))   # 1 .. 4096 sequences per replica
WIDTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@attrs.frozen
class Limits:
    slo: dict[str, float]               # `ttft.p99` -> seconds; bare `ttft` is the mean (unloaded without a rate)
    memory: float                       # bytes per GPU (`memory <= 85%` is 85 % of the chip's HBM)
    power: float                        # watts, facility (PUE included), job bound or cluster budget
    gpus: int

    def latency(self, metric: str) -> float:
        """The tightest bound on `metric` whatever its percentile."""
        return min((v for k, v in self.slo.items() if k.split(".")[0] == metric), default=math.inf)

    def memory_bytes(self, hbm: float) -> float:
        return min(self.memory, hbm)


def limits_of(entity: Entity, graph: ClusterGraph, partition: Partition) -> Limits:
    """The bounds as the planner checks them (`x <= bound`): the unit says whether `memory`
    is a share of HBM or bytes (never the magnitude: `memory <= 1 byte` is one byte), a
    strict `<` is the largest value below the bound (one GPU fewer for `gpus < 16`), and
    a target bounded twice keeps the tighter bound. The checker refuses the other
    operators (compiler/limits.py)."""
    hbm = partition.node.accelerator.hbm_capacity
    slo: dict[str, float] = {}
    bounds: dict[str, float] = {}
    for block, out in (("slo", slo), ("subject to", bounds)):
        for item in getattr(entity.get(block), "items", ()):
            bound = item.value
            if not isinstance(bound, Bound):
                continue
            quantity = bound.value if isinstance(bound.value, Quantity) else Quantity.of(bound.value)
            value = float(quantity.value)
            if bound.target == "memory" and quantity.dim == NONE:
                value *= hbm
            if bound.op == "<":
                value = value - 1 if bound.target == "gpus" else math.nextafter(value, -math.inf)
            out[bound.target] = min(out.get(bound.target, math.inf), value)
    power = min(bounds.get("power", math.inf), graph.power_budget or math.inf, partition.power_budget or math.inf)
    gpus = min(entity.get("gpus") or partition.gpus, int(bounds.get("gpus", partition.gpus)), partition.gpus)
    return Limits(slo, bounds.get("memory", hbm), power, max(0, gpus))


def engine_of(entity: Entity) -> Engine:
    e = entity.get("engine")
    if e is None:
        return Engine()
    spec, share, reads = e.get("speculative"), e.get("prefix_share"), e.get("kv_reads")
    given = {"chunk": e.get("chunk"), "block": e.get("kv_block"),
             "prefix_share": float(share) if share is not None else None,
             "draft": spec.get("tokens") if spec is not None else None,
             "acceptance": float(spec.get("acceptance")) if spec is not None else None,
             "grouped_kv": reads.name == "grouped" if reads is not None else None,
             "scheduler_steps": e.get("scheduler_steps")}
    return Engine(**{k: v for k, v in given.items() if v is not None})


def mode_of(entity: Entity) -> str:
    mode = entity.get("engine.mode")
    return mode.name if mode is not None else "auto"


def scaleup_domain(partition: Partition) -> int:
    return max((t.group_gpus for t in partition.tiers if t.scope != "scaleout"), default=partition.node.gpus)


def configs(shape: ModelShape, partition: Partition, gpus: int, precision: str, entity: Entity):
    """Replica configurations: tp inside the scale-up domain, ep and pp across nodes."""
    domain = scaleup_domain(partition)
    pinned = entity.get("parallelism")
    pin = (lambda k: pinned.get(k)) if pinned is not None else (lambda k: None)
    kv = entity.get("engine.kv_precision")
    tps = [pin("tp")] if pin("tp") else [t for t in WIDTHS if t <= domain and shape.heads % t == 0]
    eps = [pin("ep")] if pin("ep") else (
        [e for e in WIDTHS if shape.routed % e == 0] if shape.is_moe else [1])
    pps = [pin("pp")] if pin("pp") else [p for p in WIDTHS if p <= shape.layers]
    cap = entity.get("engine.max_batch")
    batches = [entity.get("batch")] if entity.get("batch") else [b for b in BATCHES if not cap or b <= cap] or [cap]
    for tp, ep, pp, batch in itertools.product(tps, eps, pps, batches):
        if tp * ep * pp <= gpus:
            yield ServeConfig(tp, batch, precision, ep, pp, kv.name if kv is not None else None)
