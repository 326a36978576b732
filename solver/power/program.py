"""Power-constrained throughput over continuous GPU counts and clocks: a geometric program
(cvxpy `gp=True`, solved with Clarabel) of one layout.

Its role. The plan is the planner's search over layout x whole GPU count x clock step
(solver/train/search.py), exact over that space; this GP is the continuous relaxation of the
plan's layout (solver/power/section.py): its optimum says what finer clocks and GPU counts
could add (the gap the plan prints), and its dual is the marginal value of power. Its own
whole-replica rounding (`whole_replicas`) is kept for `power_plan`, a quick estimate from a
full-clock plan without a search.

The model, built from one planned configuration (an `Estimate` of `N0` GPUs giving
`T0` tokens/s at full clock):

Variables
    n   GPUs that run, continuous, `n_min <= n <= n_max`. `n_min` is the fewest
        replicas (of tp x pp x cp GPUs: fewer cannot hold the model) that the plan
        allows, `n_max` the GPUs the planned configuration uses (the batch does not split
        over more). Fewer GPUs means fewer data-parallel replicas; GPUs (with their share
        of hosts, network and overheads) that do not run are powered off.
    f   clock (and so power-cap) ratio, `f_min <= f <= 1`.
    T   throughput, tokens/s.

Throughput (posynomial step time). The planned step `step0` splits, from its
breakdown, into four shares that sum to 1:

    a1  per-micro-batch work that scales with 1/clock: compute and recompute
    a2  per-micro-batch work that does not: exposed TP/CP/EP/PP communication, and the
        optimizer when ZeRO shards it over the replicas
    a3  fixed work that scales with 1/clock: the compute share of the pipeline bubble
    a4  fixed work that does not: the rest of the bubble, gradient synchronization
        (and an unsharded optimizer)

With fewer GPUs the batch is split over fewer data-parallel replicas, so each runs
N0/n times the micro-batches; the bubble and the synchronization stay. Hence

    step(n, f) = step0 * (a1 (N0/n)/f + a2 (N0/n) + a3/f + a4)
    T <= T0 / (a1 (N0/n)/f + a2 (N0/n) + a3/f + a4)                [clock="step", default]

written as the posynomial constraint `T/T0 * (a1 x^-1 f^-1 + a2 x^-1 + a3 f^-1 + a4) <= 1`
with x = n/N0. `alpha = a1 + a3` is the clock-scaled share of the step. This is the
step model's own structure, so it extrapolates down to one replica; a second estimate
of the same configuration with fewer replicas (dp divided by its smallest factor that
keeps ep valid) checks it (`fit_error`) and also fits the power-law exponent of the
simpler monomial model (clock="monomial"):

    T <= T0 (n/N0)^gamma f^alpha,   gamma = log(T0/T1) / log(N0/N1) clamped to (0, 1]

the log-log tangent of the above at (N0, 1). It overestimates throughput away from the
plan (below full clock, and far below N0 GPUs, where the bubble share changes), so it
is offered for comparison only. When dp cannot be reduced, gamma = 1 (`gamma_source`).

Power per GPU: the chip's DVFS curve (`compiler.model.dvfs`, the same one the step model
uses for a power cap; dynamic power ~ f V^2 with V ~ f, so k = 3 unless the chip says):

    P(f) = P_idle + (P_full - P_idle) * f^k

`P_full` is `compiler.model.power.gpu_power` at the plan's busy share (the accelerator
at full clock doing this job), `P_idle` the chip's idle power. The rest of the cluster
(CPUs, NICs, DPUs, DRAM, node and unit overheads, switches, optics, cluster overhead)
comes from `compiler.metrics.power_breakdown`, shared per GPU: `P_rest` with the GPUs idle,
and its host parts follow the GPUs' heat (`compiler.host_load`), `s` W per W a GPU draws above
idle. The power cap that realizes clock f is P(f).

    facility(n, f) = PUE * n * (P_idle + P_rest + (1 + s) * (P(f) - P_idle)) <= budget

Objectives: "throughput" (maximize T), "time" (minimize tokens/T: the same optimum),
"energy" (minimize facility/T: a posynomial over a monomial, so still a GP).

Whole replicas. The GP's n is continuous (the `relaxed_*` figures: a bound); what runs
is a replica count the parallelism allows (`power_inputs.replica_counts`: the batch
splits into whole micro-batches of the planned size over it, expert and shard groups
tile, memory still fits), each at its own best clock within the budget (the highest for
throughput; for energy the least energy per token, a posynomial in f). In log variables
the GP is convex, so the relaxation's optimum over f is concave (or, for energy, convex)
in log n: the best allowed count is a neighbour of the relaxed n (`whole_replicas`).

Marginal value of power: in a GP the dual `y` of the power constraint is the
sensitivity of log T to log budget, so `dT/dB = y * T / B` (of the relaxation); per MW.

Infeasible budgets (below one replica at f_min) are an answer: status "infeasible",
with the shortfall in watts. Nothing here raises for a bad budget.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable, Sequence

import attrs

from ...compiler.design import Item, Record
from ...dsl.numbers import number, percent, quantity
from ...model.job import Job
from .inputs import F_MIN, PowerInputs, budget_of, busy_share, step_shares
from ...dsl.records import frozen

__all__ = ["F_MIN", "OBJECTIVES", "PowerInputs", "PowerResult", "budget_of", "busy_share",
           "inputs_of", "power_plan", "solve_power", "step_shares", "sweep", "throughput_curve",
           "whole_replicas", "without_power_limit"]

OBJECTIVES = ("throughput", "time", "energy")
_TOL = 1e-4      # relative tolerance for saying a bound binds


@frozen
class PowerResult:
    status: str                  # optimal | infeasible | error
    objective: str
    budget: float                # W, facility
    # What runs: whole data-parallel replicas, a count the parallelism allows (the batch
    # divides it; `PowerInputs.allowed_gpus`), at the best clock for that count.
    gpus: int = 0
    replicas: int = 0            # data-parallel replicas (dp) of the planned layout
    clock: float = 0.0           # f
    power_cap: float = 0.0       # W per GPU that realizes f
    tokens_per_s: float = 0.0
    facility_power: float = 0.0  # W
    dual: float = 0.0            # d log(objective) / d log(budget), from the GP (the relaxation)
    marginal_tokens_per_s_per_mw: float | None = None
    binding: tuple[str, ...] = ()
    shortfall: float = 0.0       # W more budget needed (infeasible only)
    # The GP's optimum over continuous GPU counts: a bound the whole replicas approach.
    relaxed_gpus: float = 0.0
    relaxed_clock: float = 0.0
    relaxed_tokens_per_s: float = 0.0
    units: float = 0.0           # the GPUs that run, in scale-up units (or nodes)
    time_to_train: float | None = None   # s, when the job says how many tokens
    message: str = ""

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"

    @property
    def energy_per_token(self) -> float | None:
        return self.facility_power / self.tokens_per_s if self.tokens_per_s > 0 else None


# ----------------------------------------------------------------- the GP


def solve_power(inputs: PowerInputs, budget: float, objective: str = "throughput",
                clock: str = "step") -> PowerResult:
    """The optimum under a facility budget (W). Never raises for a bad budget."""
    import cvxpy as cp  # imported here: 2 s of start-up that most commands never need

    refused = _refused(inputs, budget, objective, clock)
    if refused is not None:
        return refused
    inputs = attrs.evolve(inputs, max_gpus=max(inputs.max_gpus, inputs.min_gpus))
    n0 = inputs.gpus
    gp = _program(inputs, budget, objective, clock)
    x, f, problem, power_limit = gp.x, gp.f, gp.problem, gp.power_limit
    try:
        with warnings.catch_warnings():     # "may be inaccurate" becomes a note in the result
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(gp=True, solver=cp.CLARABEL, warm_start=False)
    except (cp.SolverError, ValueError, ArithmeticError) as error:  # numerical trouble: say so
        return PowerResult("error", objective, budget, message=f"the GP solver failed: {error}")
    if problem.status not in ("optimal", "optimal_inaccurate") or x.value is None:
        return PowerResult("error", objective, budget, message=f"the GP solver says {problem.status}")
    n_relaxed = min(max(float(x.value) * n0, inputs.min_gpus), inputs.max_gpus)
    f_relaxed = min(max(float(f.value), inputs.f_min), 1.0)
    relaxed = inputs.throughput(n_relaxed, f_relaxed, clock)
    chosen = whole_replicas(inputs, budget, objective, clock, n_relaxed)
    if chosen is None:   # the relaxation rounds to no allowed count: cannot be, one replica fits
        return PowerResult("error", objective, budget, message="no whole replica count fits the budget")
    n, clk = chosen
    tokens_per_s = inputs.throughput(n, clk, clock)
    facility = inputs.facility(n, clk)
    dual = float(power_limit.dual_value or 0.0)
    marginal = None
    if objective != "energy":
        marginal = max(0.0, dual) * relaxed / budget * 1e6
    binding = _binding(inputs, budget, n, clk, facility)
    replica = inputs.replica_gpus or inputs.min_gpus
    return PowerResult(
        "optimal", objective, budget, gpus=round(n), replicas=round(n / replica), clock=clk,
        power_cap=inputs.gpu_watts(clk), tokens_per_s=tokens_per_s, facility_power=facility, dual=dual,
        marginal_tokens_per_s_per_mw=marginal, binding=binding, relaxed_gpus=n_relaxed, relaxed_clock=f_relaxed,
        relaxed_tokens_per_s=relaxed, units=n / max(1, inputs.gpus_per_unit),
        time_to_train=inputs.tokens / tokens_per_s if inputs.tokens and tokens_per_s > 0 else None,
        message=_message(inputs, n, clk, binding) + (" (the solver reports low accuracy)"
                                                      if problem.status == "optimal_inaccurate" else ""))


def _refused(inputs: PowerInputs, budget: float, objective: str, clock: str) -> PowerResult | None:
    """The result without a solve: an unknown objective or clock model, or a budget below
    what one replica draws at its lowest clock; None when the program is worth solving."""
    if objective not in OBJECTIVES:
        return PowerResult("error", objective, budget, message=f"unknown objective {objective!r}; one of {OBJECTIVES}")
    if clock not in ("step", "monomial"):
        return PowerResult("error", objective, budget, message=f"unknown clock model {clock!r}: step or monomial")
    least = inputs.least_power
    if not budget > 0 or budget < least * (1 - 1e-9):
        short = least - max(budget, 0.0) if budget == budget else least
        return PowerResult("infeasible", objective, budget, shortfall=short, binding=("power",),
                           message=(f"the budget {quantity(budget, 'W')} is {quantity(short, 'W')} short of the "
                                    f"{quantity(least, 'W')} that one replica ({number(inputs.min_gpus)} GPUs) "
                                    f"draws at {percent(inputs.f_min)} clock"))
    return None


def _binding(inputs: PowerInputs, budget: float, n: float, clk: float, facility: float) -> tuple[str, ...]:
    """The limits the chosen point sits on (within _TOL)."""
    return tuple(name for name, hit in (
        ("power", facility >= budget * (1 - _TOL)),
        ("all GPUs", n >= inputs.max_gpus * (1 - _TOL)),
        ("one replica", n <= inputs.min_gpus * (1 + _TOL)),
        ("full clock", clk >= 1 - _TOL),
        ("lowest clock", clk <= inputs.f_min * (1 + _TOL))) if hit)


@frozen
class _Program:
    """One GP, its variables and its power constraint (whose dual is the marginal value)."""

    problem: object
    x: object
    f: object
    power_limit: object
    values: dict = attrs.field(eq=False)   # the parameters by name


_PROGRAMS: dict[tuple, _Program] = {}   # one compiled program per shape: a solve sets its parameters


def _program(inputs: PowerInputs, budget: float, objective: str, clock: str) -> _Program:
    """The GP for these inputs and budget. The step model's GP is built once per shape (the
    objective, the DVFS exponent, which shares and which power terms are present) with its
    data as cvxpy parameters, so cvxpy compiles it once and a solve only sets the values (a
    rebuilt problem spent most of its solve compiling); the monomial form (exponents from the
    inputs) is built afresh."""
    n0 = inputs.gpus
    static = inputs.p_idle + inputs.p_rest
    dynamic = (inputs.p_full - inputs.p_idle) * (1 + inputs.rest_slope)
    live = dynamic > 1e-9 * static
    # shares below 1e-9 change nothing measurable but make the log-space problem badly scaled
    present = tuple(c > 1e-9 for c in inputs.shares)
    values = {"static": static, "dynamic": dynamic if live else 1.0, "scale": inputs.pue * n0 / budget,
              "x_max": inputs.max_gpus / n0, "x_min": inputs.min_gpus / n0, "f_min": inputs.f_min,
              **{f"a{i}": c for i, c in enumerate(inputs.shares) if present[i]}}
    key = (objective == "energy", inputs.exponent, present, live)
    gp = _PROGRAMS.get(key) if clock == "step" else None
    if gp is None:
        gp = _build(inputs, objective, clock, present, live, values)
        if clock == "step":
            _PROGRAMS[key] = gp
    for name, value in values.items():
        gp.values[name].value = value
    return gp


def _build(inputs: PowerInputs, objective: str, clock: str, present: tuple[bool, ...], live: bool,
           values: dict) -> _Program:
    import cvxpy as cp

    p = {name: cp.Parameter(pos=True, name=name, value=value) for name, value in values.items()}
    x = cp.Variable(pos=True, name="n_over_N0")
    f = cp.Variable(pos=True, name="clock")
    tau = cp.Variable(pos=True, name="T_over_T0")
    per_gpu = p["static"] + (p["dynamic"] * f ** inputs.exponent if live else 0)
    power_limit = p["scale"] * x * per_gpu <= 1         # facility / budget
    if clock == "monomial":
        speed = tau <= x ** inputs.gamma * f ** min(max(inputs.alpha, 0.0), 1.0)
    else:
        monomials = (x ** -1 * f ** -1, x ** -1, f ** -1, 1)
        terms = [p[f"a{i}"] * m for i, m in enumerate(monomials) if present[i]]
        speed = tau * sum(terms[1:], terms[0]) <= 1
    constraints = [speed, power_limit, x <= p["x_max"], x >= p["x_min"], f <= 1, f >= p["f_min"]]
    goal = cp.Minimize(x * per_gpu / tau) if objective == "energy" else cp.Maximize(tau)
    return _Program(cp.Problem(goal, constraints), x, f, power_limit, p)


NEIGHBOURS = 3      # allowed counts tried on each side of the relaxation's optimum
EXHAUSTIVE = 64     # up to this many allowed counts, every one is tried


def whole_replicas(inputs: PowerInputs, budget: float, objective: str, clock: str,
                   n_relaxed: float) -> tuple[float, float] | None:
    """(GPUs, clock) of the best allowed GPU count, each at its best clock within the budget.

    In log variables the GP is convex, so its optimum over the other variables is concave
    (throughput) or convex (energy) in log n: over a set of counts the best is a neighbour
    of the continuous optimum. Small sets are tried whole; large ones around it."""
    counts = inputs.allowed_near(n_relaxed, EXHAUSTIVE, NEIGHBOURS)
    best, best_key = None, None
    for n in counts:
        top = inputs.clock_within(n, budget)
        if top is None:
            continue
        f = _frugal_clock(inputs, n, top, clock) if objective == "energy" else top
        tokens = inputs.throughput(n, f, clock)
        if objective == "energy":
            key = (inputs.facility(n, f) / tokens, -tokens)
        else:
            key = (-tokens, n)   # ties: fewer GPUs
        if best_key is None or key < best_key:
            best, best_key = (n, f), key
    return best


def _frugal_clock(inputs: PowerInputs, n: float, top: float, clock: str) -> float:
    """The clock in [f_min, top] with the least energy per token at `n` GPUs: energy per
    token is a posynomial in f, so convex in log f (golden-section search on log f)."""
    def energy(log_f: float) -> float:
        f = math.exp(log_f)
        return inputs.facility(n, f) / inputs.throughput(n, f, clock)

    low, high = math.log(inputs.f_min), math.log(top)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        if high - low < 1e-12:
            break
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if energy(a) <= energy(b):
            high = b
        else:
            low = a
    return min(max(math.exp((low + high) / 2), inputs.f_min), top)


def _message(inputs: PowerInputs, n: float, f: float, binding: tuple[str, ...]) -> str:
    state = "the budget binds" if "power" in binding else "the budget does not bind"
    replica = inputs.replica_gpus or inputs.min_gpus
    watts = quantity(inputs.gpu_watts(f), "W")
    # at full clock the GPUs draw what the model gives them; below it the draw is the cap to set
    draw = f"each drawing {watts}" if f >= 0.999 else f"power cap {watts} per GPU (its draw at that clock)"
    return (f"{state}: run {number(round(n))} of {number(round(inputs.max_gpus))} GPUs "
            f"({number(round(n / replica))} replicas) at {percent(f)} clock, {draw}")


# ----------------------------------------------------------------- conveniences


def inputs_of(job_or_inputs, f_min: float | None = None) -> PowerInputs:
    """PowerInputs from PowerInputs, a Plan (with `.job` and `.best`), a (job, estimate) pair or a Job."""
    if isinstance(job_or_inputs, PowerInputs):
        return job_or_inputs
    if isinstance(job_or_inputs, tuple):
        job, best = job_or_inputs
        return PowerInputs.from_plan(job, best, f_min)
    if hasattr(job_or_inputs, "best") and hasattr(job_or_inputs, "job"):
        if job_or_inputs.best is None:
            raise ValueError("the plan is infeasible: there is no configuration to power")
        return PowerInputs.from_plan(job_or_inputs.job, job_or_inputs.best, f_min)
    from ..train.plan import plan

    chosen = plan(job_or_inputs, "throughput")
    if chosen.best is None:
        raise ValueError("the plan is infeasible: there is no configuration to power")
    return PowerInputs.from_plan(job_or_inputs, chosen.best, f_min)


def without_power_limit(job: Job) -> Job:
    """The job with no limit on its power: its `subject to { power ... }` bounds removed, and
    its partition's and cluster's `power.budget` (what the plan would be without them)."""
    if job.graph.power_budget is not None or job.partition.power_budget is not None:
        job = attrs.evolve(job, graph=attrs.evolve(job.graph, power_budget=None),
                           partition=attrs.evolve(job.partition, power_budget=None))
    limits = job.entity.get("subject to")
    items = getattr(limits, "items", None)
    if not items:
        return job
    kept = tuple(i for i in items if getattr(i.value, "target", None) != "power")
    if len(kept) == len(items):
        return job
    record = Record(tuple(Item(i.name, Record(kept), i.span) if i.name == "subject to" else i
                          for i in job.entity.record.items))
    return attrs.evolve(job, entity=attrs.evolve(job.entity, record=record))


def power_plan(job: Job, budget: float | None = None, objective: str = "throughput", chosen=None,
               f_min: float | None = None) -> tuple[PowerInputs, PowerResult] | None:
    """Plan the job without its power bound (or take `chosen`, a Plan of it), then meet
    `budget` (default: the job's `power <=`, else the cluster's budget) with the GP.
    None when there is no budget or no feasible configuration."""
    budget = budget if budget is not None else budget_of(job)
    if budget is None:
        return None
    if chosen is None:
        from ..train.plan import plan

        chosen = plan(without_power_limit(job), "throughput")
    if chosen.best is None:
        return None
    inputs = PowerInputs.from_plan(job, chosen.best, f_min)
    goal = {"energy": "energy", "time": "time"}.get(objective, "throughput")
    return inputs, solve_power(inputs, budget, goal)


def throughput_curve(job_or_inputs, budgets: Iterable[float], objective: str = "throughput",
                     clock: str = "step") -> list[float]:
    """Tokens/s at each budget (0 where infeasible); non-decreasing in the budget for the
    throughput objective (the GP's optimum can only improve when its constraint loosens)."""
    inputs = inputs_of(job_or_inputs)
    budgets = list(budgets)
    values = [solve_power(inputs, b, objective, clock).tokens_per_s for b in budgets]
    if objective != "energy":
        ordered = sorted(zip(budgets, values))
        for (_, low), (_, high) in zip(ordered, ordered[1:]):
            assert high >= low * (1 - 1e-5), "throughput fell as the budget grew: a solver tolerance problem"
    return values


def sweep(inputs: PowerInputs, budgets: Sequence[float], objective: str = "throughput") -> list[PowerResult]:
    return [solve_power(inputs, b, objective) for b in budgets]
