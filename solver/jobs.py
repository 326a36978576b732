"""Plan whichever job a design names: a train job (with its power budget), a job split across
partitions, or a serve job. The command line, the report and the diagrams all start here, so
that each job kind takes one path from the design to its plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias


from ..compiler.design import Design, Entity
from ..model.job import JobError, job_from_entity, select_job
from .train.plan import Plan, plan
from .power.section import PowerSection, power_section
from ..dsl.records import frozen

if TYPE_CHECKING:  # the heterogeneous split and serving load only for a job of their kind
    from .split.plan import HeteroPlan
    from .serve.plan import ServePlan
    from .rl.plan import RLPlan


@frozen
class TrainOutcome:
    job_kind = "train"   # not a field: what the views dispatch on (`Outcome`)
    plan: Plan
    # Under a power limit: what the plan says about its power (the limit, what binds, the
    # relaxation, the layout's curve). The plan itself is the operating point.
    power: PowerSection | None = None

    @property
    def feasible(self) -> bool:
        return self.plan.best is not None


# Each kind says which it is (`job_kind`: "train", "hetero", "serve" or "rl"), so that a view
# dispatches on it without loading the other kinds' modules.
Outcome: TypeAlias = "TrainOutcome | HeteroPlan | ServePlan | RLPlan"


def job_objective(job: Entity) -> str:
    """The planner objective a job's `maximize` / `minimize` names."""
    maximize, minimize = job.get("maximize"), job.get("minimize")
    if minimize is not None:
        return {"time": "time", "energy": "energy", "cost": "cost"}.get(minimize.name, "throughput")
    return {"mfu": "mfu", "goodput": "goodput"}.get(getattr(maximize, "name", ""), "throughput")


def plan_design(design: Design, job: str | None = None, objective: str | None = None, top: int = 3,
                power: bool = True) -> Outcome:
    """The plan of `job` (default: the first train job, else the first serve job); a train
    job's power budget too unless `power` is False (a drawing of the layout needs none).
    Raises `model.job.JobError` when the design has no such job."""
    kind, entity = select_job(design, job)
    if kind == "hetero":
        from .split.plan import plan_hetero

        if objective not in (None, "throughput", "time"):   # a split is planned for throughput alone
            raise JobError(f"`--objective {objective}` does not apply to `{entity.name}`, a job split across "
                           "partitions; it is planned for throughput (and so for time)")
        return plan_hetero(entity)
    if kind == "serve":
        from .serve.plan import plan_serve

        return plan_serve(entity, top, objective=objective)
    if kind == "rl":
        from .rl.plan import plan_rl

        return plan_rl(entity, top, objective)
    train = job_from_entity(entity)
    objective = objective or job_objective(train.entity)
    chosen = plan(train, objective, top)
    return TrainOutcome(chosen, power_section(train, chosen) if power else None)


def feasible(outcome: Outcome) -> bool:
    if isinstance(outcome, TrainOutcome):
        return outcome.feasible
    return outcome.best is not None


