"""What a power-limited training plan says about its power, beside the plan itself.

The plan (solver/train/plan.py) IS the operating point: the search covers layout x GPU
count x clock step (a power cap per GPU) under the limit, so its step time, throughput and
power are the ones every view prints. This section adds what the search alone does not say:

- the limit and where it comes from, and what binds: power (the plan without the limit
  would be better, by how much), the GPU count, the batch (no more replicas), the clock;
- the proof beside the search's: the continuous relaxation of the plan's layout (the
  geometric program of solver/power/program.py over continuous GPU counts and clocks) as
  a bound on finer clock steps and GPU counts, its gap to the plan, and the marginal value
  of power (the GP's dual);
- the curve: the plan's layout at other budgets, each point its best whole replica count
  and clock step within that budget (exact estimates, as the search's); a budget the layout
  cannot run within is marked infeasible, never drawn as 0 tokens/s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ...model import dvfs
from ...model.job import Job
from ...model.train.step import Estimate, estimate
from ..train import enumerate as space_def
from ..train.plan import Plan
from ..train.search import search
from ...dsl.records import frozen

if TYPE_CHECKING:   # the power program loads only for a job under a power limit (a plan without one never asks)
    from .inputs import PowerInputs
    from .program import PowerResult

CURVE_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)   # of the limit: the budgets `gclc plan` prints
_RELAXED = {"throughput": "throughput", "time": "time", "energy": "energy"}   # objectives the GP has


@frozen
class CurvePoint:
    budget: float                        # W, facility
    tokens_per_s: float | None           # None: the layout cannot run within the budget
    gpus: int = 0
    clock: float = 0.0                   # ratio of the chip's own clock
    power: float = 0.0                   # W, facility, at that operating point

    @property
    def feasible(self) -> bool:
        return self.tokens_per_s is not None


@frozen
class PowerSection:
    limit: float                         # W, facility
    source: str                          # where the limit is written
    objective: str
    binds: tuple[str, ...]               # what limits the plan under the limit, in words
    unlimited: Estimate | None           # the best plan without the limit, when it is better
    relaxed: PowerResult | None          # the GP over continuous GPUs and clocks of the plan's layout
    inputs: PowerInputs | None
    curve: tuple[CurvePoint, ...]

    def gap(self, tokens_per_s: float, joules_per_token: float | None) -> float | None:
        """How far the continuous relaxation is beyond the plan: its tokens/s above the plan's
        `tokens_per_s` (for energy, the plan's `joules_per_token` above its), a share; None
        without a relaxation."""
        r = self.relaxed
        if r is None or not r.feasible or r.relaxed_tokens_per_s <= 0 or tokens_per_s <= 0:
            return None
        if self.objective == "energy":
            relaxed = self.inputs.facility(r.relaxed_gpus, r.relaxed_clock) / r.relaxed_tokens_per_s
            return None if relaxed <= 0 or joules_per_token is None else joules_per_token / relaxed - 1
        return r.relaxed_tokens_per_s / tokens_per_s - 1


def power_limit(job: Job) -> tuple[float, str] | None:
    """(W, where it is written) of the job's power limit, None without one."""
    limit = space_def.limits(job).get("power")
    if limit is None or not limit.upper:
        return None
    return limit.value, limit.source + (f" ({limit.span})" if limit.span else "")


def power_section(job: Job, chosen: Plan) -> PowerSection | None:
    """The power section of `chosen`, the plan of `job` (the job as written); None without a
    power limit or a feasible plan."""
    found = power_limit(job)
    if found is None or chosen.best is None:
        return None
    from .program import without_power_limit
    limit, source = found
    objective, best = chosen.objective, chosen.best
    free = without_power_limit(job)
    unlimited = search(free, objective, 0)
    gave_up = unlimited.best if unlimited.best is not None and unlimited.value < _value(job, objective, best) * (
        1 - 1e-9) else None
    inputs, relaxed = _relaxation(job, best, limit, objective)
    return PowerSection(limit, source, objective, _binds(job, chosen, gave_up, limit), gave_up, relaxed, inputs,
                        tuple(layout_curve(job, best, [limit * f for f in CURVE_FRACTIONS], objective)))


def _value(job: Job, objective: str, e: Estimate) -> float:
    return space_def.objective_value(job, objective, e)


def _binds(job: Job, chosen: Plan, gave_up: Estimate | None, limit: float) -> tuple[str, ...]:
    """What holds the plan where it is: power, the GPU count, the batch, the clock."""
    best, out = chosen.best, []
    c = best.config
    if gave_up is not None:
        out.append("power")
    if c.gpus >= job.gpus:
        out.append("GPU count")
    elif c.dp == _most_replicas(job, best):
        out.append("batch")
    if c.power_cap is None:
        out.append("full clock")
    return tuple(out)


def _most_replicas(job: Job, e: Estimate) -> int:
    c = e.config
    space = space_def.space(job)
    return space_def.data_parallel(job, space, c.tp, c.pp, c.cp, c.ep) or c.dp


def _relaxation(job: Job, best: Estimate, limit: float, objective: str) -> tuple[PowerInputs | None,
                                                                                    PowerResult | None]:
    """The GP of the plan's layout at the chip's own clock and its most replicas."""
    from .inputs import PowerInputs
    from .program import solve_power
    goal = _RELAXED.get(objective)
    if goal is None:
        return None, None
    c = best.config
    widest = attrs.evolve(c, dp=_most_replicas(job, best), power_cap=None)
    reference = estimate(job.shape, widest, job.partition)
    inputs = PowerInputs.from_plan(job, reference)
    if c.power_cap is not None:   # the clock-scaled share as the step model has it at the plan's clock
        slowed = estimate(job.shape, attrs.evolve(widest, power_cap=c.power_cap), job.partition)
        inputs = clocked_share(inputs, slowed.step_time / reference.step_time, dvfs.clock_of(job.partition, c.power_cap))
    return inputs, solve_power(inputs, limit, goal)


def clocked_share(inputs: PowerInputs, slowdown: float, clock: float) -> PowerInputs:
    """`inputs` with the clock-scaled share of the step (a1 + a3) set so that the GP's step at
    `clock` is `slowdown` x its step at full clock, as the step model's is: the breakdown's
    compute term holds memory-bound kernels too, which a lower clock does not slow."""
    if not 0 < clock < 1 or slowdown <= 1:
        return inputs
    a1, a2, a3, a4 = inputs.shares
    alpha = min(1.0, max(0.0, (slowdown - 1) / (1 / clock - 1)))
    clocked, other = a1 + a3, a2 + a4
    if clocked <= 0 or other <= 0:
        return inputs
    k, m = alpha / clocked, (1 - alpha) / other
    return attrs.evolve(inputs, shares=(a1 * k, a2 * m, a3 * k, a4 * m))


def operating_points(job: Job, e: Estimate) -> list[tuple[Estimate, float]]:
    """Every (estimate, facility W) of `e`'s layout at a whole replica count and clock step
    that meets the job's limits but power: the layout's operating points."""
    from .program import without_power_limit
    c = e.config
    free = without_power_limit(job)
    lim = space_def.limits(free)
    space = space_def.space(free)
    counts = space_def.data_parallels(free, space, c.tp, c.pp, c.cp, c.ep)
    out = []
    for dp in counts:
        per_replica = job.batch // dp
        if per_replica % c.microbatch or not space_def.vp_valid(c.vp, c.pp, per_replica // c.microbatch):
            continue
        for cap in space_def.operating_caps(job, "energy"):   # every clock step
            point = estimate(job.shape, attrs.evolve(c, dp=dp, power_cap=cap), job.partition)
            if space_def.violated(free, lim, point) is None:
                out.append((point, space_def.power_of(job, point)))
    return out


def layout_curve(job: Job, e: Estimate, budgets, objective: str) -> list[CurvePoint]:
    """The best operating point of `e`'s layout within each budget (by `objective`)."""
    points = operating_points(job, e)
    out = []
    for budget in budgets:
        fitting = [(p, w) for p, w in points if w <= budget]
        if not fitting:
            out.append(CurvePoint(budget, None))
            continue
        p, w = min(fitting, key=lambda pw: (_value(job, objective, pw[0]), pw[1]))
        out.append(CurvePoint(budget, p.tokens_per_s, p.config.gpus, clock_ratio(job, p), w))
    return out


def clock_ratio(job: Job, e: Estimate) -> float:
    """The clock `e` runs at, as a ratio of the chip's own (1.0 without a cap)."""
    return dvfs.clock_of(job.partition, e.config.power_cap)
