"""The optimum beside the heuristic: at a decision epoch, which present job runs where
and on how many GPUs, to maximize priority-weighted throughput.

Variables: x[j, o] in {0, 1} picks option o (a partition and GPU count) of gang job j;
g[j, o] in [0, gpus(o)] whole GPUs for a job that is not a gang; n[j, o, k] >= 0 whole
GPUs of j's option o in group k of the partition (a topology domain at a coarse tier).
Constraints: at most one option per job; the groups' GPUs add up to the option's size;
no group holds more than its working GPUs. Objective: sum of priority x rate / the job's
best rate (each job's throughput normalized, so tokens/s and GPU-s/s compare).

Any allocation the scheduler makes is feasible here (a gang may span groups in both),
so the optimum is never below the scheduler's value: the gap is what the heuristic
leaves on the table at that epoch.
"""

from __future__ import annotations

import contextlib
import os
import sys


from .records import SchedJob
from .simulate import Epoch
from ...dsl.records import frozen

MAX_VARIABLES = 20_000


@frozen
class Optimum:
    time: float
    value: float | None           # None: too large or the solver failed
    heuristic: float
    status: str
    assignment: tuple[tuple[str, str, int], ...] = ()

    @property
    def gap(self) -> float | None:
        if self.value is None or self.value <= 0:
            return None
        return max(0.0, (self.value - self.heuristic) / self.value)


def worth(job: SchedJob, partition: str, gpus: int) -> float:
    """Priority-weighted normalized throughput of `job` on `gpus` GPUs of `partition`."""
    options = [o for o in job.options if o.partition == partition]
    exact = next((o for o in options if o.gpus == gpus), None)
    if exact is not None:
        return job.priority * exact.rate / job.best_rate
    largest = max(options, key=lambda o: o.gpus)          # a partial job that is not a gang
    return job.priority * largest.rate * gpus / largest.gpus / job.best_rate


def heuristic_value(epoch: Epoch) -> float:
    jobs = {j.name: j for j in epoch.jobs}
    return sum(worth(jobs[n], p, g) for n, p, g in epoch.running)


def solve(epoch: Epoch) -> Optimum:
    import cvxpy as cp    # lazily: only `gclc schedule` pays for it

    heuristic = heuristic_value(epoch)
    size = sum(len(j.options) * len(epoch.capacity[o.partition]) for j in epoch.jobs for o in j.options)
    if size > MAX_VARIABLES:
        return Optimum(epoch.time, None, heuristic, "skipped (too large)")
    picks, objective, constraints, place = [], 0, [], {p: [] for p in epoch.capacity}
    for job in epoch.jobs:
        chosen = []
        for o in job.options:
            groups = len(epoch.capacity[o.partition])
            n = cp.Variable(groups, integer=True)
            if job.gang:
                x = cp.Variable(boolean=True)
                used, value = o.gpus * x, job.priority * o.rate / job.best_rate * x
                chosen.append(x)
            else:
                x = cp.Variable(integer=True)
                used, value = x, job.priority * o.rate / o.gpus / job.best_rate * x
                constraints += [x >= 0, x <= o.gpus]
                chosen.append(x / o.gpus)
            constraints += [n >= 0, cp.sum(n) == used]
            place[o.partition].append(n)
            objective = objective + value
            picks.append((job, o, x))
        constraints.append(sum(chosen) <= 1)
    for partition, ns in place.items():
        if ns:
            constraints.append(sum(ns) <= list(epoch.capacity[partition]))
    problem = cp.Problem(cp.Maximize(objective), constraints)
    try:
        with _quiet():
            problem.solve(solver=cp.HIGHS, mip_rel_gap=1e-9, mip_abs_gap=0.0)
    except cp.error.SolverError as error:
        return Optimum(epoch.time, None, heuristic, f"solver failed: {error}")
    if problem.status not in ("optimal", "optimal_inaccurate"):
        return Optimum(epoch.time, None, heuristic, problem.status)
    assignment = tuple((j.name, o.partition, round(float(x.value) * (o.gpus if j.gang else 1)))
                       for j, o, x in picks if x.value is not None and round(float(x.value)) > 0)
    return Optimum(epoch.time, float(problem.value), heuristic, "optimal", assignment)


@contextlib.contextmanager
def _quiet():
    """HiGHS prints a banner on the C-level stdout, which would corrupt `--json`: point
    file descriptor 1 at /dev/null while it runs."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):   # no real stdout (captured): nothing to protect
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
