"""One collective call priced as NCCL runs it on gclc's tiers: the tiers say how fast the
bytes can move (model/comms.py, latency aside: oversubscription, ragged groups, in-network
reduction), NCCL's tables say which algorithm and protocol a call of this size and rank
count runs and the latency it pays (model/network/nccl.py `on_topology`). A 4 KB all-reduce
is then latency-bound at NCCL's LL protocol and a 4 GB one runs at the tiers' rate, where
the tiers alone charged both the same efficiency.

The training step's collectives go through here (tensor-parallel all-reduces, ZeRO's
reduce-scatters and all-gathers, data-parallel all-reduces). A torus axis is not NCCL's:
there the tiers' own ring latency stays (TPU ICI and custom meshes run their own
collectives), plus that runtime's own per-call floor (`TORUS_CALL_S`).
"""

from __future__ import annotations

import functools
import math

import attrs

from ..compiler.vendors import vendor_of
from . import comms
from .network.nccl import (Choice, Communicator, nvls_channels, nvls_share, nvls_tree, on_topology, p2p_latency,
                           search_channels, switch_reduction_seconds)
from .network.placement import SCALE_UP_SCOPES

# A torus's collectives are its own runtime's (XLA's on TPU ICI), and each call pays a floor
# beside its hops (the tiers' latency, one a ring step). "How to Scale Your Model" (Austin et
# al., Google DeepMind, 2025; sharding.md, "A note on ICI latency" and the latency-bound
# AllGather of its worked problem): a 3-hop AllGather of 32 kB shards on a TPU v5e 4x4 is
# "roughly 3 * 1us = 3us. In practice, it's closer to 8us": ~5 us for the call beyond its
# hops. ESTIMATE: one measured profile, applied to every torus.
TORUS_CALL_S = 5e-6


def all_reduce(nbytes: float, stages: tuple[comms.Stage, ...], nvls: bool = True, collnet: bool = True,
               nccl: str = "", registered: bool = False) -> float:
    """`nvls` / `collnet`: whether the caller's environment lets NCCL reduce in the NVLink switches
    (NCCL_NVLS_ENABLE) or the scale-out switches (CollNet, SHARP). Where it may not, the call is
    priced on the same tiers with those switches not reducing, as NCCL then runs ring or tree.
    `nccl`: the NCCL version that runs it (2.25.1: its NVLS channels, nccl.nvls_channels); empty, the
    newest, as the training step prices every call. `registered`: the call's buffers are registered, as NCCL
    registers them under CUDA-graph capture inside one host (no NVLS fill: nccl.nvls_fill_seconds)."""
    return _call("all_reduce", nbytes, stages, nvls, collnet, nccl, registered)


def reduce_scatter(nbytes: float, stages: tuple[comms.Stage, ...], nccl: str = "") -> float:
    return _call("reduce_scatter", nbytes, stages, nccl=nccl)


def all_gather(nbytes: float, stages: tuple[comms.Stage, ...], nccl: str = "") -> float:
    return _call("all_gather", nbytes, stages, nccl=nccl)


def choice(collective: str, nbytes: float, stages: tuple[comms.Stage, ...], nccl: str = "") -> Choice | None:
    """The (algorithm, protocol) NCCL (version `nccl`, empty: the newest) runs for this call on the
    fastest of the group's placements (None on a torus or for one rank)."""
    found = [_priced(collective, nbytes, tuple(option), nccl) for option in _options(stages)]
    found = [choice for choice in found if choice is not None]
    return min(found, key=lambda choice: choice.seconds) if found else None


def _options(stages) -> tuple:
    return getattr(stages, "options", (stages,))


def _call(collective: str, nbytes: float, stages, nvls: bool = True, collnet: bool = True, nccl: str = "",
          registered: bool = False) -> float:
    # keyed on the options themselves: a Placement hashes as its first option alone (its
    # `key`: the options as plain tuples, built once; a plain tuple of stages is its one option)
    key = getattr(stages, "key", None)
    options = key if key is not None else (tuple(stages),)
    if not (nvls and collnet):
        options = tuple(_allowed(option, nvls, collnet) for option in options)
    return _fastest(collective, nbytes, options, nccl, registered)


@functools.lru_cache(maxsize=4096)   # immutable stages
def _allowed(option: tuple[comms.Stage, ...], nvls: bool, collnet: bool) -> tuple[comms.Stage, ...]:
    """The stages (and the hierarchical ones a ring stands for) with the switches NCCL may not
    use not reducing: the scale-up's without `nvls`, the scale-out's without `collnet`."""
    def barred(tier) -> bool:
        return tier.in_network_reduction and not (nvls if tier.scope in SCALE_UP_SCOPES else collnet)

    def strip(stage: comms.Stage) -> comms.Stage:
        tiled = tuple(strip(t) for t in stage.tiled)
        tier = attrs.evolve(stage.tier, in_network_reduction=False) if barred(stage.tier) else stage.tier
        return stage if tier is stage.tier and tiled == stage.tiled else attrs.evolve(stage, tier=tier, tiled=tiled)
    return tuple(strip(s) for s in option)


@functools.lru_cache(maxsize=16384)   # immutable arguments; a search asks ~25 times per call
def _fastest(collective: str, nbytes: float, options: tuple[tuple[comms.Stage, ...], ...], nccl: str = "",
             registered: bool = False) -> float:
    """The fastest of the group's placements, each priced by NCCL's pick on it."""
    best = math.inf
    for option in options:
        priced = _priced(collective, nbytes, option, nccl, registered)
        best = min(best, comms.PER_OPTION[collective](nbytes, option) + torus_floor(option) if priced is None
                   else priced.seconds)
    return best if best < math.inf else 0.0


def all_to_all(nbytes: float, stages: tuple[comms.Stage, ...]) -> float:
    """An all-to-all as NCCL runs it, grouped sends to every peer: the tiers' bytes
    (model/comms.py, latency aside) and one p2p latency (model/network/nccl.py). On a torus,
    the tiers' own latency and the runtime's floor."""
    return _with_start_up(stages, lambda latency: comms.all_to_all(nbytes, stages, latency))


def forwarded_all_to_all(rank_bytes: float, node_bytes: float, stages: tuple[comms.Stage, ...],
                         domain: tuple[str, ...] = comms.NODE, most: int | None = None) -> float:
    """An all-to-all that crosses nodes once per destination node and forwards inside them (model/comms.py
    `forwarded_all_to_all`: DeepEP's and HybridEP's internode kernels), with `all_to_all`'s start-up latency."""
    return _with_start_up(stages, lambda latency: comms.forwarded_all_to_all(rank_bytes, node_bytes, stages, latency,
                                                                             domain, most))


def _with_start_up(stages: tuple[comms.Stage, ...], priced) -> float:
    """An exchange's bytes (`priced(latency)`, model/comms.py) with NCCL's p2p latency for its start-up, or on a
    torus its tiers' own latency and the runtime's floor."""
    option = tuple(stages)
    c = communicator(option)
    if c is None:
        return priced(True) + torus_floor(option)
    return priced(False) + p2p_latency(c)


def pipeline_send(nbytes: float, size: int, stride: int, tiers: tuple[comms.Tier, ...]) -> float:
    """One send between pipeline neighbours, all stages' at once (model/comms.py's rate),
    with NCCL's p2p latency over the outermost tier a send crosses."""
    outer, speed = comms.send_rate(size, stride, tiers)
    return 0.0 if outer is None else nbytes / speed + _send_latency(outer)


def ring_send(nbytes: float, size: int, stride: int, tiers: tuple[comms.Tier, ...]) -> float:
    """One step of ring attention's exchange (model/comms.py's rate), with NCCL's p2p latency
    over the outermost tier a hop crosses."""
    outer, speed = comms.hop_rate(size, stride, tiers)
    return 0.0 if outer is None else nbytes / speed + _send_latency(outer)


def _send_latency(outer: comms.Tier) -> float:
    """A send's latency crossing `outer`: NCCL's p2p step, or a torus hop and its runtime's floor."""
    if outer.ring:
        return outer.latency + TORUS_CALL_S
    scale_up = outer.scope in SCALE_UP_SCOPES
    link = "pcie" if scale_up and outer.kind == "pcie" else "nvlink"
    return p2p_latency(Communicator(2, 1 if scale_up else 2, math.inf, link=link, wire=0.0 if scale_up else outer.latency))


def torus_floor(option) -> float:
    """The per-call floor of a collective over a torus axis (0 elsewhere, or for one rank)."""
    if not any(s.tier.ring for s in option) or math.prod(s.peers for s in option) <= 1:
        return 0.0
    return TORUS_CALL_S


def _priced(collective: str, nbytes: float, option: tuple[comms.Stage, ...], nccl: str = "",
            registered: bool = False) -> Choice | None:
    """None where NCCL does not run the call (a torus axis, one rank). Where switches could
    reduce, each path pays its own bytes: NVLS or SHARP on the tiers' price with the switches
    reducing, ring, tree or PAT on their price without, and NCCL runs the one its own table predicts
    faster (nccl.predicted). `nccl`: the NCCL version, `registered`: its buffers registered (all_reduce)."""
    option = _nvls_capable(option)
    c = communicator(option, nccl)
    if c is None:
        return None
    c = attrs.evolve(c, registered=True) if registered else c
    if not (c.nvls or c.collnet):
        return on_topology(collective, nbytes, _wire(collective, nbytes, option), c)
    plain_wire, switch_wire = _wire(collective, nbytes, _plain(option)), _wire(collective, nbytes, option)
    # the switch chips reduce no faster than their engines: NVLS's floor (nccl.switch_reduction_seconds)
    switch_wire = max(switch_wire, switch_reduction_seconds(collective, nbytes, c))
    plain = on_topology(collective, nbytes, plain_wire, c, in_network=False)
    # NVLS inside the nodes, a tree across them (no SHARP): its halves pipelined, at NCCL's rate
    tree = nvls_tree(collective, nbytes, c)
    if switch_wire >= plain_wire:   # the tiers' price took no switch's reduction: nothing runs there
        return min((p for p in (plain, tree) if p is not None), key=lambda p: p.predicted)
    switches = on_topology(collective, nbytes, switch_wire, c, in_network=True)
    return min((p for p in (plain, switches, tree) if p is not None), key=lambda p: p.predicted)


def _nvls_capable(option: tuple[comms.Stage, ...]) -> tuple[comms.Stage, ...]:
    """The stages with the scale-up switches not reducing where the GPUs' generation runs no NVLS (Ampere:
    tuning.cc nvlsEfficiency 0, no multicast in NVLink 3), whatever fabric a design puts them on."""
    return option if nvls_share(_up_generation(option)) else _allowed(option, False, True)


def _up_generation(option: tuple[comms.Stage, ...]) -> str:
    """The generation of the option's scale-up tier (`generation`; Hopper's where it has none)."""
    up = next((t.tier for stage in option for t in (stage.tiled or (stage,)) if t.tier.scope in SCALE_UP_SCOPES), None)
    return generation(up) if up is not None else "hopper"


def _wire(collective: str, nbytes: float, option: tuple[comms.Stage, ...]) -> float:
    # NVLS pushes the buffer through the port at its generation's share of a ring's rate (nccl.nvls_share)
    return comms.PER_OPTION[collective](nbytes, option, latency=False, nvls=nvls_share(_up_generation(option)))


@functools.lru_cache(maxsize=4096)   # immutable stages; priced again for every call size
def _plain(option: tuple[comms.Stage, ...]) -> tuple[comms.Stage, ...]:
    """The same stages with no switch reducing."""
    return tuple(attrs.evolve(s, tier=attrs.evolve(s.tier, in_network_reduction=False)) for s in option)


@functools.lru_cache(maxsize=8192)
def communicator(option: tuple[comms.Stage, ...], nccl: str = "") -> Communicator | None:
    """The group as NCCL sees it: ranks in scale-up domains (a node, or an NVLink rack: MNNVL)
    and the rates and latency of the tiers it crosses. A ring in rank order stands for its
    tiled stages here: NCCL sees the same nodes whichever way the bytes move. `nccl`: the NCCL
    version whose NVLS channels it opens (empty: the newest)."""
    if not option or any(s.tier.ring for s in option):
        return None
    ranks = math.prod(s.peers for s in option)
    if ranks <= 1:
        return None
    option = tuple(t for s in option for t in (s.tiled or (s,)))
    up = [s for s in option if s.tier.scope in SCALE_UP_SCOPES]
    out = [s for s in option if s.tier.scope not in SCALE_UP_SCOPES]
    per_node = math.prod(s.peers for s in up)
    gen = generation(up[0].tier) if up else "hopper"
    link = "pcie" if up and up[0].tier.kind == "pcie" else "nvlink"
    return Communicator(ranks, ranks // per_node,
                        comms.stage_rate(up[0]) if up else math.inf,
                        comms.stage_rate(out[0]) if out else math.inf,
                        link=link,
                        nvls=any(s.tier.in_network_reduction for s in up),
                        collnet=any(s.tier.in_network_reduction for s in out),
                        wire=option[-1].tier.latency if out else 0.0,
                        reduce_rate=_reduce_share(up[0], per_node) if up else math.inf,
                        across=min((comms.stage_rate(s) for s in out), default=math.inf),
                        nvls_channels=nvls_channels(gen, nccl), nvls_share=nvls_share(gen), generation=gen,
                        host=host(option),
                        channels=search_channels(gen, ranks // per_node, per_node,
                                                 out[0].tier.bandwidth if out else math.inf, link))


def host(option: tuple[comms.Stage, ...]) -> str:
    """The host CPUs' vendor as NCCL tells them apart (topo.cc cpuVendor), lower case: across nodes NCCL reads LL's
    cap by it (tuning.cc llMaxBws). "" where no node declares its CPUs. One vendor: the lowering gives every tier of
    a partition its nodes' host (compiler/lower.py), and a group runs inside one partition."""
    return next((vendor_of(s.tier.host).lower() for s in option if s.tier.host), "")


def generation(tier) -> str:
    """The GPU generation NCCL's tables go by (tuning.cc compCapIndex, tags v2.28.7-1 and v2.30.4-1: `minCompCap
    >= 100 ? BLACKWELL : minCompCap >= 90 ? HOPPER : minCompCap >= 80 ? AMPERE : VOLTA`, four rows; its LL cap and NVLS efficiency rows,
    nvls.cc's NVLS channels): the one the lowering read off the partition's accelerator (compiler/formats.py
    generation, the same answer as the MX fp8 recipe's), so a derated NVLink 5 is still Blackwell and a fast
    link does not make an Ampere or Hopper one Blackwell. An Ada part (sm_89, under 90) takes Ampere's row:
    its fp8 tensor cores do not move it to Hopper's, and NVLS does not run on it (efficiency 0, no channels).
    NCCL reads it off the GPU whatever the link. Another vendor's part (None) takes Hopper's, as it always did."""
    if tier.generation == "ada":
        return "ampere"
    return tier.generation if tier.generation in ("ampere", "hopper", "blackwell") else "hopper"


def _reduce_share(stage: comms.Stage, per_node: int) -> float:
    """The FP32 adds/s of a scale-up domain's switches that a group of `per_node` of its GPUs
    gets: the domain's other GPUs run their own groups' collectives at the same time (a plan's
    parallel groups are symmetric), so a group gets its GPUs' share of the chips."""
    return stage.tier.reduction_rate * per_node / max(per_node, stage.tier.group_gpus)
