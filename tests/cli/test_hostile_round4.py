"""Hostile input, round 4 (benchmarks/fuzz_hostile.py): each finding of the fuzz of the shipped
examples, the docs' designs and the newer surfaces, kept as a regression: a located error with
its fix, where a traceback, a hang or an unlocated error was."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# ------------------------------------------------------------------ schedule --cluster


@pytest.mark.parametrize("name", ["Nope", "", "chat"])
def test_schedule_names_an_unknown_cluster_as_plan_and_export_do(capsys, name):
    """Was `error[no-size]: no cluster ... to schedule on` with no file or position, exit 1."""
    code, out = _run(["schedule", str(EXAMPLES / "shared_cluster.gcl"), "--cluster", name, "--no-failures",
                      "--epochs", "0"], capsys)
    assert code == 2 and "Traceback" not in out
    assert f"no cluster `{name}` in " in out and "the design has: Shared" in out
