"""The chip's derived numbers for `gclc explain`, each with its formula: peaks from the
microarchitecture, HBM from its stacks, the clock and power under a cap (model/dvfs.py),
the L2 tile the GEMM model assumes (model/cache.py) and each torus axis's links."""

from __future__ import annotations

from ..compiler import formats
from ..compiler.chip import TOLERANCE
from ..compiler.ir import Accelerator, ClusterGraph
from ..compiler.metrics import Metric, _q
from ..dsl.numbers import binary_bytes, memory
from . import cache, dvfs
from .train import dpu


def chip_metrics(graph: ClusterGraph) -> tuple[Metric, ...]:
    seen: list[str] = []
    out: list[Metric] = []
    for p in graph.partitions:
        chip = p.node.accelerator
        if chip.name not in seen:
            seen.append(chip.name)
            out += _peaks(chip) + _formats(chip) + _hbm(chip) + _clock(chip) + _cache(chip)
    return tuple(out) + _torus(graph) + _hosts(graph)


def _hosts(graph: ClusterGraph) -> tuple[Metric, ...]:
    """Per node type: host cores per GPU (what the launch and proxy threads share) and what
    its DPUs take over from the host (model/train/dpu.py, model/train/host.py)."""
    out: list[Metric] = []
    seen: list[str] = []
    for p in graph.partitions:
        node = p.node
        if node.name in seen:
            continue
        seen.append(node.name)
        cores = dpu.host_cores(node)
        if cores != float("inf"):
            cpus = " + ".join(f"{c.count} x {c.cores}" for c in node.parts_of("cpu"))
            out.append(Metric(f"node.{node.name}.host_cores_per_gpu", f"{node.name} host CPU cores per GPU",
                              cores / node.gpus, "", f"({cpus}) cores / {node.gpus} GPUs; the launch thread and "
                              f"network proxy of each GPU need {dpu.THREADS_PER_GPU}", node.span))
        for part in node.parts_of("dpu"):
            out.append(Metric(f"node.{node.name}.dpu.{part.name}", f"{node.name} {part.name} DPUs, taking over "
                              f"{', '.join(part.offload) or 'nothing'}", part.count, "",
                              "its `offload` (default: storage and input)", part.span))
        out += _dpu_paths(node)
    return tuple(out)


def _dpu_paths(node) -> list[Metric]:
    """What the node's DPUs carry beside the host: checkpoint writes and sample loading."""
    out = []
    storage = [p for p in node.parts_of("dpu") if p.offloads("storage") and p.bandwidth]
    if storage:
        terms = " + ".join(f"{p.count} x {_q(p.bandwidth, 'B/s')} line rate" for p in storage)
        out.append(Metric(f"node.{node.name}.dpu_storage", f"{node.name} checkpoint path through its DPUs",
                          dpu.storage_rate(node), "B/s", f"{terms} (NVMe-oF, GPUDirect Storage; beside the host's "
                          "`storage`, used by goodput and `checkpoint_every`)", node.span))
    loading = [p for p in node.parts_of("dpu") if p.offloads("input") and p.bandwidth]
    if loading:
        terms = " + ".join(f"{p.count} x min({_q(p.bandwidth, 'B/s')}, {p.cores} cores x "
                           f"{_q(dpu.BYTES_PER_CORE, 'B/s')})" if p.cores else f"{p.count} x {_q(p.bandwidth, 'B/s')}"
                           for p in loading)
        out.append(Metric(f"node.{node.name}.dpu_input", f"{node.name} sample loading through its DPUs",
                          dpu.input_rate(node), "B/s", terms, node.span))
    return out


def _formats(chip: Accelerator) -> list[Metric]:
    """The formats the chip runs, each with its width and the peak it runs at."""
    each = ", ".join(f"{f} ({formats.FORMATS[f].bits:g} bits at peak {formats.family(f)})" if f in formats.FORMATS
                     else f for f in chip.formats)
    where = "listed in `formats`" if chip.listed_formats else "implied by its peaks"
    return [Metric(f"chip.{chip.name}.formats", f"{chip.name} number formats ({where})", len(chip.formats), "", each,
                   chip.span)]


def _peaks(chip: Accelerator) -> list[Metric]:
    ops = dict(chip.ops_per_clock)
    out = []
    for precision, value in chip.peak:
        formula = "stated (data sheet)"
        if precision in ops and chip.cores and chip.clock:
            derived = chip.cores * chip.clock * ops[precision]
            product = f"{chip.cores} cores x {chip.clock / 1e9:g} GHz x {ops[precision]:g} ops/clock"
            agree = "agrees within 5 %" if abs(derived - value) <= TOLERANCE * value else "DIFFERS by more than 5 %"
            formula = (product if abs(derived - value) <= 1e-9 * value
                       else f"stated; {product} = {_q(derived, 'FLOPS')} {agree}")
        out.append(Metric(f"chip.{chip.name}.peak.{precision}", f"{chip.name} peak {precision}", value, "FLOPS",
                          formula, chip.span))
    return out


def _hbm(chip: Accelerator) -> list[Metric]:
    out = []
    if chip.hbm_nominal is not None:  # the data sheet's figure names the part; plans fit in the capacity
        out.append(Metric(f"chip.{chip.name}.hbm.nominal", f"{chip.name} HBM on its data sheet", chip.hbm_nominal, "B",
                          f"stated; the driver exposes {_q(chip.hbm_capacity, 'B')}, what plans fit in", chip.span))
    if not chip.hbm_stacks:
        return out
    n, binary = chip.hbm_stacks, binary_bytes(chip.hbm_capacity)
    return out + [Metric(f"chip.{chip.name}.hbm.capacity", f"{chip.name} HBM capacity", chip.hbm_capacity, "B",
                         f"{n} stacks x {memory(chip.hbm_capacity / n, binary)}", chip.span),
                  Metric(f"chip.{chip.name}.hbm.bandwidth", f"{chip.name} HBM bandwidth", chip.hbm_bandwidth, "B/s",
                         f"{n} stacks x {_q(chip.hbm_bandwidth / n, 'B/s')}", chip.span)]


def _clock(chip: Accelerator) -> list[Metric]:
    if not dvfs.below_full_clock(chip) and chip.base_clock is None:
        return []
    k = dvfs.exponent(chip)
    out = []
    if dvfs.below_full_clock(chip):
        f = dvfs.capped(chip)
        which = f"cap {_q(chip.power_cap, 'W')}" if dvfs.limit(chip) < chip.tdp else f"TDP {_q(chip.tdp, 'W')}"
        out.append(Metric(f"chip.{chip.name}.clock.capped", f"{chip.name} clock under its power limit", f, "",
                          f"max(floor {dvfs.floor(chip):g}, (({which} - idle {_q(chip.idle, 'W')}) / (full clock "
                          f"{_q(dvfs.top(chip), 'W')} - idle))^(1/{k:g})) of the full clock", chip.span))
    if chip.base_clock is not None and chip.clock:
        out.append(Metric(f"chip.{chip.name}.clock.unmeasured", f"{chip.name} clock without a measured efficiency",
                          dvfs.sustained(chip, measured=False), "",
                          f"base {chip.base_clock / 1e9:g} GHz / boost {chip.clock / 1e9:g} GHz x the cap's ratio",
                          chip.span))
    return out


def _cache(chip: Accelerator) -> list[Metric]:
    if chip.l2 <= 0:
        return []
    side = cache.tile_side(chip, 2)
    out = [Metric(f"chip.{chip.name}.l2.tile", f"{chip.name} GEMM tile side held in L2 (bf16)", side, "",
                  f"sqrt({_q(chip.l2, 'B')} / ({cache.TILE_OPERANDS} tiles x 2 B))", chip.span)]
    # stated, the generation's, or none (one memory level): explain says which it took
    out.append(Metric(f"chip.{chip.name}.l2.bandwidth", f"{chip.name} L2 bandwidth (second roofline ceiling)",
                      cache.l2_bandwidth(chip) or 0.0, "B/s", cache.l2_source(chip), chip.span))
    return out


def _torus(graph: ClusterGraph) -> tuple[Metric, ...]:
    out = []
    for p in graph.partitions:
        axes = [t for t in p.tiers if t.ring]
        if not axes:
            continue
        prefix = f"{p.name}." if len(graph.partitions) > 1 else ""
        for t in axes:
            rings = "two rings (wraparound)" if t.wraparound else "one folded ring (open line)"
            out.append(Metric(f"{prefix}torus{t.level}.link", f"{t.name}: per link per direction", t.link_bandwidth,
                              "B/s", f"chip bandwidth / its links; a collective along the axis uses {rings}", t.span))
        largest = max(axes, key=lambda t: t.ring)
        cut = axes[-1].group_gpus // largest.ring * (2 if largest.wraparound and largest.ring > 2 else 1)
        link = largest.link_bandwidth
        out.append(Metric(f"{prefix}torus.bisection", f"{largest.fabric}: bisection of one {axes[-1].group_gpus}-chip torus, per direction",
                          cut * link, "B/s", f"{cut} links cut by halving axis {largest.ring} x {_q(link, 'B/s')}",
                          largest.span))
    return tuple(out)
