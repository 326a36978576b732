"""Every command against awkward inputs: missing, empty and cluster-less designs, options
that name the wrong thing, outputs that cannot be written, infeasible jobs. Never an
internal error; bad input exits 1, usage 2, infeasible 3; inputs are never overwritten."""

from __future__ import annotations

import errno
import json
import re
import stat
from pathlib import Path

import pytest

from gclc.cli import fmt as cli_fmt
from gclc.cli.main import main
from gclc.testing.model_texts import llama3_8b

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.gcl"))

MODEL = llama3_8b()

BASE = """\
import "std/nvidia"

param nodes = 4

cluster C {
  units    = nodes x DGX_H100
  scaleout = NDR_FatTree
}

""" + MODEL + """
train t {
  model     = M
  on        = C
  batch     = 64
  precision = bf16
}
"""

ONLY_SERVE = """\
import "std/nvidia"

cluster C {
  units    = 4 x DGX_H100
  scaleout = NDR_FatTree
}

""" + MODEL + """
serve s {
  model     = M
  on        = C
  prompt    = 1024
  output    = 256
  precision = bf16
  slo { ttft <= 2 s  tpot <= 50 ms }
}
"""

PARTITIONS = """\
import "std/nvidia"

cluster L {
  scaleout = NDR_FatTree
  partition h { units = 2 x DGX_H100 }
  partition a { units = 2 x DGX_A100 }
}

""" + MODEL + """
train th { model = M  on = L.h  batch = 64 }
train tx { model = M  on = [L.h, L.a]  batch = 64 }
serve sv { model = M  on = L.a  prompt = 512  output = 128  slo { ttft <= 2 s  tpot <= 50 ms } }
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    assert "internal error" not in captured.err and "Traceback" not in captured.err, captured.err
    return code, captured.out, captured.err


@pytest.fixture
def files(tmp_path):
    texts = {"base.gcl": BASE, "serve.gcl": ONLY_SERVE, "parts.gcl": PARTITIONS, "empty.gcl": "",
             "comments.gcl": "# only\n# comments\n", "nocluster.gcl": 'import "std/nvidia"\n\nparam x = 1\n',
             "notrain.gcl": BASE.split("train t")[0],
             "nofit.gcl": BASE.replace("param nodes = 4", "param nodes = 1").replace("layers   = 32", "layers   = 400")
             .replace("hidden   = 4096", "hidden   = 32768")}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "dir.gcl").mkdir()
    return tmp_path


# ----------------------------------------------------------------- files that are not designs


@pytest.mark.parametrize("command", [["check"], ["compile"], ["explain"], ["plan"], ["render", "-o", "x.svg"],
                                     ["report", "-o", "x.html"], ["fmt"], ["fmt", "--check"], ["fmt", "--write"]])
@pytest.mark.parametrize("name", ["missing.gcl", "dir.gcl"])
def test_missing_file_and_directory(files, capsys, command, name):
    args = [command[0], files / name, *command[1:]]
    args = [files / a if str(a).startswith("x.") else a for a in args]
    code, out, err = run(capsys, *args)
    assert code == 1 and "io-error" in out + err


@pytest.mark.parametrize("name", ["empty.gcl", "comments.gcl", "nocluster.gcl"])
def test_design_without_cluster(files, capsys, name):
    path = files / name
    assert run(capsys, "check", path)[0] == 0
    assert run(capsys, "fmt", "--check", path)[0] == 0
    for args in (["compile", path], ["explain", path], ["explain", "--json", path],
                 ["render", path, "-o", files / "x.svg"], ["render", path, "-o", files / "x.dot", "--view", "power"],
                 ["report", path, "-o", files / "x.html"]):
        code, _, err = run(capsys, *args)
        assert code == 1 and "declares no cluster" in err, (args, err)
    for args in (["plan", path], ["plan", "--json", path],
                 ["render", path, "-o", files / "x.svg", "--view", "placement"]):
        code, _, err = run(capsys, *args)
        assert code == 1 and "no job to plan" in err, (args, err)
    assert not (files / "x.html").exists() and not (files / "x.svg").exists()


# ----------------------------------------------------------------- options naming the wrong thing


@pytest.mark.parametrize("name, what", [("Nope", ""), ("M", "is a model"), ("DGX_H100", "is a node"),
                                        ("t", "is a train job"), ("", "")])
def test_cluster_option_names_no_cluster(files, capsys, name, what):
    base = files / "base.gcl"
    for args in (["compile", base], ["explain", base], ["render", base, "-o", files / "x.dot"],
                 ["render", base, "-o", files / "x.dot", "--view", "power"]):
        code, _, err = run(capsys, *args, "--cluster", name)
        assert code == 2 and f"no cluster `{name}`" in err and what in err and "the design has: C" in err, err


def test_job_option(files, capsys):
    base, serve, parts = files / "base.gcl", files / "serve.gcl", files / "parts.gcl"
    code, _, err = run(capsys, "plan", base, "--job", "nope")
    assert code == 2 and "no train job `nope`; the design has: t" in err
    code, _, err = run(capsys, "plan", base, "--job", "M")
    assert code == 2 and "`M` is a model, not a train job" in err
    code, _, err = run(capsys, "render", serve, "-o", files / "x.dot", "--view", "placement", "--job", "s")
    assert code == 0 and "serve s:" in (files / "x.dot").read_text(), err  # serve plans draw their pools
    for design, job in ((serve, "s"), (parts, "sv")):  # the report plans serve jobs too
        code, _, err = run(capsys, "report", design, "-o", files / "x.html", "--job", job)
        assert code == 0 and "(serve)" in (files / "x.html").read_text(encoding="utf-8"), err
    code, out, _ = run(capsys, "plan", serve, "--job", "s", "--json")
    assert code == 0 and json.loads(out)["status"] == "optimal"


@pytest.mark.parametrize("setting, code_", [("nodes", "bad-setting"), ("=4", "bad-setting"),
                                            ("nope=4", "unknown-param"), ("nodes=1 GB", "setting-type"),
                                            ("nodes=abc", ""), ("nodes=((", "")])
def test_bad_settings(files, capsys, setting, code_):
    for command in (["plan"], ["compile"], ["report", "-o", files / "x.html"]):
        code, out, err = run(capsys, command[0], files / "base.gcl", *command[1:], "--set", setting)
        assert code == 1 and code_ in out + err


def test_top_option(files, capsys):
    base = files / "base.gcl"
    for top in ("-1", "x"):
        with pytest.raises(SystemExit) as info:
            main(["plan", str(base), "--top", top])
        assert info.value.code == 2
        assert "--top" in capsys.readouterr().err
    code, out, _ = run(capsys, "plan", base, "--top", "0")
    assert code == 0 and "#2" not in out
    code, out, _ = run(capsys, "plan", base, "--top", "1000000", "--json")
    assert code == 0 and len(json.loads(out)["runners_up"]) > 3


def test_objective_energy(files, capsys):
    code, out, _ = run(capsys, "plan", files / "base.gcl", "--objective", "energy", "--json")
    assert code == 0 and json.loads(out)["objective"] == "energy"


# ----------------------------------------------------------------- outputs


@pytest.mark.parametrize("command, suffix", [(["compile"], "json"), (["render"], "dot"), (["report"], "html")])
def test_unwritable_outputs(files, capsys, command, suffix):
    base = files / "base.gcl"
    for out, expected in ((files / "no" / "such" / f"x.{suffix}", "No such file or directory"),
                          (base / f"x.{suffix}", "Not a directory"), ("/proc/x." + suffix, "cannot write")):
        code, _, err = run(capsys, *command, base, "-o", out)
        assert code == 1 and f"cannot write `{out}`" in err and expected in err, err
    if suffix != "dot":  # a directory (render would first reject the suffix)
        code, _, err = run(capsys, *command, base, "-o", files / "dir.gcl")
        assert code == 1 and "is a directory" in err
    assert not [p for p in files.iterdir() if p.name.endswith(".tmp")]


def test_empty_output_name(files, capsys):
    for command in ("compile", "report"):
        code, _, err = run(capsys, command, files / "base.gcl", "-o", "")
        assert code == 2 and "-o needs a file name" in err
    assert run(capsys, "render", files / "base.gcl", "-o", "")[0] == 2


def test_output_never_overwrites_input(files, capsys):
    base = files / "base.gcl"
    link = files / "link.gcl"
    link.symlink_to(base)
    for command in ("compile", "report"):
        for out in (base, link):
            code, _, err = run(capsys, command, base, "-o", out)
            assert code == 2 and "refusing to overwrite the input" in err
    assert base.read_text(encoding="utf-8") == BASE


def test_render_suffixes(files, capsys):
    base = files / "base.gcl"
    for name in ("x.txt", "x", "x.jpg"):
        code, _, err = run(capsys, "render", base, "-o", files / name)
        assert code == 2 and "cannot tell the format" in err
    assert run(capsys, "render", base, "-o", files / "x.DOT")[0] == 0


def test_stdout_failure_is_not_internal(files, capsys, monkeypatch):
    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr("sys.stdout", Full())
    assert main(["explain", str(files / "base.gcl")]) == 1
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert "cannot write the output: No space left on device" in err and "internal error" not in err


# ----------------------------------------------------------------- infeasible and heterogeneous jobs


def test_job_that_cannot_fit_memory(files, capsys):
    nofit = files / "nofit.gcl"
    code, _, err = run(capsys, "plan", nofit)
    assert code == 3 and "gclc: infeasible:" in err and re.search(r"[\d.]+ [GT]B per GPU", err)
    code, out, err = run(capsys, "plan", nofit, "--json")
    data = json.loads(out)
    assert code == 3 and data["status"] == "infeasible" and data["infeasible"]["constraint"] == "memory"
    code, _, err = run(capsys, "render", nofit, "-o", files / "x.dot", "--view", "placement")
    assert code == 3 and re.search(r"[\d.]+ [GT]B per GPU", err) and not (files / "x.dot").exists()


def test_serve_infeasible_says_why(files, capsys):
    path = files / "serve.gcl"
    path.write_text(ONLY_SERVE.replace("ttft <= 2 s", "ttft <= 1 ms"), encoding="utf-8")
    code, out, err = run(capsys, "plan", path, "--json")
    assert code == 3 and json.loads(out)["status"] == "infeasible"
    assert "gclc: infeasible: no configuration of `s` meets its limits\n" in err
    assert re.search(r"serve\.gcl:\d+:\d+: `ttft <= 1 ms` is broken by every one of \d+ configurations", err), err
    code, _, err = run(capsys, "render", path, "-o", files / "s.dot", "--view", "placement")  # says why as plan does
    assert code == 3 and "gclc: infeasible: no configuration of `s` meets its limits\n" in err
    assert re.search(r"serve\.gcl:\d+:\d+: `ttft <= 1 ms` is broken", err) and not (files / "s.dot").exists()


def test_partitions(files, capsys):
    parts = files / "parts.gcl"
    code, out, _ = run(capsys, "plan", parts, "--job", "th", "--json")
    assert code == 0 and json.loads(out)["partition"] == "h"
    code, out, _ = run(capsys, "plan", parts, "--job", "tx", "--json", "--top", "0")
    data = json.loads(out)
    assert code == 0 and data["status"] == "optimal" and data["mode"] in ("data", "pipeline")
    code, out, _ = run(capsys, "plan", parts, "--job", "sv", "--json")
    assert code == 0 and json.loads(out)["cluster"] == "L"
    # A job on two partitions is drawn as one rank grid per partition its split uses.
    code, _, err = run(capsys, "render", parts, "-o", files / "x.dot", "--view", "placement", "--job", "tx")
    drawn, used = (files / "x.dot").read_text(), data["parallelism"]["partitions"]
    assert code == 0 and drawn.count("subgraph cluster_") == 2
    assert all(f'label="{p}: ' in drawn for p in used)


def test_hetero_infeasible_says_why(files, capsys):
    parts = files / "parts.gcl"
    huge = PARTITIONS.replace("layers   = 32", "layers   = 4000").replace("hidden   = 4096", "hidden   = 65536")
    parts.write_text(huge, encoding="utf-8")
    code, out, err = run(capsys, "plan", parts, "--job", "tx", "--json")
    assert code == 3 and json.loads(out)["status"] == "infeasible"
    assert "gclc: infeasible: `tx` fits neither split" in err and "no partition can hold a model replica" in err


# ----------------------------------------------------------------- fmt


UNFORMATTED = 'param   x=1\nimport "std/nvidia"\n'


def test_fmt_check_and_write_keep_mode(files, capsys):
    path = files / "u.gcl"
    path.write_text(UNFORMATTED, encoding="utf-8")
    path.chmod(0o640)
    code, out, _ = run(capsys, "fmt", "--check", path)
    assert code == 1 and "not in canonical form" in out and path.read_text(encoding="utf-8") == UNFORMATTED
    assert run(capsys, "fmt", "--write", path)[0] == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert run(capsys, "fmt", "--check", path)[0] == 0
    assert not [p for p in files.iterdir() if p.name.endswith(".tmp")]


def test_fmt_write_through_symlink(files, capsys):
    target, link = files / "u.gcl", files / "link.gcl"
    target.write_text(UNFORMATTED, encoding="utf-8")
    link.symlink_to(target.name)
    assert run(capsys, "fmt", "--write", link)[0] == 0
    assert link.is_symlink() and target.read_text(encoding="utf-8") != UNFORMATTED
    assert run(capsys, "fmt", "--check", target)[0] == 0


def test_fmt_syntax_error_leaves_file(files, capsys):
    path = files / "bad.gcl"
    path.write_text("param x = \ncluster {\n", encoding="utf-8")
    before = path.stat().st_mtime_ns
    for mode in ([], ["--check"], ["--write"]):
        code, out, err = run(capsys, "fmt", *mode, path)
        assert code == 1 and "bad.gcl:2:9: error[syntax]" in out + err
    assert path.read_text(encoding="utf-8") == "param x = \ncluster {\n" and path.stat().st_mtime_ns == before


def test_fmt_write_failure(files, capsys, monkeypatch):
    path = files / "u.gcl"
    path.write_text(UNFORMATTED, encoding="utf-8")

    def refuse(target, data, replaces=None):
        raise PermissionError(errno.EACCES, "Permission denied", str(target))

    monkeypatch.setattr(cli_fmt, "write_atomic", refuse)
    code, _, err = run(capsys, "fmt", "--write", path, files / "comments.gcl")
    assert code == 1 and f"cannot write `{path}`: Permission denied" in err
    assert path.read_text(encoding="utf-8") == UNFORMATTED


# ----------------------------------------------------------------- the examples


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_plan_json(example, capsys):
    def strict(constant):
        raise ValueError(f"not JSON: {constant}")

    code, out, _ = run(capsys, "plan", example, "--json", "--top", "0")
    data = json.loads(out, parse_constant=strict)
    assert code == 0 and data["status"] == "optimal"


def test_example_render_placement_of_a_job_on_two_partitions(tmp_path, capsys):
    # The heterogeneous example's job spans two partitions: one grid per partition (it
    # was an error before `views/placement_hetero.py`).
    code, _, _ = run(capsys, "render", ROOT / "examples" / "hetero_h100_a100.gcl", "-o", tmp_path / "x.dot",
                     "--view", "placement")
    assert code == 0 and (tmp_path / "x.dot").read_text().count("subgraph cluster_") == 2


def test_example_render_placement_of_a_serve_job(tmp_path, capsys):
    code, _, err = run(capsys, "render", ROOT / "examples" / "custom_dsa.gcl", "-o", tmp_path / "x.dot",
                       "--view", "placement")
    assert code == 0 and "pool ·" in (tmp_path / "x.dot").read_text(), err
