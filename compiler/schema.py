"""What each block kind may contain: fields, their types and ranges, nested blocks.

Data only; `check.py` walks it. Adding a field to the language is one line here.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Union

import attrs

from ..dsl import units as u

# The software stacks a job may name; what each does lives in model/config.py's table.
SOFTWARE_STACKS = ("megatron", "megatron_core", "nemo", "deepspeed", "fsdp", "maxtext")


@attrs.frozen
class Qty:
    """A quantity of one dimension. Bounds are in base units; `low_open` excludes `low`."""

    dim: u.Dim
    integer: bool = False
    low: Fraction | None = Fraction(0)
    low_open: bool = True
    high: Fraction | None = None
    marker: str | None = None  # `bidir` for bandwidths, `sparse` for FLOPS

    def describe(self) -> str:
        return "a whole number" if self.integer else u.describe_dim(self.dim)


@attrs.frozen
class Text:
    def describe(self) -> str:
        return "a string"


@attrs.frozen
class Flag:
    def describe(self) -> str:
        return "`true` or `false`"


@attrs.frozen
class Choice:
    options: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(f"`{o}`" for o in self.options)


@attrs.frozen
class PartRef:
    """The name of a declaration of one of `kinds`."""

    kinds: tuple[str, ...]

    def describe(self) -> str:
        return "a " + " or ".join(self.kinds)


@attrs.frozen
class RepeatOf:
    """`count x Part` where Part is one of `kinds`."""

    kinds: tuple[str, ...]

    def describe(self) -> str:
        return f"a count of a {' or '.join(self.kinds)}, such as `8 x Name`"


@attrs.frozen
class Constructor:
    """One form of a constructor field: its arguments and which are required."""

    args: dict[str, "FieldType"]
    required: tuple[str, ...] = ()


@attrs.frozen
class Construct:
    """A value built by a constructor: `fat_tree(tiers = 2, radix = 64)`, or bare `switched`."""

    forms: dict[str, Constructor]
    what: str = "topology"

    def describe(self) -> str:
        return f"a {self.what}: " + ", ".join(f"`{f}`" for f in self.forms)


@attrs.frozen
class ListOf:
    item: "FieldType"
    least: int = 0  # the fewest items that make sense

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


@attrs.frozen
class Targets:
    """Where a job runs: a cluster, a partition `Cluster.part`, or a list of partitions."""

    def describe(self) -> str:
        return "a cluster, a partition such as `Cluster.h100`, or a list of them"


@attrs.frozen
class Anything:
    """A param: any value; `--set` overrides must keep its type."""

    def describe(self) -> str:
        return "a value"


FieldType = Union[Qty, Text, Flag, Choice, PartRef, RepeatOf, Construct, ListOf, Targets, Anything]


@attrs.frozen
class Block:
    """A block's contents. `labelled` blocks repeat with a label: `partition h100 { ... }`."""

    fields: dict[str, FieldType] = attrs.Factory(dict)
    blocks: dict[str, "Block"] = attrs.Factory(dict)
    labelled: dict[str, "Block"] = attrs.Factory(dict)
    constraints: dict[str, FieldType] = attrs.Factory(dict)
    required: tuple[str, ...] = ()
    doc: str = ""


# ----------------------------------------------------------------- field types

def positive(dim: u.Dim, marker: str | None = None) -> Qty:
    return Qty(dim, marker=marker)


COUNT = Qty(u.NONE, integer=True, low=Fraction(1), low_open=False)
COUNT0 = Qty(u.NONE, integer=True, low=Fraction(0), low_open=False)
AMOUNT = Qty(u.NONE)  # a positive plain number, such as 14.8 T tokens
SHARE = Qty(u.NONE, high=Fraction(1))  # 0 < x <= 1: efficiencies, utilization
BYTES, TIME, POWER = positive(u.BYTES), positive(u.TIME), positive(u.POWER)
POWER0 = Qty(u.POWER, low_open=False)
BANDWIDTH = positive(u.BANDWIDTH, marker="bidir")
FLOPS = positive(u.FLOPS, marker="sparse")
CLOCK = positive(u.RATE)
TEXT, FLAG = Text(), Flag()

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")
PROTOCOLS = Choice(("infiniband", "ethernet", "nvlink", "pcie", "xgmi", "ici"))

TOPOLOGY = Construct({
    "switched": Constructor({}),
    "full_mesh": Constructor({}),
    "fat_tree": Constructor({"tiers": COUNT, "radix": COUNT, "oversubscription": Qty(u.NONE, low=Fraction(1), low_open=False)},
                            ("tiers", "radix")),
    "rail_optimized": Constructor({"tiers": COUNT, "radix": COUNT, "oversubscription": Qty(u.NONE, low=Fraction(1), low_open=False)},
                                  ("tiers", "radix")),
    "torus": Constructor({"dims": ListOf(COUNT, least=1), "wraparound": FLAG}, ("dims",)),
})

# ----------------------------------------------------------------- parts

PART_COMMON = {"vendor": TEXT, "source": TEXT, "power": POWER0}

CHIP = Block(
    fields={"vendor": TEXT, "source": TEXT, "clock": CLOCK, "cores": COUNT, "l2": BYTES, "process": TEXT},
    blocks={
        "hbm": Block({"capacity": BYTES, "bandwidth": BANDWIDTH, "stacks": COUNT, "type": TEXT},
                     required=("capacity", "bandwidth")),
        "peak": Block({p: FLOPS for p in PRECISIONS}, doc="dense peak FLOPS per precision"),
        "power": Block({"tdp": POWER, "idle": POWER0, "min_cap": POWER}, required=("tdp",)),
        "efficiency": Block({**{p: SHARE for p in PRECISIONS}, "hbm": SHARE, "attention": SHARE},
                            doc="sustained GEMM throughput per precision, fused attention (of the bf16 peak) "
                                "and HBM bandwidth, as shares of peak"),
    },
    required=("hbm", "peak", "power"),
)
CPU = Block({**PART_COMMON, "cores": COUNT, "clock": CLOCK, "memory": BYTES})
NIC = Block({**PART_COMMON, "bandwidth": BANDWIDTH, "ports": COUNT, "protocol": PROTOCOLS}, required=("bandwidth",))
DPU = Block({**PART_COMMON, "bandwidth": BANDWIDTH, "ports": COUNT, "cores": COUNT, "protocol": PROTOCOLS},
            required=("bandwidth",))
SWITCH = Block({**PART_COMMON, "radix": COUNT, "port_speed": BANDWIDTH, "capacity": BANDWIDTH,
                "latency": Qty(u.TIME, low_open=False), "protocol": PROTOCOLS, "in_network_reduction": FLAG},
               required=("radix", "port_speed"))

# ----------------------------------------------------------------- systems

NODE = Block(
    {"vendor": TEXT, "source": TEXT, "gpus": RepeatOf(("chip",)), "cpus": RepeatOf(("cpu",)), "dram": BYTES,
     "nvme": BYTES, "nics": RepeatOf(("nic",)), "dpus": RepeatOf(("dpu",)), "scaleup": PartRef(("fabric",)),
     "overhead": POWER0},
    required=("gpus",),
)
SUPERNODE = Block(
    {"vendor": TEXT, "source": TEXT, "nodes": RepeatOf(("node",)), "scaleup": PartRef(("fabric",)),
     "switches": RepeatOf(("switch",)), "overhead": POWER0},
    required=("nodes", "scaleup"),
)
FABRIC = Block(
    {"kind": PROTOCOLS, "topology": TOPOLOGY, "bandwidth": BANDWIDTH, "rails": COUNT,
     "latency": Qty(u.TIME, low_open=False), "switch": PartRef(("switch",)), "in_network_reduction": FLAG,
     "efficiency": SHARE, "link_power": POWER0, "source": TEXT},
    required=("kind", "topology", "bandwidth"),
)
_UNITS = RepeatOf(("node", "supernode"))
# Real host names of the nodes, in the order `gclc export` names them: Slurm host lists
# such as ["dgx[001-064]", "spare01"]; checked to name every node once.
HOSTNAMES = ListOf(TEXT)
CLUSTER = Block(
    {"units": _UNITS, "scaleout": PartRef(("fabric",)), "source": TEXT, "hostnames": HOSTNAMES},
    blocks={"power": Block({"budget": POWER, "pue": Qty(u.NONE, low=Fraction(1), low_open=False), "overhead": POWER0})},
    labelled={"partition": Block({"units": _UNITS, "scaleout": PartRef(("fabric",)), "hostnames": HOSTNAMES},
                                 required=("units",))},
)

# ----------------------------------------------------------------- work

MODEL = Block(
    {"arch": Choice(("dense", "moe")), "layers": COUNT, "hidden": COUNT, "heads": COUNT, "kv_heads": COUNT,
     "head_dim": COUNT, "ffn": COUNT, "vocab": COUNT, "seq": COUNT, "params": AMOUNT,
     "mlp": Choice(("swiglu", "gelu", "relu")), "tied_embeddings": FLAG, "source": TEXT},
    blocks={"experts": Block({"routed": COUNT, "shared": COUNT0, "top_k": COUNT, "ffn": COUNT,
                              "dense_layers": COUNT0}, required=("routed", "top_k"))},
    required=("arch", "layers", "hidden", "heads", "ffn", "vocab", "seq"),
)
OBJECTIVES = {"maximize": Choice(("throughput", "mfu", "goodput")), "minimize": Choice(("time", "energy", "cost"))}
_JOB_LIMITS = {"power": POWER, "memory": Qty(u.BYTES), "time": TIME, "energy": positive(u.ENERGY),
               "gpus": COUNT, "mfu": SHARE}
PARALLELISM = Block({"tp": COUNT, "pp": COUNT, "dp": COUNT, "ep": COUNT, "cp": COUNT, "vp": COUNT,
                     "microbatch": COUNT, "microbatches": COUNT, "recompute": Choice(("none", "selective", "full")),
                     "zero": Qty(u.NONE, integer=True, low=Fraction(0), low_open=False, high=Fraction(3)),
                     "sp": FLAG, "schedule": Choice(("one_f_one_b", "interleaved", "gpipe"))})
TRAIN = Block(
    {"model": PartRef(("model",)), "on": Targets(), "tokens": AMOUNT, "batch": COUNT, "seq": COUNT,
     "precision": Choice(PRECISIONS), "gpus": COUNT, "software": Choice(SOFTWARE_STACKS), **OBJECTIVES},
    blocks={"parallelism": PARALLELISM, "subject to": Block(constraints=_JOB_LIMITS)},
    required=("model", "on", "batch"),
)
SERVE = Block(
    {"model": PartRef(("model",)), "on": Targets(), "prompt": COUNT, "output": COUNT, "batch": COUNT,
     "precision": Choice(PRECISIONS), "gpus": COUNT, **OBJECTIVES},
    blocks={"parallelism": PARALLELISM, "slo": Block(constraints={"ttft": TIME, "tpot": TIME}),
            "subject to": Block(constraints=_JOB_LIMITS)},
    required=("model", "on", "prompt", "output"),
)

KINDS: dict[str, Block] = {
    "chip": CHIP, "cpu": CPU, "nic": NIC, "dpu": DPU, "switch": SWITCH, "node": NODE,
    "supernode": SUPERNODE, "fabric": FABRIC, "cluster": CLUSTER, "model": MODEL,
    "train": TRAIN, "serve": SERVE,
}
