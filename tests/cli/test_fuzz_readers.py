"""CLI fuzz, round 3 (issue 30, item 8): every reader that arrived with the newer features —
serve request traces, workload traces, host lists, CLI numeric options, output targets —
driven through the commands with generated hostile inputs. The contract of each case: exit
0, 1, 2, 3 or 130 only; no traceback; an error is located (`file:line:col: error[code]`, or
`file: error[code]` for a whole file, or a usage line that names the option); no input is
modified and no temporary file is left; and the same case run twice prints the same bytes.
The `ci` profile runs a few cases per reader; `GCLC_HYPOTHESIS=deep` a hundred."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from gclc.cli.main import main
from gclc.testing import load_profile

from .test_hostile_round3 import SERVE, SHARED

PROFILE = load_profile()
EXAMPLES = int(os.environ.get("GCLC_FUZZ_EXAMPLES", 3 if PROFILE == "ci" else 100))
CASE_SECONDS = 120
EXIT_CODES = {0, 1, 2, 3, 130}
ERROR_LINE = re.compile(r"^(?:\S.*?: )?error\[[a-z-]+\]", re.MULTILINE)
LOCATED = re.compile(r"^\S.*?(?::\d+:\d+)?: error\[[a-z-]+\]")
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ----------------------------------------------------------------- hostile cells and rows

CELLS = st.one_of(
    st.sampled_from(["0", "1", "8", "3600", "-1", "0.5", "1e3", "1e-320", "1e-30", "1e30", "1e308", "1e12", "3e8",
                     "9" * 4000, "1_000", "١٠٠", "²", "１２", "nan", "inf", "-inf", "", " ", '"', '""', '"1,2"', "0x10",
                     "high", "critical", "normal", "h100", "A100_Aged", "\x00", "\u202e", "\ufeff1", "x" * 5000,
                     "1" * 41, "0." + "0" * 60 + "1"]),
    st.integers(-5, 10**7).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=10),
)
LINES = st.lists(CELLS, min_size=0, max_size=6).map(",".join)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r", ""])


@st.composite
def traces(draw, header: str) -> str:
    first = draw(st.sampled_from([header, header, header.upper(), header + ",extra", "", "when,what"]))
    rows = draw(st.lists(LINES, max_size=6))
    ending = draw(ENDINGS)
    return ending.join([first, *rows]) + draw(st.sampled_from(["", ending]))


# ----------------------------------------------------------------- one case

def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run_once(folder: Path, argv: list[str], capsys, output: str | None = None) -> tuple[int, str, str, bytes]:
    """(exit code, stdout, stderr, the output's bytes) of `gclc argv` in `folder`, checked
    against the contract."""
    before = _files(folder)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    except _Timeout:
        pytest.fail(f"`gclc {' '.join(argv)}` ran past {CASE_SECONDS} s")
    finally:
        os.chdir(cwd)
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    assert code in EXIT_CODES, f"exit {code} for {argv}:\n{err[-3000:]}"
    assert "Traceback" not in out + err and "internal error" not in out + err, f"{argv}:\n{err[-3000:]}"
    if code == 1:
        errors = ERROR_LINE.findall(err)
        assert errors or err.startswith("gclc: "), f"{argv}: exit 1 without an error:\n{err[-3000:]}"
        assert all(LOCATED.match(e) for e in errors), f"{argv}: an error is not located:\n{err[-3000:]}"
    if code == 2:
        assert "error: " in err or "gclc: " in err, f"{argv}: a usage error that says nothing:\n{err[-2000:]}"
    after = _files(folder)
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    assert changed <= {output}, f"{argv} changed {changed - {output}}"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"
    written = b""
    if output and (folder / output).is_file():
        written = (folder / output).read_bytes()
        (folder / output).unlink()
    return code, out, err, written


def run_case(folder: Path, argv: list[str], capsys, output: str | None = None) -> int:
    """The case twice: the same bytes both times."""
    first = run_once(folder, argv, capsys, output)
    assert run_once(folder, argv, capsys, output) == first, f"{argv}: a second run printed other bytes"
    return first[0]


# ----------------------------------------------------------------- the readers

SERVE_COMMANDS = [["check", "s.gcl"], ["plan", "s.gcl"], ["plan", "s.gcl", "--json"],
                  ["compile", "s.gcl", "-o", "out.json"]]


@pytest.fixture
def serve_folder(tmp_path):
    (tmp_path / "s.gcl").write_text(SERVE)
    return tmp_path


@FUZZ
@given(trace=traces("arrival_s,prompt,output"), argv=st.sampled_from(SERVE_COMMANDS))
@example(trace="arrival_s,prompt,output\n0,100,10\n", argv=["plan", "s.gcl"])       # one request
@example(trace="arrival_s,prompt,output\n0,100,10\n1e-320,1,1\n", argv=["plan", "s.gcl"])
def test_request_traces(serve_folder, capsys, trace, argv):
    (serve_folder / "t.csv").write_text(trace, encoding="utf-8", errors="surrogatepass")
    run_case(serve_folder, argv, capsys, "out.json" if "-o" in argv else None)


@pytest.fixture
def shared_folder(tmp_path):
    (tmp_path / "shared.gcl").write_text(SHARED)
    return tmp_path


SCHEDULE = ["schedule", "shared.gcl", "--epochs", "0"]


@FUZZ
@given(trace=traces("submit,duration,gpus,gpu_type,priority"),
       argv=st.sampled_from([["check", "shared.gcl"], SCHEDULE, SCHEDULE + ["--json", "--no-failures"]]))
@example(trace="submit,duration,gpus\n0,1e12,8\n", argv=SCHEDULE)
def test_workload_traces(shared_folder, capsys, trace, argv):
    (shared_folder / "w.csv").write_text(trace, encoding="utf-8", errors="surrogatepass")
    run_case(shared_folder, argv, capsys)


HOSTS = st.one_of(st.sampled_from(["n[0-99999999999]", "n[²]", "n[1-4]", "n[4-1]", "n[01-04]", "N[1-4]", "n[1-3],n3",
                                   "n[1e3]", "n[+1-4]", "n[]", "n[1-2", "a[1]b[2]", ",", "", "n[" + "9" * 60 + "]"]),
                  st.text(alphabet="n0123456789[]-,²", max_size=16))


@FUZZ
@given(st.lists(HOSTS, min_size=1, max_size=3))
def test_host_lists(tmp_path, capsys, hosts):
    listed = ", ".join('"' + h.replace("\\", "").replace('"', "") + '"' for h in hosts)
    text = (Path(__file__).resolve().parents[2] / "examples" / "a100_cluster.gcl").read_text().replace(
        "  units    = nodes x DGX_A100", f"  units    = nodes x DGX_A100\n  hostnames = [{listed}]")
    (tmp_path / "h.gcl").write_text(text)
    run_case(tmp_path, ["check", "h.gcl", "--set", "nodes=4"], capsys)


NUMBERS = st.one_of(st.sampled_from(["-1", "0", "1", "1e0", "1_000", "²", "١", "2.5", "1e300", "nan", "inf", "",
                                     "18446744073709551616", "5%", "0x10", " 2 "]), st.integers(-3, 3).map(str),
                    st.text(max_size=6))
OPTIONS = [["schedule", "shared.gcl", "--epochs", "0", "--no-failures", "--seed"],
           ["schedule", "shared.gcl", "--no-failures", "--epochs"],
           ["check", "shared.gcl", "--set"]]


@FUZZ
@given(st.sampled_from(OPTIONS), NUMBERS)
def test_numeric_options(shared_folder, capsys, option, value):
    """Every numeric option parses through one parser: a bad value is a usage error naming it
    (`--set` values are GCL text, parsed as a design's numbers are)."""
    (shared_folder / "w.csv").write_text("submit,duration,gpus\n0,60,8\n")
    if option[-1] == "--set":
        value = f"h100_nodes={value}"
    code = run_once(shared_folder, [*option, value], capsys)[0]
    assert code in (0, 1, 2), (option, value)


TARGETS = ["shared.gcl", "w.csv", "link.gcl", "twin.gcl", "fifo", "/dev/null", "dir", "fresh.json", "sub/none.json"]


@FUZZ
@given(st.sampled_from(TARGETS), st.sampled_from([["compile"], ["render"], ["schedule", "--epochs", "0", "--no-failures"]]))
def test_outputs_never_land_on_an_input(shared_folder, capsys, target, command):
    """`-o` onto what the run reads (the design, its trace, a symlink or hard link to one), a
    FIFO nobody reads, a device, a folder: refused or written through, never an input changed."""
    (shared_folder / "w.csv").write_text("submit,duration,gpus\n0,60,8\n")
    (shared_folder / "link.gcl").symlink_to("shared.gcl")
    os.link(shared_folder / "shared.gcl", shared_folder / "twin.gcl")
    os.mkfifo(shared_folder / "fifo")
    (shared_folder / "dir").mkdir()
    code = run_once(shared_folder, [command[0], "shared.gcl", *command[1:], "-o", target], capsys,
                    "fresh.json" if target == "fresh.json" else None)[0]
    if target in ("shared.gcl", "w.csv", "link.gcl", "twin.gcl", "fifo", "dir", "sub/none.json"):
        assert code in (1, 2), (target, command)
    for name in ("link.gcl", "twin.gcl", "fifo", "w.csv"):
        (shared_folder / name).unlink()
    (shared_folder / "dir").rmdir()
