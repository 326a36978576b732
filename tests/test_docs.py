"""README.md and every docs/*.md page work as written. Every command and snippet is
extracted from the pages themselves and run as a reader would: in a fresh directory that
holds what the pages' paths name (the clone's `examples/` and `tests/data/`, as after
`cd gclc`), with the venv's `bin` on PATH.

- ```sh blocks run, command by command; shown output (`$ cmd` followed by lines) must appear
  in what the command printed.
- ```gcl blocks titled with a file name (```gcl title="first.gcl") are that file, in page
  order; each such file must check clean (no error, no warning) and is there before the
  commands run. Untitled ```gcl blocks are fragments and must parse.
- Inline `gclc ...` spans that name a real `.gcl` file run and exit 0 (or the exit a page
  states, EXPECTED_EXIT).
- ```python blocks are each run by a test below; one that no test runs fails the suite.

Nothing is skipped silently: the two commands not run (they install and run this very
suite) are named in NOT_RUN, and the test fails if README's commands and this list drift
apart. To keep the suite fast, a command runs once: a shell command may appear in one block
of one page only (test_no_shell_command_runs_twice), and an inline span already run by a
block or another page is not run again."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
         for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^ *```(\w+)([^\n`]*)\n(.*?)^ *```", re.S | re.M)
NOT_RUN = {  # command -> why it is not run here (its `gclc` half is run below)
    "bash .ci/setup && .venv/bin/gclc plan examples/a100_cluster.gcl": "installs the package",
    "bash .ci/setup && .venv/bin/python -m pytest": "runs this suite",
    "cd editors/vscode && npm ci --omit=dev": "installs the VS Code extension's dependency (docs/editors.md)",
    'ln -s "$PWD" ~/.vscode/extensions/gclc.gcl-0.1.0': "installs into the reader's VS Code",
    # docs/model.md's figures: the cross-validation takes minutes (19 refits); the plot itself is
    # tested in tests/benchmarks/test_accuracy_plot.py
    ".venv/bin/python benchmarks/accuracy.py --json > accuracy.json": "19 refits: minutes",
    ".venv/bin/python benchmarks/band_refit.py accuracy.json": "needs accuracy.json (19 refits: minutes)",
    ".venv/bin/python benchmarks/validation.py --json > validation.json": "tests/benchmarks/test_validation.py runs it",
    ".venv/bin/python benchmarks/accuracy_plot.py accuracy.json validation.json -o docs/img": "needs the two above",
    # docs/network.md's benchmarks: tests/model/test_nccl_model.py runs the published nccl-tests comparison,
    # tests/model/test_flows.py the flow simulation against the analytic rates
    ".venv/bin/python benchmarks/nccl_curves.py": "tests/model/test_nccl_model.py checks its figures",
    # docs/scheduling.md's: the laws and an end-to-end case of the same model run in
    # tests/solver/schedule/test_contention.py
    ".venv/bin/python benchmarks/contention.py": "tests/solver/schedule/test_contention.py checks its model",
    ".venv/bin/python benchmarks/flow_sim.py": "16,384 GPUs: tests/model/test_flows.py checks the simulation",
    ".venv/bin/python benchmarks/ns3_agreement.py": "compiles against ns-3 and simulates: ~30 s of CPU",
    # a month of the shared example (~10 s); the CLI with --degrade runs on a small design in
    # tests/solver/schedule/test_degraded_events.py
    "gclc schedule examples/shared_cluster.gcl --no-failures --epochs 0 --degrade spine=50%@1h-6h":
        "tests/solver/schedule/test_degraded_events.py runs the CLI with --degrade",
}
FIRST_PLAN = "gclc plan examples/a100_cluster.gcl"  # the half of NOT_RUN's first line after setup
LIMIT_S = 600  # the slowest, the sweep of 24 points on a local Dask cluster, takes ~40 s on 2 busy cores


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def blocks(lang: str) -> list[tuple[str, str, str]]:
    """Every ```lang block of every page: (page, title or "", text dedented)."""
    found = []
    for page, text in PAGES.items():
        for m in FENCE.finditer(text):
            if m[1] == lang:
                title = re.search(r'title="([^"]+)"', m[2])
                found.append((page, title[1] if title else "", _dedent(m[3])))
    return found


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """One ```sh block as its commands, each with the output lines the page shows."""
    lines = text.replace("\\\n", " ").splitlines()
    found: list[tuple[str, list[str]]] = []
    if any(line.startswith("$ ") for line in lines):
        for line in lines:
            if line.startswith("$ "):
                found.append((line[2:].strip(), []))
            elif line.strip() and found:
                found[-1][1].append(line.strip())
    else:
        found += [(re.sub(r"\s+", " ", line.strip()), []) for line in lines if line.strip()]
    return found


SHELL = [(page, _commands(text)) for page, _, text in blocks("sh")]
BLOCKS_RUN = [(page, [c for c in block if c[0] not in NOT_RUN]) for page, block in SHELL]
BLOCKS_RUN = [(page, block) for page, block in BLOCKS_RUN if block]
RUN_BY_BLOCKS = {command for _, block in BLOCKS_RUN for command, _ in block}


def gcl_files() -> dict[str, str]:
    """The files the titled ```gcl blocks make: each title's blocks joined in page order."""
    files: dict[str, list[str]] = {}
    for _, title, text in blocks("gcl"):
        if title:
            files.setdefault(title, []).append(text)
    return {title: "\n\n".join(parts) + "\n" for title, parts in files.items()}


def inline_commands() -> dict[str, str]:
    """`gclc ...` in the prose that names real files (not the table's FILE templates), each
    with the first page that names it, less those a block or a test below already runs."""
    found: dict[str, str] = {}
    for page, text in PAGES.items():
        for span in re.findall(r"`(gclc [^`]+)`", text):
            real = ".gcl" in span and not re.search(r"FILE|NAME|\[|\||\.\.\.|A\.gcl|f\.gcl", span)
            if (real or span == "gclc check --list-codes") and span not in RUN_BY_BLOCKS:
                found.setdefault(span, page)
    return {span: page for span, page in found.items() if span not in RUN_ELSEWHERE}


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A directory laid out as the pages' paths expect, outside the repository, with the
    files the pages' titled blocks make."""
    here = tmp_path_factory.mktemp("reader")
    shutil.copytree(ROOT / "examples", here / "examples")
    shutil.copytree(ROOT / "tests" / "data", here / "tests" / "data")
    shutil.copytree(ROOT / ".ci", here / ".ci")
    for title, text in gcl_files().items():
        (here / title).write_text(text, encoding="utf-8")
    return here


def _run(command: str, where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1",
           "GCLC_HYPOTHESIS": "ci"}
    return subprocess.run(["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True,
                          timeout=LIMIT_S)


def _find(lang: str, marker: str) -> str:
    texts = [text for _, _, text in blocks(lang) if marker in text]
    assert texts, f"no ```{lang} block with {marker!r} in README.md or docs/"
    return texts[0]


def test_every_shell_command_is_run_or_named():
    shown = [c for _, block in SHELL for c, _ in block]
    assert set(NOT_RUN) <= set(shown), "NOT_RUN names a command no page has any more"
    assert len(RUN_BY_BLOCKS) >= 8


def test_no_shell_command_runs_twice():
    """A command shown in two blocks would run twice: show it once and link to that page."""
    counts = Counter(command for _, block in BLOCKS_RUN for command, _ in block if command.startswith("gclc "))
    twice = {c: [page for page, block in BLOCKS_RUN if c in dict(block)] for c, n in counts.items() if n > 1}
    assert not twice, f"shown in more than one block: {twice}"


@pytest.mark.parametrize("page, block", BLOCKS_RUN, ids=[f"{p}:{b[0][0][:60]}" for p, b in BLOCKS_RUN])
def test_shell_block(page, block, clone):
    for command, shown in block:  # in order: a `grep` reads what the `gclc` before it wrote
        done = _run(command, clone)
        assert done.returncode == 0, f"{page}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        for line in shown:
            assert line in done.stdout, f"{page} shows {line!r} after `{command}`; it printed:\n{done.stdout}"


def test_the_first_lines_plan_once_set_up(clone):
    done = _run(FIRST_PLAN, clone)
    assert done.returncode == 0 and done.stdout.startswith("plan gpt3_175b on A100_Cluster"), done.stderr


# Commands a test of its own runs (with stronger checks): inline mentions of them are not run again.
PICTURE = "gclc render examples/dgx_h100_superpod.gcl -o superpod.svg"  # tests/test_docs_site.py
RUN_ELSEWHERE = {FIRST_PLAN, PICTURE}
EXPECTED_EXIT = {"gclc export examples/hetero_h100_a100.gcl --to megatron": 1}  # exports.md says it exits 1
INLINE = inline_commands()


@pytest.mark.parametrize("command", sorted(INLINE), ids=lambda c: c[:70])
def test_inline_command(command, clone):
    done = _run(command, clone)
    assert done.returncode == EXPECTED_EXIT.get(command, 0), \
        f"{INLINE[command]}: {command}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    if command in EXPECTED_EXIT:
        assert "Megatron-LM runs one parallel layout on identical GPUs" in done.stderr


def test_the_commands_run_elsewhere_are_on_the_pages():
    spans = {s for text in PAGES.values() for s in re.findall(r"`(gclc [^`]+)`", text)}
    assert RUN_ELSEWHERE <= spans | RUN_BY_BLOCKS, RUN_ELSEWHERE - spans


def test_the_lexer_line_colours_gcl(clone):
    assert any(re.search(r"pygmentize\s+-l\s+gcl\s+design\.gcl", text) for text in PAGES.values())
    done = _run("pygmentize -l gcl -f terminal examples/a100_cluster.gcl", clone)
    assert done.returncode == 0 and "\x1b[" in done.stdout and "A100_Cluster" in done.stdout, done.stderr


OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])\b")


def test_the_command_table_names_every_command_and_only_real_options():
    """The CLI page is the reference: each command has its row, each option of a command's
    `--help` is on the page, and each option a row names exists."""
    page = PAGES["docs/cli.md"]
    rows = dict(re.findall(r"^\| `gclc (\w+)([^`]*)`", page, re.M))
    commands = re.findall(r"^    (\w+) ", _run("gclc --help", ROOT).stdout, re.M)
    assert len(commands) >= 13 and sorted(rows) == sorted(commands), "a command without its row, or a row without its command"
    for name, usage in rows.items():
        help_text = _run(f"gclc {name} --help", ROOT).stdout
        for option in OPTION.findall(usage):
            assert option in help_text, f"`gclc {name}` has no {option}"
        for option in set(OPTION.findall(help_text)):
            assert re.search(rf"(?<![\w-]){re.escape(option)}\b", page), f"docs/cli.md does not mention `gclc {name} {option}`"


def test_the_tour_checks_clean_and_plans_with_the_suggested_setting(clone):
    tour = _find("gcl", 'import "std/nvidia"                       # data-sheet parts')
    (clone / "f.gcl").write_text(tour)
    done = _run("gclc check f.gcl", clone)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    suggested = re.search(r"# (gclc plan f\.gcl --set \S+)", tour)[1]
    done = _run(suggested, clone)
    assert done.returncode == 0 and done.stdout.startswith("plan pretrain on Pod"), done.stderr[-2000:]


def test_the_gcl_fragments_parse():
    from gclc.dsl.source import SourceFile, source_text
    from gclc.dsl.syntax import parse_source

    fragments = [(page, text) for page, title, text in blocks("gcl") if not title]
    assert len(fragments) >= 3
    for page, text in fragments:
        parse_source(SourceFile(page, source_text(text)))  # raises on a syntax error


@pytest.mark.parametrize("title", sorted(gcl_files()))
def test_a_titled_gcl_file_checks_clean(title, clone):
    from gclc.compiler.driver import check_file

    result = check_file(str(clone / title), [])
    assert result.ok and not result.diagnostics, [str(d) for d in result.diagnostics]


def test_no_two_pages_write_the_same_file():
    assert "first.gcl" in gcl_files()  # the tutorial's
    pages = {}
    for page, title, _ in blocks("gcl"):
        if title:
            assert pages.setdefault(title, page) == page, f"{title} is written by {pages[title]} and {page}"


PYTHON_RUN = ("check_file(\"examples/dgx_h100_superpod.gcl\"", "test_my_cluster.py")  # the two tests below


def test_every_python_block_is_run():
    for page, _, text in blocks("python"):
        assert any(marker in text for marker in PYTHON_RUN), f"{page}: a ```python block that no test runs:\n{text}"


def test_the_python_snippet(clone):
    (clone / "snippet.py").write_text(_find("python", PYTHON_RUN[0]))
    done = _run(f"{sys.executable} snippet.py", clone)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("512 ['NVLink4 (node)'"), done.stdout


def test_the_property_test_example(clone):
    (clone / "test_my_cluster.py").write_text(_find("python", PYTHON_RUN[1]))
    done = _run(f"{sys.executable} -m pytest -q -p no:cacheprovider test_my_cluster.py", clone)
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout[-3000:]


def test_the_language_page_lists_every_block_kind():
    from gclc.compiler.schema import KINDS

    listed = re.search(r"\*\*Block kinds\*\*: `([^`]+)`", PAGES["docs/language.md"])[1].split()
    assert listed == list(KINDS), "docs/language.md's block kinds are not the schema's (compiler/schema.py KINDS)"
