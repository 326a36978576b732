"""The plan of an `rl` job: the best pair of pools (solver/rl/search.py), its runners-up, what
the step costs pool by pool, and why the pools go where they go: the best plan of each
alternative the search passed over (the partitions swapped, the pools colocated, the
same pools synchronous), each with its own step time.

Optimality: exact over the space of solver/rl/space.py under the model: every point is
bounded below by its generation phase's lower bounds and only those whose bound beats the
best value found are simulated (`proof` says how many); tests/solver/rl/test_search.py checks
the choice against the exhaustive enumerator (solver/rl/exhaustive.py) on small designs.
"""

from __future__ import annotations

import attrs

from ...compiler.design import Entity
from ...dsl.numbers import count, duration, percent
from ...model.job import JobError
from ...model.rl.job import RLJob, rl_job
from ...model.rl.step import COLOCATED, DISAGGREGATED
from .pools import Candidate, evaluate
from .search import Context, SearchResult, search
from ...dsl.records import frozen


@frozen
class Alternative:
    """The best plan of another shape than the chosen one, and what it costs."""

    what: str                    # "pools swapped", "colocated on h100", "synchronous"
    candidate: Candidate | None  # None: no feasible plan of that shape


@frozen
class RLPlan:
    job_kind = "rl"   # not a field: what the views dispatch on (solver/jobs.py `Outcome`)
    name: str
    job: RLJob
    best: Candidate | None
    runners_up: tuple[Candidate, ...]
    alternatives: tuple[Alternative, ...]
    samples: int                 # a step's samples
    seq: int                     # mean tokens a sample holds (prompt and response)
    response: float              # mean response tokens
    longest: int                 # the longest response of the step
    result: SearchResult

    @property
    def status(self) -> str:
        return "optimal" if self.best is not None else "infeasible"

    @property
    def step_time(self) -> float | None:
        return self.best.step.step_time if self.best else None

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.best.step.step_time if self.best else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Tokens trained a second: every sample's prompt and response."""
        return self.samples * self.seq / self.best.step.step_time if self.best else 0.0

    @property
    def time_to_steps(self) -> float | None:
        return self.job.steps * self.best.step.step_time if self.best and self.job.steps else None

    @property
    def proof(self) -> str:
        r = self.result
        if self.best is None:
            return f"infeasible: none of {count(r.points, 'point')} of the space has a feasible plan"
        return (f"optimal over {count(r.points, 'point')} (pools x layouts x staleness): best-first on lower bounds of "
                f"the generation phase, {count(r.simulated, 'generation layout')} simulated, "
                f"{count(r.pruned, 'point')} ruled out by their bounds")

    @property
    def why(self) -> tuple[str, ...]:
        """Each alternative against the chosen plan, in the objective's terms."""
        if self.best is None:
            return ()
        objective, mine = self.job.objective, self.best.value(self.job.objective)
        out = []
        for alt in self.alternatives:
            if alt.candidate is None:
                out.append(f"{alt.what}: no feasible plan")
                continue
            other = alt.candidate.value(objective)
            worse = other / mine - 1 if mine > 0 else 0.0
            out.append(f"{alt.what}: step {duration(alt.candidate.step.step_time)}"
                       + (f", {percent(worse)} worse" if worse > 1e-9 else ", no better"))
        return tuple(out)


RL_OBJECTIVES = ("throughput", "time", "energy", "cost")


def plan_rl(entity: Entity, top: int = 3, objective: str | None = None) -> RLPlan:
    """The plan of an rl job; `objective` overrides the job's (`gclc plan --objective`)."""
    try:
        job = rl_job(entity)
    except (ValueError, KeyError) as problem:
        raise JobError(f"`{entity.name}` cannot be planned: {problem}") from problem
    if objective is not None:
        if objective not in RL_OBJECTIVES:
            raise JobError(f"`--objective {objective}` does not apply to the rl job `{entity.name}`; it is planned "
                           f"for {', '.join(RL_OBJECTIVES)}")
        job = attrs.evolve(job, objective=objective)
    ctx = Context(job)
    result = search(job, top, ctx)
    best = result.best[0] if result.best else None
    alternatives = _alternatives(job, ctx, best) if best is not None else ()
    requests = ctx.requests
    return RLPlan(job.name, job, best, result.best[1:], alternatives, len(requests), ctx.seq,
                  sum(q.output for q in requests) / len(requests), max(q.output for q in requests), result)


def _alternatives(job: RLJob, ctx: Context, best: Candidate) -> tuple[Alternative, ...]:
    """The best plan with the pools' partitions swapped (both pools on one partition: each pool on each
    other partition the job may use), colocated, and the chosen pools run synchronously (staleness 0)."""
    out = []
    g, t = best.generation.layout.partition, best.train.partition
    if best.placement == DISAGGREGATED and g != t:
        swapped = _restricted(job, ctx, placement=DISAGGREGATED, generate=t, train=g)
        out.append(Alternative(f"generation on {t}, training on {g}", swapped))
    if best.placement == DISAGGREGATED and g == t:   # both pools on one partition: why not the others
        for other in (p.name for p in job.partitions if p.name != g):
            for gen_on, train_on in ((other, t), (g, other)):
                if job.generate.partition in (None, gen_on) and job.train.partition in (None, train_on):
                    out.append(Alternative(f"generation on {gen_on}, training on {train_on}",
                                           _restricted(job, ctx, placement=DISAGGREGATED, generate=gen_on,
                                                       train=train_on)))
    if best.placement == DISAGGREGATED and job.placement == "auto":
        for name in dict.fromkeys((t, g)):
            out.append(Alternative(f"colocated on {name}", _restricted(job, ctx, placement=COLOCATED, generate=name,
                                                                        train=name)))
    if best.placement == COLOCATED and job.placement == "auto":
        out.append(Alternative("disaggregated", _restricted(job, ctx, placement=DISAGGREGATED)))
    if best.staleness > 0:
        out.append(Alternative("the same pools synchronous (staleness 0)",
                               evaluate(job, best.placement, 0, best.generation, best.train)))
    return tuple(out)


def _restricted(job: RLJob, ctx: Context, placement: str, generate: str | None = None,
                train: str | None = None) -> Candidate | None:
    pins = {"generate": attrs.evolve(job.generate, partition=generate or job.generate.partition),
            "train": attrs.evolve(job.train, partition=train or job.train.partition)}
    narrowed = attrs.evolve(job, placement=placement, **pins)
    ctx.job = narrowed
    try:
        found = search(narrowed, 0, ctx).best
    finally:
        ctx.job = job
    return found[0] if found else None


__all__ = ["Alternative", "RLPlan", "plan_rl"]
