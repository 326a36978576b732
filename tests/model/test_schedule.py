"""Pipeline schedules in the model: GPipe holds every micro-batch's activations before the
first backward (Huang et al. 2019), 1F1B at most pp of them (Narayanan et al. 2021); vp
means nothing without a pipeline; every configuration the enumerator yields has a
positive, finite step time."""

import importlib.util
import itertools
import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train.memory import memory
from gclc.model.shape import ModelShape
from gclc.model.train.step import estimate
from gclc.solver.train import enumerate as enumerator

_spec = importlib.util.spec_from_file_location(
    "solver_designs", Path(__file__).parent.parent / "solver" / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

DATA = Path(__file__).parent.parent / "data"
JOB = train_job(check_file(str(DATA / "train.gcl"), {"nodes": "4"}).design)
EXAMPLES = max(20, settings.default.max_examples // 2)

# Llama-2-7B's shape (Touvron et al. 2023, Table 1): powers of two make the hand figures exact.
LLAMA = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, head_dim=128, ffn=11008, vocab=32000, seq=4096,
                   mlp_matrices=3, tied_embeddings=False)


def test_gpipe_activations_by_hand():
    # Full recompute keeps only each layer's input: 2 bytes x s x b x h per layer.
    # pp = 4 stages of 8 layers, dp = 2, batch 64, micro-batch 1: 32 micro-batches.
    # 1F1B holds pp = 4 of them: 2 x 4096 x 4096 x 8 x 4 = 2^30 B; GPipe all 32: 2^33 B.
    one_f_one_b = TrainConfig(batch=64, seq=4096, pp=4, dp=2, microbatch=1, recompute="full")
    gpipe = attrs.evolve(one_f_one_b, gpipe=True)
    assert one_f_one_b.microbatches == 32
    assert memory(LLAMA, one_f_one_b).activations == 2 ** 30
    assert memory(LLAMA, gpipe).activations == 2 ** 33
    # The model state and the step time (same bubble: Narayanan et al. 2021, Sec 2.2.1) do not
    # depend on the schedule. Under 1F1B the first stage binds (4 micro-batches and the layer the
    # recompute rebuilds); under GPipe every stage holds all 32, and the last one the loss's peak
    # too: 4096 tokens x 32000 logits x 6 bytes (Megatron's fused loss).
    for field in ("weights", "gradients", "optimizer", "buffers"):
        assert getattr(memory(LLAMA, gpipe), field) == getattr(memory(LLAMA, one_f_one_b), field)
    assert (memory(LLAMA, one_f_one_b).logits, memory(LLAMA, gpipe).logits) == (0, 4096 * 32000 * 6)
    slow, fast = (estimate(LLAMA, c, JOB.partition) for c in (gpipe, one_f_one_b))
    assert slow.step_time == fast.step_time


def test_gpipe_activations_scale_with_micro_batches_not_with_stages():
    base = TrainConfig(batch=64, seq=4096, pp=4, dp=1, microbatch=1, recompute="full", gpipe=True)
    per_mb = memory(LLAMA, base).activations / base.microbatches
    doubled = attrs.evolve(base, batch=128)
    assert memory(LLAMA, doubled).activations == pytest.approx(2 * memory(LLAMA, base).activations)
    # 1F1B: the batch does not matter once it has pp micro-batches
    assert memory(LLAMA, attrs.evolve(doubled, gpipe=False)).activations == memory(
        LLAMA, attrs.evolve(base, gpipe=False)).activations
    assert per_mb == pytest.approx(2 * 4096 * 4096 * 8)


def test_a_pinned_gpipe_schedule_reaches_the_plan():
    from gclc.solver.train.plan import plan

    p = {"hbm": 80, "up": 300, "inr": "true", "per_node": 8, "nodes": 1, "layers": 8, "hidden": 1024, "heads": 8,
         "kv_heads": 8, "ffn": 4096, "vocab": 8000, "seq": 1024, "mlp": "swiglu", "batch": 64,
         "precision": "bf16", "stack": "megatron_core", "pins": {"pp": 2, "schedule": "gpipe"}}
    chosen = plan(designs.job(p))
    c = chosen.best.config
    assert c.gpipe and c.vp == 1
    assert chosen.best.memory.activations == memory(chosen.job.shape, c).activations
    assert memory(chosen.job.shape, attrs.evolve(c, gpipe=False)).activations <= chosen.best.memory.activations


@given(st.sampled_from([c for c in itertools.islice(enumerator.configurations(JOB), 4000) if c.vp == 1]))
def test_gpipe_never_needs_less_activation_memory_than_1f1b(cfg):
    gpipe = memory(JOB.shape, attrs.evolve(cfg, gpipe=True))
    one_f_one_b = memory(JOB.shape, attrs.evolve(cfg, gpipe=False))
    assert gpipe.activations >= one_f_one_b.activations
    assert gpipe.total >= one_f_one_b.total
    assert (gpipe.weights, gpipe.gradients, gpipe.optimizer) == (one_f_one_b.weights, one_f_one_b.gradients,
                                                               one_f_one_b.optimizer)


# ----------------------------------------------------------------- vp without a pipeline


@pytest.mark.parametrize("vp", [2, 7])
def test_virtual_stages_without_a_pipeline_change_nothing(vp):
    cfg = TrainConfig(batch=64, seq=4096, pp=1, dp=8)
    plain, odd = (estimate(LLAMA, c, JOB.partition) for c in (cfg, attrs.evolve(cfg, vp=vp)))
    assert odd.step_time == plain.step_time > 0
    assert odd.breakdown.bubble == odd.breakdown.pp == 0
    assert odd.memory == plain.memory


@pytest.mark.parametrize("field", ["vp", "pp", "microbatch", "dp"])
def test_a_width_below_one_is_refused_by_the_model(field):
    with pytest.raises(ValueError, match=">= 1"):
        estimate(LLAMA, attrs.evolve(TrainConfig(batch=64, seq=4096), **{field: 0}), JOB.partition)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(), st.randoms(use_true_random=False))
def test_every_enumerated_configuration_has_a_positive_finite_step_time(p, rng):
    job = designs.job(p)
    configs = list(itertools.islice(enumerator.configurations(job), 20000))
    for cfg in rng.sample(configs, min(len(configs), 40)):
        e = estimate(job.shape, cfg, job.partition)
        assert math.isfinite(e.step_time) and e.step_time > 0, cfg
        assert all(math.isfinite(v) and v >= 0 for _, v in e.breakdown.rows()), cfg
        assert math.isfinite(e.memory.total) and e.memory.total > 0


# ----------------------------------------------------------------- the bubble and the output layer


def test_the_bubble_is_the_fill_and_drain_of_the_stages_without_the_output_layer():
    # With stage times t_i and the last stage the slowest (it also runs the output layer, h
    # per micro-batch), 1F1B takes m x t_last + the sum of the other t_i: the bubble is
    # (pp - 1) / vp x (t_last - h), not (pp - 1) / vp x t_last. By hand from the breakdown:
    # per micro-batch the last stage runs (compute + recompute + TP + CP + EP + PP) / m.
    from gclc.model.train.step import output_layer_time

    cfg = TrainConfig(batch=64, seq=4096, pp=4, dp=2, microbatch=1, recompute="selective")
    for vp in (1, 2):
        c = attrs.evolve(cfg, vp=vp)
        e = estimate(LLAMA, c, JOB.partition)
        b, m = e.breakdown, c.microbatches
        head = output_layer_time(LLAMA, c, JOB.partition)
        stage = (b.compute + b.recompute + b.tp + b.cp + b.ep + b.pp) / m
        assert head > 0 and b.bubble == pytest.approx((4 - 1) / vp * (stage - head), rel=1e-12)
        # Llama-2-7B's output layer is 32000 x 4096 against a stage's 8 layers of ~202 M
        # parameters each: its FLOPs are 131 M / (8 x 202 M + 131 M) = 7.5 % of the stage's
        assert 0.03 < head / stage < 0.15


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.integers(1, 64), st.integers(2, 16))
def test_a_larger_vocabulary_never_lengthens_the_bubble(extra, pp):
    # Only the last stage runs the output layer: the fill and drain do not pass through it.
    cfg = TrainConfig(batch=64 * pp, seq=4096, pp=pp, dp=1, microbatch=1)
    small, large = (estimate(attrs.evolve(LLAMA, vocab=v), cfg, JOB.partition)
                    for v in (32000, 32000 + 1024 * extra))
    assert large.breakdown.bubble == pytest.approx(small.breakdown.bubble, rel=1e-12)
    assert large.step_time > small.step_time
