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
2. `identified`: the fitted per-step time differs from the design's value (its stated
   `step_overhead`, 0 s where it states none) by at least Z posterior deviations, in seconds:
   |fitted - design| >= Z x sigma_s, sigma_s the deviation the fit leaves (fit.posterior_spread:
   the fit's own curvature at the fitted values, every constant joined to it through the runs
   marginalized, taken to seconds by the delta method: log-width x fitted value). Z = 1 / (SHRINK
   x SPREAD) = 1.33, the threshold the earlier log-width rule (the data at least halve the prior's
   e^1.5) had at the fit against a design of 0 s. In seconds the test's deviation does not grow
   with the value it judges: a step moves 1 s per s of per-step time whatever its value, so runs
   that see 1 s beside steps of seconds fit it however small the design's value. (Judged in log
   units at the prior's value instead, the verdict grew with the square of the stated value: an
   unstated node, prior 20 ms, was never fitted even where its runs carried 1 s a step, issue #32.)
3. One judge (`judge`) for the shipped fit and each held-out fold: a node is judged on the fit
   of the runs left after the outliers (separable there too); dropping a node moves the others'
   fits, so the nodes left are refitted and judged again until every one passes.

Otherwise the node keeps the design's value (its stated `step_overhead`, 0 s where it states
none), the fit is made without the term, and the report says why (`kept`)."""

from __future__ import annotations

import math

import attrs

from ...compiler.ir import NodeType
from ...dsl.numbers import number, percent
from .fit import posterior_spread
from ...dsl.records import frozen
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
SHRINK = 0.5      # the earlier rule's: the data at least halve the prior's log-width
Z = 1 / (SHRINK * SPREAD)   # 1.33: that rule's threshold at the fit, as a significance in seconds


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


@frozen
class Verdict:
    """What the runs measured of a node's per-step time: the fitted value and its posterior
    deviation, in seconds, against the design's value (0 s where unstated)."""
    fitted: float
    sigma: float       # seconds (delta method: `width` x `fitted`)
    width: float       # the posterior deviation of log(step_overhead) at the fit
    design: float

    @property
    def identified(self) -> bool:
        return identified(self.fitted, self.sigma, self.design)

    def words(self) -> str:
        return (f"fitted {number(self.fitted * 1e3, 3)} ms ± {number(self.sigma * 1e3, 3)} ms, "
                f"{number(abs(self.fitted - self.design) / self.sigma if self.sigma > 0 else math.inf, 2)} sigma "
                f"from the design's value {number(self.design * 1e3, 3)} ms")


def measured(fitted: float, width: float, design: float) -> str:
    """A fitted node's test in words: the value, its deviation in seconds, how far from the design's."""
    return f"{Verdict(fitted, width * fitted, width, design).words()} (fitted at {number(Z, 3)} or more)"


def identified(fitted: float, sigma: float, design: float = 0.0) -> bool:
    """Whether the fitted per-step time is at least Z posterior deviations (seconds) from the
    design's value."""
    return abs(fitted - design) >= Z * sigma


def runs_of(kept: list[Observation], name: str) -> list[Observation]:
    """The end-to-end training runs informing node `name`'s per-step time."""
    return [o for o in kept if key(name) in o.informs and o.kind == "train" and o.end_to_end]


def design_value(runs: list[Observation]) -> float:
    """The node's stated per-step time (0 s where it states none or the runs carry no design)."""
    return next((o.partition.node.step_overhead for o in runs if o.partition is not None), 0.0)


def verdicts(params: dict, kept: list[Observation], values: dict) -> dict[str, Verdict | None]:
    """Each node whose per-step time the fit holds: its Verdict, or None where its kept runs (the
    outliers left out) are no longer `separable`."""
    nodes = {k[1] for k in params if k[0] == "node" and k[2] == "step_overhead"}
    out: dict[str, Verdict | None] = {}
    for name in sorted(nodes):
        runs = runs_of(kept, name)
        if not runs or not separable(runs):
            out[name] = None
            continue
        width = posterior_spread(params, kept, values, key(name))
        fitted = values[key(name)]
        out[name] = Verdict(fitted, width * fitted, width, design_value(runs))
    return out


def judge(nodes: set[str], fit_nodes) -> tuple[set[str], tuple | None, dict[str, Verdict | None]]:
    """The nodes whose per-step time is fitted, the fit, and every judged node's last verdict:
    `fit_nodes(nodes)` fits the runs with those nodes' terms (-> params, kept runs, values); a node
    not `identified` (or without separable kept runs) is dropped and the rest refitted, until every
    node left passes (each round drops at least one, so this ends). The shipped fit and each
    held-out fold both judge through here."""
    seen: dict[str, Verdict | None] = {}
    while nodes:
        state = fit_nodes(nodes)
        got = verdicts(*state)
        seen.update(got)
        passed = {n for n in nodes if got.get(n) is not None and got[n].identified}
        if passed == nodes:
            return nodes, state, seen
        nodes = passed
    return set(), None, seen


def kept(found: list[Observation], seen: dict[str, Verdict | None] | None = None) -> list[str]:
    """Why each node with training runs keeps the design's per-step time: its runs are not
    `separable`, or (`seen`: each judged node's last verdict) the fit is within Z deviations of the
    design's value, or a separable node's runs left after the outliers are not (none, or of one work)."""
    seen = seen or {}
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
        elif seen.get(name) is None:
            out.append(head + "its runs left in the fit after the outliers (runs no setting of their constants "
                       "explains) are not of different work per GPU, so none is left to measure it")
        elif not seen[name].identified:
            out.append(head + f"{seen[name].words()}, within {number(Z, 3)} sigma of it: kept (it is fitted where "
                       "the runs measure it at least that far from the design's value)")
    return out
