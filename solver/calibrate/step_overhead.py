"""The node's per-step host time (`node { step_overhead }`, model/train/step.py) as a calibrated
constant: the hosts' fixed work between two training steps (loss and grad-norm reads that drain
the GPU's queue, the optimizer's and data loader's Python, the next step's first launches).

A fixed time per step is told apart from the chip's and fabrics' rates only by runs whose work
per GPU differs: the rates' time scales with a step's work, a fixed time does not. One run, or
runs of one work per GPU (weak-scaling runs, whose steps differ only in their communication),
cannot split a miss between a per-step time and a rate: the split would be the priors' alone.
So the constant is fitted only where at least MIN_RUNS training runs on the node differ in model
FLOPs per GPU per step by more than SEPARATE; otherwise it keeps the design's value."""

from __future__ import annotations

import attrs

from ...compiler.ir import NodeType
from ...dsl.numbers import percent
from .observe import Observation
from .params import Param

# ASSUMPTION: 20 ms where the design states none (Megatron-LM's and torchtitan's step loops on
# H100 hosts spend a few to tens of ms between steps: the loss and grad-norm `.item()` reads, the
# optimizer's Python, the next step's launches), known to a factor of e^1.5 (the serving engine's
# host time's width, params.SPREAD["host_step"]), between 0.1 ms and 1 s. benchmarks/calibrate_own.py
# measured it (docs/calibration.md "A per-step overhead per system").
PRIOR, SPREAD, RANGE = 0.02, 1.5, (1e-4, 1.0)
MIN_RUNS = 2
SEPARATE = 0.10   # works per GPU closer than 10 % are one work (a run's noise is 5 %: observe.NOISE["train"])


def key(node: str) -> tuple[str, str, str]:
    return ("node", node, "step_overhead")


def param(node: NodeType) -> Param:
    """The node's stated per-step time as the prior (PRIOR where it states none); the range widened to
    hold a stated value outside it (the design's word stands: the fit does not clamp it)."""
    prior = node.step_overhead if node.step_overhead > 0 else PRIOR
    return Param(key(node.name), prior, SPREAD, min(RANGE[0], prior), max(RANGE[1], prior))


def step_seconds(obs: Observation) -> float:
    """The measured step length of a training observation (0 where it does not say)."""
    return obs.step_tokens / obs.measured if obs.step_tokens and obs.measured > 0 else 0.0


def separable(runs: list[Observation]) -> bool:
    """Whether `runs` hold at least MIN_RUNS works per GPU (model FLOPs per GPU per step) more
    than SEPARATE apart."""
    works = sorted(w for w in (o.step_flops for o in runs) if w > 0)
    distinct = [w for i, w in enumerate(works) if i == 0 or w > works[i - 1] * (1 + SEPARATE)]
    return len(distinct) >= MIN_RUNS


def _by_node(found: list[Observation]) -> dict[str, list[Observation]]:
    by_node: dict[str, list[Observation]] = {}
    for obs in found:
        if obs.kind == "train" and obs.end_to_end and obs.partition is not None:   # a synthetic run has none
            by_node.setdefault(obs.partition.node.name, []).append(obs)
    return by_node


def kept(found: list[Observation]) -> list[str]:
    """Why each node with training runs that cannot separate its per-step time keeps the design's."""
    return [f"node `{name}`: its per-step host time (`step_overhead`) kept at the design's value: "
            f"{len(runs)} training run{'s' if len(runs) != 1 else ''} of one work per GPU cannot tell a fixed "
            f"time per step from the chip's and fabrics' rates (it takes {MIN_RUNS} runs whose model FLOPs per GPU "
            f"per step differ by more than {percent(SEPARATE)}; weak-scaling runs, whose steps differ only in "
            "communication, do not)"
            for name, runs in _by_node(found).items() if not separable(runs)]


def informed(found: list[Observation]) -> list[Observation]:
    """`found` with each training run on a node whose runs are `separable` informing that node's
    per-step time (the runs' prediction reads it from the partition: params.applied)."""
    fitted = {name for name, runs in _by_node(found).items() if separable(runs)}
    out = []
    for obs in found:
        name = obs.partition.node.name if obs.partition is not None else None
        if obs.kind == "train" and obs.end_to_end and name in fitted and key(name) not in obs.informs:
            obs = attrs.evolve(obs, informs=obs.informs + (key(name),), priors=obs.priors + (param(obs.partition.node),))
        out.append(obs)
    return out
