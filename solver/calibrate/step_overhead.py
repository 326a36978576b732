"""The node's per-step host time (`node { step_overhead }`, model/train/step.py) as a calibrated
constant: the hosts' fixed work between two training steps (loss and grad-norm reads that drain
the GPU's queue, the optimizer's and data loader's Python, the next step's first launches).

A fixed time per step is told apart from the chip's and fabrics' rates only by runs whose work
per GPU differs: the rates' time scales with a step's work, a fixed time does not. Runs of one
work per GPU (one run; weak-scaling runs, whose steps differ only in their communication) cannot
split a miss between a per-step time and a rate: the split would be the priors' alone. And runs
of different work still say little of it where it is a small share of their steps (a few ms
beside steps of seconds): the fit then stays near its prior, which is no measurement. So the
rule, stated before any benchmark figure was read (issue #32's review):

1. `separable`: at least MIN_RUNS training runs on the node whose model FLOPs per GPU per step
   differ by more than SEPARATE;
2. `identified`: the data at least halve the prior's width of log(step_overhead): its posterior
   deviation (fit.posterior_spread: the fit's own curvature, every constant joined to it through
   the runs marginalized) is at most SHRINK x the prior's (e^1.5). That is, the runs carry at
   least three times the prior's information, a deviation of e^0.87 or less from the data alone.
   The curvature is read at the prior's value of the per-step time (the other constants, and the
   runs' Huber weights, at the fit): a step moves 1 s per s of per-step time whatever its value,
   but in log units its slope is about overhead / step, so read at the fitted value the
   information would grow with the fitted value squared and a noise that pushed the fit up would
   pass the rule. Judged at the prior's value, the rule asks whether these runs would see a
   per-step time of the size the design expects; the fitted value does not enter the verdict.

Otherwise the node keeps the design's value (its stated `step_overhead`, 0 s where it states
none), the fit is made without the term, and the report says why (`kept`)."""

from __future__ import annotations

import attrs

from ...compiler.ir import NodeType
from ...dsl.numbers import number, percent
from .fit import posterior_spread
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
SHRINK = 0.5      # fitted only where the data at least halve the prior's log-width


def key(node: str) -> tuple[str, str, str]:
    return ("node", node, "step_overhead")


def param(node: NodeType) -> Param:
    """The node's stated per-step time as the prior (PRIOR where it states none); the range widened to
    hold a stated value outside it (the design's word stands: the fit does not clamp it)."""
    prior = node.step_overhead if node.step_overhead > 0 else PRIOR
    return Param(key(node.name), prior, SPREAD, min(RANGE[0], prior), max(RANGE[1], prior))


def stated(node: NodeType) -> str:
    """The node's own value in words: what a kept per-step time stays at."""
    return f"{number(node.step_overhead * 1e3, 3)} ms" if node.step_overhead > 0 else "0 s (unstated)"


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


def candidates(found: list[Observation]) -> set[str]:
    """The nodes whose training runs are `separable`."""
    return {name for name, runs in _by_node(found).items() if separable(runs)}


def informed(found: list[Observation], nodes: set[str] | None = None) -> list[Observation]:
    """`found` with each training run on one of `nodes` (default: the `candidates`) informing that
    node's per-step time (the runs' prediction reads it from the partition: params.applied)."""
    fitted = candidates(found) if nodes is None else nodes
    out = []
    for obs in found:
        name = obs.partition.node.name if obs.partition is not None else None
        if obs.kind == "train" and obs.end_to_end and name in fitted and key(name) not in obs.informs:
            obs = attrs.evolve(obs, informs=obs.informs + (key(name),), priors=obs.priors + (param(obs.partition.node),))
        out.append(obs)
    return out


def spreads(params: dict, kept: list[Observation], values: dict) -> dict[str, float]:
    """Each fitted node's posterior deviation of log(step_overhead) at the fit `values`, its slopes
    read at the prior's value (the rule's point 2: in log units a step's slope in it is about
    overhead / step, so read at the fitted value its information would grow with the fitted value
    squared, and a noise that pushed the fit up would pass it)."""
    nodes = {k[1] for o in kept for k in o.informs if k[0] == "node" and k in params}
    return {name: posterior_spread(params, kept, values, key(name), slopes_at={**values, key(name): params[key(name)].prior})
            for name in sorted(nodes)}


def identified(spread: float, prior_spread: float = SPREAD) -> bool:
    """Whether the data at least halve the prior's log-width (SHRINK)."""
    return spread <= SHRINK * prior_spread


def kept(found: list[Observation], widths: dict[str, float] | None = None) -> list[str]:
    """Why each node with training runs keeps the design's per-step time: its runs are not
    `separable`, or (`widths`: each judged node's posterior deviation) they leave it near its prior,
    or a separable node has no width: its runs were all outliers, none left in the fit."""
    widths = widths or {}
    out = []
    for name, runs in _by_node(found).items():
        node = runs[0].partition.node
        head = (f"node `{name}`: its per-step host time (`step_overhead`) kept at the design's value, "
                f"{stated(node)}: ")
        if not separable(runs):
            count = f"{len(runs)} training run{'s' if len(runs) != 1 else ''}"
            out.append(head + f"{count} of one work per GPU cannot tell a fixed time per step from the chip's and "
                       f"fabrics' rates (it takes {MIN_RUNS} runs whose model FLOPs per GPU per step differ by more "
                       f"than {percent(SEPARATE)}; weak-scaling runs, whose steps differ only in communication, do not)")
        elif name not in widths:
            out.append(head + "every one of its runs was left out of the fit as an outlier (no setting of its "
                       "constants explains it), so none is left to measure it")
        elif not identified(widths[name]):
            out.append(head + f"its runs leave it near its prior (posterior width e^±{number(widths[name], 2)} "
                       f"against the prior's e^±{number(SPREAD, 2)}; it is fitted where the runs at least halve "
                       f"that: a per-step time a visible share of steps of different work)")
    return out
