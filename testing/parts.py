"""Strategies for the parts of a design (chips, NICs, fabrics, nodes, clusters, models,
train jobs): small frozen specs, every field pinnable, rangeable or given a strategy."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Iterable, Mapping

import attrs
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..model.config import STACKS
from .specs import ChipSpec, ClusterSpec, CpuSpec, ExpertsSpec, FabricSpec, ModelSpec, NicSpec, NodeSpec, PartitionSpec, SwitchSpec, TrainSpec
from .gcl_tree import _Renders


def _strategy(value: Any) -> SearchStrategy:
    """A constant, `range`, `(low, high)` pair, list of choices or strategy -> a strategy."""
    if isinstance(value, SearchStrategy):
        return value
    if isinstance(value, range):
        if not len(value):
            raise ValueError(f"empty range {value!r}")
        return st.integers(value.start, value[-1]) if value.step == 1 else st.sampled_from(value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                             for v in value):
        low, high = value
        if isinstance(low, int) and isinstance(high, int):
            return st.integers(low, high)
        return st.floats(float(low), float(high), allow_nan=False, allow_infinity=False)
    if isinstance(value, (list, tuple)):
        return st.sampled_from(value)
    return st.just(value)


def _fields(defaults: dict[str, SearchStrategy], overrides: dict[str, Any], what: str) -> dict[str, SearchStrategy]:
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(f"{what}() got unknown fields {sorted(unknown)}; it takes {sorted(defaults)}")
    return {**defaults, **{k: _strategy(v) for k, v in overrides.items()}}


# ================================================================= AST building




# ================================================================= strategies: parts


def chips(*, name: str = "Chip0", **fields: Any) -> SearchStrategy[ChipSpec]:
    """Accelerators. Override any `ChipSpec` field with a value, range, pair, list or strategy."""
    f = _fields({
        "hbm_gb": st.integers(4, 24) | st.integers(4, 192), "hbm_gbps": st.integers(300, 8000), "bf16_tflops": st.integers(50, 2500),
        "fp8": st.booleans(), "tdp_w": st.integers(150, 1200), "idle_w": st.integers(0, 149),
        "bf16_efficiency": st.none() | st.integers(40, 95),
    }, fields, "chips")

    @st.composite
    def build(draw) -> ChipSpec:
        bf16 = draw(f["bf16_tflops"])
        tdp = draw(f["tdp_w"])
        return ChipSpec(name, draw(f["hbm_gb"]), draw(f["hbm_gbps"]), bf16, 2 * bf16 if draw(f["fp8"]) else None,
                        tdp, min(draw(f["idle_w"]), tdp - 1), draw(f["bf16_efficiency"]))

    return build()


def nics(*, name: str = "Nic0", **fields: Any) -> SearchStrategy[NicSpec]:
    f = _fields({"gbps": st.sampled_from((100, 200, 400, 800)), "power_w": st.integers(0, 50)}, fields, "nics")
    return st.builds(NicSpec, st.just(name), f["gbps"], f["power_w"])


def fabrics(*, name: str = "Fabric0", role: str = "scaleout", **fields: Any) -> SearchStrategy[FabricSpec]:
    """Scale-out fabrics (`role="scaleout"`: InfiniBand or Ethernet, fat tree, rail-optimized
    or switched, at most 800 Gb/s, 1:1 or 2:1) or scale-up ones (`role="scaleup"`: NVLink,
    switched, at most 900 GB/s). Fat trees get the tiers their endpoints need in `clusters()`."""
    if role == "scaleup":
        defaults = {"kind": st.just("nvlink"), "topology": st.sampled_from(("switched", "full_mesh")),
                    "bandwidth": st.integers(25, 900), "unit": st.just("GB/s"),
                    "latency_ns": st.integers(100, 3000), "efficiency": st.none() | st.integers(60, 100)}
    elif role == "scaleout":
        defaults = {"kind": st.sampled_from(("infiniband", "ethernet")),
                    "topology": st.sampled_from(("fat_tree", "rail_optimized", "switched")),
                    "tiers": st.integers(1, 3), "radix": st.sampled_from((8, 16, 32, 64, 128)),
                    "oversubscription": st.sampled_from((1, 2)), "bandwidth": st.sampled_from((100, 200, 400, 800)),
                    "unit": st.just("Gb/s"), "latency_ns": st.integers(100, 5000),
                    "switch": st.none() | st.builds(SwitchSpec, st.just(f"{name}Switch"), st.sampled_from((32, 64, 128)),
                                                    st.sampled_from((200, 400, 800)), st.integers(0, 3000)),
                    "link_power_w": st.none() | st.integers(1, 30), "efficiency": st.none() | st.integers(60, 100)}
    else:
        raise ValueError(f"role must be 'scaleout' or 'scaleup', not {role!r}")
    f = _fields(defaults, fields, "fabrics")
    return st.builds(FabricSpec, name=st.just(name), **f)


def nodes(*, name: str = "Node0", chip: str | ChipSpec | SearchStrategy | None = None, max_gpus: int = 8,
          **fields: Any) -> SearchStrategy[NodeSpec]:
    """Servers of 1, 2, 4 or 8 GPUs (at most `max_gpus`); a scale-up fabric when more than one."""
    suffix = name[len("Node"):] if name.startswith("Node") else name
    chip_strategy = (chips(name=f"Chip{suffix}") if chip is None else
                     chips(name=chip) if isinstance(chip, str) else _strategy(chip))
    counts = [g for g in (1, 2, 4, 8) if g <= max_gpus] or [1]
    f = _fields({
        "gpus": st.sampled_from(counts), "nics": st.sampled_from((0, 1, 2, 4, 8)),
        "nic": nics(name=f"Nic{suffix}"), "cpus": st.integers(0, 2),
        "cpu": st.builds(CpuSpec, st.just(f"Cpu{suffix}"), st.integers(8, 128), st.integers(50, 400)),
        "scaleup": fabrics(name=f"Up{suffix}", role="scaleup"),
        "dram_gb": st.none() | st.integers(64, 2048), "overhead_w": st.none() | st.integers(0, 3000),
    }, fields, "nodes")

    @st.composite
    def build(draw) -> NodeSpec:
        # Every part is drawn, used or not, so that the draws keep their places while shrinking.
        gpus, nic_count, cpus = draw(f["gpus"]), draw(f["nics"]), draw(f["cpus"])
        chip_, nic, cpu, scaleup = draw(chip_strategy), draw(f["nic"]), draw(f["cpu"]), draw(f["scaleup"])
        return NodeSpec(name, chip_, gpus, nic_count, nic if nic_count else None, cpus, cpu if cpus else None,
                        scaleup if gpus > 1 else None, draw(f["dram_gb"]), draw(f["overhead_w"]))

    return build()


_NUMBERED = re.compile(r"^(Node|Chip|Nic|Cpu|Up)\d+$")


def _renumbered(node: NodeSpec, i: int) -> NodeSpec:
    """The node with default part names (`Node0`, `Chip0`, ...) numbered `i` instead."""
    def name(spec):
        if spec is None:
            return None
        found = _NUMBERED.match(spec.name)
        return attrs.evolve(spec, name=f"{found.group(1)}{i}") if found else spec

    renamed = name(node)
    return attrs.evolve(renamed, chip=name(node.chip), nic=name(node.nic), cpu=name(node.cpu),
                        scaleup=name(node.scaleup))


def _scaleout_per_gpu(fabric: FabricSpec, node: NodeSpec) -> float:
    """Bytes/s per GPU on the first scale-out tier, at worst (as `lower` computes it)."""
    ports = fabric.rails or node.nic_ports or 1
    per_port = min(fabric.bandwidth_bytes, node.nic.gbps * 1e9 / 8 if node.nic is not None and node.nics else math.inf)
    return per_port * ports / node.gpus / fabric.oversubscription


def _fit(node: NodeSpec, fabric: FabricSpec | None) -> NodeSpec:
    """Keep scale-up within 20x scale-out per GPU (the `thin-scaleout` warning's line)."""
    if fabric is None or node.scaleup is None:
        return node
    most = max(1, int(_scaleout_per_gpu(fabric, node) * 20 / 1e9))
    if node.scaleup.bandwidth <= most:
        return node
    return attrs.evolve(node, scaleup=attrs.evolve(node.scaleup, bandwidth=most))


def _endpoints(fabric: FabricSpec, partitions: Iterable[PartitionSpec]) -> int:
    return sum((fabric.rails or p.node.nic_ports or 1) * p.units for p in partitions)


def _enough_tiers(fabric: FabricSpec, endpoints: int) -> FabricSpec:
    while fabric.capacity() is not None and fabric.capacity() < endpoints:
        fabric = attrs.evolve(fabric, tiers=fabric.tiers + 1)
    return fabric


def clusters(*, heterogeneous: bool | None = None, max_gpus: int = 16, partitions: int | tuple[int, int] = (2, 3),
             name: str = "Cluster0", units_param: bool | SearchStrategy = False, budget: bool = False,
             node: Mapping[str, Any] | None = None, scaleout: Mapping[str, Any] | None = None,
             **fields: Any) -> SearchStrategy[ClusterSpec]:
    """Clusters of at most `max_gpus` GPUs: one partition (`heterogeneous=False`), several
    with different nodes (`True`), or either (`None`, the default; shrinks to one). `node`
    and `scaleout` pass field overrides to `nodes()` and `fabrics()`; `max_gpus` wins over
    a node's `gpus` (several partitions share it). `budget=True` adds a power budget 0-50 % above
    the facility power at full load (checked with the compiler while drawing)."""
    f = _fields({"pue": st.integers(100, 150).map(lambda p: Fraction(p, 100)),
                 "overhead_kw": st.none() | st.integers(1, 50), "rails": st.booleans()}, fields, "clusters")
    low, high = (partitions, partitions) if isinstance(partitions, int) else partitions
    units_choice = _strategy(units_param)
    # Partitions are a list, so that a heterogeneous example shrinks by dropping partitions;
    # every part is drawn, used or not, so that draws keep their places while shrinking.
    # (Strategies are built here, once: building them in every draw is slow.)
    fewest = max(2, low) if heterogeneous else 1
    most = 1 if heterogeneous is False else max(2, high)
    partition_drafts = st.lists(st.tuples(nodes(name="Node0", max_gpus=max_gpus, **(node or {})),
                                          st.integers(1, max_gpus)), min_size=fewest, max_size=most)
    networks = fabrics(name="Net", role="scaleout", **(scaleout or {}))
    headrooms = st.integers(0, 50)

    @st.composite
    def build(draw) -> ClusterSpec:
        drafts = draw(partition_drafts)
        het = len(drafts) > 1
        share = max(1, max_gpus // len(drafts))
        parts = []
        for i, (n, units) in enumerate(drafts):
            n = _renumbered(n, i)
            if n.gpus > share:
                gpus = max(g for g in (1, 2, 4, 8) if g <= share)
                n = attrs.evolve(n, gpus=gpus, scaleup=n.scaleup if gpus > 1 else None)
            parts.append(PartitionSpec(f"p{i}", n, min(units, max(1, share // n.gpus))))
        fabric = draw(networks)
        rails = draw(f["rails"])
        if het or parts[0].units > 1:
            ports = {p.node.nic_ports for p in parts}
            if len(ports) == 1 and ports != {0} and rails:
                fabric = attrs.evolve(fabric, rails=ports.pop())
            fabric = _enough_tiers(fabric, _endpoints(fabric, parts))
            parts = [attrs.evolve(p, node=_fit(p.node, fabric)) for p in parts]
        else:
            fabric = None
        spec = ClusterSpec(name, tuple(parts), fabric, draw(f["pue"]), draw(f["overhead_kw"]),
                           units_param=draw(units_choice))
        if budget:
            headroom = draw(headrooms)
            spec = attrs.evolve(spec, budget_kw=math.ceil(facility_power(spec) * (100 + headroom) / 100 / 1000) or 1)
        return spec

    return build()


def facility_power(spec: _Renders) -> float:
    """Facility watts at full load of the spec's (first) cluster, by the compiler's breakdown."""
    from ..compiler.metrics import facility_power as facility
    from .generated import GeneratedDesign

    return facility(GeneratedDesign.from_spec(spec).graph)


# ================================================================= strategies: work


def models(*, arch: str | None = None, name: str = "Model0", **fields: Any) -> SearchStrategy[ModelSpec]:
    """Transformers, dense (`arch="dense"`), mixture-of-experts (`"moe"`) or either; small by
    default (1-4 layers, hidden 16-1024, vocab up to 32k) so that plans take milliseconds."""
    f = _fields({
        "layers": st.integers(1, 4), "heads": st.sampled_from((1, 2, 4, 8)), "head_dim": st.sampled_from((16, 32, 64, 128)),
        "kv_share": st.sampled_from((1, 2, 4, 8)), "ffn": st.integers(1, 32).map(lambda k: 128 * k),
        "vocab": st.integers(1, 256).map(lambda k: 128 * k), "seq": st.sampled_from((128, 256, 512, 1024, 2048)),
        "mlp": st.sampled_from(("swiglu", "gelu", "relu")), "tied": st.booleans(), "state_params": st.booleans(),
        "routed": st.integers(2, 16), "top_k": st.integers(1, 4), "shared": st.integers(0, 2),
        "expert_ffn": st.integers(1, 16).map(lambda k: 128 * k), "dense_layers": st.integers(0, 3),
    }, fields, "models")

    @st.composite
    def build(draw) -> ModelSpec:
        moe = draw(st.booleans()) if arch is None else {"dense": False, "moe": True}[arch]
        layers, heads = draw(f["layers"]), draw(f["heads"])
        kv = max(1, heads // draw(f["kv_share"]))
        routed = draw(f["routed"])  # drawn for dense models too, so that draws keep their places
        experts = ExpertsSpec(routed, min(routed, draw(f["top_k"])), draw(f["shared"]), draw(f["expert_ffn"]),
                              min(layers - 1, draw(f["dense_layers"])))
        return ModelSpec(name, layers, heads, draw(f["head_dim"]), kv, draw(f["ffn"]), draw(f["vocab"]),
                         draw(f["seq"]), draw(f["mlp"]), draw(f["tied"]), experts if moe else None,
                         draw(f["state_params"]))

    return build()


def _powers_of_two_dividing(n: int, most: int) -> list[int]:
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= most and n % t == 0]


def train_jobs(*, model: ModelSpec | SearchStrategy | None = None, cluster: ClusterSpec | SearchStrategy | None = None,
               arch: str | None = None, heterogeneous: bool | None = None, max_gpus: int = 16,
               pins: bool = False, spread: bool = False, **fields: Any) -> SearchStrategy[TrainSpec]:
    """Training jobs with their model and cluster. On a heterogeneous cluster a job runs on
    one partition, or with `spread=True` on all of them (`on = [C.p0, C.p1]`, planned by
    `solver.split.plan`). `pins=True` pins some of tp, pp, recompute and ZeRO to valid values."""
    f = _fields({"batch": st.integers(1, 32), "precision": None, "software": st.none() | st.sampled_from(sorted(STACKS)),
                 "gpus": st.none() | st.integers(1, max_gpus), "memory_percent": st.none() | st.integers(20, 100),
                 "batch_param": st.just(False)}, fields, "train_jobs")
    model_strategy = models(arch=arch) if model is None else _strategy(model)
    cluster_strategy = clusters(heterogeneous=heterogeneous, max_gpus=max_gpus) if cluster is None else _strategy(cluster)

    @st.composite
    def build(draw) -> TrainSpec:
        m, c = draw(model_strategy), draw(cluster_strategy)
        names = [p.name for p in c.partitions]
        partition = draw(st.sampled_from(names)) if c.heterogeneous else None
        if spread and c.heterogeneous:
            partition = tuple(names)
        target = next(p for p in c.partitions if p.name == names[0]) if spread else \
            next(p for p in c.partitions if p.name == partition) if partition else c.partitions[0]
        chips_used = [p.node.chip for p in c.partitions] if spread else [target.node.chip]
        fp8 = all(chip.fp8_tflops is not None for chip in chips_used)
        # only formats the chips declare: a precision without a peak is an error, not a fallback
        precisions = ("bf16", "fp8") if fp8 else ("bf16",)
        precision = draw(st.sampled_from(precisions) if f["precision"] is None else f["precision"])
        gpus = draw(f["gpus"])
        gpus = None if gpus is None or spread else min(gpus, target.gpus)
        chosen: list[tuple[str, Any]] = []
        if pins:
            usable = gpus or target.gpus
            if draw(st.booleans()):
                chosen.append(("tp", draw(st.sampled_from(_powers_of_two_dividing(math.gcd(m.heads, m.kv_heads),
                                                                                  usable)))))
            if draw(st.booleans()):
                chosen.append(("pp", draw(st.sampled_from([p for p in range(1, m.layers + 1)
                                                           if m.layers % p == 0 and p <= usable]))))
            if draw(st.booleans()):
                chosen.append(("recompute", draw(st.sampled_from(("none", "selective", "full")))))
            if draw(st.booleans()):
                chosen.append(("zero", draw(st.sampled_from((0, 1, 3)))))
        return TrainSpec("job", m, c, partition, draw(f["batch"]), precision, draw(f["software"]), gpus,
                         tuple(chosen), draw(f["memory_percent"]), draw(f["batch_param"]))

    return build()


# ================================================================= generated designs
