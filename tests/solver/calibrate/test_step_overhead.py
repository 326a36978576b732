"""solver/calibrate/step_overhead.py: a node's per-step host time is fitted only from runs whose
work per GPU differs (weak-scaling runs do not separate it); a fitted value reaches the step
through the partition (params.applied)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gclc.compiler.driver import check_file
from gclc.dsl.source import no_span
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.solver.calibrate import step_overhead
from gclc.solver.calibrate.observe import Observation
from gclc.solver.calibrate.observe_train import train_observation
from gclc.solver.calibrate.params import applied
from gclc.testing.profiles import scaled_examples

POD = Path(__file__).resolve().parents[3] / "tests" / "data" / "calibrate" / "h100_pod.gcl"


def run(seconds: float, flops: float = 1e15, tokens: float = 4096.0) -> Observation:
    """A training run of `flops` model FLOPs per GPU a step measured at `seconds` a step (no design:
    the rule reads works)."""
    return Observation("train", f"run {seconds} {flops}", "run", tokens / seconds, "tokens/s", (), predict=None,
                       partition=None, span=no_span(), end_to_end=True, step_tokens=tokens, step_flops=flops)


def test_the_step_length_is_the_tokens_over_the_measured_rate():
    assert step_overhead.step_seconds(run(0.7, tokens=8192)) == pytest.approx(0.7)
    assert step_overhead.step_seconds(Observation("train", "g", "run", 1.0, "tokens/s", (), None, None,
                                                  no_span())) == 0


@settings(max_examples=scaled_examples(50), deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 20), st.floats(1e12, 1e17)), min_size=1, max_size=6),
       st.floats(1.0, 1.0 + step_overhead.SEPARATE), st.floats(0.05, 20), st.floats(0.05, 20))
def test_runs_of_one_work_never_separate_it_whatever_their_lengths_and_two_works_apart_do(runs, close, a, b):
    _, work = runs[0]
    # step lengths alone say nothing: runs of one work per GPU differ only in what does not scale with it
    assert not step_overhead.separable([run(a, work), run(b, work * close)])
    assert step_overhead.separable([run(a, work), run(b, work * (1 + 2 * step_overhead.SEPARATE))])
    # adding runs never makes a separable set inseparable; the order of the runs does not matter
    found = [run(s, w) for s, w in runs]
    if step_overhead.separable(found):
        assert step_overhead.separable(found + [run(1.0)]) and step_overhead.separable(found[::-1])


def pod_observation(design, dp: int, batch: int, made: dict | None = None) -> Observation:
    """The pod's job at data-parallel width `dp` and global batch `batch`, measured as the model
    predicts it with the constants `made`."""
    job = train_job(design)
    cfg = attrs.evolve(pinned_config(job), dp=dp, batch=batch)
    measured = estimate(job.shape, cfg, applied(job.partition, made or {})).tokens_per_s_per_gpu
    return train_observation(f"dp{dp}", f"dp{dp}", job.shape, cfg, measured, job.partition, no_span())


def test_weak_scaling_runs_do_not_separate_it_and_runs_of_different_work_per_gpu_do():
    design = check_file(str(POD)).design
    # weak scaling, 8 sequences per data-parallel rank on 4 and 16 GPUs, over a congested scale-out
    # (2 % of its bandwidth): the 16-GPU step is longer by its data-parallel traffic alone, by more
    # than SEPARATE, while the work per GPU is the same
    congested = {("fabric", "NDR_FatTree", "efficiency"): 0.02}
    weak = [pod_observation(design, dp, 8 * dp, congested) for dp in (2, 8)]
    assert weak[0].step_flops == pytest.approx(weak[1].step_flops)
    lengths = sorted(map(step_overhead.step_seconds, weak))
    assert lengths[1] > lengths[0] * (1 + step_overhead.SEPARATE)
    assert not step_overhead.separable(weak)
    # strong scaling: the global batch fixed, each GPU does a quarter of the work on four times the GPUs
    strong = [pod_observation(design, dp, 64) for dp in (2, 8)]
    assert strong[0].step_flops == pytest.approx(4 * strong[1].step_flops)
    assert step_overhead.separable(strong)


def test_the_prior_is_the_nodes_stated_value_else_the_assumption():
    from gclc.compiler.driver import check_text
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
