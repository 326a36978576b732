"""The node's `step_overhead` (model/train/step.py `_with_host`): the hosts' fixed work between
two training steps, added to every step; 0 s by default; located errors for bad values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.testing.profiles import scaled_examples

DESIGN = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
fabric Out {{ kind = infiniband  topology = fat_tree(tiers = 2, radix = 64)  bandwidth = 400 Gb/s }}
node Box {{ gpus = 8 x G  scaleup = Up {extra} }}
cluster C {{ units = 2 x Box  scaleout = Out }}
model M {{ arch = dense  layers = 8  hidden = 2048  heads = 16  ffn = 8192  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = {batch} }}
"""


def step(extra="", batch=64):
    result = check_text(DESIGN.format(extra=extra, batch=batch), "overhead.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    j = train_job(result.design)
    return estimate(j.shape, pinned_config(j), j.partition)


def test_unset_is_zero_and_the_step_grows_by_exactly_the_overhead():
    bare, slow = step(), step("step_overhead = 50 ms")
    assert bare.breakdown.step_overhead == 0
    assert slow.breakdown.step_overhead == pytest.approx(0.05)
    assert slow.step_time == pytest.approx(bare.step_time + 0.05)
    # one step everywhere: the rates and MFU read the longer step
    assert slow.tokens_per_s == pytest.approx(bare.tokens_per_s * bare.step_time / slow.step_time)
    assert slow.mfu == pytest.approx(bare.mfu * bare.step_time / slow.step_time)


@settings(max_examples=scaled_examples(10), deadline=None)
@given(a=st.integers(0, 500_000), b=st.integers(0, 500_000), batch=st.sampled_from([32, 64, 128]))
def test_more_overhead_never_makes_a_step_faster(a, b, batch):
    low, high = sorted((a, b))
    fast, slow = step(f"step_overhead = {low} us", batch), step(f"step_overhead = {high} us", batch)
    assert slow.step_time >= fast.step_time
    assert slow.step_time - fast.step_time == pytest.approx((high - low) / 1e6, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("value, code", [("-5 ms", "out-of-range"), ("5 GB", "wrong-dimension")])
def test_bad_values_get_a_located_error(value, code):
    result = check_text(DESIGN.format(extra=f"step_overhead = {value}", batch=64), "overhead.gcl")
    assert not result.ok
    d = result.diagnostics[0]
    assert d.code == code and "`step_overhead`" in d.summary
    assert (d.subject.path, d.subject.line) == ("overhead.gcl", 5)


def planned(extra=""):
    from gclc.solver.train.plan import plan
    result = check_text(DESIGN.format(extra=extra, batch=64), "overhead.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return plan(train_job(result.design))


def test_a_design_with_the_field_plans_slower_by_that_amount_everywhere():
    from gclc.dsl.numbers import duration
    from gclc.views.plan_json import plan_json
    from gclc.views.plan_text import plan_text
    bare, slow = planned(), planned("step_overhead = 40 ms")
    # a fixed time per step keeps the ranking of a fixed batch: the same configuration, 40 ms slower
    assert slow.best.config == bare.best.config
    assert slow.best.step_time == pytest.approx(bare.best.step_time + 0.04)
    data = plan_json(slow)
    assert data["step_time_s"] == slow.best.step_time == pytest.approx(sum(data["step_breakdown_s"].values()))
    assert data["step_breakdown_s"]["step_overhead"] == pytest.approx(0.04)
    assert data["tokens_per_s"] == pytest.approx(slow.best.tokens_per_s)
    assert duration(slow.best.step_time) in plan_text(slow)


def test_the_plans_limits_name_host_work_between_steps_where_it_is_a_visible_share():
    """What limits the plan (its binding list and the sentence `gclc plan` prints) names the
    hosts' fixed time between steps where it is at least VISIBLE_HOST of the step, once."""
    from gclc.dsl.numbers import percent
    from gclc.solver.train.review import VISIBLE_HOST
    from gclc.views.limits import limits_sentence
    slow = planned("step_overhead = 500 ms")
    share = 0.5 / slow.best.step_time
    assert share >= VISIBLE_HOST
    [line] = [b for b in slow.binding if b.startswith("step_overhead:")]
    assert f"500 ms, is {percent(share)} of the step" in line
    sentence = limits_sentence(slow)
    assert sentence.lower().count("host work between steps") == 1 and "`step_overhead`" not in sentence
    bare = planned()
    assert not any(b.startswith("step_overhead:") for b in bare.binding)
    faint = planned(f"step_overhead = {round(0.5 * VISIBLE_HOST * bare.best.step_time * 1e6)} us")
    assert not any(b.startswith("step_overhead:") for b in faint.binding)
