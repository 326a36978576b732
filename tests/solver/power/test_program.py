"""Power-constrained throughput (solver/power/program.py): the GP's laws and its reading of a job."""

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import assume, given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.power import job_power
from gclc.model.train.step import estimate
from gclc.solver.power.program import PowerInputs, budget_of, power_plan, solve_power, step_shares, throughput_curve, without_power_limit

ROOT = Path(__file__).parent.parent.parent.parent
DATA = ROOT / "tests" / "data"
JOB = train_job(check_file(str(DATA / "train.gcl"), {"nodes": "4"}).design)
# A configuration with a pipeline (so the step has a bubble) rather than a plan: the
# tests do not wait on the search, and every share of the step is non-zero.
CONFIG = TrainConfig(batch=256, seq=4096, tp=2, pp=2, dp=8, microbatch=1, sp=True, zero=1)
BEST = estimate(JOB.shape, CONFIG, JOB.partition)
INPUTS = PowerInputs.from_plan(JOB, BEST)

# Half the profile's examples (30 under `ci`, 1000 under GCLC_HYPOTHESIS=deep): each is a solve.
EXAMPLES = max(10, settings.default.max_examples // 2)

# ----------------------------------------------------------------- random model inputs


@st.composite
def power_inputs(draw):
    raw = [draw(st.floats(0.0, 1.0)) for _ in range(4)]
    assume(sum(raw) > 1e-3)
    shares = tuple(r / sum(raw) for r in raw)
    gpus = draw(st.sampled_from([8, 64, 1024, 100_000]))
    replica = draw(st.sampled_from([d for d in (1, 2, 8, 32) if gpus % d == 0]))
    idle = draw(st.floats(20.0, 200.0))
    return PowerInputs(name="random", tokens_per_s=draw(st.floats(1e3, 1e8)), gpus=float(gpus),
                       min_gpus=float(replica), max_gpus=float(gpus), shares=shares, p_idle=idle,
                       p_full=idle + draw(st.floats(50.0, 1200.0)), p_rest=draw(st.floats(0.0, 1500.0)),
                       pue=draw(st.floats(1.0, 1.6)), f_min=draw(st.sampled_from([0.3, 0.5, 0.7])))


def budget_between(inputs: PowerInputs, share: float) -> float:
    """A budget `share` of the way (in log space) from the least to 1.2 x the full power."""
    low, high = math.log(inputs.least_power), math.log(1.2 * inputs.full_power)
    return math.exp(low + share * (high - low))


# ----------------------------------------------------------------- laws


@settings(max_examples=EXAMPLES)
@given(power_inputs(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_throughput_never_falls_as_the_budget_grows(inputs, a, b):
    low, high = sorted((budget_between(inputs, a), budget_between(inputs, b)))
    t_low, t_high = (solve_power(inputs, x).tokens_per_s for x in (low, high))
    assert t_high >= t_low * (1 - 1e-6)


@settings(max_examples=EXAMPLES)
@given(power_inputs(), st.floats(0.02, 0.98))
def test_marginal_value_matches_the_curve(inputs, share):
    """d log T / d log B from the dual lies between the one-sided differences of the
    relaxation's curve (log T is concave in log B, so the right slope <= dual <= the left
    slope): the dual is the GP's, over continuous GPU counts."""
    budget = budget_between(inputs, share)
    result = solve_power(inputs, budget)
    assert result.feasible
    assert result.marginal_tokens_per_s_per_mw >= 0
    h = 1e-3
    down, up = solve_power(inputs, budget * (1 - h)), solve_power(inputs, budget * (1 + h))
    assume(down.feasible)
    left = (math.log(result.relaxed_tokens_per_s) - math.log(down.relaxed_tokens_per_s)) / -math.log(1 - h)
    right = (math.log(up.relaxed_tokens_per_s) - math.log(result.relaxed_tokens_per_s)) / math.log(1 + h)
    slope = result.marginal_tokens_per_s_per_mw / 1e6 * budget / result.relaxed_tokens_per_s
    assert right - 1e-3 <= slope <= left + 1e-3


def test_marginal_value_is_the_derivative_on_the_job():
    budget = 0.6 * INPUTS.full_power
    result = solve_power(INPUTS, budget)
    assert "power" in result.binding
    h = 1e-4 * budget
    derivative = (solve_power(INPUTS, budget + h).relaxed_tokens_per_s
                  - solve_power(INPUTS, budget - h).relaxed_tokens_per_s) / (2 * h)
    assert result.marginal_tokens_per_s_per_mw == pytest.approx(derivative * 1e6, rel=1e-2)


@settings(max_examples=EXAMPLES)
@given(power_inputs(), st.floats(0.0, 1.0))
def test_energy_objective_never_spends_more_per_token(inputs, share):
    budget = budget_between(inputs, share)
    fast, frugal = solve_power(inputs, budget, "throughput"), solve_power(inputs, budget, "energy")
    assert fast.feasible and frugal.feasible
    assert frugal.energy_per_token <= fast.energy_per_token * (1 + 1e-5)
    assert frugal.facility_power <= budget * (1 + 1e-6)


def test_time_objective_has_the_throughput_optimum():
    budget = 0.5 * INPUTS.full_power
    fast, quick = solve_power(INPUTS, budget, "throughput"), solve_power(INPUTS, budget, "time")
    assert quick.tokens_per_s == pytest.approx(fast.tokens_per_s, rel=1e-5)


@given(power_inputs(), st.floats(0.0, 0.999))
def test_a_budget_below_one_replica_is_infeasible_not_an_error(inputs, share):
    budget = share * inputs.least_power
    result = solve_power(inputs, budget)
    assert result.status == "infeasible"
    assert result.shortfall == pytest.approx(inputs.least_power - budget, rel=1e-9)
    assert "short" in result.message and result.tokens_per_s == 0


@pytest.mark.parametrize("budget", [0.0, -5.0, float("nan")])
def test_nonsense_budgets_are_infeasible(budget):
    assert solve_power(INPUTS, budget).status == "infeasible"


def test_unknown_objective_is_an_error_result():
    assert solve_power(INPUTS, 1e6, "mfu").status == "error"


# ----------------------------------------------------------------- the job's model


def test_inputs_from_a_job():
    assert sum(INPUTS.shares) == pytest.approx(1.0)
    assert all(s >= 0 for s in INPUTS.shares) and INPUTS.shares[2] > 0   # a bubble that scales with clock
    # the fewest replicas whose configuration fits (fewer replicas shard ZeRO state over fewer GPUs)
    assert INPUTS.min_gpus == CONFIG.tp * CONFIG.pp * CONFIG.cp * INPUTS.counts[0] and INPUTS.max_gpus == CONFIG.gpus
    assert INPUTS.counts[-1] == CONFIG.dp and all(CONFIG.batch % (k * CONFIG.microbatch) == 0 for k in INPUTS.counts)
    assert INPUTS.p_idle < INPUTS.p_full <= JOB.partition.node.accelerator.tdp
    assert INPUTS.throughput(INPUTS.gpus, 1.0) == pytest.approx(BEST.tokens_per_s)
    assert 0 < INPUTS.gamma <= 1
    # the posynomial step model against the step model itself at half the replicas
    assert INPUTS.fit_error is not None and abs(INPUTS.fit_error) < 0.1


def test_full_power_is_the_plans_power():
    """At every planned GPU and full clock the GP's facility power is `job_power`'s."""
    b = BEST.breakdown
    busy = min(1.0, (b.compute + b.recompute + b.optimizer) / BEST.step_time)
    expected = job_power(JOB.graph, JOB.partition, CONFIG.gpus, busy).total
    assert INPUTS.full_power == pytest.approx(expected, rel=1e-9)


def test_shares_follow_the_breakdown():
    a1, a2, a3, a4 = step_shares(BEST)
    b = BEST.breakdown
    assert a1 == pytest.approx((b.compute + b.recompute) / BEST.step_time)


def test_an_ample_budget_runs_everything_at_full_clock():
    result = solve_power(INPUTS, 2 * INPUTS.full_power)
    assert result.gpus == pytest.approx(INPUTS.max_gpus, rel=1e-4)
    assert result.clock == pytest.approx(1.0, rel=1e-4)
    assert result.tokens_per_s == pytest.approx(BEST.tokens_per_s, rel=1e-4)
    assert result.marginal_tokens_per_s_per_mw == pytest.approx(0.0, abs=1e-3 * BEST.tokens_per_s)


def test_a_tight_budget_is_met_exactly():
    budget = 0.4 * INPUTS.full_power
    result = solve_power(INPUTS, budget)
    assert result.facility_power == pytest.approx(budget, rel=1e-5)
    assert INPUTS.f_min - 1e-9 <= result.clock <= 1 + 1e-9
    assert result.power_cap == pytest.approx(INPUTS.gpu_watts(result.clock))
    assert result.gpus in INPUTS.allowed_gpus() and result.gpus == result.replicas * CONFIG.tp * CONFIG.pp * CONFIG.cp
    assert result.tokens_per_s <= result.relaxed_tokens_per_s * (1 + 1e-6)   # the relaxation bounds it


def test_curve_of_the_job_is_non_decreasing():
    budgets = [INPUTS.least_power * 0.5] + [INPUTS.full_power * x for x in (0.05, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5)]
    curve = throughput_curve(INPUTS, budgets)
    assert curve[0] == 0.0
    assert all(b >= a * (1 - 1e-6) for a, b in zip(curve, curve[1:]))
    assert curve[-1] == pytest.approx(BEST.tokens_per_s, rel=1e-4)
    assert throughput_curve((JOB, BEST), budgets[-2:]) == pytest.approx(curve[-2:], rel=1e-6)


def test_monomial_model_is_close_near_the_plan():
    """The log-log tangent (the brief's T0 (n/N0)^gamma f^alpha) agrees with the exact
    posynomial at the plan and stays close over the range that gamma was fitted on."""
    full = solve_power(INPUTS, 2 * INPUTS.full_power, clock="monomial")
    assert full.tokens_per_s == pytest.approx(BEST.tokens_per_s, rel=1e-4)
    budget = 0.6 * INPUTS.full_power
    exact, tangent = solve_power(INPUTS, budget), solve_power(INPUTS, budget, clock="monomial")
    assert tangent.feasible and tangent.tokens_per_s == pytest.approx(exact.tokens_per_s, rel=0.05)


CAMPUS = train_job(check_file(str(ROOT / "examples" / "gb200_nvl72_100k.gcl"), {}).design)


def test_budget_from_the_design():
    assert budget_of(CAMPUS) == pytest.approx(200e6)
    assert budget_of(JOB) is None        # the test pod declares no budget


def test_the_search_can_be_freed_of_the_power_bound():
    def targets(job):
        return [item.value.target for item in job.entity.get("subject to").items]

    freed = without_power_limit(CAMPUS)
    assert targets(freed) == ["memory"] and targets(CAMPUS) == ["power", "memory"]
    assert budget_of(freed) is None and CAMPUS.graph.power_budget    # free of the cluster's budget too
    assert without_power_limit(JOB) is JOB


class _Planned:
    best = BEST


def test_power_plan_from_a_plan():
    assert power_plan(JOB, None, chosen=_Planned()) is None            # no budget anywhere
    inputs, result = power_plan(JOB, 0.5 * INPUTS.full_power, "energy", chosen=_Planned())
    assert inputs == INPUTS and result.objective == "energy" and result.feasible


def test_reports():
    result = solve_power(INPUTS, INPUTS.facility(INPUTS.max_gpus, 0.85))   # every GPU, below full clock
    assert result.clock < 0.999
    assert "power cap" in result.message and result.marginal_tokens_per_s_per_mw > 0
    assert "short" in solve_power(INPUTS, 1.0).message


def with_min_cap(min_cap: float):
    """JOB on chips whose firmware refuses a power cap below `min_cap` W."""
    partition = JOB.partition
    chip = attrs.evolve(partition.node.accelerator, min_cap=min_cap)
    return attrs.evolve(JOB, partition=attrs.evolve(partition, node=attrs.evolve(partition.node, accelerator=chip)))


@settings(max_examples=EXAMPLES)
@given(st.floats(0.05, 0.95), st.floats(0.0, 1.0))
def test_the_power_plan_never_sets_a_cap_below_the_chips_min_cap(cap_share, share):
    """`power.min_cap` (issue 12: accepted and ignored, the plan set 302 W on a 650 W floor):
    the cap the plan sets is one the firmware accepts, at any budget it can meet."""
    chip = JOB.partition.node.accelerator
    min_cap = chip.idle + cap_share * (chip.tdp - chip.idle)
    inputs = PowerInputs.from_plan(with_min_cap(min_cap), BEST)
    assert inputs.f_min >= INPUTS.f_min
    result = solve_power(inputs, budget_between(inputs, share))
    if result.status == "optimal":
        assert result.power_cap >= min(min_cap, inputs.p_full) * (1 - 1e-6)


@settings(max_examples=max(10, settings.default.max_examples // 6))
@given(power_inputs(), power_inputs(), st.floats(0.0, 1.0), st.sampled_from(["throughput", "energy"]))
def test_a_solve_does_not_depend_on_the_solves_before_it(first, second, share, objective):
    """The GP of a shape is compiled once and its parameters set per solve
    (solver/power/program.py `_program`): a solve after another of the same shape answers as
    the first solve of its inputs did."""
    budget = budget_between(first, share)
    alone = solve_power(first, budget, objective)
    solve_power(second, budget_between(second, share), objective)
    assert solve_power(first, budget, objective) == alone
