"""Installing prints no warning banner: the build backend (setuptools, as pip runs it for
`pip install -e .` and `.ci/setup`) reads pyproject.toml and prepares the metadata of a wheel
and of an editable install without a warning. Run in a subprocess with every Python warning
shown (`-W always`), offline and in about a second: nothing is built or installed.

What this cannot see: setuptools' own notice that an editable install of a mapped package
directory (`gclc = "."`, fixed by the product card) goes through a meta path finder. pip
prints it at `-q` (a 10-line banner before a newcomer's first plan, issue 27), so `.ci/setup`
installs at `-qq`: errors only, and a failed install stops the script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import sys
from setuptools import build_meta as backend
out = sys.argv[1]
print(backend.get_requires_for_build_editable())
print(backend.prepare_metadata_for_build_editable(out))
print(backend.get_requires_for_build_wheel())
print(backend.prepare_metadata_for_build_wheel(out))
"""


def test_the_build_backend_reads_the_project_without_a_warning(tmp_path):
    run = subprocess.run([sys.executable, "-W", "always", "-c", SCRIPT, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    noisy = [line for line in output.splitlines() if re.search(r"warn|deprecat|!!|\*{8}", line, re.I)]
    assert noisy == [], "\n".join(noisy)
    metadata = (tmp_path / "gclc-0.1.0.dist-info" / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata and "Requires-Python: >=3.11" in metadata


def test_setup_installs_quietly_and_stops_on_a_failed_install():
    lines = [x for x in (ROOT / ".ci" / "setup").read_text().splitlines() if "pip install" in x and not x.startswith("#")]
    assert lines and all(" -qq " in x for x in lines), lines          # warnings (the banner) hidden, errors shown
    assert not any("|| true" in x or "| grep" in x for x in lines), lines  # `set -e` sees a failed install
