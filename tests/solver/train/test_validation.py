"""Validation closes the holes issue 11 found: a schedule against its virtual stages, a
batch that does not split into the pinned replicas and micro-batches, expert groups that
do not fold over tp x cp x dp, and objectives the planner does not model. Each is a located
error from `gclc check` and never a configuration of the space."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import attrs
import pytest
from hypothesis import assume, given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.model import comms
from gclc.model.job import train_job
from gclc.solver.train import enumerate as enumerator
from gclc.solver.train.plan import plan

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)


_p = designs.small


def _errors(p: dict, extra: str = "") -> list:
    text = designs.text(p)
    if extra:
        text = text.rstrip()[:-1] + extra + "}\n"
    result = check_text(text, "job.gcl")
    return [d for d in result.diagnostics if d.severity.name == "ERROR"]


def _line_of(p: dict, needle: str) -> int:
    return next(i for i, line in enumerate(designs.text(p).splitlines(), 1) if needle in line)


# ----------------------------------------------------------------- schedule and vp

def test_gpipe_with_virtual_stages_is_a_located_error():
    # The counterexample test_search_finds_the_enumerators_optimum found: gpipe and vp = 2.
    p = _p(pins={"pp": 2, "schedule": "gpipe", "vp": 2})
    [error] = _errors(p)
    assert error.code == "parallelism" and "interleaved" in error.summary and "gpipe" in error.summary
    assert error.subject.line == _line_of(p, "vp = 2")


@pytest.mark.parametrize("pins, needle", [({"schedule": "one_f_one_b", "vp": 2}, "vp = 2"),
                                          ({"pp": 2, "schedule": "interleaved", "vp": 1}, "schedule ="),
                                          ({"pp": 1, "vp": 2}, "vp = 2")])
def test_contradictory_schedule_pins_are_errors(pins, needle):
    p = _p(pins=pins)
    [error] = _errors(p)
    assert error.code == "parallelism" and error.subject.line == _line_of(p, needle)


def test_the_space_never_holds_virtual_stages_a_schedule_forbids():
    # Even a Job built without `gclc check` (as the solver's callers may) gets no vp > 1
    # under gpipe or 1F1B, and no vp = 1 under the interleaved schedule.
    job = designs.job(_p(pins={"pp": 2}))
    for schedule, vp in (("gpipe", 2), ("one_f_one_b", 2), ("interleaved", 1)):
        forced = attrs.evolve(job, pinned={**job.pinned, "schedule": schedule, "vp": vp})
        assert list(enumerator.configurations(forced)) == []
        assert plan(forced).status == "infeasible"
    gpipe = attrs.evolve(job, pinned={**job.pinned, "schedule": "gpipe"})
    assert {c.vp for c in enumerator.configurations(gpipe)} == {1}


# ----------------------------------------------------------------- the batch

@pytest.mark.parametrize("pins, batch, needle, words", [
    ({"dp": 8}, 4, "dp = 8", "at least 8 sequences"),
    ({"dp": 3}, 64, "dp = 3", "does not split into dp = 3"),
    ({"dp": 4, "microbatch": 3}, 64, "microbatch = 3", "dp = 4 x microbatch = 3 = 12"),
    ({"microbatch": 5}, 64, "microbatch = 5", "microbatch = 5"),
    ({"dp": 2, "microbatch": 2, "microbatches": 4}, 64, "microbatches = 4", "= 16 sequences"),
])
def test_a_batch_that_does_not_split_is_an_error_at_the_pin(pins, batch, needle, words):
    p = _p(batch=batch, pins=pins)
    [error] = _errors(p)
    assert error.code == "parallelism" and words in error.summary, error.summary
    assert error.subject.line == _line_of(p, needle)
    assert any(label.span.line == _line_of(p, "batch ") for label in error.labels)


def test_the_search_never_plans_more_replicas_than_sequences():
    # 16 GPUs, a batch of 4: dp is at most 4 in every configuration of the space.
    job = designs.job(_p(nodes=2, batch=4))
    assert job.gpus == 16
    assert all(c.dp <= 4 and 4 % c.dp == 0 for c in enumerator.configurations(job))


# ----------------------------------------------------------------- experts

MOE = {"routed": 8, "shared": 0, "top_k": 2, "expert_ffn": 1024, "dense_layers": 0}


def test_ep_against_pinned_tp_cp_dp_is_an_error_naming_the_fold():
    p = _p(**MOE, pins={"tp": 1, "cp": 1, "dp": 2, "ep": 8})
    [error] = _errors(p)
    assert error.code == "parallelism" and "tp x cp x dp" in error.summary and "batch" not in error.summary
    assert error.subject.line == _line_of(p, "ep = 8")
    # Folding over tp too is valid (NeMo's DeepSeek-V3 recipe: tp 2 x dp 32 holds ep 64).
    assert _errors(_p(**MOE, pins={"tp": 2, "cp": 1, "dp": 4, "ep": 8})) == []


def test_ep_that_no_dp_can_hold_names_the_real_cause_not_the_batch():
    # tp x pp = 8 on 8 GPUs leaves one replica: tp x cp x dp = 4 holds no 8-way expert group.
    p = _p(**MOE, pins={"tp": 4, "pp": 2, "ep": 8})
    job = designs.job(p)
    chosen = plan(job)
    assert chosen.status == "infeasible"
    message = chosen.infeasibility.message
    assert "tp x cp x dp must be a multiple of 8" in message and "splitting" not in message
    assert "the largest dp that divides the batch of 64 is 1" in message
    assert chosen.infeasibility.span.line == _line_of(p, "ep = 8")


# ----------------------------------------------------------------- objectives

@pytest.mark.parametrize("objective", ["minimize = cost"])  # goodput is planned (solver/schedule/goodput.py)
def test_unimplemented_objectives_are_rejected_at_the_field(objective):
    p = _p()
    [error] = _errors(p, f"  {objective}\n")
    assert error.code == "not-implemented" and objective.split(" = ")[1] in error.summary
    text = designs.text(p).rstrip()[:-1] + f"  {objective}\n}}\n"
    assert error.subject.line == next(i for i, line in enumerate(text.splitlines(), 1) if objective in line)


@pytest.mark.parametrize("objective", ["maximize = throughput", "maximize = mfu", "minimize = time",
                                       "minimize = energy", "maximize = goodput"])
def test_implemented_objectives_pass(objective):
    assert _errors(_p(), f"  {objective}\n") == []


# ----------------------------------------------------------------- check and planner agree


# Pins drawn without the strategy's own filter: `gclc check` alone decides what is valid.
_RAW_PINS = {"tp": [1, 2, 4], "pp": [1, 2], "cp": [1, 2], "dp": [1, 2, 4, 8], "ep": [1, 2, 4, 8],
             "microbatch": [1, 2], "vp": [1, 2], "schedule": ["gpipe", "interleaved", "one_f_one_b"]}


@settings(max_examples=max(20, settings.default.max_examples // 2), deadline=None)
@given(designs.designs(moe=True, pins=False, limits=False, max_gpus=16),
       st.dictionaries(st.sampled_from(sorted(_RAW_PINS)), st.integers(0, 3), max_size=4))
def test_whatever_check_accepts_the_planner_plans_or_explains(p, picks):
    pins = {k: _RAW_PINS[k][i % len(_RAW_PINS[k])] for k, i in picks.items()}
    p = dict(p, pins=pins)
    result = check_text(designs.text(p), "job.gcl")
    assume(result.design is not None and not any(d.severity.name == "ERROR" for d in result.diagnostics))
    chosen = plan(train_job(result.design))
    if chosen.best is not None:
        c = chosen.best.config
        assert (c.tp * c.cp * c.dp) % c.ep == 0
        for k in ("tp", "pp", "dp", "cp", "ep", "microbatch", "vp"):
            if k in pins:
                assert getattr(c, k) == pins[k]
        assert c.gpipe == (pins.get("schedule") == "gpipe")
    else:
        assert chosen.status == "infeasible"
        reason = chosen.infeasibility
        assert reason is not None and reason.message and reason.span is not None, reason


def test_experts_fold_over_tensor_parallel_ranks_when_dp_x_cp_cannot_hold_them():
    # 8 GPUs, tp = 4 x dp = 2: dp x cp = 2 holds no 8-way expert group, but the stage's
    # tp x cp x dp = 8 ranks do (MoE parallel folding); the plan runs it, not an error.
    p = _p(**MOE, pins={"tp": 4, "dp": 2, "ep": 8})
    assert _errors(p) == []
    chosen = plan(designs.job(p))
    c = chosen.best.config
    assert (c.tp, c.dp, c.ep) == (4, 2, 8)
    # The expert group is 8 consecutive ranks: inside one 8-GPU node, on NVLink only.
    [stage] = comms.place(8, c.stride("ep"), chosen.job.partition.tiers)
    assert stage.tier.scope == "node" and stage.peers == 8


@settings(max_examples=max(20, settings.default.max_examples // 2), deadline=None)
@given(designs.designs(moe=True, pins=False, limits=False, max_gpus=16))
def test_every_expert_group_lies_in_one_pipeline_stage(p):
    # The span the model charges (ep consecutive ranks) is the real one only if the
    # consecutive ranks share a stage: check it rank by rank for every enumerated layout.
    job = designs.job(p)
    seen = set()
    for c in enumerator.configurations(job):
        key = (c.tp, c.pp, c.dp, c.cp, c.ep, c.order)
        if c.ep == 1 or key in seen:
            continue
        seen.add(key)
        for first in range(0, c.gpus, c.ep):
            stages = {(r // c.stride("pp")) % c.pp for r in range(first, first + c.ep)}
            assert len(stages) == 1, (c, first)
