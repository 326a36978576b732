"""Huge values of fields whose magnitude a planner steps through: a located error where the value
is past what anything published has, and otherwise a plan in time that does not grow with the
value (issue 27's "answers come promptly"). The contract is the round-3 fuzz's
(tests/cli/test_fuzz_readers.py `run_once`: no traceback, located errors)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .test_fuzz_readers import run_once

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEEPSEEK = (EXAMPLES / "deepseek_v3_serve.gcl").read_text()
ROUTED = "routed       = 256"


def _write(folder: Path, text: str) -> str:
    (folder / "d.gcl").write_text(text)
    return "d.gcl"


@pytest.mark.parametrize("routed", ["1048577", "1e9", "1e30"])
def test_more_routed_experts_than_any_published_model_is_a_located_error(tmp_path, capsys, routed):
    """A billion experts walked a GPU's experts one by one in the serving cost model: the plan
    ran past a minute. Past PEER's 1024^2 the error names the field, the limit and its source."""
    name = _write(tmp_path, DEEPSEEK.replace(ROUTED, f"routed       = {routed}"))
    line = DEEPSEEK.split("\n").index(next(t for t in DEEPSEEK.split("\n") if ROUTED in t)) + 1
    for command in ("check", "plan"):
        code, _, err, _ = run_once(tmp_path, [command, name], capsys)
        assert code == 1 and f"d.gcl:{line}:" in err and "`routed` must be" in err, err[-2000:]
        assert "1,048,576 routed experts is the most" in err and "arXiv:2407.04969" in err, err[-2000:]


def test_a_million_experts_plans_promptly(tmp_path, capsys):
    """At the limit the plan takes the time of a model of 256 experts (the expected busiest GPU's
    experts summed over a window around the mean: model/serve/moe.py), not 9 s of CPU as before."""
    name = _write(tmp_path, DEEPSEEK.replace(ROUTED, "routed       = 1048576"))
    started = time.process_time()
    code, out, err, _ = run_once(tmp_path, ["plan", name], capsys)
    assert code in (0, 3), err[-2000:]
    assert time.process_time() - started < 3.0
