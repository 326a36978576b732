"""README.md works as written. Every command and snippet is extracted from the README
itself and run as a reader would: in a fresh directory that holds what the README's paths
name (the clone's `examples/` and `tests/data/`, as after `cd gclc`), with the venv's `bin`
on PATH. Shown output (`$ cmd` followed by lines) must appear in what the command prints;
the command table's options must exist in each command's `--help`; the tour's GCL checks
clean and plans with the `--set` its comment suggests. Nothing is skipped silently: the two
commands not run (they install and run this very suite) are named in NOT_RUN, and the test
fails if the README's commands and this list drift apart."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
BLOCKS = [(m[1], m[2]) for m in re.finditer(r"^ *```(\w+)\n(.*?)^ *```", README, re.S | re.M)]
NOT_RUN = {  # command -> why it is not run here (its `gclc` half is run below)
    "bash .ci/setup && .venv/bin/gclc plan examples/a100_cluster.gcl": "installs the package",
    "bash .ci/setup && .venv/bin/python -m pytest": "runs this suite",
}
LIMIT_S = 600  # the slowest, the sweep of 24 points on a local Dask cluster, takes ~40 s on 2 busy cores


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def shell_blocks() -> list[list[tuple[str, list[str]]]]:
    """Each ```sh block as its commands, each with the output lines the README shows."""
    blocks = []
    for lang, text in BLOCKS:
        if lang != "sh":
            continue
        lines = _dedent(text).replace("\\\n", " ").splitlines()
        found: list[tuple[str, list[str]]] = []
        if any(line.startswith("$ ") for line in lines):
            for line in lines:
                if line.startswith("$ "):
                    found.append((line[2:].strip(), []))
                elif line.strip() and found:
                    found[-1][1].append(line.strip())
        else:
            found += [(re.sub(r"\s+", " ", line.strip()), []) for line in lines if line.strip()]
        blocks.append(found)
    return blocks


def inline_commands() -> list[str]:
    """`gclc ...` in the prose that names real files (not the table's FILE templates)."""
    spans = re.findall(r"`(gclc [^`]+)`", README)
    return sorted({s for s in spans if ".gcl" in s and not re.search(r"FILE|NAME|\[|\||\.\.\.|A\.gcl|f\.gcl", s)
                   or s == "gclc check --list-codes"})


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A directory laid out as the README's paths expect, outside the repository."""
    here = tmp_path_factory.mktemp("reader")
    shutil.copytree(ROOT / "examples", here / "examples")
    shutil.copytree(ROOT / "tests" / "data", here / "tests" / "data")
    shutil.copytree(ROOT / ".ci", here / ".ci")
    return here


def _run(command: str, where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1",
           "GCLC_HYPOTHESIS": "ci"}
    return subprocess.run(["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True,
                          timeout=LIMIT_S)


def test_every_shell_command_is_run_or_named():
    commands = [c for block in shell_blocks() for c, _ in block]
    assert set(NOT_RUN) <= set(commands), "NOT_RUN names a command the README no longer has"
    assert len(commands) >= 8


BLOCKS_RUN = [[c for c in block if c[0] not in NOT_RUN] for block in shell_blocks()]
BLOCKS_RUN = [block for block in BLOCKS_RUN if block]


@pytest.mark.parametrize("block", BLOCKS_RUN, ids=[block[0][0][:60] for block in BLOCKS_RUN])
def test_readme_shell_block(block, clone):
    for command, shown in block:  # in order: a `grep` reads what the `gclc` before it wrote
        done = _run(command, clone)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        for line in shown:
            assert line in done.stdout, f"README shows {line!r} after `{command}`; it printed:\n{done.stdout}"


def test_the_first_lines_plan_once_set_up(clone):
    done = _run("gclc plan examples/a100_cluster.gcl", clone)  # the half of NOT_RUN's first line after setup
    assert done.returncode == 0 and done.stdout.startswith("plan gpt3_175b on A100_Cluster"), done.stderr


EXPECTED_EXIT = {"gclc export examples/hetero_h100_a100.gcl --to megatron": 1}  # the README says it exits 1


@pytest.mark.parametrize("command", inline_commands())
def test_readme_inline_command(command, clone):
    done = _run(command, clone)
    assert done.returncode == EXPECTED_EXIT.get(command, 0), f"{command}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    if command in EXPECTED_EXIT:
        assert "Megatron-LM runs one parallel layout on identical GPUs" in done.stderr


def test_the_lexer_line_colours_gcl(clone):
    assert re.search(r"pygmentize\s+-l\s+gcl\s+design\.gcl", README)
    done = _run("pygmentize -l gcl -f terminal examples/a100_cluster.gcl", clone)
    assert done.returncode == 0 and "\x1b[" in done.stdout and "A100_Cluster" in done.stdout, done.stderr


def test_the_command_table_names_only_real_options():
    rows = re.findall(r"^\| `gclc (\w+)([^`]*)`", README, re.M)
    assert len(rows) >= 12
    for name, usage in rows:
        help_text = _run(f"gclc {name} --help", ROOT).stdout
        for option in re.findall(r"(--[\w-]+|(?<![\w-])-[a-zA-Z]\b)", usage):
            assert option in help_text, f"`gclc {name}` has no {option}"


def test_the_tour_checks_clean_and_plans_with_the_suggested_setting(clone):
    tour = next(text for lang, text in BLOCKS if lang == "gcl" and text.startswith('import "std/nvidia"'))
    (clone / "f.gcl").write_text(tour)
    done = _run("gclc check f.gcl", clone)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    suggested = re.search(r"# (gclc plan f\.gcl --set \S+)", tour)[1]
    done = _run(suggested, clone)
    assert done.returncode == 0 and done.stdout.startswith("plan pretrain on Pod"), done.stderr[-2000:]


def test_the_gcl_fragments_parse():
    from gclc.dsl.source import SourceFile, source_text
    from gclc.dsl.syntax import parse_source

    fragments = [_dedent(text) for lang, text in BLOCKS if lang == "gcl"]
    assert len(fragments) >= 3
    for text in fragments:
        parse_source(SourceFile("README.md", source_text(text)))  # raises on a syntax error


def test_the_python_snippet(clone):
    snippet = next(text for lang, text in BLOCKS if lang == "python" and "check_file" in text)
    (clone / "snippet.py").write_text(snippet)
    done = _run(f"{sys.executable} snippet.py", clone)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("512 ['NVLink4 (node)'"), done.stdout


def test_the_property_test_example(clone):
    example = next(text for lang, text in BLOCKS if lang == "python" and "test_my_cluster.py" in text)
    (clone / "test_my_cluster.py").write_text(example)
    done = _run(f"{sys.executable} -m pytest -q -p no:cacheprovider test_my_cluster.py", clone)
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout[-3000:]
