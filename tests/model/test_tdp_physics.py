"""TDP is physics (issue 28): a chip's draw comes from its activity and clock on its DVFS curve;
`tdp` is the sustained limit the chip enforces itself (the clock falls while its work would
draw more), `power.cap` an operator's lower limit. A lower TDP makes a compute-bound plan
slower, monotonically; a TDP at or above the curve's top changes nothing."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import attrs
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model import dvfs
from gclc.model.calibration import power_capped
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.power import gpu_power
from gclc.model.train.step import estimate
from gclc.solver.train.plan import plan
from gclc.testing.profiles import scaled_examples

DESIGN = """\
import "std/nvidia"
param tdp = 700 W
chip H100_Limited extends H100_SXM {{ power.tdp = tdp }}
node Box extends DGX_H100 {{ gpus = 8 x H100_Limited }}
cluster Lab {{ units = 2 x Box  scaleout = NDR_FatTree }}
# Llama 3.1 8B's shape (arXiv:2407.21783, Table 3), as tests/data/power_limit.gcl
model Llama8B {{
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
  ffn = 14336  vocab = 128256  seq = 8192  mlp = swiglu  params = 8.03 B
}}
train job {{ model = Llama8B  on = Lab  batch = 64  precision = bf16 }}
"""
CONFIG = TrainConfig(batch=64, seq=8192, tp=1, dp=16, zero=1)   # compute-bound: no tensor or pipeline traffic


def _path(tmp: Path) -> str:
    path = tmp / "tdp.gcl"
    path.write_text(DESIGN.format())
    return str(path)


@functools.cache
def _base_job():
    return _job(_path(Path(tempfile.mkdtemp(prefix="gclc-tdp-"))), 700)


def _job(path: str, tdp: float):
    return train_job(check_file(path, {"tdp": f"{tdp:g} W"}).design)


def _with_tdp(job, tdp: float):
    chip = attrs.evolve(job.partition.node.accelerator, tdp=tdp)
    return attrs.evolve(job, partition=attrs.evolve(job.partition, node=attrs.evolve(job.partition.node, accelerator=chip)))


@settings(max_examples=scaled_examples(60), deadline=None)
@given(st.floats(150.0, 900.0), st.floats(150.0, 900.0))
def test_a_lower_tdp_never_speeds_a_step_and_slows_a_compute_bound_one(a, b):
    low, high = sorted((a, b))
    job = _base_job()
    slow, fast = (estimate(job.shape, CONFIG, _with_tdp(job, t).partition) for t in (low, high))
    assert slow.step_time >= fast.step_time * (1 - 1e-12)
    top = dvfs.top(job.partition.node.accelerator)
    if low < top * 0.99 and high > low * 1.02:          # below the curve's top a lower TDP costs time
        assert slow.step_time > fast.step_time
    if low >= top:                                       # at or above it, nothing changes
        assert slow.step_time == fast.step_time
    # the chip's draw at full load is its limit (or its curve's top), never above its TDP
    for t in (low, high):
        chip = _with_tdp(job, t).partition.node.accelerator
        assert dvfs.draw(chip) <= min(t, top) * (1 + 1e-12)
        assert gpu_power(_with_tdp(job, t).partition, 1.0) <= t * (1 + 1e-12)


def test_plans_slow_down_monotonically_with_the_tdp_and_say_why(tmp_path):
    path = _path(tmp_path)
    plans = [plan(_job(path, tdp)) for tdp in (700, 600, 450, 350)]
    rates = [p.best.tokens_per_s for p in plans]
    assert rates == sorted(rates, reverse=True) and rates[-1] < rates[0] * 0.9
    assert [p.power.per_gpu <= t for p, t in zip(plans, (700, 600, 450, 350))] == [True] * 4
    assert "power_cap" not in {r.key for r in plans[0].band_reasons}     # at its full clock
    assert "power_cap" in {r.key for r in plans[-1].band_reasons}        # below it: the curve's band reason


def test_a_chip_without_a_curve_reaches_its_full_clock_at_its_tdp():
    chip = train_job(check_file(str(Path(__file__).parents[1] / "data" / "train.gcl")).design).partition.node.accelerator
    bare = attrs.evolve(chip, full_clock=None, power_cap=None)
    assert dvfs.top(bare) == bare.tdp and dvfs.capped(bare) == 1.0 and not power_capped(bare)
    assert dvfs.exponent(bare) == dvfs.DEFAULT_EXPONENT == 3.0        # Le Sueur and Heiser 2010
    capped = attrs.evolve(bare, power_cap=bare.tdp * 0.7)
    assert dvfs.capped(capped) < 1.0 and power_capped(capped)
