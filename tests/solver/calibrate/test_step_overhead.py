"""solver/calibrate/step_overhead.py: a node's per-step host time is fitted only from runs whose
steps differ in length; a fitted value reaches the step through the partition (params.applied)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gclc.dsl.source import no_span
from gclc.solver.calibrate import step_overhead
from gclc.solver.calibrate.observe import Observation
from gclc.testing.profiles import scaled_examples


def run(seconds: float, tokens: float = 4096.0) -> Observation:
    """A training run of `tokens` per GPU a step measured at `seconds` a step (no design: the rule reads lengths)."""
    return Observation("train", f"run {seconds}", "run", tokens / seconds, "tokens/s", (), predict=None,
                       partition=None, span=no_span(), end_to_end=True, step_tokens=tokens)


def test_the_step_length_is_the_tokens_over_the_measured_rate():
    assert step_overhead.step_seconds(run(0.7, 8192)) == pytest.approx(0.7)
    assert step_overhead.step_seconds(Observation("train", "g", "run", 1.0, "tokens/s", (), None, None,
                                                  no_span())) == 0


@settings(max_examples=scaled_examples(50), deadline=None)
@given(st.lists(st.floats(0.05, 20), min_size=1, max_size=6), st.floats(1.0, 1.0 + step_overhead.SEPARATE))
def test_runs_of_one_step_length_never_separate_it_and_two_lengths_apart_do(lengths, close):
    base = lengths[0]
    assert not step_overhead.separable([run(base), run(base * close)])
    assert step_overhead.separable([run(base), run(base * (1 + 2 * step_overhead.SEPARATE))])
    # adding runs never makes a separable set inseparable; the order of the runs does not matter
    runs = [run(s) for s in lengths]
    if step_overhead.separable(runs):
        assert step_overhead.separable(runs + [run(1.0)]) and step_overhead.separable(runs[::-1])


def test_the_prior_is_the_nodes_stated_value_else_the_assumption():
    from gclc.compiler.driver import check_text
    from gclc.model.job import train_job
    text = """
chip G { peak { bf16 = 1000 TFLOPS } hbm { capacity = 80 GB  bandwidth = 3 TB/s } power { tdp = 700 W } }
fabric Up { kind = nvlink  topology = switched  bandwidth = 450 GB/s }
node Box { gpus = 8 x G  scaleup = Up  STATED }
cluster C { units = 1 x Box }
model M { arch = dense  layers = 8  hidden = 2048  heads = 16  ffn = 8192  vocab = 32000  seq = 2048 }
train t { model = M  on = C  batch = 64 }
"""
    # a stated value outside the fit's physical range stays the prior (the range widens to hold it)
    for stated, prior in (("", step_overhead.PRIOR), ("step_overhead = 7 ms", 0.007),
                          ("step_overhead = 50 us", 50e-6), ("step_overhead = 2 s", 2.0)):
        node = train_job(check_text(text.replace("STATED", stated), "p.gcl").design).partition.node
        p = step_overhead.param(node)
        assert p.key == ("node", "Box", "step_overhead") and p.prior == pytest.approx(prior)
        assert p.low <= p.prior <= p.high
