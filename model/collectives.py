"""One collective call priced as NCCL runs it on gclc's tiers: the tiers say how fast the
bytes can move (model/comms.py, latency aside: oversubscription, ragged groups, in-network
reduction), NCCL's tables say which algorithm and protocol a call of this size and rank
count runs and the latency it pays (model/network/nccl.py `on_topology`). A 4 KB all-reduce
is then latency-bound at NCCL's LL protocol and a 4 GB one runs at the tiers' rate, where
the tiers alone charged both the same efficiency.

The training step's collectives go through here (tensor-parallel all-reduces, ZeRO's
reduce-scatters and all-gathers, data-parallel all-reduces). A torus axis is not NCCL's:
there the tiers' own ring latency stays (TPU ICI and custom meshes run their own
collectives).
"""

from __future__ import annotations

import functools
import math

from . import comms
from .network.nccl import NVLS_EFFICIENCY, Choice, Communicator, on_topology

_SCALE_UP = ("node", "supernode")


def all_reduce(nbytes: float, stages: tuple[comms.Stage, ...]) -> float:
    return _call("all_reduce", nbytes, stages)


def reduce_scatter(nbytes: float, stages: tuple[comms.Stage, ...]) -> float:
    return _call("reduce_scatter", nbytes, stages)


def all_gather(nbytes: float, stages: tuple[comms.Stage, ...]) -> float:
    return _call("all_gather", nbytes, stages)


def choice(collective: str, nbytes: float, stages: tuple[comms.Stage, ...]) -> Choice | None:
    """The (algorithm, protocol) NCCL runs for this call on the fastest of the group's
    placements (None on a torus or for one rank)."""
    found = [_priced(collective, nbytes, tuple(option)) for option in _options(stages)]
    found = [choice for choice in found if choice is not None]
    return min(found, key=lambda choice: choice.seconds) if found else None


def _options(stages) -> tuple:
    return getattr(stages, "options", (stages,))


def _call(collective: str, nbytes: float, stages) -> float:
    # keyed on the options themselves: a Placement hashes as its first option alone
    return _fastest(collective, nbytes, tuple(tuple(option) for option in _options(stages)))


@functools.lru_cache(maxsize=16384)   # immutable arguments; a search asks ~25 times per call
def _fastest(collective: str, nbytes: float, options: tuple[tuple[comms.Stage, ...], ...]) -> float:
    """The fastest of the group's placements, each priced by NCCL's pick on it."""
    best = math.inf
    for option in options:
        priced = _priced(collective, nbytes, option)
        best = min(best, comms.PER_OPTION[collective](nbytes, option) if priced is None else priced.seconds)
    return best if best < math.inf else 0.0


def _priced(collective: str, nbytes: float, option: tuple[comms.Stage, ...]) -> Choice | None:
    """None where NCCL does not run the call (a torus axis, one rank)."""
    c = communicator(option)
    if c is None:
        return None
    # NVLS pushes the buffer through the port at 0.74 of what a ring gets (nccl-tests#212)
    wire = comms.PER_OPTION[collective](nbytes, option, latency=False, nvls=NVLS_EFFICIENCY)
    return on_topology(collective, nbytes, wire, c)


@functools.lru_cache(maxsize=8192)
def communicator(option: tuple[comms.Stage, ...]) -> Communicator | None:
    """The group as NCCL sees it: ranks in scale-up domains (a node, or an NVLink rack: MNNVL)
    and the rates and latency of the tiers it crosses."""
    if not option or any(s.tier.ring for s in option):
        return None
    ranks = math.prod(s.peers for s in option)
    if ranks <= 1:
        return None
    up = [s for s in option if s.tier.scope in _SCALE_UP]
    out = [s for s in option if s.tier.scope not in _SCALE_UP]
    per_node = math.prod(s.peers for s in up)
    return Communicator(ranks, ranks // per_node,
                        comms.stage_rate(up[0]) if up else math.inf,
                        comms.stage_rate(out[0]) if out else math.inf,
                        link="pcie" if up and up[0].tier.kind == "pcie" else "nvlink",
                        nvls=any(s.tier.in_network_reduction for s in up),
                        collnet=any(s.tier.in_network_reduction for s in out),
                        wire=option[-1].tier.latency if out else 0.0)
