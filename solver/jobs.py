"""Plan whichever job a design names: a train job (with its power budget), a job split across
partitions, or a serve job. The command line, the report and the diagrams all start here, so
that each job kind takes one path from the design to its plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import attrs

from ..compiler.design import Design, Entity
from ..model.job import job_from_entity, select_job
from ..model.train.step import Estimate, estimate
from .train.plan import Plan, plan
from .power.program import PowerInputs, PowerResult, budget_curve, power_plan, without_power_limit

if TYPE_CHECKING:  # the heterogeneous split and serving load only for a job of their kind
    from .split.plan import HeteroPlan
    from .serve.plan import ServePlan
    from .rl.plan import RLPlan


@attrs.frozen
class Budgeted:
    """A power budget met with GPU counts and clocks (the GP), and the curve around it."""

    inputs: PowerInputs
    result: PowerResult
    curve: tuple[tuple[float, float], ...]
    layout: Estimate | None = None    # the full-clock configuration whose GPUs and clock the GP scales
    # The layout with the replica count the power plan runs (at full clock): its parallelism,
    # memory and placement are the plan's when only the power plan is feasible.
    scaled: Estimate | None = None


@attrs.frozen
class TrainOutcome:
    job_kind = "train"   # not a field: what the views dispatch on (`Outcome`)
    plan: Plan
    power: Budgeted | None = None

    @property
    def feasible(self) -> bool:
        """A plan exists, or the only thing it breaks is the power bound that the GP meets."""
        if self.plan.best is not None:
            return True
        return self.power is not None and self.power.result.feasible and self.plan.binding == ("power",)


# Each kind says which it is (`job_kind`: "train", "hetero", "serve" or "rl"), so that a view
# dispatches on it without loading the other kinds' modules.
Outcome: TypeAlias = "TrainOutcome | HeteroPlan | ServePlan | RLPlan"


def job_objective(job: Entity) -> str:
    """The planner objective a job's `maximize` / `minimize` names."""
    maximize, minimize = job.get("maximize"), job.get("minimize")
    if minimize is not None:
        return {"time": "time", "energy": "energy"}.get(minimize.name, "throughput")
    return {"mfu": "mfu", "goodput": "goodput"}.get(getattr(maximize, "name", ""), "throughput")


def plan_design(design: Design, job: str | None = None, objective: str | None = None, top: int = 3,
                power: bool = True) -> Outcome:
    """The plan of `job` (default: the first train job, else the first serve job); a train
    job's power budget too unless `power` is False (a drawing of the layout needs none).
    Raises `model.job.JobError` when the design has no such job."""
    kind, entity = select_job(design, job)
    if kind == "hetero":
        from .split.plan import plan_hetero

        return plan_hetero(entity)
    if kind == "serve":
        from .serve.plan import plan_serve

        return plan_serve(entity, top)
    if kind == "rl":
        from .rl.plan import plan_rl

        return plan_rl(entity, top, objective)
    train = job_from_entity(entity)
    objective = objective or job_objective(train.entity)
    chosen = plan(train, objective, top)
    return TrainOutcome(chosen, _budgeted(train, chosen, objective) if power else None)


def feasible(outcome: Outcome) -> bool:
    if isinstance(outcome, TrainOutcome):
        return outcome.feasible
    return outcome.best is not None


def _budgeted(job, chosen: Plan, objective: str) -> Budgeted | None:
    """Meet the job's power bound (or the cluster's budget) with GPU counts and clocks."""
    freed = without_power_limit(job)
    if freed is not job:      # the GP scales the best layout the bound did not constrain
        chosen = plan(freed, "throughput")
    powered = power_plan(job, objective=objective, chosen=chosen)
    if powered is None:
        return None
    inputs, result = powered
    scaled = None
    if result.feasible:
        c = chosen.best.config
        scaled = chosen.best if result.replicas == c.dp else estimate(job.shape, attrs.evolve(c, dp=result.replicas),
                                                                        job.partition)
    return Budgeted(inputs, result, tuple(budget_curve(inputs, result.budget)), chosen.best, scaled)
