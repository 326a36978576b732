"""Issue 30's "Why" list, one regression test per item: the inputs that arrived with the newer
features (serve request traces, workload traces, host lists, CLI numbers, outputs, sizes, the
language server) get a located error or a plan — never exit 70, a hang or a changed input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gclc.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
GCLC = [sys.executable, "-m", "gclc"]
LOCATED = re.compile(r"^(?P<path>\S+):(?P<line>\d+):(?P<column>\d+): error\[(?P<code>[a-z-]+)\]", re.MULTILINE)

SERVE = """\
import "std/nvidia"
import "std/network"
cluster C { units = 2 x DGX_H100  scaleout = NDR_FatTree }
model M {
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
  ffn = 14336  vocab = 128256  seq = 8192
}
serve s { model = M  on = C  precision = bf16
  trace = "t.csv"
  slo { ttft.p99 <= 2 s }
}
"""
SHARED = (ROOT / "examples" / "shared_cluster.gcl").read_text().replace(
    "workload notebooks {", 'workload notebooks {\n  trace    = "w.csv"')


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code != 70 and "Traceback" not in out and "internal error" not in out, out
    return code, out


def located(out: str) -> list[dict]:
    return [m.groupdict() for m in LOCATED.finditer(out)]


@pytest.fixture
def serve(tmp_path, monkeypatch):
    """A serve design in the current folder whose trace `t.csv` a test writes."""
    monkeypatch.chdir(tmp_path)
    Path("s.gcl").write_text(SERVE)
    return lambda rows: Path("t.csv").write_text(rows) if isinstance(rows, str) else Path("t.csv").write_bytes(rows)


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """The shared-cluster example in the current folder, its workload reading `w.csv`."""
    monkeypatch.chdir(tmp_path)
    Path("shared.gcl").write_text(SHARED)
    return lambda rows: Path("w.csv").write_text(rows)


# ----------------------------------------------------------------- serve request traces

@pytest.mark.parametrize("rows", ["0,100,10\n", "0,100,10\n0,100,10\n0,120,12\n"])
def test_a_trace_of_one_request_or_one_instant_is_planned(serve, capsys, rows):
    serve("arrival_s,prompt,output\n" + rows)
    code, out = run(["plan", "s.gcl"], capsys)
    assert code == 0 and "at one instant" in out


@pytest.mark.parametrize("rows, line, column, words", [
    ("0,100,10\n1e-320,100,10\n", 3, 1, "outside 1e-30..1e30"),            # overflowed `math.ceil(rate / ...)`
    ("0,100,10\n1," + "9" * 4000 + ",10\n", 3, 3, "too long"),               # overflowed a float division
    ("0,1_000,10\n", 2, 3, "without separators"),                           # `int("1_000")` took it
    ("0,١٠٠,10\n", 2, 3, "ASCII digits"),                                    # so did Arabic-Indic digits
    ('0,"' + "9" * 140_000 + '",10\n', 2, 4097, "at most 4,096"),            # an uncaught `_csv.Error`
])
def test_a_bad_request_row_is_located_in_the_trace(serve, capsys, rows, line, column, words):
    serve("arrival_s,prompt,output\n" + rows)
    code, out = run(["check", "s.gcl"], capsys)
    [where] = located(out)
    assert code == 1 and (where["path"], int(where["line"]), int(where["column"])) == ("t.csv", line, column)
    assert words in out


def test_a_fifo_trace_does_not_block_check(serve, tmp_path):
    os.mkfifo("t.csv")
    done = subprocess.run([*GCLC, "check", "s.gcl"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1 and "s.gcl:9:3: error[io-error]" in done.stderr and "not a regular file" in done.stderr


# ----------------------------------------------------------------- workload traces

@pytest.mark.parametrize("rows, column, words", [
    ("0,100,²\n", 7, "ASCII digits"),                                       # `str.isdigit()` then `int()` crashed
    ("0,10,8,²\n", 8, "ASCII digits"),                                      # in the priority column too
    ("0,10,1e300\n", 6, "outside 1e-30..1e30"),                             # echoed as 301 digits
    ("0," + "1" * 140_000 + ",8\n", 4097, "at most 4,096"),                  # an oversized cell crashed
])
def test_a_bad_workload_row_is_located_where_the_user_named_it(shared, capsys, rows, column, words):
    shared("submit,duration,gpus,priority\n" + rows)
    code, out = run(["check", "shared.gcl"], capsys)
    [where] = located(out)
    assert code == 1 and (where["path"], int(where["line"]), int(where["column"])) == ("w.csv", 2, column)
    assert words in out and len(max(out.split(), key=len)) < 200   # no 301-digit echo
    assert str(Path.cwd()) not in out                                # the path as given, never made absolute


def test_a_fifo_workload_trace_does_not_block(shared, tmp_path):
    os.mkfifo("w.csv")
    done = subprocess.run([*GCLC, "check", "shared.gcl"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1 and "error[io-error]" in done.stderr and "not a regular file" in done.stderr


# ----------------------------------------------------------------- host lists

@pytest.mark.parametrize("hosts, words", [("n[0-99999999999]", "names 100,000,000,000 hosts"),
                                          ("n[²]", "ASCII digits")])
def test_a_host_list_is_counted_before_it_expands(tmp_path, capsys, hosts, words):
    text = (ROOT / "examples" / "a100_cluster.gcl").read_text().replace(
        "  units    = nodes x DGX_A100", f'  units    = nodes x DGX_A100\n  hostnames = ["{hosts}"]')
    (tmp_path / "h.gcl").write_text(text)
    start = time.process_time()
    code, out = run(["check", str(tmp_path / "h.gcl")], capsys)
    assert code == 1 and [w["code"] for w in located(out)] == ["hostnames"] and words in out
    assert time.process_time() - start < 5   # it expanded 3 GB before


# ----------------------------------------------------------------- CLI numbers

def test_seed_minus_one_is_a_usage_error_and_1e3_a_seed(capsys):
    example = str(ROOT / "examples" / "shared_cluster.gcl")
    with pytest.raises(SystemExit) as exit_:
        main(["schedule", example, "--seed", "-1"])
    assert exit_.value.code == 2 and "argument --seed" in capsys.readouterr().err
    code, _ = run(["schedule", example, "--seed", "1e3", "--no-failures", "--epochs", "0", "--json"], capsys)
    assert code == 0
