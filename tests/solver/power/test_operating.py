"""One search space, one answer under a power limit (issue 28): layout x GPU count x clock step
searched jointly, the plan IS the operating point every output reports, and the exhaustive
enumerator over (layout, GPU count, clock steps) is the oracle, on the planner's own 2.5 % grid."""

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.model import dvfs
from gclc.model.job import train_job
from gclc.solver.jobs import plan_design
from gclc.solver.power.program import without_power_limit
from gclc.solver.train import enumerate as enumerator
from gclc.solver.train.plan import plan
from gclc.solver.train.search import search

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

ROOT = Path(__file__).resolve().parents[3]
ISSUE = str(ROOT / "tests" / "data" / "power_limit.gcl")
EXAMPLES = max(4, settings.default.max_examples // 8)   # each enumerates 21 clock steps


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


# ----------------------------------------------------------------- the issue's examples


def _plan_json(capsys, limit: str, *extra: str) -> dict:
    assert main(["plan", ISSUE, "--set", f"limit={limit}", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def issue_plans():
    """The issue's design at each of its limits: (limit W, outcome)."""
    out = []
    for kw in (100, 150, 250, 600):
        design = check_file(ISSUE, {"limit": f"{kw} kW"}).design
        out.append((kw * 1e3, plan_design(design)))
    return out


def test_the_issues_limits_plan_within_them_and_more_power_never_runs_slower(issue_plans):
    rates = []
    for limit, outcome in issue_plans:
        p = outcome.plan
        assert p.best is not None and p.power.total <= limit
        rates.append(p.best.tokens_per_s)
        # no point of its own layout's curve beats it within the same limit
        at_limit = [c for c in outcome.power.curve if c.budget <= limit and c.feasible]
        assert all(c.tokens_per_s <= p.best.tokens_per_s * (1 + 1e-9) for c in at_limit)
    assert rates == sorted(rates)
    # 250 kW: the limit binds, and every GPU runs below full clock rather than half of them at full
    p250 = issue_plans[2][1]
    assert "power" in p250.power.binds and p250.plan.best.config.gpus == 256 and p250.plan.clock < 1
    # 600 kW: the limit leaves room, so the plan is the unlimited one, at full clock
    p600 = issue_plans[3][1]
    assert "power" not in p600.power.binds and p600.plan.best.config.power_cap is None


def test_the_headline_is_the_power_section(issue_plans, capsys):
    from gclc.views.plan_json import outcome_json
    from gclc.views.plan_text import outcome_text

    for limit, outcome in issue_plans:
        text = outcome_text(outcome)
        step_line = next(line for line in text.splitlines() if line.startswith("  step "))
        power_line = next(line for line in text.splitlines() if line.startswith("power limit"))
        tokens = re.search(r"[\d.,]+(?: [kMG])? tokens/s", step_line).group()     # `2.19 M tokens/s`
        watts = re.search(r"power +([\d.,]+ [kM]?W)", text).group(1)              # the plan's power line
        assert f"{tokens}, {watts} facility" in power_line
    data = outcome_json(issue_plans[2][1])            # 250 kW
    section = data["power_budget"]
    assert section["tokens_per_s"] == data["tokens_per_s"] and section["facility_power_w"] == data["power_w"]
    assert section["gpus"] == data["gpus"] and section["clock"] == data["clock"]
    assert section["power_cap_w"] == data["parallelism"]["power_cap_w"]
    assert data["power_w"] <= section["limit_w"]
    # the curve at the limit is the plan itself; infeasible budgets are marked, not 0 tokens/s
    at_limit = next(c for c in section["curve"] if c["budget_w"] == section["limit_w"])
    assert at_limit["tokens_per_s"] == pytest.approx(data["tokens_per_s"], rel=1e-9)
    assert all((c["tokens_per_s"] is None) == (not c["feasible"]) for c in section["curve"])


def test_the_energy_objective_may_lower_the_clock(issue_plans, capsys):
    fast = issue_plans[3][1].plan                       # 600 kW: the limit leaves room
    frugal = _plan_json(capsys, "600 kW", "--objective", "energy")
    assert frugal["energy_per_token_j"] < fast.energy_per_token
    assert frugal["parallelism"]["power_cap_w"] is not None      # a cap, below the chip's own clock
    assert frugal["power_budget"]["objective"] == "energy"
    assert frugal["power_w"] == frugal["power_budget"]["facility_power_w"] <= 600e3


# ----------------------------------------------------------------- the oracle on small designs


def small(p: dict) -> dict:
    """`p` with recompute and the ZeRO stage pinned where it leaves them free: the joint
    dimensions (layout, GPU count, clock step) stay whole, and the enumerator stays quick."""
    return {**p, "pins": {"recompute": "none", "zero": 1, **(p.get("pins") or {})}}


def _limited(p: dict, share: float):
    """The design `p` under a power limit `share` of its unlimited plan's power (None when it has no plan)."""
    p = small(p)
    free = designs.job(p)
    chosen = search(free, "throughput", 0)
    if chosen.best is None:
        return None
    watts = enumerator.power_of(free, chosen.best) * share
    return designs.job({**p, "limits": [*(p.get("limits") or []), f"power <= {watts:.6g} W"]})


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, max_gpus=4), st.floats(0.2, 1.3),
       st.sampled_from(enumerator.OBJECTIVES))
def test_the_joint_search_is_the_enumerators_optimum(p, share, objective):
    job = _limited(p, share)
    assume(job is not None)
    limit = enumerator.limits(job).get("power").value
    result = search(job, objective, 1)
    ranked = enumerator.ranked(job, objective)
    assert result.configurations == enumerator.space_size(job, objective)
    if not ranked:
        assert result.best is None
        return
    assert close(result.value, ranked[0][0])
    best = result.best
    assert enumerator.power_of(job, best) <= limit * (1 + 1e-12)          # the plan never exceeds the limit
    # no enumerated point that fits beats it, whatever its clock step
    assert all(value >= result.value * (1 - 1e-9) if result.value > 0 else value >= result.value * (1 + 1e-9)
               for value, _ in ranked)
    if objective == "energy":   # no enumerated point, clock and cap included, spends fewer J per token
        joules = enumerator.power_of(job, best) / best.tokens_per_s
        assert all(enumerator.power_of(job, e) / e.tokens_per_s >= joules * (1 - 1e-9) for _, e in ranked)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, max_gpus=4), st.floats(0.2, 1.0), st.floats(1.0, 2.0))
def test_a_larger_limit_never_lowers_throughput(p, share, more):
    low, high = _limited(p, share), _limited(p, share * more)
    assume(low is not None)
    a, b = plan(low, "throughput", 0), plan(high, "throughput", 0)
    if a.best is not None:
        assert b.best is not None and b.best.tokens_per_s >= a.best.tokens_per_s * (1 - 1e-9)
        assert a.power.total <= enumerator.limits(low).get("power").value * (1 + 1e-12)


def test_clock_steps_of_the_planner():
    chip = train_job(check_file(ISSUE).design).partition.node.accelerator
    steps = dvfs.clock_steps(chip)
    assert steps[0] == (1.0, None) and len(steps) == 21          # 100 % to the 50 % floor in 2.5 % steps
    caps = [cap for _, cap in steps[1:]]
    assert caps == sorted(caps, reverse=True) and caps[-1] > chip.idle
    job = train_job(check_file(ISSUE).design)
    assert enumerator.operating_caps(without_power_limit(job), "throughput") == (None,)
    assert len(enumerator.operating_caps(job, "throughput")) == 21


def _issue_with(tmp_path, old: str, new: str) -> str:
    path = tmp_path / "job.gcl"
    path.write_text(Path(ISSUE).read_text().replace(old, new))
    return str(path)


def test_cost_chooses_its_own_operating_point_and_the_plan_prints_that_cost(tmp_path, capsys):
    # ASSUMPTION: the superpod example's economics (5 years, 0.08 USD/kWh); DGX_H100 carries a price
    path = _issue_with(tmp_path, "  scaleout = NDR_FatTree\n",
                       "  scaleout = NDR_FatTree\n  economics { years = 5  energy_price = 0.08 USD/kWh }\n")
    runs = {}
    for objective in ("throughput", "cost"):
        assert main(["plan", path, "--set", "limit=250 kW", "--json", "--objective", objective]) == 0
        runs[objective] = json.loads(capsys.readouterr().out)
    cheap, fast = runs["cost"], runs["throughput"]
    assert cheap["cost"]["cost_per_token_usd"] <= fast["cost"]["cost_per_token_usd"]
    assert cheap["power_w"] <= 250e3 and cheap["power_budget"]["objective"] == "cost"


def test_cost_without_economics_is_a_located_error(tmp_path, capsys):
    path = _issue_with(tmp_path, "  subject to {", "  minimize = cost\n  subject to {")
    assert main(["plan", path]) != 0
    err = capsys.readouterr().err
    assert "economics" in err and "job.gcl:" in err and "Traceback" not in err
