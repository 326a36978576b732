"""What a serve job asks for, read from its block: the engine options, the SLOs and
limits, and the replica configurations the planner may choose from."""

from __future__ import annotations

import itertools
import math


from ...compiler.design import Bound, Entity
from ...compiler.schema import TRT_ENGINES
from ...compiler.ir import ClusterGraph, Partition
from ...model.network.placement import SCALE_UP_SCOPES
from ...model.serve.engines import Engine, profile
from ...model.serve.inference import ServeConfig
from ...dsl.units import NONE, Quantity
from ...model.shape import ModelShape
from ...dsl.records import frozen

BATCHES = tuple(2**i for i in range(13))   # 1 .. 4096 sequences per replica
WIDTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@frozen
class Limits:
    slo: dict[str, float]               # `ttft.p99` -> seconds; bare `ttft` is the mean (unloaded without a rate)
    memory: float                       # bytes per GPU (`memory <= 85%` is 85 % of the chip's HBM)
    power: float                        # watts, facility (PUE included), job bound or cluster budget
    gpus: int
    exact: bool = False                 # `gpus = N`: the plan uses exactly `gpus` GPUs (else at most)
    replicas: int | None = None         # `parallelism { replicas }`: the serving pool's count, pinned
    available: int | None = None        # GPUs the partition and a `gpus <=` bound allow (None: `gpus`)

    def allows(self, used: int) -> bool:
        """Whether a plan on `used` GPUs keeps to the GPU count: exactly it, or at most it."""
        return used == self.gpus if self.exact else used <= self.gpus

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
    stated = entity.get("gpus")
    available = max(0, min(partition.gpus, int(bounds.get("gpus", partition.gpus))))
    # `gpus = N` is the count the plan uses (one beyond what is available leaves no plan:
    # `short_of_gpus` says why); without it, at most what the partition and the bound allow
    gpus = stated if stated is not None else available
    return Limits(slo, bounds.get("memory", hbm), power, gpus, stated is not None,
                  entity.get("parallelism.replicas"), available)


def short_of_gpus(limits: Limits, entity: Entity | None = None) -> str | None:
    """Why a pinned GPU count cannot be planned at all, or None: more GPUs than the partition
    and the `gpus` bound allow, or pinned replicas of pinned widths that do not make it up;
    located at the pin in `entity` (file:line:column, as training's infeasible plans say it)."""
    def at(key: str) -> str:
        span = entity.span_of(key) if entity is not None else None
        return f" ({span})" if span is not None else ""
    if limits.exact and limits.available is not None and limits.gpus > limits.available:
        return (f"gpus: `gpus = {limits.gpus}` asks for more than the {limits.available} GPUs the partition and the "
                f"`subject to {{ gpus }}` bound allow{at('gpus')}")
    if limits.replicas and limits.replicas > limits.gpus:
        return (f"replicas: {limits.replicas} replicas need at least as many GPUs; the job may use {limits.gpus}"
                f"{at('parallelism.replicas')}")
    return None


DEFAULT_ENGINE = "vllm_v1"      # the engine of a job that names none (the most deployed today)


def engine_name(entity: Entity) -> str:
    """The engine a serve job names (`engine = sglang` or `engine { profile = sglang }`)."""
    named = entity.get("engine")
    symbol = named if not hasattr(named, "items") else entity.get("engine.profile")
    return getattr(symbol, "name", None) or DEFAULT_ENGINE


def engine_of(entity: Entity, partition: Partition | None = None) -> Engine:
    """The job's engine on `partition`'s chips: its profile's knobs, each overridden where the
    `engine` block states it."""
    e = entity.get("engine")
    e = e if hasattr(e, "items") else None
    get = (lambda k: e.get(k)) if e is not None else (lambda k: None)
    spec, share, reads = get("speculative"), get("prefix_share"), get("kv_reads")
    given = {"chunk": get("chunk"), "block": get("kv_block"),
             "prefix_share": float(share) if share is not None else None,
             "draft": spec.get("tokens") if spec is not None else None,
             "acceptance": float(spec.get("acceptance")) if spec is not None else None,
             "grouped_kv": reads.name == "grouped" if reads is not None else None,
             "scheduler_steps": get("scheduler_steps"), "max_seqs": get("max_batch"),
             "mixed": get("mixed"), "graph_batch": get("graph_batch"), "overlap": get("overlap"),
             "preemption": getattr(get("preemption"), "name", None), "moe_path": getattr(get("moe_path"), "name", None),
             "dispatcher": getattr(get("dispatcher"), "name", None)}
    for field, knob in (("host_step", "step_s"), ("host_per_sequence", "seq_s"), ("eager_op", "eager_op_s"),
                        ("frontend", "frontend_s")):
        value = get(field)
        given[knob] = float(value.value) if value is not None else None
    chip = partition.node.accelerator if partition is not None else None
    return profile(engine_name(entity)).engine(chip.hbm_capacity if chip else None, chip.name if chip else "",
                                               **given)


def router_of(entity: Entity) -> str:
    """How the job's requests pick a replica (default: the fewest requests in hand)."""
    return getattr(entity.get("router"), "name", None) or "least_requests"


def mode_of(entity: Entity) -> str:
    """The plan's mode: as stated; pinned replicas make one serving pool (aggregated)."""
    mode = entity.get("engine.mode")
    if mode is None and entity.get("parallelism.replicas"):
        return "aggregated"
    return mode.name if mode is not None else "auto"


def scaleup_domain(partition: Partition) -> int:
    return max((t.group_gpus for t in partition.tiers if t.scope in SCALE_UP_SCOPES), default=partition.node.gpus)


def configs(shape: ModelShape, partition: Partition, gpus: int, precision: str, entity: Entity,
            engine_cap: int | None = None, engine_name: str = ""):
    """Replica configurations: tp inside the scale-up domain, ep and pp across nodes; batches
    up to the engine's running sequences (`engine_cap`, or `engine { max_batch }`). TensorRT-LLM's
    TensorRT engines run no attention data parallelism (ep 1: docs/engines.md), and its PyTorch
    backend's attention DP gives each GPU its own attention group (tp 1 where ep > 1)."""
    domain = scaleup_domain(partition)
    pinned = entity.get("parallelism")
    pin = (lambda k: pinned.get(k)) if pinned is not None else (lambda k: None)
    kv = entity.get("engine.kv_precision")
    wide = {k: float(entity.get(f"checkpoint.{k}") or 0.0) for k in ("wide_share", "dense_wide_share")}
    tps = [pin("tp")] if pin("tp") else [t for t in WIDTHS if t <= domain and shape.heads % t == 0]
    eps = [pin("ep")] if pin("ep") else (
        [e for e in WIDTHS if shape.routed % e == 0] if shape.is_moe else [1])
    pps = [pin("pp")] if pin("pp") else [p for p in WIDTHS if p <= shape.layers]
    cap = entity.get("engine.max_batch") or engine_cap
    batches = [entity.get("batch")] if entity.get("batch") else [b for b in BATCHES if not cap or b <= cap] or [cap]
    if engine_name in TRT_ENGINES and not pin("ep"):
        eps = [1]
    for tp, ep, pp, batch in itertools.product(tps, eps, pps, batches):
        if engine_name == "trtllm_pytorch" and tp > 1 and ep > 1 and not (pin("tp") and pin("ep")):
            continue
        if tp * ep * pp <= gpus:
            yield ServeConfig(tp, batch, precision, ep, pp, kv.name if kv is not None else None, **wide)
