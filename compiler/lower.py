"""Checked design -> ClusterGraph: nodes, units and partitions, fabric tiers and switches."""

from __future__ import annotations

import math

import attrs

from . import chip as chip_numbers, routing, topology
from .design import Construct, Design, Entity, Record, Repeat
from .formats import generation
from .rules.switch import in_network_reduction
from .ir import Accelerator, ClusterGraph, NodeType, Part, Partition, SwitchLayer, Tier
from ..dsl.units import Quantity

PRECISIONS = chip_numbers.PRECISIONS


def lower(design: Design, cluster: str | None = None) -> ClusterGraph:
    """The graph of `cluster`, or of the design's only (or first local) cluster."""
    return lower_cluster(pick_cluster(design, cluster))


def pick_cluster(design: Design, name: str | None = None) -> Entity:
    clusters = design.of_kind("cluster")
    if name is not None:
        return design[name]
    local = [c for c in clusters if c.span.path == design.root]
    if not (local or clusters):
        raise LookupError("the design declares no cluster")
    return (local or list(clusters))[0]


def _f(value: object, default: float = 0.0) -> float:
    return float(value) if isinstance(value, Quantity) else (float(value) if isinstance(value, int) else default)


# ----------------------------------------------------------------- parts


def accelerator(chip: Entity) -> Accelerator:
    efficiency = chip.get("efficiency") or Record()
    opt = lambda key: _f(chip.get(key)) if chip.get(key) is not None else None  # noqa: E731
    return Accelerator(
        chip.name, chip.get("vendor", ""), chip_numbers.peaks(chip),
        tuple((i.name, _f(i.value)) for i in efficiency.items),
        chip_numbers.hbm(chip, "capacity"), chip_numbers.hbm(chip, "bandwidth"),
        _f(chip.get("power.tdp")), _f(chip.get("power.idle")), opt("clock"),
        base_clock=opt("base_clock"), cores=chip.get("cores"), l2=_f(chip.get("l2")), l2_bandwidth=opt("l2_bandwidth"),
        power_cap=opt("power.cap"), min_clock=opt("power.min_clock"), min_cap=opt("power.min_cap"),
        dvfs_exponent=opt("power.dvfs_exponent"), full_clock=opt("power.full_clock"),
        ops_per_clock=tuple(chip_numbers.ops_per_clock(chip).items()), hbm_stacks=chip.get("hbm.stacks"),
        listed_formats=chip_numbers.stated_formats(chip), hbm_nominal=opt("hbm.nominal"),
        hbm_type=chip.get("hbm.type") if isinstance(chip.get("hbm.type"), str) else None,
        hbm_packaging=str(getattr(chip.get("hbm.packaging"), "name", None) or "interposer"), extends=chip.ancestors,
        span=chip.span,
    )


def part(kind: str, repeat: Repeat) -> Part:
    entity = repeat.part
    bandwidth = entity.get("bandwidth") or entity.get("port_speed")
    offload = entity.get("offload")
    offload = tuple(str(v) for v in offload) if offload is not None else (DEFAULT_DPU_OFFLOAD if kind == "dpu" else ())
    return Part(kind, entity.name, repeat.count, _f(entity.get("power")),
                _f(bandwidth) if bandwidth is not None else None, cores=entity.get("cores"), offload=offload,
                ports=entity.get("ports") or 1, vendor=entity.get("vendor") or "", span=entity.span)


# A DPU that does not say what it offloads serves storage and input (as the BlueField-3s of
# a DGX do: "storage and in-band management"); network offload must be stated.
DEFAULT_DPU_OFFLOAD = ("storage", "input")


def node_type(node: Entity) -> NodeType:
    gpus: Repeat = node.get("gpus")
    parts = tuple(part(kind, node.get(field)) for kind, field in (("cpu", "cpus"), ("nic", "nics"), ("dpu", "dpus"))
                  if node.get(field) is not None and node.get(field).count > 0)   # `dpus = 0 x ...`: none
    return NodeType(node.name, accelerator(gpus.part), gpus.count, parts, _dram(node),
                    _f(node.get("nvme")), _f(node.get("overhead")),
                    nvme_bandwidth=_f(node.get("nvme_bandwidth")) if node.get("nvme_bandwidth") is not None else None,
                    host_link=_f(node.get("host_link")) if node.get("host_link") is not None else None,
                    storage=_f(node.get("storage")) if node.get("storage") is not None else None,
                    step_overhead=_f(node.get("step_overhead")) if node.get("step_overhead") is not None else 0.0,
                    span=node.span)


def _dram(node: Entity) -> float:
    """Host memory: the node's `dram`, else its CPUs' `memory` (LPDDR on the package, as Grace's)."""
    if node.get("dram") is not None:
        return _f(node.get("dram"))
    cpus: Repeat | None = node.get("cpus")
    return cpus.count * _f(cpus.part.get("memory")) if cpus is not None else 0.0


# ----------------------------------------------------------------- partitions


def _partition_specs(cluster: Entity) -> list[tuple[str, Repeat, Entity | None, object, float | None]]:
    """(name, units, scale-out fabric, span, its own power budget) for each partition; one unnamed
    when `units` is set (the cluster's budget is the graph's)."""
    if cluster.get("units") is not None:
        return [(cluster.name, cluster.get("units"), cluster.get("scaleout"), cluster.span_of("units"), None)]
    partitions: Record = cluster.get("partition")
    out = []
    for item in partitions.items:
        if item.value.get("units").count == 0:   # a partition of 0 units holds nothing
            continue
        budget = item.value.get("power.budget")
        out.append((item.name, item.value.get("units"), item.value.get("scaleout") or cluster.get("scaleout"),
                    item.span, _f(budget) if budget is not None else None))
    return out


def _unit_shape(unit: Entity) -> tuple[Entity, int, Entity | None, float, tuple[Part, ...]]:
    """(node, nodes per unit, unit-level scale-up fabric, unit overhead, unit switches)."""
    if unit.kind == "node":
        return unit, 1, None, 0.0, ()
    nodes: Repeat = unit.get("nodes")
    switches = (part("switch", unit.get("switches")),) if unit.get("switches") is not None else ()
    return nodes.part, nodes.count, unit.get("scaleup"), _f(unit.get("overhead")), switches


# The graph of each recently lowered cluster, by identity: one check, its limits, the job
# and the sweep's costs each lower the same (immutable) cluster entity of a design point.
_LOWERED: dict[int, tuple[Entity, ClusterGraph]] = {}
_LOWERED_KEPT = 16


def lower_cluster(cluster: Entity) -> ClusterGraph:
    hit = _LOWERED.get(id(cluster))
    if hit is not None and hit[0] is cluster:
        return hit[1]
    graph = _lower_cluster(cluster)
    if len(_LOWERED) >= _LOWERED_KEPT:
        _LOWERED.pop(next(iter(_LOWERED)), None)
    _LOWERED[id(cluster)] = (cluster, graph)   # the entity is kept, so its id is not reused while here
    return graph


def _lower_cluster(cluster: Entity) -> ClusterGraph:
    specs = _partition_specs(cluster)
    budgets = {spec[0]: spec[4] for spec in specs}
    shapes = [(name, units, fabric, span, _unit_shape(units.part)) for name, units, fabric, span, _ in specs]
    ntypes = [node_type(shape[0]) for *_, shape in shapes]
    endpoints = _endpoints_per_fabric(shapes, ntypes)
    partitions, layers = [], {}
    for (name, units, fabric, span, (node, per_unit, unit_fabric, overhead, switches)), ntype in zip(shapes, ntypes):
        tiers = _scaleup_tiers(ntype, (node.get("scaleup"), node.get("switches")),
                               (unit_fabric, units.part.get("switches") if unit_fabric is not None else None), per_unit)
        # the scale-up tiers carry their GPUs' generation: NCCL's NVLS constants go by it (model/collectives.py)
        tiers = [attrs.evolve(t, generation=generation(ntype.accelerator)) for t in tiers]
        if fabric is not None:
            out_tiers, out_layers = _scaleout(fabric, ntype, per_unit, units.count, endpoints[fabric.name], len(tiers))
            tiers += out_tiers
            layers.update({(layer.fabric, layer.level): layer for layer in out_layers})
        # every tier carries its nodes' host CPU vendor: NCCL's LL cap across nodes goes by it (model/network/nccl.py)
        tiers = [attrs.evolve(t, host=ntype.host_vendor) for t in tiers]
        partitions.append(Partition(name, units.part.name, units.count, per_unit, ntype, overhead, switches,
                                    tuple(tiers), span=span, power_budget=budgets[name]))
    budget = cluster.get("power.budget")
    return ClusterGraph(cluster.name, tuple(partitions), tuple(layers.values()),
                        _f(budget) if budget is not None else None, _f(cluster.get("power.pue"), 1.0),
                        _f(cluster.get("power.overhead")), span=cluster.span)


def _endpoints_per_fabric(shapes, ntypes: list[NodeType]) -> dict[str, int]:
    """Scale-out ports per fabric, summed over the partitions cabled to it."""
    totals: dict[str, int] = {}
    for (_, units, fabric, _, (_node, per_unit, *_rest)), ntype in zip(shapes, ntypes):
        if fabric is not None:
            ports = ports_per_node(fabric, ntype)
            totals[fabric.name] = totals.get(fabric.name, 0) + ports * per_unit * units.count
    return totals


def ports_per_node(fabric: Entity, node: NodeType) -> int:
    return fabric.get("rails") or node.nic_ports or 1


# ----------------------------------------------------------------- tiers


def _fabric_tier(fabric: Entity, level: int, scope: str, group: int, bandwidth: float,
                 hops: int = 1, oversubscription: float = 1.0, name: str | None = None) -> Tier:
    return Tier(level, name or f"{fabric.name} ({scope})", fabric.name, fabric.get("kind").name, scope, group,
                bandwidth, hops * _hop_latency(fabric), oversubscription,
                in_network_reduction(fabric), _f(fabric.get("efficiency"), 1.0),
                congestion=getattr(fabric.get("congestion"), "name", "ecn"), span=fabric.span)


def _hop_latency(fabric: Entity) -> float:
    """Seconds per switch hop: the fabric's `latency`, else its switch's (0 when neither says)."""
    switch = fabric.get("switch")
    stated = fabric.get("latency")
    return _f(stated if stated is not None or switch is None else switch.get("latency"))


def _scaleup_tiers(node: NodeType, on_node: tuple, on_unit: tuple, per_unit: int) -> list[Tier]:
    """`on_node`, `on_unit`: (scale-up fabric, its switches as listed) of the node and of its unit."""
    (node_fabric, node_switches), (unit_fabric, unit_switches) = on_node, on_unit
    tiers: list[Tier] = []
    if node_fabric is not None and (unit_fabric is None or unit_fabric.name != node_fabric.name):
        tiers += _with_switches(_domain_tiers(node_fabric, 0, "node", node.gpus), node_switches)
    if unit_fabric is not None:
        tiers += _with_switches(_domain_tiers(unit_fabric, len(tiers), "supernode", node.gpus * per_unit),
                                unit_switches)
    return tiers


def _with_switches(tiers: list[Tier], switches: Repeat | None) -> list[Tier]:
    """A switched domain's tier with the chips of its listed switches and each chip's reduction rate."""
    if switches is None or len(tiers) != 1 or tiers[0].ring:
        return tiers
    entity = switches.part
    chips = switches.count * (entity.get("chips") or 1)
    return [attrs.evolve(tiers[0], switch_chips=chips, switch_reduction=_f(entity.get("reduction")))]


def _domain_tiers(fabric: Entity, level: int, scope: str, gpus: int) -> list[Tier]:
    """A scale-up fabric: one switched tier, or one tier per axis of a torus."""
    bandwidth = _f(fabric.get("bandwidth"))
    shape: Construct | None = fabric.get("topology")
    if shape is None or shape.name != "torus":
        return [_fabric_tier(fabric, level, scope, gpus, bandwidth)]
    return _torus_tiers(fabric, shape, bandwidth, level, scope, gpus)


def _scaleout(fabric: Entity, node: NodeType, per_unit: int, units: int, endpoints: int,
              first_level: int) -> tuple[list[Tier], list[SwitchLayer]]:
    shape: Construct = fabric.get("topology")
    gpus = node.gpus * per_unit * units
    ports = ports_per_node(fabric, node)
    per_port = min(_f(fabric.get("bandwidth")), node.port_bandwidth)
    per_gpu = per_port * ports / node.gpus
    unit_gpus = node.gpus * per_unit
    if shape.name == "torus":
        return _torus_tiers(fabric, shape, per_gpu, first_level, gpus=gpus), []
    if shape.name in ("switched", "full_mesh"):
        radix = _switch_radix(fabric) or endpoints
        layer = _layer(fabric, 1, "switch", max(1, math.ceil(endpoints / radix)) if shape.name == "switched" else 0,
                       radix, endpoints)
        return [_fabric_tier(fabric, first_level, "scaleout", gpus, per_gpu)], [layer]
    args = shape.args
    radix, levels = args.get("radix"), args.get("tiers")
    oversub = _f(args.get("oversubscription"), 1.0)
    shapes = topology.fat_tree(endpoints, radix, levels, oversub)
    gpus_per_port = node.gpus / ports
    rail_factor = ports if shape.name == "rail_optimized" else 1
    tiers, layers = [], []
    hashed = _routed(fabric, radix, oversub)
    for s in shapes:
        group = min(gpus, max(unit_gpus, _round_to(s.group_endpoints * gpus_per_port * rail_factor, unit_gpus)))
        if s.level == len(shapes):
            group = gpus
        name = f"{fabric.name} {_tier_name(s.level, len(shapes))}"
        tier = _fabric_tier(fabric, first_level + s.level - 1, "scaleout", group,
                            per_gpu / s.oversubscription, s.hops, s.oversubscription, name)
        if s.level > 1 and hashed < 1:   # reached through the uplinks of the switches below: hashed
            down = topology.down_ports(radix, oversub)
            tier = attrs.evolve(tier, efficiency=tier.efficiency * hashed, hashed=hashed, paths=radix - down,
                                qps=fabric.get("flows") or 1)
        tiers.append(tier)
        layers.append(_layer(fabric, s.level, _tier_name(s.level, len(shapes)), s.switches, radix, s.links_below))
    return _dedupe_groups(tiers), layers


def _routed(fabric: Entity, radix: int, oversubscription: float) -> float:
    """The share of the uplinks a synchronous collective gets above a fat tree's leaves under the
    fabric's routing (a tier's efficiency carries it): every down port's flows climb in a stage
    that crosses the tier, over the switch's uplinks; 1 where they spread (adaptive)."""
    if routing.routing_of(fabric) != "ecmp":
        return 1.0
    down = topology.down_ports(radix, oversubscription)
    return routing.ecmp_share(down * (fabric.get("flows") or 1), radix - down)


def _round_to(value: float, multiple: int) -> int:
    return max(multiple, int(value // multiple) * multiple)


def _dedupe_groups(tiers: list[Tier]) -> list[Tier]:
    """Keep one tier per group size: a leaf that holds no more GPUs than the unit adds nothing."""
    out: list[Tier] = []
    for tier in tiers:
        if out and out[-1].group_gpus >= tier.group_gpus:
            continue
        out.append(tier)
    return out


def _torus_tiers(fabric: Entity, shape: Construct, per_gpu: float, first_level: int, scope: str = "scaleout",
                 gpus: int | None = None) -> list[Tier]:
    """One tier per axis (collectives per dimension, rings with wraparound); one hop each."""
    dims = tuple(shape.args.get("dims"))
    wrap = bool(shape.args.get("wraparound", True))
    axes = topology.torus_axes(dims, per_gpu, wrap, gpus)
    return [attrs.evolve(_fabric_tier(fabric, first_level + i, scope, min(a.group, gpus or a.group), a.ring_bandwidth,
                                      name=f"{fabric.name} dim {i + 1}"),
                         ring=a.length, wraparound=wrap)
            for i, a in enumerate(axes)]


def _tier_name(level: int, levels: int) -> str:
    names = {1: "leaf", 2: "spine", 3: "core"}
    return "core" if level == levels and levels > 3 else names.get(level, f"tier {level}")


def _switch_radix(fabric: Entity) -> int | None:
    switch = fabric.get("switch")
    return switch.get("radix") if switch is not None else None


def _layer(fabric: Entity, level: int, name: str, switches: int, radix: int, links: int) -> SwitchLayer:
    switch = fabric.get("switch")
    power = _f(switch.get("power")) if switch is not None else 0.0
    return SwitchLayer(fabric.name, level, f"{fabric.name} {name}", switches, radix, links, power,
                       _f(fabric.get("link_power")), span=fabric.span)
