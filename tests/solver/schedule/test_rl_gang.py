"""An rl job on a shared cluster: one gang holding both pools, on one partition or generating on
one and training on another (bound, released and failed together), its work its steps; a job
without steps is a located problem, not a crash."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import attrs
import jsonschema
import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.model.rl.job import rl_job
from gclc.solver.rl.schedule import placements
from gclc.solver.schedule.catalog import POLICIES
from gclc.solver.schedule.jobs import ScheduleError, build
from gclc.solver.schedule.simulate import simulate
from gclc.solver.schedule.state import ClusterState
from gclc.views.schedule import schedule_json

DATA = Path(__file__).resolve().parents[2] / "data" / "rl_shared.gcl"
SCHEMA = Path(__file__).resolve().parents[3] / "views" / "schedule.schema.json"


@functools.cache
def shared():
    return build(check_file(str(DATA)).design)


def test_an_rl_job_is_one_gang_with_an_option_per_partition():
    workload = shared()
    rl = next(j for j in workload.jobs if j.name == "grpo")
    assert rl.gang and rl.unit == "steps" and rl.work == 200 and rl.priority > 1
    assert {o.partition for o in rl.options if o.companion is None} == {"h100", "a100"}
    rates = [o.rate for o in rl.options]
    assert rates == sorted(rates, reverse=True) and all(0 < o.gpus <= 16 for o in rl.options)
    assert rl.submit == 600.0


def test_an_rl_job_without_steps_says_so_where_it_is():
    text = DATA.read_text().replace("  steps = 200  priority = high", "  priority = high")
    with pytest.raises(ScheduleError) as raised:
        build(check_text(text, str(DATA)).design)
    problem = raised.value.diagnostics[0]
    assert problem.code == "no-size" and "`grpo`" in problem.summary and problem.subject.line == 13


# --- a gang across two partitions (Option.companion), on the hand-made cluster: a has 32 GPUs, b 16
_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def _two_pools(name="rl", train=8, generate=16, hours=1.0, submit=0.0):
    """Training on `train` GPUs of a, generation on `generate` of b, bound together."""
    job = fx.job(name, train, hours=hours, partitions=("a",), submit=submit, unit="steps")
    return attrs.evolve(job, options=(attrs.evolve(job.options[0], companion=("b", generate)),))


@pytest.mark.parametrize("policy", ["fifo", "priority", "slurm", "kube", "kueue"])
def test_a_gang_across_partitions_waits_for_both_and_holds_both(policy):
    """The gang needs its companion's GPUs too: while `fill` holds all of b it waits, though a is
    free; once started it holds both partitions' GPUs for its whole run, and frees both."""
    fill = fx.job("fill", 16, hours=2, partitions=("b",))
    outcome = simulate(fx.workload([fill, _two_pools(submit=0.1)]), POLICIES[policy], failures=False)
    runs = {r.job.name: r for r in outcome.runs}
    rl, filled = runs["rl"], runs["fill"]
    assert rl.phase == filled.phase == "done"
    assert rl.first_start == pytest.approx(filled.end)          # b's 16 GPUs were the gang's too
    assert rl.held == pytest.approx((8 + 16) * (rl.end - rl.first_start))
    if policy == "priority":   # the schedule's JSON names both pools, as its schema says
        data = schedule_json(fx.workload([fill, _two_pools(submit=0.1)]), outcome, [])
        jsonschema.validate(data, json.loads(SCHEMA.read_text()))
        job = next(j for j in data["jobs"] if j["name"] == "rl")
        assert (job["partition"], job["gpus"], job["companion"], job["unit"]) == \
            ("a", 8, {"partition": "b", "gpus": 16}, "steps")


def test_a_failure_on_the_companion_partition_reaches_the_gang():
    state = ClusterState.of(fx.GRAPH)
    def take(name, gpus):
        part = state.partitions[name]
        top = len(part.group_domains) - 1
        return part.take("rl", gpus, top, part.best_group(gpus, top)[0])

    main, other = take("a", 8), take("b", 16)
    state.bind("rl", attrs.evolve(main, companion=other))
    assert state.free("a") == 24 and state.free("b") == 0 and state.used() == 24
    assert all("rl" in state.holders("b", d) for d in other.domains)   # a node of b down hits the gang
    state.release("rl")
    assert state.free("a") == 32 and state.free("b") == 16
    assert not any(held for domains in state.holding.values() for held in domains)   # no domain holds it


def test_an_rl_job_may_generate_on_one_partition_and_train_on_another():
    workload = shared()
    rl = next(j for j in workload.jobs if j.name == "grpo")
    apart = [o for o in rl.options if o.companion is not None]
    assert apart and all(o.companion[0] != o.partition and o.gpus + o.companion[1] <= 32 for o in apart)
    # the file's pins rule placements out: colocated keeps each partition alone, pinned pools one pair
    def pairs(edit):
        return placements(rl_job(check_text(edit(DATA.read_text()), str(DATA)).design["grpo"]))

    assert pairs(lambda t: t) == [("h100", "h100"), ("a100", "a100"), ("h100", "a100"), ("a100", "h100")]
    assert pairs(lambda t: t.replace("staleness = 1", "staleness = 1  placement = colocated")) == \
        [("h100", "h100"), ("a100", "a100")]
    assert pairs(lambda t: t.replace("staleness = 1", "staleness = 1\n  generate { on = Lab.a100 }"
                                                           "  train { on = Lab.h100 }")) == [("a100", "h100")]
