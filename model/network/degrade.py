"""A part of the cluster running below its rate, or down, and what a synchronous step sees.

A training step is synchronous: every collective waits for its slowest member and every
pipeline stage for the one before it, so one slow part paces the whole job (a straggler).
The step of the degraded job is therefore the step of the slow part's GPUs, and that is what
the partition becomes here: the tiers (or the chip) that part's GPUs see, at its rate.

- `nic` at a share f of its rate: NCCL stripes its channels over a node's NICs, each channel
  bound to one, so the slow NIC's channels pace every ring that leaves the node: the scale-out
  tiers run at f. Down (f = 0): the job restarts on the node's other NICs, which carry its
  traffic (PXN over NVLink): the scale-out tiers run at (k - 1) / k of k ports.
- `link`, one uplink of a leaf at a share f (0: down): the leaf's U uplinks carry (U - 1 + f)
  links' worth, so the tiers above the leaf run at that share of their rate.
- `spine`, one spine switch at a share f (0: down): each leaf reaches it over 1 / S of its
  uplinks, S spine switches: the tiers above the leaf run at (S - 1 + f) / S.
- `gpu` at a share f of its clock (thermal or power throttling): its peaks and memory rate
  at f; the others wait for it at every collective. A GPU down is a failure, not a slowdown:
  plan on fewer GPUs.
"""

from __future__ import annotations

import attrs

from ...compiler.ir import ClusterGraph, Partition, Tier
from ...dsl.numbers import percent
from ...dsl.records import frozen

PARTS = ("nic", "link", "spine", "gpu")


class DegradeError(ValueError):
    """The degradation cannot be applied to this cluster (what is wrong and how to fix it)."""


def share_of(text: str) -> float:
    """The share of its rate a part keeps, as written: `down`, a number from 0 to 1, or a
    percentage (`50%`); ValueError with what to write instead."""
    try:
        share = 0.0 if text == "down" else float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"`{text}`: the share is `down`, a number from 0 to 1 or a percentage (`50%`)") from None
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"`{text}`: the share of a rate left is between 0 (down) and 1 (or 0% and 100%)")
    return share


def parse(what: str) -> Degradation:
    """`nic=down`, `link=0.5`, `gpu=80%` (as `gclc degrade` takes it) -> Degradation;
    ValueError with what to write instead."""
    part, sep, level = what.partition("=")
    part, level = part.strip(), level.strip()
    if not sep or part not in PARTS:
        raise ValueError(f"`{what}`: write PART=SHARE with PART one of {', '.join(PARTS)} (`nic=down`, `gpu=80%`)")
    return Degradation(part, share_of(level))


@frozen
class Degradation:
    part: str          # one of PARTS
    share: float       # of its rate left, 0 <= share <= 1 (0: down)

    def describe(self) -> str:
        return f"one {self.part} down" if self.share == 0 else f"one {self.part} at {percent(self.share)} of its rate"


def degrade(graph: ClusterGraph, partition: Partition, d: Degradation) -> Partition:
    """`partition` as the GPUs behind the degraded part see it."""
    if d.part not in PARTS:
        raise DegradeError(f"unknown part `{d.part}`: one of {', '.join(PARTS)}")
    if not 0.0 <= d.share <= 1.0:
        raise DegradeError(f"a share of a rate is between 0 (down) and 1, not {d.share}")
    if d.part == "gpu":
        return _slow_chip(partition, d.share)
    out = [t for t in partition.tiers if t.scope == "scaleout"]
    if not out:
        raise DegradeError(f"`{partition.name}` has no scale-out fabric: no {d.part} to degrade")
    if d.part == "nic":
        return _scale(partition, out, _nic_share(partition, d.share))
    above = out[1:]
    if not above:
        raise DegradeError(f"`{partition.name}`'s scale-out fabric has one tier: no {d.part} above its leaves")
    paths = _uplinks(graph, out[0].fabric) if d.part == "link" else _spines(graph, out[0].fabric)
    if paths <= 1 and d.share == 0:
        raise DegradeError(f"`{out[0].fabric}` has one {'uplink a leaf' if d.part == 'link' else 'spine switch'}: "
                           "down, its leaves are cut off; degrade it to a share instead")
    return _scale(partition, above, (paths - 1 + d.share) / paths)


def _slow_chip(partition: Partition, share: float) -> Partition:
    if share == 0:
        raise DegradeError("a GPU down is a failure, not a slowdown: plan the job on fewer GPUs")
    chip = partition.node.accelerator
    slow = attrs.evolve(chip, peak=tuple((k, v * share) for k, v in chip.peak),
                        hbm_bandwidth=chip.hbm_bandwidth * share)
    return attrs.evolve(partition, node=attrs.evolve(partition.node, accelerator=slow))


def _nic_share(partition: Partition, share: float) -> float:
    if share > 0:
        return share
    ports = partition.node.nic_ports
    if ports <= 1:
        raise DegradeError(f"`{partition.node.name}` has one scale-out port: with it down the node is cut off; "
                           "degrade it to a share instead")
    return (ports - 1) / ports


def _scale(partition: Partition, tiers: list[Tier], share: float) -> Partition:
    slowed = {id(t) for t in tiers}
    return attrs.evolve(partition, tiers=tuple(attrs.evolve(t, bandwidth=t.bandwidth * share) if id(t) in slowed else t
                                               for t in partition.tiers))


def _layers(graph: ClusterGraph, fabric: str):
    return sorted((layer for layer in graph.switch_layers if layer.fabric == fabric), key=lambda layer: layer.level)


def _uplinks(graph: ClusterGraph, fabric: str) -> int:
    """Uplinks of one leaf: the cables into the next layer over the leaves."""
    layers = _layers(graph, fabric)
    if len(layers) < 2 or not layers[0].switches:
        return 1
    return max(1, layers[1].links_below // layers[0].switches)


def _spines(graph: ClusterGraph, fabric: str) -> int:
    layers = _layers(graph, fabric)
    return layers[1].switches if len(layers) >= 2 else 1
