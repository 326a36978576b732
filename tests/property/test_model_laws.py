"""Physical laws of the training model, over random valid configurations."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.model.train.memory import model_state
from gclc.model.train.step import estimate
from gclc.solver.train.enumerate import configurations
from gclc.solver.train.plan import plan
from gclc.testing.profiles import scaled_examples

DATA = Path(__file__).parent.parent / "data"
JOB = train_job(check_file(str(DATA / "train.gcl"), {"nodes": "4"}).design)
CONFIGS = list(configurations(JOB))


def with_tier_bandwidth(partition, level, factor):
    tiers = tuple(attrs.evolve(t, bandwidth=t.bandwidth * factor) if t.level == level else t for t in partition.tiers)
    return attrs.evolve(partition, tiers=tiers)


def with_peak(partition, factor):
    chip = partition.node.accelerator
    faster = attrs.evolve(chip, peak=tuple((p, v * factor) for p, v in chip.peak))
    return attrs.evolve(partition, node=attrs.evolve(partition.node, accelerator=faster))


configs = st.sampled_from(CONFIGS)
factors = st.floats(1.0, 8.0)


@given(configs, st.integers(0, 2), factors)
def test_more_link_bandwidth_never_slows_a_step(cfg, level, factor):
    base = estimate(JOB.shape, cfg, JOB.partition).step_time
    faster = estimate(JOB.shape, cfg, with_tier_bandwidth(JOB.partition, level, factor)).step_time
    assert faster <= base * (1 + 1e-12)


@given(configs, factors)
def test_more_peak_flops_never_slows_a_step(cfg, factor):
    base = estimate(JOB.shape, cfg, JOB.partition).step_time
    faster = estimate(JOB.shape, cfg, with_peak(JOB.partition, factor)).step_time
    assert faster <= base * (1 + 1e-12)


@given(configs, st.sampled_from(["tp", "pp"]))
def test_more_tp_or_pp_never_raises_weight_memory(cfg, dim):
    more = attrs.evolve(cfg, **{dim: getattr(cfg, dim) * 2})
    assert model_state(JOB.shape, more)[0] <= model_state(JOB.shape, cfg)[0]


@settings(max_examples=scaled_examples(10))
@given(st.sampled_from(["throughput", "energy"]))
def test_energy_is_power_times_time(objective):
    chosen = plan(JOB, objective)
    tokens = chosen.best.config.batch * chosen.best.config.seq
    energy_per_step = chosen.power.total * chosen.best.step_time
    assert chosen.energy_per_token * tokens == pytest.approx(energy_per_step)


def test_energy_objective_never_uses_more_energy_than_throughput():
    fast, frugal = plan(JOB, "throughput"), plan(JOB, "energy")
    assert frugal.energy_per_token <= fast.energy_per_token * (1 + 1e-9)
    assert fast.best.step_time <= frugal.best.step_time * (1 + 1e-9)
