"""Start-up: a command loads what its job needs and nothing else (issue 10). Each case runs
the command in a fresh interpreter and lists the modules it left in `sys.modules`."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("cvxpy", "scipy", "numpy", "highspy", "networkx", "matplotlib", "graphviz", "jsonschema", "yaml",
         "pyarrow", "distributed", "pygments")
PROBE = ("import contextlib, io, sys; from gclc.cli.main import main\n"
         "with contextlib.redirect_stdout(io.StringIO()): status = main(sys.argv[1:])\n"
         "print(status, ' '.join(sorted(sys.modules)))")


@functools.cache
def _run(command: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
    """The exit status and every module the command left loaded, in a fresh interpreter; once
    per command (two tests watch the serve plan: it simulates for seconds)."""
    done = subprocess.run([sys.executable, "-c", PROBE, *command], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    status, _, names = done.stdout.strip().partition(" ")
    return int(status), tuple(names.split())


def loaded(command: list[str], watched: tuple[str, ...]) -> tuple[int, list[str]]:
    """The exit status and the modules of `watched` (packages and their submodules) it loaded."""
    status, names = _run(tuple(command))
    return status, [m for m in names if m.split(".")[0] in watched
                    or any(m == p or m.startswith(p + ".") for p in watched)]


def test_a_train_plan_loads_no_serving_no_solver_library_and_no_drawing():
    status, names = loaded(["plan", "tests/data/train.gcl", "--json"],
                           HEAVY + ("gclc.solver.serve.plan", "gclc.views.serve", "gclc.views.report.page", "gclc.solver.sweep",
                                    "gclc.views.export", "gclc.solver.split.plan", "gclc.solver.split.lanes",
                                    "gclc.solver.split.search"))
    assert status == 0
    assert names == []


def test_a_serve_plan_loads_no_heterogeneous_split():
    status, names = loaded(["plan", "examples/deepseek_v3_serve.gcl", "--json"],
                           ("gclc.solver.split.plan", "gclc.solver.split.lanes", "gclc.solver.split.search"))
    assert status == 0
    assert names == []


def test_check_loads_neither_the_model_nor_the_solver():
    status, names = loaded(["check", "examples/a100_cluster.gcl"], HEAVY + ("gclc.model", "gclc.solver"))
    assert status == 0
    assert names == []


@pytest.mark.parametrize("command, needed", [
    (["plan", "examples/deepseek_v3_serve.gcl", "--json"], "gclc.solver.serve.plan"),
    (["plan", "examples/hetero_h100_a100.gcl", "--json"], "gclc.solver.split.plan"),
])
def test_the_job_kind_that_needs_a_module_still_loads_it(command, needed):
    """The lazy imports are taken where the job needs them (a serve plan plans with serving's modules)."""
    status, names = loaded(command, (needed,))
    assert status == 0
    assert needed in names
