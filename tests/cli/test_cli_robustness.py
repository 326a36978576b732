"""`gclc check` on malformed input: always a located diagnostic and exit code 1, never a
traceback; usage errors exit 2. Plus property tests: text drawn from the grammar, and
arbitrary text, only ever produce diagnostics."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark

from gclc import __version__
from gclc.cli.main import main
from gclc.dsl.diagnostics import render_all
from gclc.compiler.driver import check_text
from gclc.dsl.parser import grammar_text

ROOT = Path(__file__).resolve().parents[2]
LOCATED = re.compile(r"^\S+:\d+:\d+: error\[[a-z-]+\]: ", re.MULTILINE)

VALID = """\
# A small, valid design.
param racks = 4

chip H100 {
  vendor = "NVIDIA"
  clock = 1.98 GHz
  hbm { capacity = 80 GB  bandwidth = 3.35 TB/s }
  peak { bf16 = 989 TFLOPS  fp8 = 3958 TFLOPS sparse }
  power { tdp = 700 W  idle = 100 W }
}

fabric NVL { kind = nvlink  topology = switched  bandwidth = 900 GB/s bidir }
fabric IB { kind = infiniband  topology = fat_tree(tiers = 2, radix = 64)  bandwidth = 400 Gb/s  rails = 8 }

node DGX {
  gpus = 8 x H100
  scaleup = NVL
}

cluster C {
  units = racks x DGX
  scaleout = IB
}
"""


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def check_bytes(tmp_path: Path, capsys, data: bytes, name: str = "input.gcl") -> tuple[int, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return run_cli(capsys, "check", str(path))


def assert_located_error(code: int, out: str, path_part: str = "input.gcl") -> None:
    assert code == 1, out
    assert LOCATED.search(out), out
    assert path_part in LOCATED.search(out).group(0)
    assert "Traceback" not in out


# ----------------------------------------------------------------- malformed files


def test_valid_file_is_clean(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, VALID.encode())
    assert code == 0, out
    assert "error" not in out


@pytest.mark.parametrize("half", ["first", "second"])
def test_truncated_halves(tmp_path, capsys, half):
    middle = len(VALID) // 2
    text = VALID[:middle] if half == "first" else VALID[middle:]
    assert_located_error(*check_bytes(tmp_path, capsys, text.encode()))


@pytest.mark.parametrize("cut", range(37, len(VALID) - 1, 53))
def test_truncated_anywhere(tmp_path, capsys, cut):
    code, out = check_bytes(tmp_path, capsys, VALID[:cut].encode())
    assert code in (0, 1) and "Traceback" not in out
    if code == 1:
        assert LOCATED.search(out), out


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(tmp_path, capsys, seed):
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(300))
    assert_located_error(*check_bytes(tmp_path, capsys, data))


def test_nul_bytes(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b"chip A {\n  vendor = \"x\"\x00\x00\n}\n")
    assert_located_error(code, out)
    assert "nul-byte" in out and "input.gcl:2:15:" in out


def test_utf8_bom_is_accepted(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b"\xef\xbb\xbf" + VALID.encode())
    assert code == 0, out


def test_utf8_bom_keeps_columns(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b"\xef\xbb\xbfparam p = 1 GBs\n")
    assert_located_error(code, out)
    assert "input.gcl:1:11: error[unknown-unit]" in out


def test_invalid_utf8(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b'param p = 1\nnic A { vendor = "\xff\xfe" }\n')
    assert_located_error(code, out)
    assert "input.gcl:2:19: error[encoding]" in out


def test_deeply_nested_blocks(tmp_path, capsys):
    text = "chip A {\n" + "a { " * 5000 + "}" * 5000 + "\n}\n"
    code, out = check_bytes(tmp_path, capsys, text.encode())
    assert_located_error(code, out)
    assert "too-deep" in out


def test_long_sum(tmp_path, capsys):
    text = "param p = " + " + ".join(["1"] * 5000) + "\n"
    code, out = check_bytes(tmp_path, capsys, text.encode())
    assert_located_error(code, out)
    assert "too-deep" in out


def test_deep_parentheses(tmp_path, capsys):
    text = "param p = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    code, out = check_bytes(tmp_path, capsys, text.encode())
    assert_located_error(code, out)
    assert "too-deep" in out


def test_deep_unary_minus_and_lists(tmp_path, capsys):
    for text in ("param p = " + "-" * 5000 + "1\n", "param p = " + "[" * 5000 + "]" * 5000 + "\n"):
        assert_located_error(*check_bytes(tmp_path, capsys, text.encode()))


def test_huge_number(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b"param p = 1e309\n")
    assert_located_error(code, out)
    assert "input.gcl:1:11: error[number-range]" in out


def test_huge_exponent_with_unit(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b"nic A { bandwidth = 1e999999 GB/s }\n")
    assert_located_error(code, out)


def test_very_long_line(tmp_path, capsys):
    text = "param p = 1" + " " * 10_000 + "GBs\n"
    code, out = check_bytes(tmp_path, capsys, text.encode())
    assert_located_error(code, out)
    assert max(len(line) for line in out.splitlines()) < 400


def test_empty_file(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, b"")
    assert code == 0 and "error" not in out


def test_only_comments(tmp_path, capsys):
    code, out = check_bytes(tmp_path, capsys, "# nothing here\n   # 只有注释\n#\n".encode())
    assert code == 0 and "error" not in out


def test_directory_and_missing_file(tmp_path, capsys):
    code, out = run_cli(capsys, "check", str(tmp_path))
    assert code == 1 and "io-error" in out and "Traceback" not in out
    code, out = run_cli(capsys, "check", str(tmp_path / "missing.gcl"))
    assert code == 1 and "io-error" in out and "Traceback" not in out


def test_several_files_worst_exit_code(tmp_path, capsys):
    good, bad = tmp_path / "good.gcl", tmp_path / "bad.gcl"
    good.write_text(VALID, encoding="utf-8")
    bad.write_text("param p = \n", encoding="utf-8")
    code, out = run_cli(capsys, "check", str(good), str(bad))
    assert code == 1 and f"{good}: ok" in out and LOCATED.search(out)


def test_json_format(tmp_path, capsys):
    path = tmp_path / "input.gcl"
    path.write_text("param p = 1 GBs\n", encoding="utf-8")
    code, out = run_cli(capsys, "check", "--format", "json", str(path))
    import json

    (diagnostic,) = json.loads(out)
    assert code == 1 and diagnostic["code"] == "unknown-unit" and diagnostic["subject"]["line"] == 1


def test_set_errors(tmp_path, capsys):
    path = tmp_path / "input.gcl"
    path.write_text(VALID, encoding="utf-8")
    code, out = run_cli(capsys, "check", str(path), "--set", "racks=8")
    assert code == 0, out
    code, out = run_cli(capsys, "check", str(path), "--set", "racks=1 GB")
    assert code == 1 and "setting-type" in out and "Traceback" not in out
    code, out = run_cli(capsys, "check", str(path), "--set", "rack=8")
    assert code == 1 and "unknown-param" in out
    code, out = run_cli(capsys, "check", str(path), "--set", "racks")
    assert code == 1 and "bad-setting" in out


# ----------------------------------------------------------------- usage


def test_no_arguments_is_usage(capsys):
    code, out = run_cli(capsys)
    assert code == 2 and "usage" in out


def test_unknown_command_is_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_check_without_files_is_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gclc {__version__}"


def test_real_process(tmp_path):
    """The installed entry point, in its own process: exit codes and no traceback."""
    bad = tmp_path / "bad.gcl"
    bad.write_bytes(b"chip A {\n" + b"a { " * 5000 + b"}" * 5000 + b"\n}\n\xff")
    runs = {
        "bad": ([sys.executable, "-m", "gclc", "check", str(bad)], 1),
        "usage": ([sys.executable, "-m", "gclc"], 2),
        "unknown": ([sys.executable, "-m", "gclc", "nope"], 2),
        "version": ([sys.executable, "-m", "gclc", "--version"], 0),
    }
    for name, (argv, expected) in runs.items():
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
        output = done.stdout + done.stderr
        assert done.returncode == expected, (name, output)
        assert "Traceback" not in output, (name, output)
    done = subprocess.run(runs["bad"][0], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert LOCATED.search(done.stderr) and done.stdout == "", done.stderr  # diagnostics on stderr


# ----------------------------------------------------------------- properties

_NAMES = st.sampled_from(["a", "b", "hbm", "capacity", "bandwidth", "power", "tdp", "idle", "gpus", "units",
                          "H100", "DGX", "chip", "node", "cluster", "fabric", "model", "kind", "topology",
                          "fat_tree", "tiers", "radix", "partition", "on", "racks", "带宽", "节点", "_x1"])
_NUMBERS = st.sampled_from(["0", "1", "8", "1_000", "3.35", ".5", "1e9", "2.5e-3", "1e309", "0.0"])
_UNITS = st.sampled_from(["", " GB", " TB/s", "GB/s", " Gb", " W", "%", " TFLOPS", " GHz", " B", " GBps",
                          " FLOPs", " bogus", " ms", " kWh"])
# Padded with spaces (which the grammar ignores) so that neighbouring tokens do not run
# together into one (`chip` `A` -> `chipA`) and most drawn texts get past the parser.
TERMINALS = {
    "NAME": _NAMES.map(" {} ".format),
    "QUANTITY": st.builds(lambda n, u: f" {n}{u} ", _NUMBERS, _UNITS),
    "RATIO": st.builds(lambda a, b: f"{a}:{b}", st.sampled_from(["1", "3", "0", "1.5"]), st.sampled_from(["1", "0", "2"])),
    "STRING": st.sampled_from(['""', '"NVIDIA"', '"中文"', r'"a\"b"', r'"\q"', r'"\u00e9"']),
    "COMMENT": st.sampled_from(["# c\n", "# 注释\n"]),
    "WS": st.sampled_from([" ", "\n", "  ", "\t", "\r\n"]),
}


def _check_never_raises(text: str) -> None:
    result = check_text(text, "gen.gcl")
    rendered = render_all(result.diagnostics, result.sources)
    assert isinstance(rendered, str)
    for diagnostic in result.diagnostics:
        if diagnostic.is_error and diagnostic.code not in ("unknown-param", "bad-setting"):
            assert diagnostic.subject is not None, diagnostic


@settings(suppress_health_check=list(HealthCheck))  # examples: the profile in conftest.py
# from_lark reads the grammar itself, which lark's table cache (in lark_parser) does not keep.
@given(from_lark(Lark(grammar_text(), parser="lalr"), start="start", explicit=TERMINALS))
def test_grammar_text_never_raises(text):
    _check_never_raises(text)


@settings(deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    _check_never_raises(text)


@settings(deadline=None)
@given(st.lists(st.sampled_from(VALID.split()), max_size=60).map(" ".join))
def test_shuffled_tokens_never_raise(text):
    _check_never_raises(text)
