"""Command-line conventions: `--color` (and NO_COLOR), `check --json` keyed by file,
`fmt --diff`, diagnostics on stderr and results on stdout, `--quiet`, progress on a
terminal. Colour only adds ANSI codes: stripped, the text is the plain text."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from pathlib import Path

import pytest

from gclc.cli.common import colour, set_color
from gclc.cli.main import main
from gclc.views.color import strip

ROOT = Path(__file__).resolve().parents[2]
UGLY = "chip  A {\n hbm {capacity=80 GB bandwidth=3 TB/s}\n  peak { bf16 = 1 PFLOPS }  power { tdp = 700 W }\n}\n"
BAD = 'import "std/nvidia"\nnode N { gpus = 8 x H200 }\nnic X { bandwidth = 400 Gbit/s }\n'


@pytest.fixture(autouse=True)
def _reset_colour():
    yield
    set_color("auto")


class _Terminal:
    def isatty(self) -> bool:
        return True


def test_colour_follows_the_flag_then_no_color_then_the_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    set_color("auto")
    assert colour(_Terminal()) and not colour(object())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour(_Terminal())
    set_color("always")  # an explicit flag wins over the environment
    assert colour(object())
    set_color("never")
    assert not colour(_Terminal())


@pytest.mark.parametrize("where", ["before", "after"])
def test_check_in_colour_is_the_plain_text_painted(tmp_path, capsys, where):
    path = tmp_path / "bad.gcl"
    path.write_text(BAD)
    assert main(["check", str(path), "--color", "never"]) == 1
    plain = capsys.readouterr().err  # diagnostics on stderr
    args = ["--color", "always", "check", str(path)] if where == "before" else ["check", str(path), "--color", "always"]
    assert main(args) == 1
    painted = capsys.readouterr().err
    assert "\x1b[" in painted and "\x1b[" not in plain
    assert strip(painted) == plain
    assert "\x1b[1m\x1b[31merror[unknown-name]" in painted


def test_fmt_prints_gcl_highlighted_only_when_asked(tmp_path, capsys):
    path = tmp_path / "ugly.gcl"
    path.write_text(UGLY)
    assert main(["fmt", str(path)]) == 0
    plain = capsys.readouterr().out
    assert main(["fmt", "--color", "always", str(path)]) == 0
    painted = capsys.readouterr().out
    assert "\x1b[" not in plain and "\x1b[" in painted and strip(painted) == plain


def test_check_json_is_one_flag_and_keyed_by_file(tmp_path, capsys):
    good, bad = tmp_path / "good.gcl", tmp_path / "bad.gcl"
    good.write_text("param racks = 4\n")
    bad.write_text(BAD)
    assert main(["check", "--json", str(good), str(bad)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert list(data) == [str(good), str(bad)] and data[str(good)] == []
    assert [d["code"] for d in data[str(bad)]] == ["unknown-name", "unknown-unit"]
    assert main(["check", "--json", str(bad)]) == 1
    single = json.loads(capsys.readouterr().out)
    assert single == data[str(bad)]  # one file: its list, as `--format json` always printed
    assert main(["check", "--json", str(good), str(bad), str(good)]) == 1  # named twice: one key, checked once
    text = capsys.readouterr().out
    assert text.count(f'"{good}"') == 1 and json.loads(text) == data


def test_fmt_diff_is_the_change_to_canonical_form(tmp_path, capsys):
    path = tmp_path / "ugly.gcl"
    path.write_text(UGLY)
    assert main(["fmt", str(path)]) == 0
    canonical = capsys.readouterr().out
    assert main(["fmt", "--check", "--diff", str(path)]) == 1
    diff = capsys.readouterr().out.splitlines(keepends=True)
    assert diff[0].startswith(f"--- {path}") and diff[1].startswith(f"+++ {path} (formatted)")
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    assert added == [line for line in canonical.splitlines(keepends=True) if line not in UGLY.splitlines(keepends=True)]
    assert removed == [line for line in UGLY.splitlines(keepends=True) if line not in canonical.splitlines(keepends=True)]
    assert path.read_text() == UGLY  # --check --diff writes nothing
    assert main(["fmt", "--write", "--diff", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"--- {path}") and path.read_text() == canonical
    assert main(["fmt", "--diff", str(path)]) == 0 and capsys.readouterr().out == ""  # canonical: no diff


def test_diagnostics_go_to_stderr_and_quiet_keeps_errors_only(tmp_path, capsys):
    warned = ROOT / "tests" / "golden" / "model_params_mismatch.gcl"
    bad = tmp_path / "bad.gcl"
    bad.write_text(BAD)
    assert main(["check", str(warned), str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "warning[params-mismatch]" in err and "error[unknown-unit]" in err
    assert main(["check", "--quiet", str(warned), str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "warning" not in err.replace("0 warnings", "") and "error[unknown-unit]" in err
    good = tmp_path / "good.gcl"
    good.write_text("param racks = 4\n")
    other = tmp_path / "other.gcl"
    other.write_text("param racks = 8\n")
    assert main(["check", str(good), str(other)]) == 0
    out, err = capsys.readouterr()
    assert out == f"{good}: ok\n{other}: ok\n" and err == ""
    assert main(["-q", "check", str(good), str(other)]) == 0 and capsys.readouterr() == ("", "")


def test_one_clean_file_says_ok_as_two_do(tmp_path, capsys):
    """Issue 27: one clean file printed nothing, two printed `ok` lines on stderr. The
    verdict is check's result: `FILE: ok` on stdout for one file or several alike."""
    good = tmp_path / "good.gcl"
    good.write_text("param racks = 4\n")
    assert main(["check", str(good)]) == 0
    assert capsys.readouterr() == (f"{good}: ok\n", "")


def test_every_command_that_writes_a_file_says_what_it_wrote_on_stdout(tmp_path, capsys):
    """Issue 27: `render` printed nothing on success while export and sweep said what they
    wrote. Every command that writes says `wrote PATH` on stdout (results on stdout,
    diagnostics and progress on stderr), and nothing under --quiet."""
    design = str(ROOT / "tests" / "data" / "train.gcl")
    runs = {"render": (["render", design, "-o", str(tmp_path / "t.dot")], "t.dot"),
            "compile": (["compile", design, "-o", str(tmp_path / "ir.json")], "ir.json"),
            "report": (["report", design, "-o", str(tmp_path / "r.html")], "r.html"),
            "export": (["export", design, "--to", "slurm", "-o", str(tmp_path / "slurm")], "job.sbatch")}
    for name, (args, written) in runs.items():
        assert main(args) == 0, name
        out, err = capsys.readouterr()
        assert re.search(rf"^wrote \S*{re.escape(written)}", out, re.MULTILINE), (name, out)
        assert "wrote" not in err, name
        assert main(["-q", *args]) == 0 and "wrote" not in capsys.readouterr().out, name
    ugly = tmp_path / "ugly.gcl"
    ugly.write_text(UGLY)
    assert main(["fmt", "--write", str(ugly)]) == 0 and capsys.readouterr().out == f"wrote {ugly}\n"


class _TerminalBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_after_a_second_and_is_erased(monkeypatch):
    from gclc.cli import progress as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.05)
    terminal = _TerminalBuffer()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_module.progress("planning"):
        time.sleep(0.3)
    shown = terminal.getvalue()
    assert "planning… 0 s" in shown and shown.endswith("\r\x1b[K")
    piped = io.StringIO()  # not a terminal: nothing
    monkeypatch.setattr(sys, "stderr", piped)
    with progress_module.progress("planning"):
        time.sleep(0.2)
    assert piped.getvalue() == ""
    monkeypatch.setattr(sys, "stderr", terminal)
    set_color("auto", quiet=True)  # --quiet: nothing either
    before = terminal.getvalue()
    with progress_module.progress("planning"):
        time.sleep(0.2)
    assert terminal.getvalue() == before
