"""Issue 12's reproducers, one test each, plus families of variants (hypothesis): hostile and
odd input gets a located error or a plan that honours it, never a hang, a traceback, a
clobbered file or a limit silently dropped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_text
from gclc.dsl.diagnostics import printable
from gclc.dsl.units import literal_problem, value_in_range
from gclc.solver.train.enumerate import divisors
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[2]
GCLC = [sys.executable, "-m", "gclc"]
LOCATED = re.compile(r"^\S+:\d+:\d+: error\[([a-z-]+)\]", re.MULTILINE)

SMALL = """\
import "std/nvidia"

cluster C {
  units    = 4 x DGX_A100
  scaleout = HDR_FatTree
}

model M {
  arch   = dense
  layers = 24
  hidden = 2048
  heads  = 16
  ffn    = 8192
  vocab  = 32000
  seq    = 2048
}

train t {
  model     = M
  on        = C
  gpus      = 32
  tokens    = 10 B
  batch     = 256
  precision = bf16
EXTRA}
"""


def design(extra: str = "", **replace: str) -> str:
    text = SMALL.replace("EXTRA", extra + "\n" if extra else "")
    for old, new in replace.items():
        text = text.replace(old.replace("_", " "), new)
    return text


def run(tmp_path: Path, capsys, text: str, *args: str) -> tuple[int, str]:
    path = tmp_path / "in.gcl"
    path.write_text(text, encoding="utf-8")
    code = main([args[0], str(path), *args[1:]] if args else ["check", str(path)])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "Traceback" not in out and "internal error" not in out, out
    return code, out


def codes_of(out: str) -> set[str]:
    return set(LOCATED.findall(out))


# ----------------------------------------------------------------- 2: magnitudes and sizes

@pytest.mark.parametrize("number", ["1e-999999999", "1e999999", "0e-99999999999", "1" * 5000, "9e31", "1e-31",
                                    "0." + "0" * 40 + "1"])
def test_magnitudes_out_of_range_are_located_and_fast(tmp_path, capsys, number):
    start = time.perf_counter()
    code, out = run(tmp_path, capsys, f"param x = {number}\nparam y = x * 2\n")
    assert code == 1 and "in.gcl:1:11: error[number-range]" in out, out
    assert time.perf_counter() - start < 5
    assert len(out) < 2000  # a 5,000-digit literal is named by its ends


@given(st.integers(-30, 30), st.integers(1, 9))
def test_literals_inside_the_range_are_accepted(exponent, digit):
    assert literal_problem(f"{digit}e{exponent}") is None


@given(st.integers(31, 10**12), st.sampled_from(["", "-"]))
def test_literals_outside_the_range_are_refused(exponent, sign):
    assert literal_problem(f"1e{sign}{exponent}") is not None


def test_arithmetic_beyond_the_value_range_is_located(tmp_path, capsys):
    code, out = run(tmp_path, capsys, "param x = 1e30 * 1e30 * 1e30\n")
    assert code == 1 and "in.gcl:1:11: error[value-range]" in out
    assert value_in_range(__import__("fractions").Fraction(10) ** 60)
    assert not value_in_range(__import__("fractions").Fraction(1, 10**62))


@given(st.integers(1, 5000), st.one_of(st.none(), st.integers(1, 6000)))
def test_bounded_divisors_match_trial_division(n, limit):
    assert divisors(n, limit) == [d for d in range(1, min(n, limit or n) + 1) if n % d == 0]


def test_divisors_of_a_huge_layer_count_are_bounded():
    start = time.perf_counter()
    assert divisors(10**12, 64) == [d for d in range(1, 65) if 10**12 % d == 0]
    assert time.perf_counter() - start < 1


def test_huge_layer_count_plans_quickly_or_is_refused(tmp_path, capsys):
    start = time.perf_counter()
    code, _ = run(tmp_path, capsys, design(**{"layers = 24": "layers = 1e12"}), "plan")
    assert code in (0, 1, 3) and time.perf_counter() - start < 60


TIERED = 'fabric F extends HDR_FatTree {\n  topology = fat_tree(tiers = %s, radix = 64)\n}\n'


@pytest.mark.parametrize("tiers, accepted", [("1", True), ("3", True), ("8", True), ("9", False),
                                             ("64", False), ("1e6", False), ("1e30", False)])
def test_fat_tree_tiers_are_bounded_before_lowering(tmp_path, capsys, tiers, accepted):
    # `tiers = 1e6` used to lower a million tiers of ever larger powers of the radix (a hang)
    text = design(**{"scaleout = HDR_FatTree": "scaleout = F"}).replace('import "std/nvidia"\n',
                                                                        'import "std/nvidia"\n' + TIERED % tiers)
    start = time.perf_counter()
    code, out = run(tmp_path, capsys, text)
    assert time.perf_counter() - start < 30
    if accepted:
        assert "out-of-range" not in codes_of(out), out
    else:
        assert code == 1 and "out-of-range" in codes_of(out) and "<= 8" in out, out


def test_fifo_input_is_refused_not_a_hang(tmp_path):
    fifo = tmp_path / "in.gcl"
    os.mkfifo(fifo)
    result = subprocess.run([*GCLC, "check", str(fifo)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "not a regular file" in result.stdout + result.stderr


def test_dev_zero_is_refused_not_read(capsys):
    assert main(["check", "/dev/zero"]) == 1
    captured = capsys.readouterr()
    assert "not a regular file" in captured.out + captured.err


def test_oversized_file_is_refused(tmp_path, capsys):
    path = tmp_path / "big.gcl"
    with open(path, "wb") as handle:
        handle.truncate(17 * 2**20)  # sparse: no disk used
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert "at most" in captured.out + captured.err


# ----------------------------------------------------------------- 4: internal errors

def test_lone_surrogate_escape_is_refused(tmp_path, capsys):
    code, out = run(tmp_path, capsys, 'chip X { vendor = "a\\ud800b" }\n')
    assert code == 1 and "bad-escape" in codes_of(out)


@pytest.mark.parametrize("depth", [200, 1500])
def test_long_param_and_extends_chains(tmp_path, capsys, depth):
    params = "param p0 = 1\n" + "".join(f"param p{i} = p{i - 1} + 1\n" for i in range(1, depth))
    code, _ = run(tmp_path, capsys, params)
    assert code == 0
    chips = ('chip C0 { clock = 1 GHz hbm { capacity = 80 GB bandwidth = 3 TB/s } peak { bf16 = 1 TFLOPS } '
             'power { tdp = 700 W } }\n') + "".join(f"chip C{i} extends C{i - 1} {{ }}\n" for i in range(1, depth))
    code, _ = run(tmp_path, capsys, chips)
    assert code == 0


def test_list_codes_to_a_full_device_is_an_error_not_a_traceback():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        result = subprocess.run([*GCLC, "--list-codes"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "No space" in result.stderr


def test_closed_stdout_pipe_exits_non_zero(tmp_path):
    path = tmp_path / "in.gcl"
    path.write_text("# x\n" * 50_000)
    process = subprocess.Popen([*GCLC, "fmt", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the first write
    err = process.stderr.read().decode()
    assert process.wait(60) == 1 and "Traceback" not in err


def test_ctrl_c_while_loading_exits_130_quietly(tmp_path):
    """After the interpreter has started (our code runs), Ctrl-C during the imports is 130, silent."""
    path = tmp_path / "in.gcl"
    path.write_text(design())
    # Half-way through an uninterrupted run: past interpreter start-up, inside the imports or
    # the plan (a fixed delay raced the whole run once `plan` took under half a second).
    start = time.perf_counter()
    assert subprocess.run([*GCLC, "plan", str(path)], capture_output=True, timeout=60).returncode == 0
    whole = time.perf_counter() - start
    process = subprocess.Popen([*GCLC, "plan", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(whole / 2)
    process.send_signal(signal.SIGINT)
    err = process.stderr.read().decode()
    assert process.wait(60) == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err


# ----------------------------------------------------------------- 5: limits

@pytest.mark.parametrize("limit, code", [
    ("memory >= 10 GB", "limit-direction"), ("power >= 1 kW", "limit-direction"), ("time > 1 h", "limit-direction"),
    ("mfu <= 50%", "limit-direction"), ("gpus >= 8", "limit-direction"), ("energy >= 1 MWh", "limit-direction"),
])
def test_limits_bound_the_wrong_way_are_located(tmp_path, capsys, limit, code):
    status, out = run(tmp_path, capsys, design(f"  subject to {{ {limit} }}"))
    assert status == 1 and code in codes_of(out), out


def test_gpus_limit_binds(tmp_path, capsys):
    status, out = run(tmp_path, capsys, design("  subject to { gpus <= 8 }"), "plan", "--json")
    assert status == 0 and json.loads(out)["gpus"] <= 8


def test_time_limit_without_tokens_is_located(tmp_path, capsys):
    status, out = run(tmp_path, capsys, design("  subject to { time <= 1 d }", **{"  tokens    = 10 B\n": ""}))
    assert status == 1 and "limit-needs" in codes_of(out)


def test_more_gpus_than_the_cluster_is_a_located_warning(tmp_path, capsys):
    status, out = run(tmp_path, capsys, design(**{"gpus      = 32": "gpus      = 64"}))
    assert status == 0 and "in.gcl:21:3: warning[too-many-gpus]" in out and "asks 64 GPUs; its target has 32" in out


def test_target_listed_twice_is_located(tmp_path, capsys):
    status, out = run(tmp_path, capsys, design(**{"on        = C": "on        = [C, C]"}))
    assert status == 1 and "target-twice" in codes_of(out)


# ----------------------------------------------------------------- 6: nonsense pins

@pytest.mark.parametrize("pins, code", [("ep = 4", "pin-meaningless")])
def test_nonsense_pins_are_located(tmp_path, capsys, pins, code):
    status, out = run(tmp_path, capsys, design(f"  parallelism {{ {pins} }}"))
    assert status == 1 and code in codes_of(out), out


def test_empty_torus_is_located(tmp_path, capsys):
    status, out = run(tmp_path, capsys, "fabric T { kind = ici  topology = torus(dims = [])  bandwidth = 1 GB/s }\n")
    assert status == 1 and "out-of-range" in codes_of(out)


# ----------------------------------------------------------------- 7: messages

@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x3000), max_size=40))
def test_printable_never_lets_control_characters_through(text):
    shown = printable(text)
    assert all(ch.isprintable() or ch == "\n" for ch in shown)
    assert printable(shown) == shown


def test_control_characters_in_input_are_escaped(tmp_path, capsys):
    code, out = run(tmp_path, capsys, 'chip X { vendor = "\x1b[31mred\x07" \x1b }\n')
    assert code == 1 and "\x1b" not in out and "\x07" not in out


def test_unknown_setting_is_located(tmp_path, capsys):
    code, out = run(tmp_path, capsys, design(), "check", "--set", "bogus=1")
    assert code == 1 and "<--set>:1:1: error[unknown-param]" in out


def test_unknown_job_is_a_usage_error_everywhere(tmp_path, capsys):
    path = tmp_path / "in.gcl"
    path.write_text(design())
    assert main(["plan", str(path), "--job", "Nope"]) == 2
    assert main(["render", str(path), "-o", str(tmp_path / "x.dot"), "--cluster", "Nope"]) == 2
    assert main(["report", str(path), "-o", str(tmp_path / "x.html"), "--job", "Nope"]) == 2


def test_cr_only_line_ends_are_line_ends(tmp_path, capsys):
    code, out = run(tmp_path, capsys, "# a comment\rchip X { vendr = 1 }\r")
    assert code == 1 and "in.gcl:2:10: error[unknown-field]" in out, out
    assert check_text("param a = 1\rparam b = a + 1\r").design is not None


def test_a_whole_prompt_from_the_prefix_cache_plans(tmp_path, capsys):
    """Found by the fuzz: `prefix_share = 1` was an internal error (TypeError) in the simulator."""
    text = (ROOT / "examples" / "deepseek_v3_serve.gcl").read_text()
    assert "chunk        = 8192" in text
    code, out = run(tmp_path, capsys, text.replace("chunk        = 8192", "prefix_share = 1"), "plan", "--json")
    plan = json.loads(out[: out.rindex("}") + 1])
    assert code == 0 and plan["status"] == "optimal" and plan["latency"]["ttft"]["p50"] > 0, out[-2000:]
