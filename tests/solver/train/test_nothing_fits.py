"""A design that no layout can hold (solver/train/search.py `fits_nowhere`): the search opens no
layout and says so at once, with the same counts and the same answer as a search that opens
every one (a vocabulary of 1e30 on the 100,800-GPU example took 11 s of CPU before)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.solver.train import search as search_module
from gclc.solver.train.plan import plan
from gclc.solver.train.search import search

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

pytestmark = pytest.mark.usefixtures("coarse_clock_steps")
OBJECTIVES = ("throughput", "energy", "mfu")


def _counts(result) -> tuple:
    return (result.status, result.configurations, result.evaluated, result.pruned_bound, result.pruned_memory,
            result.pruned_limits, result.estimates, result.least_power, result.closest, result.rejected,
            result.best is None)


def _opened(job, objective: str, shortcut: bool, patch) -> tuple[object, int]:
    """The search's result and how many layouts it opened, with the shortcut on or off."""
    opened = [0]
    original = search_module._Search.open_layout

    def counting(self, layout):
        opened[0] += 1
        return original(self, layout)

    patch.setattr(search_module._Search, "open_layout", counting)
    if not shortcut:
        patch.setattr(search_module._Search, "fits_nowhere", lambda self: False)
    try:
        return search(job, objective, 2), opened[0]
    finally:
        patch.undo()


@settings(deadline=None)
@given(designs.designs(hbm=st.sampled_from([1, 2, 6, 8]), variants=None), st.sampled_from(OBJECTIVES))
def test_the_shortcut_counts_as_the_search_that_opens_every_layout(p, objective):
    job = designs.job(p)
    with pytest.MonkeyPatch.context() as patch:
        fast, opened_fast = _opened(job, objective, True, patch)
        slow, opened_slow = _opened(job, objective, False, patch)
    assert _counts(fast) == _counts(slow)
    if opened_fast == 0 and slow.configurations:
        # the shortcut took: the slow search opened layouts and found none that fits
        assert fast.best is None and fast.pruned_memory + fast.pruned_limits == fast.configurations
    else:
        assert opened_fast == opened_slow


def _infeasible(tmp_path, **changes):
    p = {"hbm": 8, "up": 300, "inr": "true", "per_node": 8, "nodes": 2, "layers": 48, "hidden": 8192, "heads": 64,
         "kv_heads": 8, "ffn": 32768, "vocab": 32000, "seq": 4096, "mlp": "swiglu", "batch": 64,
         "precision": "bf16", "stack": "megatron_core"} | changes
    path = tmp_path / "job.gcl"
    path.write_text(designs.text(p))
    return train_job(check_file(str(path)).design)


@pytest.mark.parametrize("limits", [[], ["power <= 20 kW"]])
def test_a_design_no_layout_holds_opens_no_layout(tmp_path, limits):
    job = _infeasible(tmp_path, limits=limits)
    with pytest.MonkeyPatch.context() as patch:
        fast, opened = _opened(job, "throughput", True, patch)
        slow, opened_slow = _opened(job, "throughput", False, patch)
    assert opened == 0 < opened_slow
    assert _counts(fast) == _counts(slow) and fast.pruned_memory > 0
    reason = plan(job).infeasibility
    assert reason.constraint == "memory" and "least-memory configuration" in reason.message


def test_a_design_that_fits_opens_layouts(tmp_path):
    job = _infeasible(tmp_path, hbm=80, layers=8, hidden=4096, heads=32, ffn=16384)
    with pytest.MonkeyPatch.context() as patch:
        result, opened = _opened(job, "throughput", True, patch)
    assert result.best is not None and opened > 0


def test_each_layouts_memory_is_found_once_for_every_operating_point(tmp_path):
    """Under a power limit the space is searched once per clock step; a layout's memory does not
    depend on the clock, so it is found once (a design of 100,000 layers took 14.5 s of CPU, most
    of it the same memory found again at each of 21 clock steps)."""
    job = _infeasible(tmp_path, hbm=24, layers=16, hidden=4096, heads=32, ffn=16384, nodes=2, limits=["power <= 9 kW"])
    calls = []
    original = search_module.fitting_microbatches
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "fitting_microbatches", lambda *a, **k: calls.append(a[1]) or original(*a, **k))
        searcher = search_module._Search(job, "throughput", 2)
        result = searcher.run()
    layouts = {(c.tp, c.pp, c.dp, c.cp, c.ep) for c in calls}
    assert len(searcher.caps) > 1 and result.best is not None
    assert len(calls) == len(layouts) > 0       # once a layout, whatever the clock steps
