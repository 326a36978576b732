"""The rl search simulates a generation layout only as far as its answer needs (solver/rl/search.py
`_advance`): its plan, runners-up, alternatives and counts are those of the search that simulates
every layout it takes off the heap to the end, to the last bit, for each objective and placement."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_text
from gclc.solver.rl import generation as gen
from gclc.solver.rl.plan import plan_rl

SMALL = (Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl").read_text()

VARIANTS = {
    "as written": lambda t: t,
    "synchronous": lambda t: t.replace("staleness    = 1", "staleness    = 0"),
    "colocated": lambda t: t.replace("staleness    = 1", "placement = colocated"),
    "energy": lambda t: t.replace("staleness    = 1", "staleness = 1  minimize = energy"),
    "power bound": lambda t: t.replace("memory <= 90%", "memory <= 90%  power <= 25 kW"),
    "a small cache": lambda t: t.replace("memory <= 90%", "memory <= 40%"),
}


def _plan(text: str):
    result = check_text(text, "rl.gcl")
    assert result.design is not None, [d.summary for d in result.diagnostics]
    return plan_rl(result.design["grpo"])


def _answer(plan):
    """All the plan says (the search's own wall time aside)."""
    return attrs.evolve(plan, result=attrs.evolve(plan.result, seconds=0.0))


@pytest.mark.parametrize("name", VARIANTS)
def test_a_part_simulated_search_plans_what_the_whole_one_does(name, monkeypatch):
    text = VARIANTS[name](SMALL)
    started = []
    original = gen.GenerationRun.__init__
    monkeypatch.setattr(gen.GenerationRun, "__init__",
                        lambda self, *a: started.append(self) or original(self, *a))
    partial = _plan(text)
    unfinished = sum(1 for run in started if run.result is None)
    monkeypatch.setattr(gen.GenerationRun, "always_served", lambda self: False)   # every run to its end
    whole = _plan(text)
    assert _answer(partial) == _answer(whole)
    assert partial.result.simulated == whole.result.simulated
    if name == "as written":
        assert unfinished > 0        # some layout's run was left part way: the saving exists



def test_every_bound_of_a_layout_counts_the_iterations_its_finished_run_reports(monkeypatch):
    # the bounds (`search`'s placeholders, `_advance`'s paused runs) price the engine iterations the
    # finished Generation carries (a stack's host time a step reads them); a smaller count would still
    # bound from below, so only a direct check tells they are the run's own
    from gclc.solver.rl import search
    seen: dict = {}
    evaluate = search.evaluate
    monkeypatch.setattr(search, "evaluate", lambda job, placement, staleness, g, train, *a, **k: seen.setdefault(
        (g.layout, g.kv_tokens > 0), set()).add(g.iterations) or evaluate(job, placement, staleness, g, train, *a, **k))
    _plan(SMALL)
    bounded = {layout: counts for (layout, done), counts in seen.items() if not done}
    finished = {layout: counts for (layout, done), counts in seen.items() if done}
    assert finished and all(len(counts) == 1 for counts in seen.values())
    assert all(bounded[layout] == counts for layout, counts in finished.items() if layout in bounded)
