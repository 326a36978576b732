"""`gclc degrade`: the plan's step with a part of the cluster slow or down, and the plan
re-made around it, as text or JSON (solver/train/degraded.py)."""

from __future__ import annotations

from ..dsl.numbers import big, duration, percent
from ..solver.train.degraded import Degraded
from .plan_json import parallelism
from .plan_text import _config


def degraded_text(r: Degraded) -> str:
    what = r.degradation.describe()
    if r.healthy.best is None or r.same is None:
        return f"{what}: no healthy plan fits this job, so there is no step to degrade"
    healthy, same = r.healthy.best, r.same
    lines = [f"{what}",
             f"  healthy     {duration(healthy.step_time)} a step, {big(healthy.tokens_per_s)} tokens/s  ({_config(healthy)})",
             f"  same plan   {duration(same.step_time)} a step, {big(same.tokens_per_s)} tokens/s  "
             f"(+{percent(r.slowdown - 1)} step time)"]
    best = r.replanned.best
    if best is None:
        lines.append("  re-planned  nothing fits")
    else:
        lines.append(f"  re-planned  {duration(best.step_time)} a step, {big(best.tokens_per_s)} tokens/s  ({_config(best)})")
    return "\n".join(lines)


def not_a_train_job(name: str, kind: str) -> str:
    """Why `gclc degrade --job NAME` refuses a serve or RL job, or a train job on several
    partitions (whose kind is `hetero`: the user wrote `train`, so say what makes it other)."""
    if kind == "hetero":
        return (f"`gclc degrade` plans train jobs on one partition; `{name}` is a train job split over several "
                f"partitions (a heterogeneous plan): put it `on` one partition to degrade it")
    return f"`gclc degrade` plans train jobs; `{name}` is {'an' if kind == 'rl' else 'a'} {kind} job"


def degraded_json(r: Degraded) -> dict:
    def point(e):
        if e is None:
            return None
        return {"step_time_s": e.step_time, "tokens_per_s": e.tokens_per_s, "parallelism": parallelism(e)}

    return {"degradation": {"part": r.degradation.part, "share": r.degradation.share},
            "healthy": point(r.healthy.best), "same_plan": point(r.same), "replanned": point(r.replanned.best),
            "slowdown": r.slowdown}
