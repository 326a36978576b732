"""CLI fuzz (issue 12): every command on generated bad input. Each case must exit with a
documented code (0, 1, 2, 3, 130), print no traceback, finish within a bound, and touch no
file but the output it was named; and the bytes a command prints must not depend on
PYTHONHASHSEED. Inputs are a small valid design mutated by hostile edits: out-of-range and
odd numbers, control characters, lone surrogates, CR line ends, deleted spans, limits and
pins the planner cannot honour. The `ci` profile runs a handful per command."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gclc.cli.main import main
from gclc.testing import load_profile

from .test_hostile import SMALL

PROFILE = load_profile()
EXAMPLES = int(os.environ.get("GCLC_FUZZ_EXAMPLES", 5 if PROFILE == "ci" else 100))
CASE_SECONDS = 60  # a generous bound on one case: the slowest valid plan here takes ~1 s
EXIT_CODES = {0, 1, 2, 3, 130}

# (arguments after FILE, the output it may write: a file name in the case's folder, or None)
COMMANDS = {
    "check": ([], None),
    "compile": (["-o", "out.json"], "out.json"),
    "explain": ([], None),
    "plan": ([], None),
    "plan-json": (["--json"], None),
    "render": (["-o", "out.dot"], "out.dot"),
    "report": (["-o", "out.html"], "out.html"),
    "export": (["--to", "slurm", "-o", "outdir"], "outdir"),
    "fmt": ([], None),
    "fmt-check": (["--check"], None),
    "schedule": ([], None),
    "schedule-json": (["--json"], None),
    "sweep": (["--in-process", "--vary", "n=1,2", "-o", "sweepdir"], "sweepdir"),
    "diff": (["BASE"], None),          # the hostile file against a valid one
    "diff-json": (["BASE", "--json"], None),
    "explain-json": (["--json"], None),
    "calibrate": (["MEAS", "-o", "cal.gcl"], "cal.gcl"),   # a published nccl-tests run as the measurement
}
MEASUREMENT = Path(__file__).resolve().parents[1] / "data" / "measurements" / "nccl" / "bitdeer_h100_1node_all_reduce.txt"
# Commands that take no design file, fuzzed on their own below: `std` (names), `lsp` (stdin),
# `probe` (where it is told to write).
OTHER_COMMANDS = {"std", "lsp", "probe"}

NUMBERS = ["0", "-1", "1e-999999999", "1e999999", "1e12", "1e30", "1e-30", "99999999999999999999999", "1:0",
           "0.0000001", "1" * 60, "3.5", "2 PB", "1 byte", "1e20 GHz"]
SNIPPETS = ["\x1b[2J", "\x07", "\x00", "\r", "\r\n", '"\\ud800"', "((((((((", "}", "{", "subject to { gpus <= 0 }",
            "subject to { memory >= 1 GB }", "subject to { ttft >= 1 h }", "parallelism { tp = 1024 }",
            "parallelism { ep = 4 }", "parallelism { pp = 1  vp = 7 }", "on = [C, C]", "gpus = 1e9",
            "extends M", 'import "std/../../etc/passwd"', "param p = p", "\u202e", "\ufeff", "é", "\U0001f600"]
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")
ERROR_LINE = re.compile(r"^(?:\S.*?: )?error\[[a-z-]+\]", re.MULTILINE)
LOCATED = re.compile(r"^\S.*?(?::\d+:\d+)?: error\[[a-z-]+\]")


@st.composite
def hostile_designs(draw) -> str:
    text = SMALL.replace("EXTRA", "")
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from(["number", "snippet", "delete"]))
        if edit == "number":
            spots = list(_NUMBER.finditer(text))
            spot = spots[draw(st.integers(0, len(spots) - 1))]
            text = text[: spot.start()] + draw(st.sampled_from(NUMBERS)) + text[spot.end():]
        elif edit == "snippet":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
        else:
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
    return text


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run_case(folder: Path, command: str, text: str, capsys) -> tuple[int, str]:
    extra, output = COMMANDS[command]
    source = folder / "in.gcl"
    if command == "sweep":  # a param for its --vary
        text = "param n = 1\n" + text
    source.write_text(text, encoding="utf-8", errors="surrogatepass")
    base = folder / "base.gcl"
    if "BASE" in extra and not base.exists():
        base.write_text(SMALL.replace("EXTRA", ""), encoding="utf-8")
    measurement = folder / "all_reduce_perf.txt"
    if "MEAS" in extra and not measurement.exists():
        shutil.copy(MEASUREMENT, measurement)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    argv = [command.split("-")[0], str(source),
            *[str(folder / a) if a == output else str(base) if a == "BASE" else str(measurement) if a == "MEAS" else a
              for a in extra]]
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    try:
        code = main(argv)
    except _Timeout:
        pytest.fail(f"`gclc {' '.join(argv)}` ran past {CASE_SECONDS} s on:\n{text!r}")
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code in EXIT_CODES, f"exit {code} for {argv} on {text!r}:\n{out}"
    assert "Traceback" not in out and "internal error" not in out, f"{argv} on {text!r}:\n{out}"
    if code == 1 and "--json" not in argv:  # every error located (issue 30): `file:line:col: error[code]`
        errors = ERROR_LINE.findall(captured.err)
        assert errors or captured.err.startswith("gclc: "), f"{argv} on {text!r}: exit 1 without an error:\n{out}"
        assert all(LOCATED.match(e) for e in errors), f"{argv} on {text!r}: an error is not located:\n{out}"
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    touched = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    assert touched <= {output}, f"{argv} touched {touched - {output}}"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"
    for name in list(after):  # the next case starts from the same folder contents
        if name == output:
            (folder / name).unlink()
    if output and (folder / output).is_dir():
        shutil.rmtree(folder / output)
    return code, out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_survives_hostile_input(tmp_path_factory, capsys, command):
    folder = tmp_path_factory.mktemp(command)

    @settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
              deadline=None)
    @given(hostile_designs())
    def case(text):
        run_case(folder, command, text, capsys)

    case()


# ----------------------------------------------------------------- determinism across hash seeds

_TIMING = re.compile(rb'\d+(\.\d+)? s\)|"seconds": [0-9.e-]+')  # wall-clock solver time (issue 12 class 8: the lead's)


# Every command in one interpreter per seed (three interpreters, not three per command):
# each command's exit code, stdout, stderr and written file, in order, separated.
_ALL_COMMANDS = """
import contextlib, io, sys
from pathlib import Path
from gclc.cli.main import main
for argv, output in eval(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    written = Path(output).read_bytes().decode("utf-8", "replace") if output and Path(output).is_file() else ""
    sys.stdout.write(f"=== {argv} -> {code}\\n{out.getvalue()}\\n--- stderr\\n{err.getvalue()}\\n--- file\\n{written}\\n")
"""
SEEDED = ["check", "compile", "plan-json", "render", "fmt", "explain-json", "schedule-json", "diff-json"]


def test_output_bytes_do_not_depend_on_the_hash_seed(tmp_path):
    good = SMALL.replace("EXTRA", "  subject to { memory <= 70% }\n")
    odd = good.replace("\n", "\r\n", 3) + "\x1b param oops\n"   # diagnostics, in an order to keep
    results = []
    for seed in ("0", "1", "12345"):
        folder = tmp_path / seed
        folder.mkdir()
        (folder / "in.gcl").write_text(good, encoding="utf-8")
        (folder / "odd.gcl").write_text(odd, encoding="utf-8")
        (folder / "base.gcl").write_text(SMALL.replace("EXTRA", ""), encoding="utf-8")
        runs = [(["check", "odd.gcl"], None)]
        for command in SEEDED:
            extra, output = COMMANDS[command]
            runs.append(([command.split("-")[0], "in.gcl", *["base.gcl" if a == "BASE" else a for a in extra]], output))
        runs += [(["std", "list", "--json"], None), (["std", "show", "H100_SXM"], None)]
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _ALL_COMMANDS, repr(runs)], cwd=folder, env=env,
                              capture_output=True, timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr.decode(), done.stderr.decode()[-2000:]
        results.append(_TIMING.sub(b"", done.stdout))
    assert results[0].count(b"=== ") == len(SEEDED) + 3
    for command in SEEDED:
        assert f"['{command.split('-')[0]}', 'in.gcl'".encode() in results[0]
    assert results[0] == results[1] == results[2]


# ----------------------------------------------------------------- every command, and those without a file


def test_the_fuzz_drives_every_command_the_cli_lists():
    from gclc.cli.main import _parser

    listed = set(next(a for a in _parser()._actions if a.dest == "command").choices)
    driven = {name.split("-")[0] for name in COMMANDS} | OTHER_COMMANDS
    assert listed == driven, f"not fuzzed: {sorted(listed - driven)}; unknown: {sorted(driven - listed)}"


NAMES = st.one_of(st.sampled_from(["H100_SXM", "std/nvidia", "std/../../etc/passwd", "", "\x1b[2J", "\ud800",
                                   "a" * 5000, "std/", "/etc/passwd", "..", "H100_SXM.mtbf", "chip"]),
                  st.text(max_size=40))


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["show", "list", "show-json", "list-kind"]), NAMES)
def test_std_survives_hostile_names(capsys, action, name):
    argv = {"show": ["std", "show", name], "list": ["std", "list", name], "show-json": ["std", "show", name, "--json"],
            "list-kind": ["std", "list", "--kind", name]}[action]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code in EXIT_CODES and "Traceback" not in out and "internal error" not in out, (argv, out[-2000:])
    assert "\x1b[" not in out, "an escape sequence from the name reached the terminal raw"


@pytest.mark.parametrize("output", ["", ".", "missing-folder/m.csv", "a" * 300 + ".csv"])
def test_probe_survives_hostile_outputs(tmp_path, capsys, monkeypatch, output):
    pytest.importorskip("torch", reason="PyTorch installs with the dev extras (.ci/setup)")
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["probe", "-o", output, "--quick", "--no-collectives"])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code in {1, 2} and "Traceback" not in out and "internal error" not in out, (output, out[-2000:])


LSP_INPUTS = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda n, body: b"Content-Length: %d\r\n\r\n" % n + body,
              st.sampled_from([0, 1, 2, 5, 10**6, 10**11]), st.binary(max_size=50)),
    st.sampled_from([b'Content-Length: 2\r\n\r\n{}', b'Content-Length: 9\r\n\r\n[1,2,3,4]',
                     b"x" * 100_000, b"Content-Length: 1\r\n" * 1000]))


@settings(max_examples=max(3, EXAMPLES // 2), deadline=None)
@given(LSP_INPUTS)
def test_lsp_survives_hostile_input(data):
    """`gclc lsp` (as an editor starts it) on bytes that are not a client's: it ends, with a
    documented code, and its log has no traceback."""
    done = subprocess.run([sys.executable, "-m", "gclc", "lsp"], input=data, capture_output=True, timeout=CASE_SECONDS)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode in EXIT_CODES and "Traceback" not in err, (data[:200], done.returncode, err[-2000:])


@pytest.mark.parametrize("command", sorted(OTHER_COMMANDS | {n.split("-")[0] for n in COMMANDS}))
def test_every_command_has_help(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0 and "usage: gclc " + command in capsys.readouterr().out
