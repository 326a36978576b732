"""Rules that relate several fields of a hardware declaration: a chip's idle power below its
TDP, its derived peaks, clocks and formats, suspicious per-direction bandwidths, cluster
host names (chips' number formats and DPUs: `part_rules`)."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterator

from ...dsl import codes
from .. import chip as chip_numbers
from .. import hbm as hbm_generations
from ..hostlist import HOSTNAME, MAX_HOSTS, HostlistError, count_all, expand_all
from ..design import Entity, Record
from .part import chip_formats
from .switch import fabric_switch_rules
from ...dsl.diagnostics import Diagnostic, Label
from ...dsl.units import BANDWIDTH, BYTES, FLOPS, Quantity, format_distinct, format_quantity
from ...dsl.numbers import percent

# The fastest per-direction bandwidth per GPU each link kind offers today; a figure above
# it is most likely a bidirectional number. NVLink 5: 900 GB/s per direction (NVIDIA
# NVLink page, via stas00/ml-engineering network/README.md); InfiniBand XDR: 800 Gb/s
# per port (IBTA rates, same source) — 8 rails of it per GPU at most.
PER_DIRECTION_CEILING = {
    "nvlink": Quantity(Fraction(900 * 10**9), BANDWIDTH),
    "infiniband": Quantity(Fraction(8 * 100 * 10**9), BANDWIDTH),
}



def chip_rules(chip: Entity) -> Iterator[Diagnostic]:
    tdp, idle, cap = chip.get("power.tdp"), chip.get("power.idle"), chip.get("power.min_cap")
    for low, value in (("idle", idle), ("min_cap", cap)):
        if tdp is not None and value is not None and not value < tdp:
            yield codes.ORDER.make(chip.span_of(f"power.{low}"), low=f"power.{low}", high="power.tdp",
                                   **_pair(value, tdp),
                                   labels=[Label(chip.span_of("power.tdp"), "the TDP")])
    full = chip.get("power.full_clock")
    if full is not None and idle is not None and not idle < full:
        yield codes.ORDER.make(chip.span_of("power.idle"), low="power.idle", high="power.full_clock",
                               **_pair(idle, full), labels=[Label(chip.span_of("power.full_clock"), "the full clock's")])
    yield from _chip_derivations(chip)
    yield from _chip_clocks(chip)
    yield from chip_formats(chip)
    yield from _hbm_type(chip)


def _hbm_type(chip: Entity) -> Iterator[Diagnostic]:
    """`hbm.type` names a generation whose energy per bit the power model charges (compiler/hbm.py)."""
    kind = chip.get("hbm.type")
    if isinstance(kind, str) and not hbm_generations.known(kind):
        listed = ", ".join(f'"{n}"' for n in hbm_generations.TYPES)
        yield codes.BAD_CHOICE.make(chip.span_of("hbm.type"), value=kind, field="hbm.type",
                                    notes=[codes.suggest(kind, hbm_generations.TYPES),
                                           f"help: `hbm.type` is the memory's generation: {listed} "
                                           "(its energy per bit enters the chip's power)"])
    packaging = getattr(chip.get("hbm.packaging"), "name", None)
    if packaging is not None and isinstance(kind, str) and hbm_generations.on_board(kind):
        yield codes.BAD_CHOICE.make(chip.span_of("hbm.packaging"), value=packaging, field="hbm.packaging",
                                    labels=[Label(chip.span_of("hbm.type"), "board memory")],
                                    notes=[f'`hbm.type = "{kind}"` sits on the board beside the package, neither on an '
                                           "interposer nor stacked on the die: no HBM packaging applies to it "
                                           "(compiler/hbm.py)",
                                           "help: remove `packaging` (it describes HBM only)"])
    if packaging == "stacked" and kind is None:
        yield codes.MISSING_FIELD.make(chip.span_of("hbm.packaging"), where="`hbm.packaging = stacked`",
                                       field="`hbm.type`",
                                       notes=["a stack lowers its generation's energy per bit (compiler/hbm.py); "
                                              "without one the power model has no figure to lower",
                                              'help: state the generation, `hbm { type = "HBM3e"  packaging = stacked }`'])


def _chip_derivations(chip: Entity) -> Iterator[Diagnostic]:
    """Peaks and HBM figures: stated or derivable, and the two agreeing within 5 %."""
    peak = chip.get("peak")
    if isinstance(peak, Record) and not peak.items and not chip_numbers.peaks(chip):
        yield codes.MISSING_FIELD.make(chip.span_of("peak"), field="a precision", where="`peak`",
                                       notes=["help: for example `peak { bf16 = 989 TFLOPS }`"])
    for d in chip_numbers.disagreements(chip):
        yield codes.DERIVED_MISMATCH.make(
            chip.span_of(d.key), field=d.key, stated=_quantity(d.stated, d.unit), derived=_quantity(d.value, d.unit),
            percent=percent(abs(d.stated - d.value) / d.stated),
            notes=[f"derived: {d.formula} = {_quantity(d.value, d.unit)}",
                   "the stated figure is used; fix whichever is wrong"])


def _chip_clocks(chip: Entity) -> Iterator[Diagnostic]:
    clock = chip.get("clock")
    for low, value, high, bound in (("base_clock", chip.get("base_clock"), "clock", clock),
                                    ("power.min_clock", chip.get("power.min_clock"), "clock", clock),
                                    ("power.idle", chip.get("power.idle"), "power.cap", chip.get("power.cap"))):
        if value is not None and bound is not None and not value < bound:
            yield codes.ORDER.make(chip.span_of(low), low=low, high=high, **_pair(value, bound), labels=[Label(chip.span_of(high), "here")])
    cap, tdp, least = chip.get("power.cap"), chip.get("power.tdp"), chip.get("power.min_cap")
    if cap is not None and least is not None and cap < least:
        yield codes.ORDER.make(chip.span_of("power.min_cap"), low="power.min_cap", high="power.cap",
                               **_pair(least, cap),
                               labels=[Label(chip.span_of("power.cap"), "the cap")],
                               notes=["help: the firmware accepts no cap below `min_cap`"])
    if cap is not None and tdp is not None and tdp < cap:
        yield codes.ORDER.make(chip.span_of("power.cap"), low="power.cap", high="power.tdp",
                               **_pair(cap, tdp),
                               notes=["help: a power cap limits the chip below its TDP"])


def _pair(low: Quantity, high: Quantity) -> dict[str, str]:
    """ORDER's two values, with the digits it takes to tell them apart."""
    low_value, high_value = format_distinct(low, high)
    return {"low_value": low_value, "high_value": high_value}


def _quantity(value: float, unit: str) -> str:
    dim = {"FLOPS": FLOPS, "B": BYTES, "B/s": BANDWIDTH}[unit]
    return format_quantity(Quantity(Fraction(repr(value)), dim))


def fabric_rules(fabric: Entity) -> Iterator[Diagnostic]:
    kind, bandwidth = fabric.get("kind"), fabric.get("bandwidth")
    switch = fabric.get("switch")
    spoken = _protocol(switch) if isinstance(switch, Entity) else None
    if kind is not None and spoken not in (None, kind.name):
        yield codes.PROTOCOL_MISMATCH.make(
            fabric.span_of("switch"), what=f"`{switch.name}` speaks {spoken}; fabric `{fabric.name}` is {kind.name}",
            labels=[Label(fabric.span_of("kind"), "the fabric's kind"), Label(switch.span_of("protocol"), "the switch's")],
            notes=[f"help: name a switch that speaks {kind.name}; if `{switch.name}` runs both, declare "
                   f"`switch My{switch.name} extends {switch.name} {{ protocol = {kind.name} }}` and name that"])
    ceiling = PER_DIRECTION_CEILING.get(getattr(kind, "name", ""))
    if ceiling is not None and bandwidth is not None and ceiling < bandwidth:
        yield codes.BIDIR_HINT.make(
            fabric.span_of("bandwidth"), field="bandwidth", value=format_quantity(bandwidth),
            notes=[f"the fastest {kind.name} today carries {format_quantity(ceiling)} per GPU per direction",
                   f"help: if this is the sum of both directions, write `{format_quantity(bandwidth, 9)} bidir`"
                   f" (= {format_quantity(bandwidth.scaled(Fraction(1, 2)))} per direction)"])
    yield from fabric_switch_rules(fabric)


def _calibration_coverage(cluster: Entity) -> Iterator[Diagnostic]:
    """`precisions`, `gpus`, `moe` and `beyond` say what the training runs of the band covered
    (model/calibration.py Own): without a training band (`runs`), no plan reads them; `beyond`
    (the factor for plans on more GPUs than `gpus`) without `gpus` neither."""
    block = cluster.get("calibration")
    if block is None:
        return
    if block.get("runs") is not None:
        if block.get("beyond") is not None and block.get("gpus") is None:
            yield codes.SHAPE.make(
                cluster.span_of("calibration.beyond"),
                what="`calibration { beyond }` widens the band of plans on more GPUs than `gpus`, and this block "
                     "has no `gpus`: no plan would read it",
                notes=["help: add `gpus = N` (the largest calibrated run's GPUs, as `gclc calibrate` writes it), "
                       "or remove `beyond`"])
        return
    for name in ("precisions", "gpus", "moe", "beyond"):
        if block.get(name) is not None:
            yield codes.SHAPE.make(
                cluster.span_of(f"calibration.{name}"),
                what=f"`calibration {{ {name} }}` says what the training runs of the band covered, and this block "
                     "has no training band: no plan would read it",
                notes=["help: remove it, or add the training band it describes (`runs`, `low`, `high`, as "
                       "`gclc calibrate` writes them)"])


def cluster_rules(cluster: Entity) -> Iterator[Diagnostic]:
    has_units, partitions = "units" in cluster.record, cluster.get("partition")
    if has_units == bool(partitions):
        what = "both `units` and partitions" if has_units else "neither `units` nor a partition"
        labels = [Label(cluster.span_of("units"), "the units"),
                  Label(cluster.span_of("partition"), "a partition")] if has_units else []
        yield codes.SHAPE.make(cluster.span, what=f"cluster `{cluster.name}` has {what}", labels=labels,
                               notes=["help: give `units = N x Unit` for one kind of unit, or "
                                      "`partition name { units = ... }` blocks for several"])
    yield from _hostnames(cluster)
    yield from _node_protocols(cluster)
    yield from _calibration_coverage(cluster)
    units = [item.value.get("units") for item in getattr(partitions, "items", ())]
    if units and all(u is not None and u.count == 0 for u in units):  # swept to zero, every one of them
        yield codes.SHAPE.make(cluster.span, what=f"every partition of cluster `{cluster.name}` holds 0 units",
                               labels=[Label(item.value.span_of("units"), "0 units") for item in partitions.items],
                               notes=["help: a partition may be swept to 0 to drop it, but one must hold nodes"])
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
        nodes = units.count * (units.part.get("nodes").count if units.part.kind == "supernode" else 1)
        try:  # counted before expanded: `n[0-99999999999]` is a number, not 100 billion names
            listed = count_all(expressions)
            names = expand_all(expressions, most=MAX_HOSTS) if listed == nodes else []
        except HostlistError as error:
            yield codes.HOSTNAMES.make(span, what=str(error))
            continue
        bad = next((n for n in names if not HOSTNAME.match(n)), None)
        repeated = _first_repeat(names, seen)
        seen.update(names)
        if listed != nodes:
            yield codes.HOSTNAMES.make(span, what=f"`hostnames` names {listed:,} hosts; {where} has {nodes:,} nodes",
                                       labels=[Label(record.span_of("units"), f"{nodes:,} nodes")],
                                       notes=["help: list one host name per node, in order, e.g. "
                                              f"[\"gpu[{1:03d}-{nodes:03d}]\"]"])
        elif bad is not None:
            yield codes.HOSTNAMES.make(span, what=f"`{bad}` is not a host name",
                                       notes=["help: lowercase letters, digits and `-`, dot-separated labels "
                                              "of at most 63 characters (RFC 1123, as Kubernetes node names)"])
        elif repeated is not None:
            yield codes.HOSTNAMES.make(span, what=f"`{repeated}` is listed twice")


def _first_repeat(names: list[str], seen: set[str]) -> str | None:
    mine: set[str] = set()
    for name in names:
        if name in mine or name in seen:
            return name
        mine.add(name)
    return None


def _protocol(part: Entity) -> str | None:
    return getattr(part.get("protocol"), "name", None)


def _network_dpu(node: Entity, fabric: Entity, kind: str, span) -> Iterator[Diagnostic]:
    """A DPU whose `offload` lists `network` is the node's scale-out card (its ports are links
    into the fabric, model/train/dpu.py): it must speak the fabric's protocol itself, whatever
    the node's NICs speak (an Ethernet DPU planned as InfiniBand links changed nothing)."""
    dpus = node.get("dpus")
    dpu = getattr(dpus, "part", None)
    if not isinstance(dpu, Entity):
        return
    offload = {getattr(item, "name", item) for item in (dpu.get("offload") or ())}
    spoken = _protocol(dpu)
    if "network" in offload and spoken is not None and spoken != kind:
        yield codes.PROTOCOL_MISMATCH.make(
            span, what=f"`{dpu.name}` carries `{node.name}`'s scale-out traffic (its `offload` lists network) but "
                       f"speaks {spoken}, not {kind}, the protocol of `{fabric.name}`",
            labels=[Label(fabric.span_of("kind"), f"{kind}")],
            notes=[f"help: take `network` out of its `offload`, or give `{node.name}` a DPU that speaks {kind} "
                   f"(`dpus = 2 x {dpu.name} {{ protocol = {kind} }}` for a card that runs both)"])


def _node_protocols(cluster: Entity) -> Iterator[Diagnostic]:
    """A node on a scale-out fabric has a NIC or DPU that speaks the fabric's protocol (when
    its parts say what they speak): an Ethernet card cannot join an InfiniBand fabric."""
    partitions = cluster.get("partition")
    places = [(cluster.record, cluster.span_of("units"))] if partitions is None else [
        (item.value, item.value.span_of("units")) for item in partitions.items]
    for record, span in places:
        fabric, units = record.get("scaleout") or cluster.get("scaleout"), record.get("units")
        kind = getattr(fabric.get("kind"), "name", None) if isinstance(fabric, Entity) else None
        node = units.part if units is not None else None
        if node is not None and node.kind == "supernode":
            node = getattr(node.get("nodes"), "part", None)
        if kind is None or node is None:
            continue
        cards = [r.part for r in (node.get("nics"), node.get("dpus")) if r is not None]
        yield from _network_dpu(node, fabric, kind, span)
        spoken = {_protocol(card) for card in cards}
        if spoken and None not in spoken and kind not in spoken:  # a card that does not say may speak it
            yield codes.PROTOCOL_MISMATCH.make(
                span, what=f"no NIC or DPU of `{node.name}` speaks {kind}, the protocol of `{fabric.name}`",
                labels=[Label(fabric.span_of("kind"), f"{kind}")],
                notes=[f"its cards speak {', '.join(sorted(spoken))}",
                       f"help: give `{node.name}` NICs that speak {kind} (a card that runs both: `nics = 8 x Card "
                       f"{{ protocol = {kind} }}`), or put it on a fabric of its cards' protocol"])
