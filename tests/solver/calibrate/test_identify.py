"""Which constants an operator's training runs tell apart (solver/calibrate/identify.py): runs
of one attention share move the GEMM efficiency alone; runs at sequence lengths whose attention
shares differ also move the chip's attention efficiency, and the fit recovers both."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.measure.records import TrainRun, TrainStep
from gclc.dsl.source import Span
from gclc.model import compute
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.solver.calibrate.calibrate import calibrate
from gclc.solver.calibrate.params import applied

DESIGN = Path(__file__).resolve().parents[2] / "data" / "calibrate" / "h100_pod.gcl"
CHIP = "H100_SXM"
GEMM, ATTENTION = ("chip", CHIP, "bf16"), ("chip", CHIP, "attention")


@pytest.fixture(scope="module")
def job():
    return train_job(check_file(str(DESIGN)).design)


def run(job, truth: dict, seq: int, dp: int, line: int) -> TrainRun:
    """A Megatron log of the job at sequence length `seq` and data-parallel width `dp`, timed by
    the model on the chip's constants `truth` (SYNTHETIC: the fit's identifiability is tested)."""
    cfg = attrs.evolve(pinned_config(job), seq=seq, dp=dp)
    seconds = estimate(job.shape, cfg, applied(job.partition, truth)).step_time
    settings = (("data_parallel_size", str(dp)), ("tensor_model_parallel_size", str(cfg.tp)),
                ("pipeline_model_parallel_size", "1"), ("seq_length", str(seq)),
                ("global_batch_size", str(cfg.batch)))
    span = Span(f"run{line}.log", line, 1, line, 2)
    return TrainRun("megatron", tuple(TrainStep(i, seconds, span=span) for i in range(5)), settings, span)


def test_runs_of_one_sequence_length_move_the_gemm_efficiency_alone(job):
    truth = {GEMM: 0.58}
    result = calibrate(check_file(str(DESIGN)).design, [run(job, truth, 8192, dp, i) for i, dp in enumerate((2, 4, 8))])
    assert ATTENTION not in result.params
    assert _toward(result.values[GEMM], 0.58, result.params[GEMM].prior, 0.5)


def test_runs_at_sequence_lengths_of_other_attention_shares_recover_both(job):
    chip = job.partition.node.accelerator
    attention = compute.attention_efficiency(chip) * 0.8     # the design's attention 25 % fast
    truth = {GEMM: 0.60, ATTENTION: attention}
    runs = [run(job, truth, seq, 2, i) for i, seq in enumerate((2048, 8192, 32768))]
    result = calibrate(check_file(str(DESIGN)).design, runs)
    assert ATTENTION in result.params
    # attention recovered (the long run pins it), the GEMM efficiency most of the way from its
    # prior (a stated efficiency's spread holds it back as much as three runs' noise pulls it)
    assert result.values[ATTENTION] == pytest.approx(attention, rel=0.03)
    assert _toward(result.values[GEMM], 0.60, result.params[GEMM].prior, 0.5)
    assert all(abs(r.after) < abs(r.before) / 3 for r in result.rows)
    # three runs at one length cannot tell attention apart: it stays out of the fit
    alone = [run(job, truth, 8192, 2, i) for i in range(3)]
    assert ATTENTION not in calibrate(check_file(str(DESIGN)).design, alone).params


def _toward(fitted: float, truth: float, prior: float, share: float) -> bool:
    """The fitted value lies within `share` of the prior's distance from the truth (log scale)."""
    return abs(math.log(fitted / truth)) < share * abs(math.log(prior / truth))


def test_runs_of_different_models_do_not_tell_attention_apart(job):
    """Two runs whose attention shares differ, but of two models: what else the model misprices in
    either would be read as attention, so only the GEMM efficiency is informed."""
    from gclc.solver.calibrate.identify import with_attention
    from gclc.solver.calibrate.observe_train import train_observation

    def observation(shape, seq):
        cfg = attrs.evolve(pinned_config(job), seq=seq)
        return train_observation(f"r{seq}", "run", shape, cfg, 1000.0, job.partition, Span("r", 1, 1, 1, 2))

    wider = attrs.evolve(job.shape, hidden=2 * job.shape.hidden, ffn=2 * job.shape.ffn)
    one_model = with_attention([observation(job.shape, 2048), observation(job.shape, 32768)])
    two_models = with_attention([observation(job.shape, 2048), observation(wider, 32768)])
    assert all(ATTENTION in o.informs for o in one_model)
    assert not any(ATTENTION in o.informs for o in two_models)
