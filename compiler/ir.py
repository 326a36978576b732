"""The IR: a hierarchical, frozen cluster graph.

A node type appears once with its multiplicity, so a 1,000,000-GPU cluster is a few
dozen elements. All numbers are floats in SI base units (bytes, seconds, watts, FLOPS,
bytes/s per direction); every element keeps the `Span` of the text it came from.
Flattening to one vertex per GPU is explicit: `flatten()` in `compiler/flatten.py`.
"""

from __future__ import annotations

import math

import attrs

from ..dsl.source import Span
from . import formats as number_formats
from . import hbm as hbm_generations
from ..dsl.records import frozen

# Bump on every change to the IR's classes or fields (tests/compiler/test_ir_version.py pins
# the schema's hash per version): 2: accelerators carry cores, clocks, L2 and the DVFS curve;
# 3: parts carry what a DPU offloads (`Part.offload`), chips the formats they list, nodes
# their checkpoint `storage` bandwidth; 4: accelerators carry the lowest cap they accept (`min_cap`);
# 5: parts carry their network `ports` (a NIC's or DPU's `bandwidth` is split over them);
# 6: accelerators carry their data sheet's HBM figure (`hbm_nominal`), shown in every output;
# 7: partitions carry their own `power.budget`, accelerators the top of their DVFS curve (`full_clock`);
# 8: accelerators carry their HBM generation (`hbm_type`, whose energy per bit enters power).
# 9: scale-out tiers carry their ECMP hashing (`hashed`, `paths`, `qps`: a ring's few leaving flows);
# 10: tiers carry their fabric's `congestion` (ecn, pfc).
# 12: accelerators carry their HBM packaging (`hbm_packaging`: interposer or stacked, energy per bit and latency).
# 13: tiers carry their GPUs' `generation` (NCCL's NVLS constants: model/collectives.py).
# 14: a tier's `generation` is its GPUs' own (ampere, hopper, blackwell; None off NVIDIA), read off their peaks.
# 15: accelerators carry the chips they extend (`extends`: whose published runs calibrate them).
# 16: parts carry their `vendor`, tiers their nodes' host CPU vendor (`host`: NCCL's LL cap across nodes);
#     a tier's `generation` may be ada (an fp8, GDDR part: NCCL's Ampere rows).
IR_VERSION = 17
# sha256 of each version's JSON Schema (less its version number), as
# tests/compiler/test_ir_version.py computes it: a field changed without a bump fails there.
IR_SCHEMA_SHA256 = {
    2: "2efbdcbd6e9b4198bbd85f55ad2a325a6c3d420ae30b10a8790756c679f8cf58",
    3: "d642b5856a02f9a1dc60b9d783df75eea4f4a3a9ef8ee26e31bb67955e735c1d",
    4: "08b4c592a1b6cad1779a7a2f132b33a289f5a7894655cef56119701025a873ec",
    5: "a4a21f7dd3cc8a0d1894cc6e7ba2e042af30c14aafb5811e889f3f2055dbb8ad",
    6: "459854794c86a1b0b911eb465dc89aff0fae08c2cf3e59513f273f1188cf5fdd",
    7: "dc498aa4fe26abdc90714c6ce28a8e38ddf16968f079526bad7819000d3dac6a",
    8: "e69232612e5f51617067d0cfc6f57160b5ae9869200732b775cc4ce8ae729d06",
    9: "dfe21c65aae30a0e4880c9829668d3031815f316618f6580867882060c343c0b",   # Tier: hashed, paths, qps
    10: "0c823995c9d2c9c1361888d28c51dc19d86cc79572d748de4a050caed5f1fb1d",   # Tier: congestion
    11: "89a14c70ae7372738235a04f8cf8699f5c44f3c050c703908d8e85f9b2d248e2",   # Tier: switch_chips, switch_reduction
    12: "e043b9c51321f90b9daba297f7893073f88d20ebbc42301907fa06950f792ae1",   # Accelerator: hbm_packaging
    13: "b21f6f2707e4a85ed6470ad254ba49eacd602262961d65fdb5d357f27dad95a4",   # Tier: generation
    14: "d7d3bd626e766bbb1b339b78e4e6c798dce9b78c0da7970c17aa4bef542869c8",   # Tier: generation str or None
    15: "9018f60d279574749e50a2ea1ac095bdcd6cc225691329c3c19c5b782d5620a2",   # Accelerator: extends
    16: "e1c0d75c3888eb1c43089c8b6e2a5d26261a09f16d85f06a47875896f112045e",   # Part: vendor; Tier: host
    17: "6ce6abba619b33e5f258171a11a30f346ac1a1abe98dd3799543b6467b0d6c37",   # NodeType: step_overhead
}


def _span() -> attrs.Attribute:
    return attrs.field(eq=False, repr=False, kw_only=True)


@frozen(cache_hash=True)  # hashed on every model cache lookup
class Accelerator:
    name: str
    vendor: str
    peak: tuple[tuple[str, float], ...]          # precision -> dense FLOPS
    efficiency: tuple[tuple[str, float], ...]    # precision (or "hbm") -> measured share of peak
    hbm_capacity: float
    hbm_bandwidth: float
    tdp: float
    idle: float
    clock: float | None          # Hz, boost: the clock the peaks are quoted at
    base_clock: float | None = None   # Hz, the clock guaranteed at TDP under full load
    cores: int | None = None
    l2: float = 0.0              # bytes of on-chip L2 / SRAM (0 when not declared)
    l2_bandwidth: float | None = None   # bytes/s of that level (the roofline's second ceiling)
    power_cap: float | None = None      # W, the operator's cap below TDP
    min_clock: float | None = None      # Hz, the DVFS floor under a cap
    min_cap: float | None = None        # W, the lowest cap the firmware accepts (a floor of the clock too)
    dvfs_exponent: float | None = None  # dynamic power ~ clock^exponent (model/dvfs.py default when None)
    full_clock: float | None = None     # W at full load at the full clock: the DVFS curve's top (None: tdp)
    ops_per_clock: tuple[tuple[str, float], ...] = ()   # dense operations per core per clock
    hbm_stacks: int | None = None
    listed_formats: tuple[str, ...] = ()   # the chip's `formats = [...]` (compiler/formats.py)
    hbm_nominal: float | None = None    # bytes, the data sheet's figure (`hbm.nominal`): shown, never fitted in
    hbm_type: str | None = None         # the HBM generation (`hbm.type`, compiler/hbm.py): its energy per bit
    hbm_packaging: str = "interposer"   # `hbm.packaging`: 2.5D beside the die, or stacked on it (compiler/hbm.py)
    # the chips it extends, nearest first (`chip MyB200 extends B200 {}`: ("B200",)): whose published
    # runs calibrate it, where it changes none of their physics (model/calibration.py calibrated_as)
    extends: tuple[str, ...] = ()
    span: Span = _span()

    @property
    def hbm_joules_per_byte(self) -> float | None:
        """Energy of one byte moved to or from HBM (None when the generation is not stated)."""
        return hbm_generations.joules_per_byte(self.hbm_type, self.hbm_packaging)

    @property
    def hbm_datasheet(self) -> float:
        """The HBM figure outputs name the part by: the data sheet's, else the capacity."""
        return self.hbm_nominal if self.hbm_nominal is not None else self.hbm_capacity

    @property
    def formats(self) -> tuple[str, ...]:
        """The formats the chip runs: as listed, else the families with a (stated or derived) peak."""
        return self.listed_formats or tuple(name for name, _ in self.peak)

    def runs(self, precision: str) -> bool:
        return number_formats.runs(self.formats, precision)

    def peak_of(self, precision: str) -> float | None:
        """The dense peak of a format's family (`nvfp4` runs at the fp4 peak)."""
        return dict(self.peak).get(number_formats.family(precision))

    def efficiency_of(self, key: str) -> float | None:
        return dict(self.efficiency).get(number_formats.family(key))


@frozen(cache_hash=True)  # hashed on every model cache lookup
class Part:
    """A non-accelerator part of a node or unit: a CPU, NIC, DPU or switch, `count` of them."""

    kind: str
    name: str
    count: int
    power: float                 # watts each
    bandwidth: float | None      # bytes/s per direction each: a NIC's or DPU's over all its ports; a switch port's
    cores: int | None = None     # CPU and DPU cores each
    offload: tuple[str, ...] = ()   # what a DPU takes over from the host: network, storage, input
    ports: int = 1               # network ports each (NICs, DPUs): `bandwidth` is split evenly over them
    vendor: str = ""             # the part's `vendor` as written (a host CPU's: NCCL's LL cap across nodes)
    span: Span = _span()

    def offloads(self, what: str) -> bool:
        return what in self.offload

    @property
    def port_bandwidth(self) -> float | None:
        """Bytes/s per direction of one of its ports."""
        return self.bandwidth / self.ports if self.bandwidth is not None else None


@frozen(cache_hash=True)  # hashed on every model cache lookup
class NodeType:
    name: str
    accelerator: Accelerator
    gpus: int
    parts: tuple[Part, ...]
    dram: float
    nvme: float
    overhead: float              # watts: fans, boards, power conversion
    nvme_bandwidth: float | None = None   # bytes/s the node's NVMe drives read or write
    host_link: float | None = None        # bytes/s per direction between one GPU and host memory (PCIe, C2C)
    storage: float | None = None          # bytes/s the host writes its checkpoint to storage at (model/train/host.py)
    step_overhead: float = 0.0            # seconds of host work between two training steps (model/train/step.py)
    span: Span = _span()

    def parts_of(self, kind: str) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.kind == kind)

    @property
    def scaleout_cards(self) -> tuple[Part, ...]:
        """The cards cabled to the scale-out fabric: its NICs, and the DPUs that take over the
        network (model/train/dpu.py: such a DPU is a scale-out NIC); storage DPUs sit on another network."""
        return tuple(p for p in self.parts if p.kind == "nic" or (p.kind == "dpu" and p.offloads("network")))

    @property
    def host_vendor(self) -> str:
        """The vendor of the node's host CPUs ("" where none is declared; the first where several are)."""
        return next((p.vendor for p in self.parts_of("cpu") if p.vendor), "")

    @property
    def nic_ports(self) -> int:
        """Scale-out ports: each scale-out card's `ports`, one link (a rail) each."""
        return sum(p.count * p.ports for p in self.scaleout_cards)

    @property
    def port_bandwidth(self) -> float:
        """Bytes/s per direction of the slowest scale-out port (inf when no card says)."""
        return min((p.port_bandwidth for p in self.scaleout_cards if p.bandwidth), default=math.inf)


@frozen(cache_hash=True)  # hashed on every model cache lookup
class Tier:
    """One level of the communication hierarchy, as seen from one GPU.

    `group_gpus` GPUs can talk without leaving this tier; `bandwidth` is what each GPU
    can send (and receive) per direction through it, after oversubscription.
    """

    level: int
    name: str
    fabric: str
    kind: str                    # nvlink, infiniband, ethernet, pcie, xgmi, ici
    scope: str                   # node, supernode or scaleout
    group_gpus: int
    bandwidth: float
    latency: float               # seconds, one way through this tier
    oversubscription: float
    in_network_reduction: bool
    efficiency: float            # achievable share of `bandwidth` (1.0 when not declared)
    ring: int = 0                # a torus axis: chips along it (0: a switched tier)
    wraparound: bool = False     # the axis closes into a ring (two links per chip along it)
    congestion: str = "ecn"      # ecn or pfc: how the fabric meets congestion (model/network/pfc.py)
    hashed: float = 1.0          # the ECMP share of the uplinks `efficiency` carries (compiler/routing.py)
    paths: int = 0               # ... the uplinks a domain below hashes its flows over (0: not hashed)
    qps: int = 1                 # ... and the flows per port it hashes (queue pairs)
    switch_chips: int = 0        # switch chips of one domain of a scale-up tier (0: not stated)
    switch_reduction: float = 0.0   # FP32 adds/s each of them reduces at (0: not stated, not bounded)
    generation: str | None = None   # a scale-up tier's GPUs' generation (compiler/formats.py GENERATIONS; None: not NVIDIA's)
    host: str = ""               # the node's host CPUs' vendor (NCCL's LL cap across nodes; "" not stated)
    span: Span = _span()

    @property
    def reduction_rate(self) -> float:
        """FP32 adds/s all the switches of one domain reduce at (inf where the design does not say)."""
        return self.switch_chips * self.switch_reduction if self.switch_chips and self.switch_reduction else math.inf

    @property
    def link_bandwidth(self) -> float:
        """Per direction to one neighbour: a ring axis uses both its links for collectives."""
        return self.bandwidth / 2 if self.ring and self.wraparound else self.bandwidth


@frozen(cache_hash=True)  # hashed on every model cache lookup
class SwitchLayer:
    """Switches of one fabric tier, counted over the whole cluster, and the cables into it."""

    fabric: str
    level: int
    name: str
    switches: int
    radix: int
    links_below: int
    switch_power: float          # watts each
    link_power: float            # watts per cable end (optics)
    span: Span = _span()


@frozen(cache_hash=True)  # hashed on every model cache lookup
class Partition:
    """Units of one kind (a node or a supernode type) and the tiers their GPUs see."""

    name: str
    unit: str                    # the node or supernode name
    units: int
    nodes_per_unit: int
    node: NodeType
    unit_overhead: float         # watts per unit beyond its nodes (NVL72 switch trays, shelves)
    unit_switches: tuple[Part, ...]
    tiers: tuple[Tier, ...]
    span: Span = _span()
    power_budget: float | None = None   # W at the facility: the partition's own `power.budget`

    @property
    def nodes(self) -> int:
        return self.units * self.nodes_per_unit

    @property
    def gpus(self) -> int:
        return self.nodes * self.node.gpus


@frozen(cache_hash=True)  # hashed on every model cache lookup
class ClusterGraph:
    name: str
    partitions: tuple[Partition, ...]
    switch_layers: tuple[SwitchLayer, ...]
    power_budget: float | None
    pue: float
    overhead: float              # watts at cluster level (storage, management)
    span: Span = _span()

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.partitions)

    def partition(self, name: str) -> Partition:
        for partition in self.partitions:
            if partition.name == name:
                return partition
        raise KeyError(name)
