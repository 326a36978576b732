"""What each block kind may contain: fields, their types and ranges, nested blocks.

Data only; `check.py` walks it. Adding a field to the language is one line here.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Union

import attrs

from ..dsl import units as u
from . import formats
from . import hbm as hbm_packaging
from .serve_trace import MAX_ROWS
from ..dsl.records import frozen

# The software stacks a job may name; what each does lives in model/config.py's table.
SOFTWARE_STACKS = ("megatron", "megatron_core", "nemo", "deepspeed", "deepspeed_2022", "fsdp", "fsdp_compiled", "maxtext")
DEFAULT_STACK = "megatron_core"   # the stack of a job that states none (the checks and the model read it)
# Activation offload to host memory travels over the node's GPU-to-host link: a node that
# declares no `host_link` cannot price it. One rule for a stated offload (`gclc check`,
# compiler/rules/train.py) and an unstated one the band weighs (model/train/guessed.py).
def offload_possible(host_link) -> bool:
    """Whether a node with this `host_link` (None: not declared) can offload activations."""
    return host_link is not None and host_link > 0


# The stacks whose recipes offload activations as a documented switch, what an unstated offload
# can be: Megatron-Core 0.5+ `--cpu-offloading` (CHANGELOG "Activation offloading to CPU"; NeMo
# and Megatron-Bridge recipes set `cpu_offloading_num_layers`, benchmarks/runs/mb2509_2.gcl) and
# MaxText's offloaded remat policies (MaxText configs/base.yml `remat_policy: minimal_offloaded`).
# A stated offload under another stack that has a switch for it (OFFLOAD_SWITCHES) is the user's
# statement, not a recipe default.
OFFLOAD_STACKS = frozenset({"megatron_core", "nemo", "maxtext"})
# The stacks that run a *stated* activation offload, by the switch each runs it with (`gclc check` refuses
# it elsewhere, compiler/rules/train.py): the recipe stacks above; PyTorch's `offload_wrapper` (its
# `save_on_cpu` hook around each block: torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py), which
# llm-foundry's FSDP recipes turn on with `fsdp_config.activation_cpu_offload: true` (mosaicml/llm-foundry
# README; Composer's `apply_ac(..., activation_cpu_offload)`) -- ASSUMPTION: under torch.compile as well;
# DeepSpeed's `activation_checkpointing.cpu_checkpointing`, which moves only the inputs its checkpointed layers
# keep (deepspeed/runtime/activation_checkpointing/checkpointing.py `CheckpointFunction.forward`:
# `elif CPU_CHECKPOINT: copy_to_device(args, cpu)`), so only under full recompute (OFFLOAD_NEEDS_FULL_RECOMPUTE).
# Megatron-LM before Megatron-Core (`megatron`) has none: `--cpu-offloading` came with Megatron-Core 0.5.
OFFLOAD_SWITCHES = {"megatron_core": "--cpu-offloading", "nemo": "cpu_offloading_num_layers",
                    "maxtext": "an offloaded remat_policy", "fsdp": "fsdp_config.activation_cpu_offload",
                    "fsdp_compiled": "fsdp_config.activation_cpu_offload",
                    "deepspeed": "cpu_checkpointing, with full recompute",
                    "deepspeed_2022": "cpu_checkpointing, with full recompute"}
OFFLOAD_NEEDS_FULL_RECOMPUTE = frozenset({"deepspeed", "deepspeed_2022"})
# What each stack's switch runs beside (`gclc check` refuses the rest where it is written; the search and the
# band's guesses try offload only within them, `offload_refusal`). Megatron-Core's TransformerConfig.__post_init__
# (megatron/core/transformer/transformer_config.py, megatron-core 0.16.1) raises "Currently there is no support for
# Pipeline parallelism with CPU offloading" and "CPU offloading does not work when activation recomputation is
# enabled" (any recompute_granularity, selective too), and wants cpu_offloading_num_layers < num_layers; NeMo and
# Megatron-Bridge build that config (their performance recipes offload at pp 1 without recompute,
# benchmarks/runs/mb2509_2.gcl). DeepSpeed's cpu_checkpointing is one switch for every checkpointed layer: all of
# them or none.
OFFLOAD_ALONE = frozenset({"megatron_core", "nemo"})
OFFLOAD_ALL_OR_NONE = OFFLOAD_NEEDS_FULL_RECOMPUTE


def offload_refusal(stack: str, offload: float | None, pp: int | None, recompute: str | None) -> tuple[str, str] | None:
    """(the field at fault: pp, recompute or offload; why) when `stack` cannot offload the share `offload` of each
    stage's layers (None: some share, as a search asks) at `pp` stages with `recompute` (None: not known yet);
    None when it can."""
    if stack in OFFLOAD_ALONE:
        if pp is not None and pp > 1:
            return "pp", (f"`{stack}` offloads only without a pipeline: Megatron-Core's TransformerConfig refuses "
                          "CPU offloading with pipeline parallelism")
        if recompute is not None and recompute != "none":
            return "recompute", (f"`{stack}` offloads only without recompute: Megatron-Core's TransformerConfig "
                                 "refuses CPU offloading when activation recomputation is enabled")
        if offload is not None and offload >= 1:
            return "offload", (f"`{stack}` keeps at least one layer's activations on the GPU "
                               "(Megatron-Core wants cpu_offloading_num_layers < num_layers)")
    if stack in OFFLOAD_ALL_OR_NONE:
        if recompute is not None and recompute != "full":
            return "recompute", (f"`{stack}` offloads only the layer inputs a full recompute keeps (DeepSpeed's "
                                 "cpu_checkpointing), and this job does not pin `recompute = full`")
        if offload is not None and 0 < offload < 1:
            return "offload", (f"`{stack}` offloads every checkpointed layer's inputs or none (DeepSpeed's "
                               "cpu_checkpointing is one switch): a share of the layers has no setting")
    return None
# The stacks that run Megatron-Core's optimizer and arguments (its precision-aware optimizer, its exports)
MEGATRON_STACKS = ("megatron", "megatron_core", "nemo")
MAX_VP = 8      # the most virtual pipeline stages the planner searches (solver/train/enumerate.py)


def overlap_refusal(stack: str, pp: int | None, vp: int | None, recompute: str | None) -> tuple[str, str] | None:
    """(the field at fault, vp or recompute; why) when `stack` cannot overlap the MoE all-to-all (`ep_overlap`)
    at `pp` stages of `vp` virtual stages with `recompute` (None: not known yet); None when it can. Megatron-Core
    overlaps it only in its interleaved 1F1B schedule on a pipeline and never beside a full recompute
    (core_r0.15.0 transformer_config.py `__post_init__`); the other stacks are not held to it. The why is what
    `gclc check` says of a pinned contradiction and what the least-memory report says of what it left out."""
    if stack not in MEGATRON_STACKS:
        return None
    if pp is not None and pp > 1 and vp is not None and vp <= 1:
        return "vp", ("Megatron-Core overlaps the all-to-all only in its interleaved 1F1B schedule, and refuses "
                      "pp > 1 without vp")
    if recompute == "full":
        return "recompute", (f"Megatron-Core refuses the all-to-all overlap beside full recomputation, so `{stack}` "
                             "runs `ep_overlap = true` with a selective recompute or none")
    return None


# Serving engines by release (model/serve/engines.py PROFILES holds what each one does)
# How a serve job's requests pick a replica (solver/serve/sim.py), as the SGLang router's `--policy`
# names them (sgl-project/sglang sgl-router; its gateway's docs/concepts/routing/load-balancing.md):
# the fewest requests in hand (running and waiting: least-request routing), in turn, at random, or
# the lighter of two drawn at random.
SERVE_ROUTERS = ("least_requests", "round_robin", "random", "power_of_two")
# RL stacks by release (model/rl/stacks.py STACKS holds what each one does between a step's phases)
RL_STACKS = ("nemo_rl", "nemo_rl_0_4")
SERVING_ENGINES = ("ideal", "vllm_0_2", "vllm_v0", "vllm_0_6", "vllm_v1", "sglang_0_3", "sglang", "trtllm_0_9", "trtllm_0_12",
                   "trtllm_pytorch")
# TensorRT-LLM's TensorRT engines (model/serve/engines.py [trtmoe]) run no attention data parallelism, so
# they dispatch no tokens: a pinned `dispatcher` is refused on them (its PyTorch backend runs all three, [trtep])
TRT_ENGINES = ("trtllm_0_9", "trtllm_0_12")
# How a train job stores Adam's state (model/train/optimizer.py): the moments' formats are Megatron-LM's
# --exp-avg-dtype choices (megatron/training/arguments.py); the master weights' add bf16 (Apex's
# DistributedFusedAdam) and `none` (no copy: Adam updates the weights the GEMMs read).
OPTIMIZER_STATES = ("fp32", "bf16", "fp16", "fp8")
MASTER_WEIGHTS = ("fp32", "bf16", "fp16", "none")
# The main gradients Adam reads: Megatron-LM's --main-grads-dtype choices (megatron/training/arguments.py).
MAIN_GRADS = ("fp32", "bf16")


@frozen
class Qty:
    """A quantity of one dimension. Bounds are in base units; `low_open` excludes `low`."""

    dim: u.Dim
    integer: bool = False
    low: Fraction | None = Fraction(0)
    low_open: bool = True
    high: Fraction | None = None
    marker: str | None = None  # `bidir` for bandwidths, `sparse` for FLOPS
    why: str | None = None     # the reason for the bounds, a note on a value beyond them

    def describe(self) -> str:
        return "a whole number" if self.integer else u.describe_dim(self.dim)


@frozen
class Text:
    def describe(self) -> str:
        return "a string"


@frozen
class Flag:
    def describe(self) -> str:
        return "`true` or `false`"


@frozen
class Choice:
    options: tuple[str, ...]
    what: str = ""  # `a precision`: how a message names the kind of word expected

    def describe(self) -> str:
        listed = ", ".join(f"`{o}`" for o in self.options)
        return f"{self.what}: {listed}" if self.what else f"one of {listed}"


@frozen
class PartRef:
    """The name of a declaration of one of `kinds`."""

    kinds: tuple[str, ...]

    def describe(self) -> str:
        return "a " + " or ".join(self.kinds)


@frozen
class RepeatOf:
    """`count x Part` where Part is one of `kinds`; `least` 0 where none is a design choice a
    sweep may reach (`dpus = 0 x BlueField3`, a partition of `0 x DGX_A100`)."""

    kinds: tuple[str, ...]
    least: int = 1

    def describe(self) -> str:
        return f"a count of a {' or '.join(self.kinds)}, such as `8 x Name`"


@frozen
class Constructor:
    """One form of a constructor field: its arguments and which are required."""

    args: dict[str, "FieldType"]
    required: tuple[str, ...] = ()


@frozen
class Construct:
    """A value built by a constructor: `fat_tree(tiers = 2, radix = 64)`, or bare `switched`."""

    forms: dict[str, Constructor]
    what: str = "topology"

    def describe(self) -> str:
        return f"a {self.what}: " + ", ".join(f"`{f}`" for f in self.forms)


@frozen
class ListOf:
    item: "FieldType"
    least: int = 0  # the fewest items that make sense

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


@frozen
class Targets:
    """Where a job runs: a cluster, a partition `Cluster.part`, or a list of partitions."""

    def describe(self) -> str:
        return "a cluster, a partition such as `Cluster.h100`, or a list of them"


@frozen
class Priority:
    """A job's importance: an ordered class (`low` < `normal` < `high` < `critical`) or a
    whole number >= 1 (higher is more important; also the job's weight in the optimum)."""

    classes: tuple[str, ...] = ("low", "normal", "high", "critical")

    def describe(self) -> str:
        return "a priority class (" + ", ".join(f"`{c}`" for c in self.classes) + ") or a whole number >= 1"


@frozen
class CountOr:
    """A whole number, or a value built by one of `construct`'s forms: `output = exponential(mean = 512)`."""

    construct: "Construct"

    def describe(self) -> str:
        return "a whole number or " + self.construct.describe()


@frozen
class Anything:
    """A param: any value; `--set` overrides must keep its type."""

    def describe(self) -> str:
        return "a value"


@frozen
class Axis:
    """A sweep axis: a list of values a param takes, or a `range(...)` of numbers."""

    def describe(self) -> str:
        return "a list of values such as `[16, 32, 64]`, or `range(low = 16, high = 1024, times = 2)`"


FieldType = Union[Qty, Text, Flag, Choice, PartRef, RepeatOf, Construct, CountOr, ListOf, Targets, Priority, Anything, Axis]


@frozen
class Block:
    """A block's contents. `labelled` blocks repeat with a label: `partition h100 { ... }`."""

    fields: dict[str, FieldType] = attrs.Factory(dict)
    blocks: dict[str, "Block"] = attrs.Factory(dict)
    labelled: dict[str, "Block"] = attrs.Factory(dict)
    constraints: dict[str, FieldType] = attrs.Factory(dict)
    required: tuple[str, ...] = ()
    doc: str = ""
    # a required name is also satisfied by any one group of these (a value derived from them)
    alternatives: dict[str, tuple[tuple[str, ...], ...]] = attrs.Factory(dict)
    free: FieldType | None = None  # the type of any other field (a sweep's axes are named by params)


# ----------------------------------------------------------------- field types

def positive(dim: u.Dim, marker: str | None = None) -> Qty:
    return Qty(dim, marker=marker)


COUNT = Qty(u.NONE, integer=True, low=Fraction(1), low_open=False)
COUNT0 = Qty(u.NONE, integer=True, low=Fraction(0), low_open=False)
AMOUNT = Qty(u.NONE)  # a positive plain number, such as 14.8 T tokens
# Switching tiers of a fat tree: built ones have 2-4 (3 serve 65,536 hosts at radix 64); 8 tiers
# of radix-64 switches would serve 32^7 x 64 (2.2e12) endpoints. A bound keeps the lowering's
# per-tier loop (and its powers of the radix) small.
TIERS = Qty(u.NONE, integer=True, low=Fraction(1), low_open=False, high=Fraction(8))
SHARE = Qty(u.NONE, high=Fraction(1))  # 0 < x <= 1: efficiencies, utilization
BYTES, TIME, POWER = positive(u.BYTES), positive(u.TIME), positive(u.POWER)
TIME0 = Qty(u.TIME, low_open=False)  # instants from the start of a schedule: `submit = 0 h`
POWER0 = Qty(u.POWER, low_open=False)
PRICE = Qty(u.MONEY, low_open=False)  # capex per part, `25 kUSD`; 0 for parts bundled in another's price
BANDWIDTH = positive(u.BANDWIDTH, marker="bidir")
FLOPS = positive(u.FLOPS, marker="sparse")
CLOCK = positive(u.RATE)
TEXT, FLAG = Text(), Flag()

PRECISIONS = formats.FAMILIES  # the keys of `peak`, `ops_per_clock` and `efficiency`
PROTOCOLS = Choice(("infiniband", "ethernet", "nvlink", "pcie", "xgmi", "ici"), "a protocol")
PRECISION = Choice(formats.NAMES, "a precision")  # a family or a named format (compiler/formats.py)

TOPOLOGY = Construct({
    "switched": Constructor({}),
    "full_mesh": Constructor({}),
    "fat_tree": Constructor({"tiers": TIERS, "radix": COUNT, "oversubscription": Qty(u.NONE, low=Fraction(1), low_open=False)},
                            ("tiers", "radix")),
    "rail_optimized": Constructor({"tiers": TIERS, "radix": COUNT, "oversubscription": Qty(u.NONE, low=Fraction(1), low_open=False)},
                                  ("tiers", "radix")),
    "torus": Constructor({"dims": ListOf(COUNT, least=1), "wraparound": FLAG}, ("dims",)),
})

# ----------------------------------------------------------------- parts

PART_COMMON = {"vendor": TEXT, "source": TEXT, "power": POWER0, "price": PRICE}

# Reliability: mean time between failures of one part (a GPU, a node's host parts, a
# switch), mean time to repair a node; defaults in solver/schedule/goodput.py, cited there.
RELIABILITY = {"mtbf": TIME}

CHIP = Block(
    fields={"vendor": TEXT, "source": TEXT, "clock": CLOCK, "base_clock": CLOCK, "cores": COUNT, "l2": BYTES,
            "l2_bandwidth": BANDWIDTH, "process": TEXT, "price": PRICE, **RELIABILITY,
            "formats": ListOf(Choice(formats.NAMES, "a number format"), least=1)},
    blocks={
        "hbm": Block({"capacity": BYTES, "bandwidth": BANDWIDTH, "stacks": COUNT, "stack_capacity": BYTES,
                      "stack_bandwidth": BANDWIDTH, "type": TEXT, "nominal": BYTES,
                      "packaging": Choice(hbm_packaging.PACKAGINGS, "an HBM packaging")},
                     required=("capacity", "bandwidth"),
                     alternatives={"capacity": (("stacks", "stack_capacity"),),
                                   "bandwidth": (("stacks", "stack_bandwidth"),)},
                     doc="capacity (what the driver exposes: plans fit in it) and bandwidth, stated or derived from "
                         "stacks x stack_capacity / stack_bandwidth; `nominal`, the data sheet's figure as it writes it "
                         "(`80 GB`, `95 GiB`), names the part in every output (default: the capacity); `packaging`: "
                         "interposer (2.5D beside the die, the default) or stacked (3D on the logic die: less energy "
                         "per bit and a shorter round trip, compiler/hbm.py; needs `type`); none for a GDDR `type`, board memory"),
        "peak": Block({p: FLOPS for p in PRECISIONS}, doc="dense peak FLOPS per precision"),
        "ops_per_clock": Block({p: AMOUNT for p in PRECISIONS},
                               doc="dense operations (2 per multiply-add) per core per clock, per precision"),
        "systolic": Block({"rows": COUNT, "cols": COUNT, "arrays": COUNT, "precision": Choice(PRECISIONS)},
                          required=("rows", "cols"),
                          doc="multiply-add array per core: 2 x rows x cols x arrays operations per clock"),
        "power": Block({"tdp": POWER, "idle": POWER0, "min_cap": POWER, "cap": POWER, "min_clock": CLOCK,
                        "full_clock": POWER, "dvfs_exponent": Qty(u.NONE, low=Fraction(1), low_open=False)},
                       required=("tdp",),
                       doc="tdp (the sustained limit the chip enforces itself), idle, the operator's power `cap` and "
                           "the DVFS curve: `full_clock`, the draw at full load at the clock its peaks and efficiency "
                           "are quoted at (default: tdp), dynamic power ~ clock^exponent down to `min_clock`"),
        "efficiency": Block({**{p: SHARE for p in PRECISIONS}, "hbm": SHARE, "attention": SHARE},
                            doc="sustained GEMM throughput per precision, fused attention (of the bf16 peak) "
                                "and HBM bandwidth, as shares of peak"),
    },
    required=("hbm", "peak", "power"),
    alternatives={"peak": (("cores", "clock", "ops_per_clock"), ("cores", "clock", "systolic"))},
)
CPU = Block({**PART_COMMON, "cores": COUNT, "clock": CLOCK, "memory": BYTES},
            doc="`cores` set the host's rates (data loading, checkpoint copies, kernel launches and network "
                "proxies: per core, model/train/dpu.py); `clock` is the data sheet's, descriptive as `vendor` "
                "and `source` (no host rate here follows the clock); `memory`: the node's `dram` default")
# A card's `bandwidth` is its line rate over all its ports, as NVIDIA quotes a card (ConnectX-7
# and BlueField-3: 1 x 400 or 2 x 200 Gb/s); `ports` (default 1) split it evenly. Each port
# of a scale-out card is one link into the fabric, a rail (compiler/lower.py `ports_per_node`).
_CARD_DOC = ("`bandwidth` is the card's line rate per direction over all its `ports` (default 1), which "
             "split it evenly: `bandwidth = 400 Gb/s  ports = 2` is 2 x 200 Gb/s. Each port of a scale-out "
             "card is one link (a rail) into the fabric")
NIC = Block({**PART_COMMON, "bandwidth": BANDWIDTH, "ports": COUNT, "protocol": PROTOCOLS}, required=("bandwidth",),
            doc=_CARD_DOC)
# What a DPU takes over from the host (model/train/dpu.py, model/train/host.py): `network`, the
# transport and collective progress of the scale-out traffic (the DPU is the node's
# scale-out NIC); `storage`, checkpoint writes; `input`, loading the training data.
DPU_OFFLOADS = ("network", "storage", "input")
DPU = Block({**PART_COMMON, "bandwidth": BANDWIDTH, "ports": COUNT, "cores": COUNT, "protocol": PROTOCOLS,
             "offload": ListOf(Choice(DPU_OFFLOADS, "a DPU offload"))},
            required=("bandwidth",),
            doc="`offload` lists what it takes over from the host: network (its ports are then scale-out links, "
                "as a NIC's), storage, input (default: storage and input, which use the card's whole `bandwidth`); "
                + _CARD_DOC)
SWITCH = Block({**PART_COMMON, **RELIABILITY, "radix": COUNT, "port_speed": BANDWIDTH, "capacity": BANDWIDTH,
                "latency": Qty(u.TIME, low_open=False), "protocol": PROTOCOLS, "in_network_reduction": FLAG,
                "chips": COUNT, "reduction": positive(u.FLOPS)},
               required=("radix", "port_speed"),
               doc="`capacity`: switching capacity per direction (write a vendor's sum of both directions with "
                   "`bidir`), checked against radix x port_speed and against the radix x bandwidth of each fat tree "
                   "built from it; `in_network_reduction`: the switch can reduce (SHARP, NVLS), the default of its "
                   "fabrics; `chips`: switch ASICs in the part (a switch tray's, default 1); `reduction`: the FP32 "
                   "adds per second each chip's reduction engines perform (NVLS, SHARP), which bound an in-network "
                   "reduction (model/network/nccl.py)")

# ----------------------------------------------------------------- systems

NODE = Block(
    {"vendor": TEXT, "source": TEXT, "gpus": RepeatOf(("chip",)), "cpus": RepeatOf(("cpu",)), "dram": BYTES,
     "nvme": BYTES, "nvme_bandwidth": BANDWIDTH, "nics": RepeatOf(("nic",)), "dpus": RepeatOf(("dpu",), least=0), "scaleup": PartRef(("fabric",)),
     "switches": RepeatOf(("switch",)),
     "overhead": POWER0, "price": PRICE, **RELIABILITY, "mttr": TIME, "storage": BANDWIDTH, "host_link": BANDWIDTH,
     "step_overhead": TIME0},
    required=("gpus",),
    doc="`dram`: host memory (default: its CPUs' `memory`); `mtbf` counts the host's own failures (CPU, memory, NIC, SSD, power), not its GPUs'; `mttr` is the "
        "time to repair one; `storage` the checkpoint write bandwidth of one node's host path (its storage DPUs add their line rate; "
        "default: its `nvme_bandwidth`, else Llama 3's ~1 GB/s per host); `host_link` the bandwidth "
        "between one GPU and host memory per direction (PCIe, NVLink-C2C), what activation offload uses; "
        "`switches` the scale-up switches on its board (NVSwitch chips), counted for in-network reduction "
        "(their power is in `overhead`); `step_overhead` the hosts' fixed work between two training steps "
        "(loss and grad-norm reads, the optimizer's and data loader's Python, the next step's first launches), "
        "added to every training and RL training step (default 0 s; `gclc calibrate` fits it from runs of different "
        "step lengths; a serving engine's host time is its `host_step`)",
)
SUPERNODE = Block(
    {"vendor": TEXT, "source": TEXT, "nodes": RepeatOf(("node",)), "scaleup": PartRef(("fabric",)),
     "switches": RepeatOf(("switch",)), "overhead": POWER0, "price": PRICE},
    required=("nodes", "scaleup"),
)
FABRIC = Block(
    {"kind": PROTOCOLS, "topology": TOPOLOGY, "bandwidth": BANDWIDTH, "rails": COUNT,
     "latency": Qty(u.TIME, low_open=False), "switch": PartRef(("switch",)), "in_network_reduction": FLAG,
     "efficiency": SHARE, "link_power": POWER0, "source": TEXT,
     "transceiver_price": PRICE, "fiber_price": PRICE, "copper_price": PRICE,
     "routing": Choice(("adaptive", "ecmp"), "a routing"), "flows": COUNT,
     "congestion": Choice(("ecn", "pfc"), "a congestion mode")},
    required=("kind", "topology", "bandwidth"),
    doc="`bandwidth`: per port (a rail) of a scale-out fabric, per GPU of a scale-up one; "
        "`in_network_reduction`: collectives reduce in the switches (SHARP, NVLS); absent, as its `switch` says "
        "(else false); an error on a switch that says it cannot, or on a torus or full mesh; "
        "`routing`: how flows spread over a fat tree's uplinks, `adaptive` (adaptive routing, packet spraying, "
        "InfiniBand's fat-tree routes: no collisions) or `ecmp` (each flow hashed onto one uplink: collisions); "
        "default `ecmp` on Ethernet, `adaptive` otherwise; `flows`: flows per port that ECMP hashes "
        "(queue pairs per connection, default 1 as NCCL's NCCL_IB_QPS_PER_CONNECTION), only with `ecmp`; "
        "`congestion`: how an Ethernet (RoCE) fabric meets congestion, `ecn` (ECN marks and DCQCN rate control, "
        "the default) or `pfc` (Priority Flow Control alone: a paused port holds every flow on it)",
)
_UNITS = RepeatOf(("node", "supernode"))
RATE0 = Qty(u.NONE, low=Fraction(0), low_open=False, high=Fraction(1))  # 0 <= x <= 1
ECONOMICS = Block(
    {"years": COUNT, "energy_price": positive(u.ENERGY_PRICE), "discount_rate": RATE0, "maintenance": RATE0,
     "utilization": SHARE, "rack_power": POWER, "rack_price": PRICE, "source": TEXT},
    required=("years", "energy_price"),
    doc="cost of ownership: lifetime, energy price, yearly discount rate and maintenance (share of capex), "
        "share of hours at load, rack power limit and price",
)
# Real host names of the nodes, in the order `gclc export` names them: Slurm host lists
# such as ["dgx[001-064]", "spare01"]; checked to name every node once.
HOSTNAMES = ListOf(TEXT)
# What `gclc calibrate` writes of a cluster calibrated on its operator's runs: how many
# end-to-end runs the band comes from, its 80 % bounds on measured / predicted throughput,
# and what those runs covered (precisions, their largest GPU count, MoE), against which a
# plan's reasons for a wider band are judged (model/calibration.py `own`).
CALIBRATION = Block(
    {"runs": COUNT, "low": SHARE, "high": Qty(u.NONE, low=Fraction(1), low_open=False, high=Fraction(100)),
     "precisions": ListOf(Choice(PRECISIONS, "a precision"), least=1), "gpus": COUNT, "moe": FLAG, "source": TEXT,
     "beyond": Qty(u.NONE, low=Fraction(1), low_open=False, high=Fraction(100)),
     "serve_runs": COUNT, "serve_low": SHARE,
     "serve_high": Qty(u.NONE, low=Fraction(1), low_open=False, high=Fraction(100))},
    # a training band (runs, low, high), a serving band (serve_runs, serve_low, serve_high), or both: each whole
    required=("runs", "low", "high"),
    alternatives={name: (("serve_runs", "serve_low", "serve_high"),) for name in ("runs", "low", "high")},
    doc="the error band of plans on this cluster, from `gclc calibrate`: `runs` end-to-end training runs of the "
        "operator's, `low` and `high` the 80 % bounds on measured / predicted throughput; `precisions`, `gpus` (the "
        "largest run) and `moe` say what the runs covered (a plan beyond them gets a wider band; `beyond` the "
        "factor for more GPUs than `gpus`, read from the runs' largest predicted by a fit of the smaller); `serve_runs` "
        "serving benchmarks, `serve_low` and `serve_high` the 80 % bounds on measured / predicted throughput, TTFT "
        "and TPOT of serve plans")
CLUSTER = Block(
    {"units": _UNITS, "scaleout": PartRef(("fabric",)), "source": TEXT, "hostnames": HOSTNAMES},
    blocks={"power": Block({"budget": POWER, "pue": Qty(u.NONE, low=Fraction(1), low_open=False), "overhead": POWER0}),
            "economics": ECONOMICS, "calibration": CALIBRATION},
    # a partition may hold no units (swept to zero): it drops out of the cluster and the jobs on it
    labelled={"partition": Block({"units": RepeatOf(("node", "supernode"), least=0), "scaleout": PartRef(("fabric",)),
                                  "hostnames": HOSTNAMES},
                                 blocks={"power": Block({"budget": POWER},
                                                        doc="the partition's own facility budget: a job on it "
                                                            "plans under the lower of it and the cluster's")},
                                 required=("units",))},
)

# ----------------------------------------------------------------- work

# Routed experts a model may have: the most published, PEER's 1024^2 (He, "Mixture of A Million
# Experts", arXiv:2407.04969), so that the serving cost model's per-expert sums stay bounded
# (model/serve/moe.py `_expected_max` walks a GPU's experts).
MAX_ROUTED = 2**20
ROUTED = Qty(u.NONE, integer=True, low=Fraction(1), low_open=False, high=Fraction(MAX_ROUTED),
             why=f"{MAX_ROUTED:,} routed experts is the most any published model has (PEER, He 2024, "
                 "arXiv:2407.04969); help: state fewer, wider experts (`ffn`)")
MODEL = Block(
    {"arch": Choice(("dense", "moe"), "an architecture"), "layers": COUNT, "hidden": COUNT, "heads": COUNT, "kv_heads": COUNT,
     "head_dim": COUNT, "ffn": COUNT, "vocab": COUNT, "seq": COUNT, "params": AMOUNT,
     "mlp": Choice(("swiglu", "gelu", "relu"), "an MLP activation"), "tied_embeddings": FLAG, "source": TEXT,
     "mtp": COUNT0, "window": COUNT, "global_every": COUNT,
     "block": Choice(("sequential", "parallel"), "a block layout"),
     "position_embedding": Choice(("rope", "learned", "none"), "a position embedding"),
     "normalization": Choice(("rmsnorm", "layernorm"), "a normalization")},
    blocks={"experts": Block({"routed": ROUTED, "shared": COUNT0, "top_k": COUNT, "ffn": COUNT,
                              "dense_layers": COUNT0, "capacity_factor": Qty(u.NONE, high=Fraction(64)),
                              "bias": FLAG, "clamp": Qty(u.NONE, high=Fraction(10**6)),
                              "groups": COUNT, "group_top_k": COUNT},
                             required=("routed", "top_k"),
                             doc="routed and shared experts; `capacity_factor = c` drops the tokens beyond c x an "
                                 "expert's mean share and pads the rest to it (absent: dropless); `bias`: the "
                                 "experts' projections carry biases; `clamp = c`: the gated activation clamps its "
                                 "inputs to c (GPT-OSS: both); `groups = g  group_top_k = t`: group-limited "
                                 "routing, a token's top_k experts chosen inside t of g groups of contiguous "
                                 "experts (DeepSeek-V3: 8 and 4)"),
            "mla": Block({"kv_rank": COUNT, "rope_dim": COUNT0, "q_rank": COUNT0}, required=("kv_rank",),
                         doc="multi-head latent attention: the cache holds one latent of kv_rank + rope_dim per "
                             "token; queries through a q_rank latent (0: a full projection); head_dim is the "
                             "per-head key (without rope_dim) and value width")},
    required=("arch", "layers", "hidden", "heads", "ffn", "vocab", "seq"),
    doc="`window`: sliding-window (local) attention over that many keys, in every layer or, with "
        "`global_every = k`, all but every k-th (Gemma 2, GPT-OSS); `block = parallel`: attention and MLP "
        "read one normed input and their outputs are summed (GPT-J, PaLM); `position_embedding`: rotary (rope, "
        "no weights; every layer rotates its queries and keys), a learned table of seq x hidden weights added once "
        "at the embedding (learned) or none; `normalization`: rmsnorm (a "
        "scale per norm) or layernorm (a scale and a bias); both unstated: no position weights and rmsnorm's, "
        "and exports that must name them ask for them",
)
OBJECTIVES = {"maximize": Choice(("throughput", "mfu", "goodput"), "an objective"),
              "minimize": Choice(("time", "energy", "cost"), "an objective")}
_JOB_LIMITS = {"power": POWER, "memory": Qty(u.BYTES), "time": TIME, "energy": positive(u.ENERGY),
               "gpus": COUNT, "mfu": SHARE}
# Activation checkpointing variants (model/train/recompute.py) and offload (model/train/offload.py).
LOSSES = ("eager", "fused", "compiled")   # the cross entropy's implementation (model/train/peak.py)
GRAD_REDUCE = ("fp32", "bf16")   # the gradient buffer and data-parallel reduction (model/train/optimizer.py `grad_bytes`)
# MoE token dispatchers (Megatron-Core moe_token_dispatcher_type, flex's moe_flex_dispatcher_backend; model/train/moe.py).
DISPATCHERS = ("alltoall", "allgather", "deepep", "hybridep")
RECOMPUTE_MODULES = ("core_attention", "norm", "mlp", "moe_act", "op_level")   # op_level: torchtitan's op SAC, listed alone
# Choices the planner searches only where a job asks (solver/train/enumerate.py `variants`).
SEARCHABLE = ("shard", "recompute_modules", "recompute_every", "offload")
PARALLELISM = Block({"tp": COUNT, "pp": COUNT, "dp": COUNT, "ep": COUNT, "cp": COUNT, "vp": COUNT,
                     "microbatch": COUNT, "microbatches": COUNT, "recompute": Choice(("none", "selective", "full"), "a recomputation mode"),
                     "recompute_modules": ListOf(Choice(RECOMPUTE_MODULES, "a recomputed module"), least=1),
                     "recompute_every": COUNT, "offload": SHARE,
                     "zero": Qty(u.NONE, integer=True, low=Fraction(0), low_open=False, high=Fraction(3)),
                     "shard": COUNT,
                     "sp": FLAG, "schedule": Choice(("one_f_one_b", "interleaved", "gpipe"), "a pipeline schedule"),
                     "cp_balance": FLAG, "ep_overlap": FLAG, "tp_overlap": FLAG, "dp_overlap": FLAG,
                     "dispatcher": Choice(DISPATCHERS, "an MoE token dispatcher"),
                     "loss": Choice(LOSSES, "a loss implementation"),
                     "grad_reduce": Choice(GRAD_REDUCE, "a gradient buffer format"), "dropout": FLAG,
                     "search": ListOf(Choice(SEARCHABLE, "a choice the planner can search"), least=1)},
                    doc="`shard`: hybrid sharding, the ZeRO state sharded over groups of `shard` data-parallel ranks and "
                        "replicated across groups; `recompute_modules` (with `recompute = selective`: any of "
                        "core_attention, norm, mlp, moe_act (the routed experts' activation function), or `op_level` alone, torchtitan's op-level policy that saves every "
                        "other matmul's output and the attention kernel's and recomputes the rest) and "
                        "`recompute_every` (every k-th layer) select what is recomputed; `offload`: the share of each "
                        "stage's layers whose activations are kept in host memory; `cp_balance = false` gives each "
                        "context-parallel rank one contiguous chunk (causal imbalance) instead of the balanced pair "
                        "of chunks; `ep_overlap = true` overlaps one micro-batch's MoE all-to-all with another's compute; "
                        "`dispatcher`: how an MoE layer exchanges its routed tokens (alltoall: NCCL all-to-all of every "
                        "routed copy; allgather: every rank gathers the group's tokens; deepep, hybridep: Megatron-Core's "
                        "flex dispatcher, one copy per destination GPU; default alltoall; see docs/moe_dispatcher.md); "
                        "`tp_overlap` and `dp_overlap` say whether the tensor-parallel collectives run under the GEMMs "
                        "(Transformer Engine's userbuffers, MegaScale's fused kernels) and the data-parallel gradient "
                        "reduction and parameter gathers under the backward and forward (default: the software stack's); "
                        "`loss`: the cross entropy's implementation, which sets the logits' peak memory (eager: "
                        "PyTorch's on fp32 logits, 12 bytes a logit; fused: Megatron's vocabulary-parallel loss, 6; "
                        "compiled: torch.compile's fused loss, 4; default: the software stack's); "
                        "`grad_reduce`: the format the gradients are accumulated in and data parallelism reduces "
                        "(fp32: Megatron-LM's default with bf16, --accumulate-allreduce-grads-in-fp32; bf16: the "
                        "parameters' 16-bit dtype, --grad-reduce-in-bf16, Megatron-Core's DDP default; default: the "
                        "software stack's; bf16 `main_grads` keep it 16-bit); `dropout`: attention and hidden dropout in "
                        "training, whose masks each layer keeps for backward (Megatron-LM's default 0.1; default: the "
                        "software stack's); "
                        "`search`: those of `shard`, `recompute_modules`, `recompute_every` and `offload` the planner "
                        "also searches (each multiplies the space)")
# A job on a shared cluster: when it arrives, how important it is, how much work (one of
# tokens, steps, duration), how many GPUs it may take and where, all-or-nothing or not, and
# how long a run may last before the scheduler ends it (Slurm's --time).
SHARED = {"priority": Priority(), "submit": TIME0, "steps": COUNT, "duration": TIME, "min_gpus": COUNT,
          "prefer": Targets(), "gang": FLAG, "time_limit": TIME, "tenant": PartRef(("tenant",)), "user": TEXT}
CHECKPOINT = Block({"size": BYTES, "bandwidth": BANDWIDTH, "restart": TIME0, "interval": TIME, "keep": COUNT},
                   doc="checkpoint size (default: weights and Adam state), write bandwidth of the whole job "
                       "(default: each node's `storage` plus its storage DPUs), restart time (default: a fixed start "
                       "plus reading it back), the interval (default: the job's `checkpoint_every`, else "
                       "Young/Daly from the write time and the job's failure rate), and `keep`: the checkpoints "
                       "retained where they are written (default 1); on nodes that write to their local NVMe "
                       "(`nvme_bandwidth` without `storage`) their shares must fit in its `nvme`")
TRAIN = Block(
    {"model": PartRef(("model",)), "on": Targets(), "tokens": AMOUNT, "batch": COUNT, "seq": COUNT,
     "sample_bytes": BYTES, "checkpoint_every": TIME,
     "precision": PRECISION, "gpus": COUNT, "software": Choice(SOFTWARE_STACKS, "a software stack"),
     "optimizer_state": Choice(OPTIMIZER_STATES, "the format Adam's two moments are stored in"),
     "second_moment": Choice(OPTIMIZER_STATES, "the format Adam's second moment is stored in"),
     "master_weights": Choice(MASTER_WEIGHTS, "the copy of the weights Adam updates (`none`: the weights "
                                              "themselves)"),
     "main_grads": Choice(MAIN_GRADS, "the format of the gradient buffer Adam reads and data parallelism reduces"),
     "precision_aware_optimizer": FLAG,
     "fp8_params": FLAG,
     **OBJECTIVES, **SHARED},
    blocks={"parallelism": PARALLELISM, "subject to": Block(constraints=_JOB_LIMITS), "checkpoint": CHECKPOINT},
    required=("model", "on", "batch"),
    doc="`precision`: the GEMMs' number format; `optimizer_state`: the format Adam's two moments are stored "
        "in (default fp32; Megatron's --exp-avg-dtype / --exp-avg-sq-dtype); `second_moment`: the second moment's "
        "where it differs (--exp-avg-sq-dtype; default: `optimizer_state`'s); `master_weights`: the copy of the "
        "weights Adam updates (default fp32, which Megatron-Core and NeMo keep as 16-bit remainders of the bf16 "
        "weights once the moments are narrower; `none`: no copy, the weights themselves, as NeMo 1.0's "
        "distributed Adam with a bf16 state). Both change the optimizer's memory, its step's HBM traffic and "
        "the checkpoint. `main_grads`: the gradients Adam reads (Megatron's --main-grads-dtype; default fp32, "
        "with the stack's gradient reduction; bf16: the gradient buffer, the data-parallel reduction and "
        "Adam's read all in bf16). `precision_aware_optimizer`: Megatron-Core's precision-aware optimizer "
        "(--use-precision-aware-optimizer, Transformer Engine's FusedAdam; default: true when any of the three "
        "is narrower than fp32, which it needs); with fp32 dtypes it keeps the fp32 master as the 16 bits the bf16 "
        "weights lack (10 bytes a parameter, not 12); megatron, megatron_core and nemo stacks only, with the "
        "distributed optimizer or FSDP (ZeRO 1-3). `fp8_params = true` (an fp8 `precision`): the weights are kept and gathered in "
        "the GEMMs' fp8 format only, no bf16 copy (Megatron's --fp8-param-gather, NeMo's fp8_params)",
)
# Request lengths: a fixed count or a distribution (tokens; sampled with a fixed seed).
LENGTHS = CountOr(Construct({
    "lognormal": Constructor({"mean": AMOUNT, "sigma": AMOUNT}, ("mean", "sigma")),
    "uniform": Constructor({"low": COUNT, "high": COUNT}, ("low", "high")),
    "exponential": Constructor({"mean": AMOUNT}, ("mean",)),
}, what="length distribution"))
# Requests a plan simulates: at most what a trace may hold (compiler/serve_trace.py), so
# that each of a plan's simulations stays bounded.
REQUESTS = Qty(u.NONE, integer=True, low=Fraction(1), low_open=False, high=Fraction(MAX_ROWS))
PERCENTILES = ("mean", "p50", "p90", "p95", "p99")
_SLO = {f"{metric}{suffix}": TIME for metric in ("ttft", "tpot", "e2e")
        for suffix in ("", *(f".{p}" for p in PERCENTILES))}
ENGINE_NAME = Choice(SERVING_ENGINES, "a serving engine")
ENGINE = Block(
    {"profile": ENGINE_NAME,
     "mode": Choice(("auto", "aggregated", "disaggregated")), "max_batch": COUNT, "chunk": COUNT,
     "kv_precision": PRECISION, "kv_block": COUNT, "prefix_share": Qty(u.NONE, low_open=False, high=Fraction(1)),
     "kv_reads": Choice(("grouped", "per_query_head")), "scheduler_steps": COUNT,
     "mixed": FLAG, "graph_batch": COUNT0, "host_step": TIME0, "host_per_sequence": TIME0, "overlap": FLAG,
     "eager_op": TIME0, "frontend": TIME0, "preemption": Choice(("recompute", "swap", "reserve"), "a preemption policy"),
     "moe_path": Choice(("grouped", "tp_sharded", "per_expert", "ep_with_dp"), "an MoE kernel path"),
     "dispatcher": Choice(("alltoall", "deepep", "allgather"), "an expert dispatcher")},
    blocks={"speculative": Block({"tokens": COUNT, "acceptance": SHARE}, required=("tokens", "acceptance"),
                                 doc="draft tokens per step and the declared acceptance rate of each")},
    doc="the serving engine: `profile` names one by release (default vllm_v1), whose knobs the other fields "
        "override: aggregated or disaggregated prefill/decode, `max_batch` (running sequences), `chunk` "
        "(tokens per iteration), KV cache pages; `scheduler_steps`: decode steps per scheduling round (vLLM's "
        "multi-step scheduling: prompts join only between rounds); `mixed`: prompt chunks ride in decode "
        "iterations (false: prompts run first, alone); `graph_batch`: the largest decode batch run as a CUDA "
        "graph; `host_step`, `host_per_sequence`: the host's time per iteration and per decoding sequence; "
        "`overlap`: the host prepares the next iteration while the GPU runs; `eager_op`: host time per kernel "
        "issued outside a graph; `frontend`: time a request spends outside the engine before its first token; "
        "`preemption`: recompute, swap (to host memory) or reserve (admit only what fits whole); `moe_path`: "
        "grouped GEMMs, TP-sharded experts, a loop over experts, or ep_with_dp (TP-sharded experts in one attention "
        "group, grouped over several: vLLM's); `dispatcher`: how the expert all-to-all sends a token, a copy per "
        "routed expert (alltoall, the default but on vllm_v1), once per GPU holding any of its experts (deepep: "
        "DeepEP's normal kernels, once per node across nodes, which vLLM and SGLang run without CUDA graphs), or "
        "every attention group's tokens all-gathered on every GPU and the outputs reduce-scattered (allgather: "
        "vLLM's default backend, vllm_v1's)")
# A serve plan serves its demand with the fewest GPUs (or, without a demand, the most
# tokens) — `maximize = throughput` — or with the least power — `minimize = energy`.
SERVE = Block(
    {"model": PartRef(("model",)), "on": Targets(), "prompt": LENGTHS, "output": LENGTHS, "batch": COUNT,
     "rate": positive(u.RATE), "trace": TEXT, "requests": REQUESTS,
     "precision": PRECISION, "gpus": COUNT, "engine": ENGINE_NAME, "router": Choice(SERVE_ROUTERS, "a router"),
     "priority": Priority(), "time_limit": TIME,
     "tenant": PartRef(("tenant",)), "daily_load": ListOf(SHARE, least=1),
     "maximize": Choice(("throughput",)), "minimize": Choice(("energy",))},
    blocks={"parallelism": Block({"tp": COUNT, "pp": COUNT, "ep": COUNT, "replicas": COUNT},
                                 doc="a replica's layout: tp inside the scale-up domain, ep and pp across nodes; "
                                     "`replicas`: how many of them serve (one aggregated pool)"),
            "slo": Block(constraints=_SLO), "engine": ENGINE,
            "checkpoint": Block({"wide_share": SHARE, "dense_wide_share": SHARE},
                                doc="a mixed-precision checkpoint of a `precision` narrower than bf16: `wide_share`, the "
                                    "share of all its weights kept at bf16 (ModelOpt AutoQuantize's effective bits: 8.75 "
                                    "over fp8 is 9.4 %); `dense_wide_share`, the share of the non-expert weights "
                                    "(attention, dense MLPs, shared experts, embeddings) kept at bf16 where the routed "
                                    "experts are all narrow (an MoE model's). Each weight's bytes and GEMM rate follow "
                                    "its own format"),
            "subject to": Block(constraints={k: _JOB_LIMITS[k] for k in ("power", "memory", "gpus")})},
    required=("model", "on"),
    doc="`gpus`: the GPUs the plan uses, exactly (`subject to { gpus <= N }` bounds them instead); `engine = "
        "vllm_v1` names the serving engine (or `engine { profile = vllm_v1 ... }` with overrides); `router`: "
        "how requests pick a replica (least_requests, round_robin, random, power_of_two); "
        "`daily_load`: the demand over a day as shares of `rate`, evenly spaced from midnight (24 values: "
        "hourly); the plan is for `rate`, and each stretch of the day runs the replicas its share needs "
        "(solver/serve/daily.py): `gclc plan` reports the GPUs, power and energy over the day, `gclc schedule` "
        "holds those GPUs hour by hour beside the cluster's other jobs")

# RL post-training (solver/rl): a policy trained on samples it generates, scored by optional
# reference / reward models, with a critic for PPO; a generation pool (an inference engine) and
# a training pool, on separate GPUs or on the same ones in turn.
RL_ENGINE = Block({**{k: v for k, v in ENGINE.fields.items() if k != "mode"}, "memory": SHARE},
                  blocks=ENGINE.blocks,
                  doc="the generation pool's engine (as a serve job's, without prefill/decode disaggregation); "
                      "`prefix_share` defaults to (samples - 1) / samples: a prompt's samples share its cache; "
                      "`memory`: the share of each GPU's HBM the engine may fill with its weights and cache "
                      "(vLLM's gpu_memory_utilization; default: the job's memory bound)")
RL_GENERATE = Block(
    {"on": Targets(), "gpus": COUNT, "precision": PRECISION, "engine": ENGINE_NAME},
    blocks={"parallelism": Block({"tp": COUNT, "pp": COUNT, "ep": COUNT},
                                 doc="a generation replica's layout: tp inside the scale-up domain, ep and pp across nodes"),
            "engine": RL_ENGINE},
    doc="the generation pool: the partition it runs `on` (default: the planner's choice), its `gpus`, the "
        "precision the engine serves the policy in, a replica's layout and the engine (`engine = vllm_v1` "
        "names its profile, as a serve job's)")
RL_TRAIN = Block(
    {"on": Targets(), "gpus": COUNT, "precision": PRECISION, "software": Choice(SOFTWARE_STACKS, "a software stack"),
     "optimizer_state": TRAIN.fields["optimizer_state"], "second_moment": TRAIN.fields["second_moment"],
     "master_weights": TRAIN.fields["master_weights"],
     "main_grads": TRAIN.fields["main_grads"],
     "precision_aware_optimizer": TRAIN.fields["precision_aware_optimizer"]},
    blocks={"parallelism": PARALLELISM},
    doc="the training pool: the partition it runs `on`, its `gpus`, the training stack and its pins (as a "
        "train job's; `precision_aware_optimizer` defaults to the RL stack's: NeMo-RL runs it); it also scores the samples (reference, reward and critic forwards, the policy's "
        "old log-probabilities)")
RL = Block(
    {"model": PartRef(("model",)), "reference": PartRef(("model",)), "reward": PartRef(("model",)),
     "critic": PartRef(("model",)), "on": Targets(), "algorithm": Choice(("grpo", "ppo"), "an RL algorithm"),
     "prompts": COUNT, "samples": COUNT, "prompt": LENGTHS, "response": LENGTHS, "max_response": COUNT,
     "epochs": COUNT, "minibatches": COUNT, "old_logprobs": FLAG,
     "placement": Choice(("auto", "colocated", "disaggregated"), "a placement of the pools"),
     "staleness": COUNT0, "steps": COUNT, "stack": Choice(RL_STACKS, "an RL stack release"),
     "maximize": Choice(("throughput",)), "minimize": Choice(("time", "cost", "energy")),
     "priority": Priority(), "submit": TIME0, "time_limit": TIME, "tenant": PartRef(("tenant",))},
    blocks={"generate": RL_GENERATE, "train": RL_TRAIN,
            "subject to": Block(constraints={k: _JOB_LIMITS[k] for k in ("power", "memory", "gpus")})},
    required=("model", "on", "prompts", "prompt", "response"),
    doc="`model`: the policy; `reference` (the KL term's frozen policy), `reward` (a reward model; absent: a "
        "rule or verifier, free) and `critic` (PPO's value model, trained beside the policy) are optional; "
        "`prompts` per step, `samples` per prompt (GRPO's group), `prompt` and `response` lengths (tokens: a "
        "count or a distribution, responses cut at `max_response`), `epochs` over the step's samples in "
        "`minibatches` optimizer steps each; `old_logprobs = false`: the stack skips the policy's forward pass for its "
        "old log-probabilities, the importance ratio held at 1 (NeMo-RL's `force_on_policy_ratio`; only with one "
        "optimizer step a step); `placement`: the pools on separate GPUs (disaggregated), on the "
        "same GPUs in turn (colocated) or the planner's choice (auto); `staleness`: the most steps a sample's "
        "policy may lag the trained one (0: synchronous; k >= 1 lets generation overlap training); `stack`: the RL "
        "stack's release (nemo_rl: NeMo-RL v0.5 and later, the default; nemo_rl_0_4: v0.4 and earlier, whose "
        "training pool moves Adam's state to host memory and back every step even apart from its engines)",
)

# ----------------------------------------------------------------- design space

# What `gclc sweep` can put on a Pareto front (solver/sweep/pareto.py maps each to a column).
SWEEP_OBJECTIVES = ("time_to_train", "tco", "capex", "cost_per_token", "cost_to_train", "power", "energy",
                    "step_time", "gpus", "throughput", "mfu", "goodput")
_NUMBER = Qty(u.NONE, low=None)
RANGE = Construct({"range": Constructor({"low": _NUMBER, "high": _NUMBER, "step": AMOUNT,
                                         "times": Qty(u.NONE, low=Fraction(1))}, ("low", "high"))}, what="range")
SWEEP = Block({"pareto": ListOf(Choice(SWEEP_OBJECTIVES))}, free=Axis(),
              doc="the axes of `gclc sweep`: each other field is a param and the values it takes")

# A stream of jobs without a model: a trace's rows, inline or from a CSV file below the
# design (columns of public traces: submit, duration, gpus, gpu_type, priority).
TRACE_JOB = Block({"submit": TIME0, "duration": TIME, "gpus": COUNT, "type": TEXT, "priority": Priority(),
                   "time_limit": TIME, "tenant": PartRef(("tenant",)), "user": TEXT},
                  required=("duration", "gpus"))
WORKLOAD = Block(
    {"on": Targets(), "trace": TEXT, "priority": Priority(), "gang": FLAG, "source": TEXT, "time_limit": TIME,
     "tenant": PartRef(("tenant",)), "user": TEXT},
    blocks={"checkpoint": Block({"interval": TIME, "write": TIME0, "restart": TIME0},
                                required=("interval",),
                                doc="how the rows checkpoint (they have no model to derive it from); without "
                                    "it a failure or a preemption loses the whole run")},
    labelled={"job": TRACE_JOB},
    required=("on",),
    doc="`trace` is a CSV path relative to the design; `priority`, `gang` and `time_limit` apply to rows that "
        "do not set them (a row without a time limit runs as long as it takes, and backfill cannot plan "
        "around it)",
)

# A tenant of a shared cluster: a Slurm account (its fair-share `shares`) and a Kueue
# ClusterQueue (a nominal quota of GPUs per partition, a cohort whose queues lend each other
# unused quota, and how much it may borrow or lend).
PER_PARTITION = Block(free=COUNT0, doc="GPUs per partition of the tenant's cluster, such as `h100 = 64`")
TENANT = Block(
    {"on": Targets(), "cohort": TEXT, "shares": COUNT},
    blocks={"quota": PER_PARTITION, "borrowing_limit": PER_PARTITION, "lending_limit": PER_PARTITION},
    required=("on",),
    doc="`quota`: the GPUs per partition the tenant is guaranteed (Kueue's nominalQuota per flavor; default 0); "
        "`cohort`: tenants of one cohort lend each other what they do not use; `borrowing_limit` / "
        "`lending_limit`: at most this many GPUs per partition borrowed beyond the quota or lent out of it "
        "(default: no limit); `shares`: the fair-share weight (Slurm's fairshare, Kueue's fairSharing.weight; "
        "default 1)")
# A scheduler's settings, named for the policy they configure (`scheduler slurm { ... }`);
# each field is the real setting it stands for (solver/schedule/settings.py, with links).
_QOS = ("low", "normal", "high", "critical")   # the priority classes, each a QOS (compiler/trace.py)
SCHEDULER = Block(
    {"on": Targets(),
     # slurm.conf: SchedulerParameters, the multifactor priority and preemption
     "bf_interval": TIME, "bf_window": TIME, "bf_resolution": TIME, "bf_max_job_test": COUNT, "max_switch_wait": TIME0,
     "priority_max_age": TIME, "priority_decay_half_life": TIME, "priority_calc_period": TIME,
     "preempt_type": Choice(("none", "qos")), "preempt_mode": Choice(("requeue", "cancel")),
     # Kueue: the ClusterQueues' queueing strategy and preemption, fair sharing, waitForPodsReady, TAS
     "queueing": Choice(("strict_fifo", "best_effort_fifo")),
     "within_cluster_queue": Choice(("never", "lower_priority", "lower_or_newer_equal_priority")),
     "reclaim_within_cohort": Choice(("never", "lower_priority", "any")),
     "borrow_within_cohort": Choice(("never", "lower_priority")),
     "fair_sharing": FLAG, "wait_for_pods_ready": TIME, "topology": Choice(("required", "preferred")),
     # kube-scheduler: the NodeResourcesFit scoring strategy
     "scoring": Choice(("least_allocated", "most_allocated"))},
    blocks={"priority_weight": Block({k: COUNT0 for k in ("age", "fairshare", "job_size", "partition", "qos")},
                                     doc="slurm.conf PriorityWeightAge, ...Fairshare, ...JobSize, ...Partition, "
                                         "...QOS"),
            # QOS limits (https://slurm.schedmd.com/qos.html), per QOS: the priority classes
            "qos_grp_gpus": Block({k: COUNT0 for k in _QOS},
                                  doc="GrpTRES=gres/gpu=N per QOS: the GPUs all running jobs of that QOS may hold"),
            "qos_max_gpus_per_user": Block({k: COUNT0 for k in _QOS},
                                           doc="MaxTRESPerUser=gres/gpu=N per QOS: the GPUs one user's running "
                                               "jobs of that QOS may hold"),
            "qos_max_jobs_per_user": Block({k: COUNT0 for k in _QOS},
                                           doc="MaxJobsPerUser=N per QOS: the jobs of that QOS one user may run")},
    doc="the settings of the policy it is named for: `scheduler slurm`, `scheduler kueue` or `scheduler kube`; "
        "what is not stated takes the real scheduler's default")

KINDS: dict[str, Block] = {
    "chip": CHIP, "cpu": CPU, "nic": NIC, "dpu": DPU, "switch": SWITCH, "node": NODE,
    "supernode": SUPERNODE, "fabric": FABRIC, "cluster": CLUSTER, "model": MODEL,
    "train": TRAIN, "serve": SERVE, "sweep": SWEEP, "workload": WORKLOAD, "tenant": TENANT,
    "scheduler": SCHEDULER, "rl": RL,
}
