"""Shared test settings: the hypothesis profiles of `gclc.testing` (`GCLC_HYPOTHESIS=deep`
for many examples); the outputs several test files check of the same example, made once
per test run (an example's plan takes seconds: the suite must fit CI's 15 minutes).

What is shared is text (immutable), made by exactly the call each test made itself; a test
that needs the call made again (determinism, a changed setting) still makes it."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

from gclc.testing import load_profile

load_profile()

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def a_test_is_a_run_of_its_own():
    """Each test starts as a new run of gclc: no data file read by an earlier test is quoted
    or guarded (the CLI does this per command), and no torch.distributed world another test
    built is left for this one to find."""
    from gclc.compiler.files import forget_reads

    forget_reads()
    yield
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


@pytest.fixture(scope="session")
def cli_once():
    """`cli_once(*args)`: (exit code, stdout, stderr) of `gclc ARGS` run in-process through
    `gclc.cli.main.main`, once per run for the same arguments. Never call it under a
    monkeypatch: the output is shared with every later test that asks for the same ARGS."""
    from gclc.cli.main import main

    made: dict[tuple[str, ...], tuple[int, str, str]] = {}

    def run(*args) -> tuple[int, str, str]:
        key = tuple(map(str, args))
        if key not in made:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(key))
            made[key] = (code, out.getvalue(), err.getvalue())
        return made[key]

    return run


@pytest.fixture(scope="session")
def example_report():
    """`example_report(name)`: the HTML report of `examples/NAME` as `gclc report` makes it
    (`report_html(design, source="examples/NAME")`), once per run."""
    from gclc.compiler.driver import check_file
    from gclc.views.report.page import report_html

    made: dict[str, str] = {}

    def make(name: str) -> str:
        if name not in made:
            design = check_file(str(EXAMPLES / name)).design
            assert design is not None, name
            made[name] = report_html(design, source=f"examples/{name}")
        return made[name]

    return make
