"""Validation closes the holes issue 11 found: a schedule against its virtual stages, a
batch that does not split into the pinned replicas and micro-batches, expert groups that
do not fold over dp x cp, and objectives the planner does not model. Each is a located
error from `gclc check` and never a configuration of the space."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_text
from gclc.solver import enumerate as enumerator
from gclc.solver.plan import plan

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).with_name("_designs.py"))
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)


def _p(**changes) -> dict:
    p = {"hbm": 80, "up": 300, "inr": "true", "per_node": 8, "nodes": 1, "layers": 8, "hidden": 1024, "heads": 8,
         "kv_heads": 8, "ffn": 4096, "vocab": 8000, "seq": 1024, "mlp": "swiglu", "batch": 64,
         "precision": "bf16", "stack": "megatron_core"}
    p.update(changes)
    return p


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
    # tp x pp = 4 on 8 GPUs leaves at most 2 replicas; ep = 8 needs dp x cp a multiple of 8.
    p = _p(**MOE, pins={"tp": 4, "pp": 2, "ep": 8})
    job = designs.job(p)
    chosen = plan(job)
    assert chosen.status == "infeasible"
    message = chosen.infeasibility.message
    assert "dp x cp must be a multiple of 8" in message and "splitting" not in message
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
