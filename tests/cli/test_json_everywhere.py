"""One `--json` on every command that has results, each printing one JSON document on
stdout (several files: keyed by file name); and a progress line on a terminal for the
commands that can take more than a second (export, diff, schedule, besides plan, render
and the report, which tests/cli/test_conventions.py covers with the progress primitive)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gclc.cli.main import _parser, main

ROOT = Path(__file__).resolve().parents[2]
TRAIN = str(ROOT / "tests" / "data" / "train.gcl")
SHARED = str(ROOT / "examples" / "shared_cluster.gcl")
WITH_RESULTS = ("check", "compile", "explain", "plan", "schedule", "export", "sweep", "diff", "std", "fmt", "render",
                "report")


def test_every_command_with_results_has_one_json_flag():
    parser = _parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in WITH_RESULTS:
        flags = [o for a in commands[name]._actions for o in a.option_strings if o == "--json"]
        assert flags == ["--json"], name


@pytest.mark.parametrize("argv, check", [
    (["compile", TRAIN], lambda d: d["cluster"]["name"] == "Pod"),
    (["explain", TRAIN], lambda d: d["metrics"][0]["key"] == "gpus"),
    (["plan", TRAIN, "--set", "nodes=2"], lambda d: d["status"] == "optimal"),
    (["diff", TRAIN, TRAIN, "--set", "nodes=2"], lambda d: d["status"] == {"a": "ok", "b": "ok"} and d["changes"] == []),
    (["std", "list", "--kind", "switch"], lambda d: any(p["name"] == "QM9700" for p in d)),
    (["schedule", SHARED, "--no-failures", "--epochs", "0"], lambda d: d["jobs"]),
])
def test_json_is_one_document_on_stdout(argv, check, capsys):
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert check(data)


def test_commands_that_write_a_file_say_what_they_wrote(tmp_path, capsys):
    dot = tmp_path / "t.dot"
    assert main(["render", TRAIN, "--set", "nodes=2", "-o", str(dot), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == {"output": str(dot), "bytes": dot.stat().st_size, "format": "dot", "view": "topology"}
    page = tmp_path / "t.html"
    assert main(["report", TRAIN, "--set", "nodes=2", "-o", str(page), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bytes"] == page.stat().st_size and data["sections"][1:3] == ["Design", "Bill of materials and cost"]
    assert data["sections"][0].endswith(": the answer") and "Roofline" in data["sections"]


def test_fmt_json_says_per_file_whether_it_is_canonical(tmp_path, capsys):
    messy, clean = tmp_path / "messy.gcl", tmp_path / "clean.gcl"
    messy.write_text("model M { arch = dense  layers = 2  hidden = 64  heads = 2  ffn = 128  vocab = 100  seq = 128 }\n")
    assert main(["fmt", str(messy), "--write"]) == 0
    clean.write_text(messy.read_text())
    messy.write_text(messy.read_text().replace("  arch", "arch", 1))
    capsys.readouterr()
    assert main(["fmt", str(messy), str(clean), "--check", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {str(messy), str(clean)}
    assert data[str(clean)] == {"file": str(clean), "canonical": True, "written": False, "diff": ""}
    assert data[str(messy)]["canonical"] is False and data[str(messy)]["diff"].startswith(f"--- {messy}")
    assert main(["fmt", str(messy), "--write", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)       # one file: its object
    assert one["written"] is True and messy.read_text() == clean.read_text()
    broken = tmp_path / "broken.gcl"
    broken.write_text("model M { layers = 2 + }\n")
    assert main(["fmt", str(broken), "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"file": str(broken), "canonical": None, "written": False, "diff": None}
    assert "error[syntax]" in captured.err


def test_export_json_is_keyed_by_file_name(capsys):
    assert main(["export", TRAIN, "--set", "nodes=2", "--to", "slurm", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)
    assert {"slurm.conf", "topology.conf", "job.sbatch"} <= set(files)
    assert all(isinstance(text, str) and text for text in files.values())


def test_sweep_json_summarises_the_points(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", TRAIN, "--vary", "nodes=1,2", "--in-process", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["points"] == 2 and summary["feasible"] + summary["infeasible"] + summary["invalid"] == 2
    assert str(out / "sweep.csv") in summary["files"] and isinstance(summary["pareto"], list)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("argv, words", [
    (["export", TRAIN, "--set", "nodes=2", "--to", "slurm"], "planning and exporting to slurm…"),
    (["diff", TRAIN, TRAIN, "--set", "nodes=2"], "planning both designs…"),
])
def test_slow_commands_show_progress_on_a_terminal(argv, words, monkeypatch, capsys):
    from gclc.cli import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(argv) == 0
    assert words in terminal.getvalue() and terminal.getvalue().endswith("\r\x1b[K")
