"""Design specs: small frozen descriptions of parts, clusters, models and jobs that render
to canonical GCL through the AST and the formatter. `gclc.testing` draws them with
hypothesis; anything else that needs to write a design in code can use them too."""

from __future__ import annotations

from fractions import Fraction
from typing import Any


from ..compiler import topology
from ..dsl.units import UNITS
from ..dsl import ast
from .gcl_tree import _Renders, _block, _call, _decl, _dotted, _field, _id, _num, _pin, _ref, _times, _unique
from ..dsl.records import frozen


# ================================================================= parts


@frozen
class ChipSpec(_Renders):
    """An accelerator: HBM, dense peaks, power and an optional measured GEMM efficiency."""

    name: str = "Chip0"
    hbm_gb: int = 80
    hbm_gbps: int = 3350             # GB/s
    bf16_tflops: int = 989
    fp8_tflops: int | None = None
    tdp_w: int = 700
    idle_w: int = 70
    bf16_efficiency: int | None = None  # percent of peak

    def declarations(self) -> tuple[ast.Declaration, ...]:
        peak = [_field("bf16", _num(self.bf16_tflops, "TFLOPS"))]
        if self.fp8_tflops is not None:
            peak.append(_field("fp8", _num(self.fp8_tflops, "TFLOPS")))
        members = [
            _block("hbm", [_field("capacity", _num(self.hbm_gb, "GB")), _field("bandwidth", _num(self.hbm_gbps, "GB/s"))]),
            _block("peak", peak),
            _block("power", [_field("tdp", _num(self.tdp_w, "W")), _field("idle", _num(self.idle_w, "W"))]),
        ]
        if self.bf16_efficiency is not None:
            members.append(_block("efficiency", [_field("bf16", _num(self.bf16_efficiency, "%"))]))
        return (_decl("chip", self.name, members),)


@frozen
class NicSpec(_Renders):
    name: str = "Nic0"
    gbps: int = 400                  # Gb/s per direction
    power_w: int = 25

    def declarations(self) -> tuple[ast.Declaration, ...]:
        return (_decl("nic", self.name, [_field("bandwidth", _num(self.gbps, "Gb/s")),
                                         _field("power", _num(self.power_w, "W"))]),)


@frozen
class CpuSpec(_Renders):
    name: str = "Cpu0"
    cores: int = 32
    power_w: int = 250

    def declarations(self) -> tuple[ast.Declaration, ...]:
        return (_decl("cpu", self.name, [_field("cores", _num(self.cores)), _field("power", _num(self.power_w, "W"))]),)


@frozen
class SwitchSpec(_Renders):
    name: str = "Switch0"
    radix: int = 64
    port_gbps: int = 400
    power_w: int = 1000

    def declarations(self) -> tuple[ast.Declaration, ...]:
        return (_decl("switch", self.name, [_field("radix", _num(self.radix)),
                                            _field("port_speed", _num(self.port_gbps, "Gb/s")),
                                            _field("power", _num(self.power_w, "W"))]),)


@frozen
class FabricSpec(_Renders):
    """A scale-up (`kind = nvlink`, bandwidth in GB/s) or scale-out fabric (Gb/s)."""

    name: str = "Fabric0"
    kind: str = "infiniband"
    topology: str = "fat_tree"       # switched | full_mesh | fat_tree | rail_optimized
    tiers: int = 2
    radix: int = 64
    oversubscription: int = 1        # n:1
    bandwidth: int = 400
    unit: str = "Gb/s"
    latency_ns: int = 1000
    rails: int | None = None
    switch: SwitchSpec | None = None
    link_power_w: int | None = None
    efficiency: int | None = None    # percent

    @property
    def bandwidth_bytes(self) -> float:
        return self.bandwidth * float(UNITS[self.unit.split("/")[0]][0])

    def capacity(self) -> int | None:
        """Endpoints the fabric can connect (None: no limit)."""
        if self.topology not in ("fat_tree", "rail_optimized"):
            return None
        return topology.fat_tree_capacity(self.radix, self.tiers, self.oversubscription)

    def declarations(self) -> tuple[ast.Declaration, ...]:
        if self.topology in ("fat_tree", "rail_optimized"):
            shape: ast.Expr = _call(self.topology, tiers=_num(self.tiers), radix=_num(self.radix),
                                    oversubscription=ast.Ratio(str(self.oversubscription), "1"))
        else:
            shape = _ref(self.topology)
        members = [_field("kind", _ref(self.kind)), _field("topology", shape),
                   _field("bandwidth", _num(self.bandwidth, self.unit)), _field("latency", _num(self.latency_ns, "ns"))]
        if self.rails is not None:
            members.append(_field("rails", _num(self.rails)))
        if self.switch is not None:
            members.append(_field("switch", _ref(self.switch.name)))
        if self.link_power_w is not None:
            members.append(_field("link_power", _num(self.link_power_w, "W")))
        if self.efficiency is not None:
            members.append(_field("efficiency", _num(self.efficiency, "%")))
        parts = self.switch.declarations() if self.switch is not None else ()
        return (*parts, _decl("fabric", self.name, members))


@frozen
class NodeSpec(_Renders):
    """A server: `gpus x chip`, NICs, CPUs, a scale-up fabric, DRAM and overhead."""

    name: str = "Node0"
    chip: ChipSpec = ChipSpec()
    gpus: int = 8
    nics: int = 0
    nic: NicSpec | None = None
    cpus: int = 0
    cpu: CpuSpec | None = None
    scaleup: FabricSpec | None = None
    dram_gb: int | None = None
    overhead_w: int | None = None

    @property
    def nic_ports(self) -> int:
        return self.nics if self.nic is not None else 0

    def declarations(self) -> tuple[ast.Declaration, ...]:
        members = [_field("gpus", _times(self.gpus, self.chip.name))]
        parts = list(self.chip.declarations())
        if self.cpu is not None and self.cpus:
            members.append(_field("cpus", _times(self.cpus, self.cpu.name)))
            parts += self.cpu.declarations()
        if self.nic is not None and self.nics:
            members.append(_field("nics", _times(self.nics, self.nic.name)))
            parts += self.nic.declarations()
        if self.dram_gb is not None:
            members.append(_field("dram", _num(self.dram_gb, "GB")))
        if self.scaleup is not None:
            members.append(_field("scaleup", _ref(self.scaleup.name)))
            parts += self.scaleup.declarations()
        if self.overhead_w is not None:
            members.append(_field("overhead", _num(self.overhead_w, "W")))
        return (*parts, _decl("node", self.name, members))


@frozen
class PartitionSpec:
    name: str
    node: NodeSpec
    units: int

    @property
    def gpus(self) -> int:
        return self.units * self.node.gpus


@frozen
class ClusterSpec(_Renders):
    """One partition (`units = N x Node`) or several (`partition p0 { ... }` blocks)."""

    name: str = "Cluster0"
    partitions: tuple[PartitionSpec, ...] = (PartitionSpec("p0", NodeSpec(), 1),)
    scaleout: FabricSpec | None = None
    pue: Fraction = Fraction(1)
    overhead_kw: int | None = None
    budget_kw: int | None = None
    units_param: bool = False        # `param units = N` (one per partition when several)

    @property
    def heterogeneous(self) -> bool:
        return len(self.partitions) > 1

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.partitions)

    def units_param_name(self, partition: PartitionSpec) -> str:
        return "units" if not self.heterogeneous else f"units_{partition.name}"

    def params(self) -> tuple[ast.Param, ...]:
        if not self.units_param:
            return ()
        return tuple(ast.Param(_id(self.units_param_name(p)), _num(p.units)) for p in self.partitions)

    def _units(self, p: PartitionSpec) -> ast.Expr:
        count = _ref(self.units_param_name(p)) if self.units_param else _num(p.units)
        return ast.Multiplicity(count, _dotted(p.node.name), None)

    def declarations(self) -> tuple[ast.Declaration, ...]:
        parts: list[ast.Declaration] = []
        for p in self.partitions:
            parts += p.node.declarations()
        if self.heterogeneous:
            members = [_block("partition", [_field("units", self._units(p))], p.name) for p in self.partitions]
        else:
            members = [_field("units", self._units(self.partitions[0]))]
        if self.scaleout is not None:
            members.insert(0 if self.heterogeneous else 1, _field("scaleout", _ref(self.scaleout.name)))
            parts += self.scaleout.declarations()
        power = [_field("pue", _num(self.pue))]
        if self.overhead_kw is not None:
            power.append(_field("overhead", _num(self.overhead_kw, "kW")))
        if self.budget_kw is not None:
            power.append(_field("budget", _num(self.budget_kw, "kW")))
        members.append(_block("power", power))
        return (*parts, _decl("cluster", self.name, members))

    def module(self) -> ast.Module:
        return ast.Module((*self.params(), *_unique(self.declarations())))


# ================================================================= work


@frozen
class ExpertsSpec:
    routed: int = 8
    top_k: int = 2
    shared: int = 0
    ffn: int = 1024
    dense_layers: int = 0


@frozen
class ModelSpec(_Renders):
    """A transformer; `hidden = heads x head_dim`. `state_params` writes the exact count."""

    name: str = "Model0"
    layers: int = 2
    heads: int = 8
    head_dim: int = 64
    kv_heads: int = 8
    ffn: int = 2048
    vocab: int = 8192
    seq: int = 1024
    mlp: str = "swiglu"
    tied: bool = False
    experts: ExpertsSpec | None = None
    state_params: bool = False

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim

    @property
    def arch(self) -> str:
        return "dense" if self.experts is None else "moe"

    def shape(self):
        """The `ModelShape` the compiler builds from this model."""
        from ..model.shape import ModelShape

        e = self.experts
        moe = {} if e is None else {"routed": e.routed, "shared": e.shared, "top_k": e.top_k, "expert_ffn": e.ffn,
                                    "dense_layers": e.dense_layers}
        return ModelShape(self.layers, self.hidden, self.heads, self.kv_heads, self.head_dim, self.ffn, self.vocab,
                          self.seq, 3 if self.mlp == "swiglu" else 2, tied_embeddings=self.tied, **moe)

    def declarations(self) -> tuple[ast.Declaration, ...]:
        members = [_field("arch", _ref(self.arch)), _field("layers", _num(self.layers)),
                   _field("hidden", _num(self.hidden)), _field("heads", _num(self.heads)),
                   _field("kv_heads", _num(self.kv_heads)), _field("ffn", _num(self.ffn)),
                   _field("vocab", _num(self.vocab)), _field("seq", _num(self.seq)), _field("mlp", _ref(self.mlp))]
        if self.tied:
            members.append(_field("tied_embeddings", ast.Bool(True)))
        if self.experts is not None:
            e = self.experts
            inner = [_field("routed", _num(e.routed)), _field("top_k", _num(e.top_k))]
            inner += [_field("shared", _num(e.shared))] if e.shared else []
            inner += [_field("ffn", _num(e.ffn))]
            inner += [_field("dense_layers", _num(e.dense_layers))] if e.dense_layers else []
            members.append(_block("experts", inner))
        if self.state_params:
            members.append(_field("params", _num(self.shape().params)))
        return (_decl("model", self.name, members),)


@frozen
class TrainSpec(_Renders):
    """A `train` job with its model and cluster: rendered, a whole design."""

    name: str = "job"
    model: ModelSpec = ModelSpec()
    cluster: ClusterSpec = ClusterSpec()
    partition: str | tuple[str, ...] | None = None  # `on = Cluster.p0`, or `[Cluster.p0, Cluster.p1]`
    batch: int = 8
    precision: str = "bf16"
    software: str | None = None
    gpus: int | None = None
    pins: tuple[tuple[str, Any], ...] = ()
    memory_percent: int | None = None  # subject to { memory <= N% }
    batch_param: bool = False

    @property
    def spread(self) -> bool:
        """The job spans several partitions (a heterogeneous job)."""
        return isinstance(self.partition, tuple)

    @property
    def target(self) -> PartitionSpec:
        """The partition the job runs on (the first, for a job over several)."""
        first = self.partition[0] if self.spread else self.partition
        return next((p for p in self.cluster.partitions if p.name == first), self.cluster.partitions[0])

    def declarations(self) -> tuple[ast.Declaration, ...]:
        if self.spread:
            on: ast.Expr = ast.ListExpr(tuple(_ref(f"{self.cluster.name}.{p}") for p in self.partition))
        else:
            on = _ref(self.cluster.name if self.partition is None else f"{self.cluster.name}.{self.partition}")
        members = [_field("model", _ref(self.model.name)), _field("on", on),
                   _field("batch", _ref("batch") if self.batch_param else _num(self.batch)),
                   _field("precision", _ref(self.precision))]
        if self.software is not None:
            members.append(_field("software", _ref(self.software)))
        if self.gpus is not None:
            members.append(_field("gpus", _num(self.gpus)))
        if self.pins:
            members.append(_block("parallelism", [_field(k, _pin(v)) for k, v in self.pins]))
        if self.memory_percent is not None:
            limit = ast.Constraint(_dotted("memory"), "<=", _num(self.memory_percent, "%"))
            members.append(_block("subject", [limit], label="to"))
        return (*self.cluster.declarations(), *self.model.declarations(), _decl("train", self.name, members))

    def module(self) -> ast.Module:
        params = self.cluster.params()
        if self.batch_param:
            params += (ast.Param(_id("batch"), _num(self.batch)),)
        return ast.Module((*params, *_unique(self.declarations())))
