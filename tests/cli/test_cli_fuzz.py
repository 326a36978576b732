"""CLI fuzz (issue 12): every command on generated bad input. Each case must exit with a
documented code (0, 1, 2, 3, 130), print no traceback, finish within a bound, and touch no
file but the output it was named; and the bytes a command prints must not depend on
PYTHONHASHSEED. Inputs are a small valid design mutated by hostile edits: out-of-range and
odd numbers, control characters, lone surrogates, CR line ends, deleted spans, limits and
pins the planner cannot honour. The `ci` profile runs a handful per command."""

from __future__ import annotations

import os
import re
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
}

NUMBERS = ["0", "-1", "1e-999999999", "1e999999", "1e12", "1e30", "1e-30", "99999999999999999999999", "1:0",
           "0.0000001", "1" * 60, "3.5", "2 PB", "1 byte", "1e20 GHz"]
SNIPPETS = ["\x1b[2J", "\x07", "\x00", "\r", "\r\n", '"\\ud800"', "((((((((", "}", "{", "subject to { gpus <= 0 }",
            "subject to { memory >= 1 GB }", "subject to { ttft >= 1 h }", "parallelism { tp = 1024 }",
            "parallelism { ep = 4 }", "parallelism { pp = 1  vp = 7 }", "on = [C, C]", "gpus = 1e9",
            "extends M", 'import "std/../../etc/passwd"', "param p = p", "\u202e", "\ufeff", "é", "\U0001f600"]
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")


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
    source.write_text(text, encoding="utf-8", errors="surrogatepass")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    argv = [command.split("-")[0], str(source), *[str(folder / a) if a == output else a for a in extra]]
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
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    touched = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    assert touched <= {output}, f"{argv} touched {touched - {output}}"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"
    for name in list(after):  # the next case starts from the same folder contents
        if name == output:
            (folder / name).unlink()
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


@pytest.mark.parametrize("command", ["check", "compile", "plan-json", "render", "fmt"])
def test_output_bytes_do_not_depend_on_the_hash_seed(tmp_path, command):
    text = SMALL.replace("EXTRA", "  subject to { memory <= 70% }\n").replace("\n", "\r\n", 3) + "\x1b param oops\n"
    if command != "check":
        text = SMALL.replace("EXTRA", "  subject to { memory <= 70% }\n")
    results = []
    for seed in ("0", "1", "12345"):
        folder = tmp_path / seed
        folder.mkdir()
        (folder / "in.gcl").write_text(text, encoding="utf-8")
        extra, output = COMMANDS[command]
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "gclc", command.split("-")[0], "in.gcl", *extra],
                              cwd=folder, env=env, capture_output=True, timeout=120)
        written = (folder / output).read_bytes() if output and (folder / output).is_file() else b""
        results.append((done.returncode, _TIMING.sub(b"", done.stdout), done.stderr, written))
    assert results[0][0] in EXIT_CODES
    assert results[0] == results[1] == results[2]
