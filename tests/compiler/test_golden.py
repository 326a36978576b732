"""Golden diagnostics: every `tests/golden/<case>.gcl` against its `<case>.out`.

Each `.out` holds exactly what `gclc check tests/golden/<case>.gcl` prints from the
repository root. Regenerate after a deliberate change of wording with

    GCLC_UPDATE_GOLDEN=1 .venv/bin/pytest tests/compiler/test_golden.py

and read the diff before committing it. Helper files for import cases live in
subfolders (`tests/golden/imports/`) and are not cases themselves.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gclc.dsl.diagnostics import render_all
from gclc.compiler.driver import check_file

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CASES = sorted(GOLDEN.glob("*.gcl"))
UPDATE = os.environ.get("GCLC_UPDATE_GOLDEN") == "1"
HEADLINE = re.compile(r"^tests/golden/[\w/]+\.gcl:\d+:\d+: (error|warning)\[[a-z-]+\]: \S", re.MULTILINE)


def render_case(case: Path) -> str:
    relative = case.relative_to(ROOT).as_posix()
    cwd = os.getcwd()
    os.chdir(ROOT)  # display paths are relative to the repository root, so goldens are stable
    try:
        result = check_file(relative)
    finally:
        os.chdir(cwd)
    return render_all(result.diagnostics, result.sources) + "\n"


def test_there_are_enough_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_golden(case: Path):
    actual = render_case(case)
    expected_path = case.with_suffix(".out")
    if UPDATE:
        expected_path.write_text(actual, encoding="utf-8")
    assert expected_path.exists(), f"no golden for {case.name}; run with GCLC_UPDATE_GOLDEN=1"
    assert actual == expected_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_golden_shape(case: Path):
    """Every case reports something, located, with the source line and an underline."""
    actual = render_case(case)
    assert HEADLINE.search(actual), actual
    lines = actual.splitlines()
    head = next(i for i, line in enumerate(lines) if HEADLINE.match(line))
    assert re.match(r"^\s*\d+ \| ", lines[head + 2]), actual  # the quoted source line
    assert re.match(r"^\s*\| *[\^]+", lines[head + 3]), actual  # its underline
    assert "Traceback" not in actual


def test_no_orphan_goldens():
    outs = {p.stem for p in GOLDEN.glob("*.out")}
    assert outs <= {c.stem for c in CASES}, outs - {c.stem for c in CASES}
