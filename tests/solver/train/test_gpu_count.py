"""The GPU count is searched in whole replicas (issue 11: `--objective energy` kept every
GPU of gb200_nvl72_100k at 2.19 J/token while a quarter of them gave 1.08): every
objective may leave GPUs idle, the plan says why, and a pinned dp or the job's `gpus`
fixes or caps the count."""

from __future__ import annotations

import pytest
import importlib.util
from pathlib import Path

from gclc.solver.train import enumerate as enumerator
from gclc.solver.train.plan import plan

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

# the search is exact whatever the clock grid: a coarse one keeps the enumerator quick (tests/solver/conftest.py)
pytestmark = pytest.mark.usefixtures("coarse_clock_steps")


def _p(**changes) -> dict:
    return designs.small(**{"nodes": 2, **changes})


def test_energy_is_free_to_leave_gpus_idle_and_beats_every_full_replica_count():
    job = designs.job(_p())
    chosen = plan(job, "energy")
    assert chosen.best.config.gpus < job.gpus == 16
    space = enumerator.space(job)
    # What the old space allowed: only the most replicas of each (tp, pp, cp, ep).
    widest = [e for e in enumerator.evaluate_all(job)
              if e.config.dp == enumerator.data_parallel(job, space, e.config.tp, e.config.pp, e.config.cp, e.config.ep)]
    old = min(enumerator.objective_value(job, "energy", e) for e in widest)
    assert chosen.energy_per_token < old
    idle = next(w.message for w in chosen.warnings if w.kind == "idle-gpus")
    assert idle.startswith(f"{16 - chosen.best.config.gpus} of 16 GPUs idle") and "the GPU count is searched" in idle


def test_a_pinned_dp_fixes_the_replica_count_and_gpus_cap_it():
    pinned = designs.job(_p(pins={"dp": 8}))
    assert {c.dp for c in enumerator.configurations(pinned)} == {8}
    assert plan(pinned, "energy").best.config.dp == 8
    capped = designs.job(_p(job_gpus=12))
    assert max(c.gpus for c in enumerator.configurations(capped)) == 8   # powers of two within 12
    assert {c.dp for c in enumerator.configurations(capped) if c.tp * c.pp * c.cp == 1} == {1, 2, 4, 8}
