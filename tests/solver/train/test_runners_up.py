"""Runners-up are distinct layouts (issue 27): the SuperPOD example's plan listed the same
configuration in three other rank orders at the same step time as its runners-up. Each
runner-up is now a layout of its own (a rank order alone makes none), at its best order,
and its line names what differs from the plan. The exact search keeps the same list as the
exhaustive enumerator (tests/solver/train/test_search.py checks that on random designs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.solver.train.search import search
from gclc.solver.train.search_result import Top

ROOT = Path(__file__).resolve().parents[3]
SUPERPOD = str(ROOT / "examples" / "dgx_h100_superpod.gcl")


def test_the_superpods_runners_up_are_other_layouts_each_with_its_difference_named(capsys, cli_once):
    assert main(["plan", SUPERPOD]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if re.match(r"  #\d", x)]
    assert len(lines) == 3
    for line in lines:
        differs = re.search(r"\(differs: (.*)\)$", line)[1]
        assert [d for d in differs.split("; ") if not d.startswith("ranks ")], line
    code, out, _ = cli_once("plan", SUPERPOD, "--json")   # once per test run (tests/conftest.py)
    assert code == 0
    data = json.loads(out)
    layouts = [json.dumps(x, sort_keys=True) for x in [data["parallelism"]] + [r["parallelism"] for r in data["runners_up"]]]
    assert len(set(layouts)) == len(layouts)


def test_the_search_keeps_each_layout_once_at_its_best_order():
    job = train_job(check_file(SUPERPOD).design)
    result = search(job, "throughput", 3)
    keys = [attrs.evolve(e.config, order=()) for e in (result.best, *result.runners_up)]
    assert len(set(keys)) == len(keys) == 4


class _E:
    def __init__(self, order: tuple[str, ...], mb: int) -> None:
        from gclc.model.config import TrainConfig

        self.config = TrainConfig(batch=8, seq=16, microbatch=mb, order=order)


def test_a_better_order_of_a_kept_layout_replaces_it_and_a_worse_one_is_dropped():
    top = Top(2)
    first, better, worse, other = (_E(("tp", "dp", "pp", "cp"), 1), _E(("tp", "pp", "dp", "cp"), 1),
                                   _E(("tp", "cp", "dp", "pp"), 1), _E(("tp", "dp", "pp", "cp"), 2))
    top.offer(3.0, first)
    top.offer(2.0, better)
    top.offer(5.0, worse)
    assert [(v, e) for v, e in top.ranked()] == [(2.0, better)] and top.threshold == float("inf")
    top.offer(4.0, other)
    assert [v for v, _ in top.ranked()] == [2.0, 4.0] and top.threshold == 4.0
