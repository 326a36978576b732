"""Issue 12, classes 5 and 7: messages that had no location (a missing input file, a file
name too long for the file system, serve infeasibility) name the file or `file:line:col`
and say how to fix it; every operator and unit of a serve limit means what it says
(`memory <= 1 byte` is one byte, `gpus < 16` is at most 15) or is a located error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.dsl.diagnostics import has_errors
from gclc.solver.serve.plan import plan_serve, serve_entity

ROOT = Path(__file__).resolve().parents[2]
DSA = (ROOT / "examples" / "custom_dsa.gcl").read_text()
FILE_COMMANDS = [["check"], ["compile"], ["explain"], ["plan"], ["plan", "--json"], ["fmt"], ["schedule"],
                 ["render", "-o", "x.svg"], ["report", "-o", "x.html"], ["export", "--to", "slurm", "-o", "d"],
                 ["sweep", "--in-process"]]
LOCATED = re.compile(r"^\S+:\d+:\d+: ")



@pytest.mark.parametrize("command", FILE_COMMANDS, ids=" ".join)
def test_a_missing_input_file_is_named_with_a_fix(tmp_path, monkeypatch, cli, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cluster.gcl").write_text("# a design\n")
    argv = [command[0], "clustr.gcl", *command[1:]]
    code, out = cli(argv)
    assert code == 1 and "Traceback" not in out, out
    assert "clustr.gcl: error[io-error]: cannot read `clustr.gcl`: No such file or directory" in out, out
    assert "help: there is no `clustr.gcl` in the current folder; did you mean `cluster.gcl`?" in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.gcl"]   # nothing written


def test_a_missing_folder_says_so(tmp_path, cli):
    code, out = cli(["check", str(tmp_path / "nowhere" / "x.gcl")])
    assert code == 1 and f"{tmp_path / 'nowhere' / 'x.gcl'}: error[io-error]" in out
    assert f"help: the folder `{tmp_path / 'nowhere'}` does not exist either" in out


@pytest.mark.parametrize("length", [256, 1000, 5000])
def test_a_file_name_too_long_is_named_with_the_limit(tmp_path, cli, length):
    name = "a" * length + ".gcl"
    code, out = cli(["plan", str(tmp_path / name)])
    assert code == 1 and "Traceback" not in out, out
    assert f"{name}: error[io-error]: cannot read" in out and "name too long" in out, out
    assert "help: a file name may have at most 255 bytes and a path 4,096 (this path has " in out, out
    assert f"its longest name {length + 4:,})" in out, out


def test_an_unreadable_file_says_to_check_permissions(tmp_path, cli):
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "locked.gcl"
    path.write_text("# x\n")
    path.chmod(0)
    code, out = cli(["check", str(path)])
    assert code == 1 and "check its permissions" in out


# ----------------------------------------------------------------- serve infeasibility, located


def _serve(text: str, name: str = "dsa.gcl"):
    result = check_text(text, name)
    assert result.design is not None and not has_errors(result.diagnostics), [d.summary for d in result.diagnostics]
    return plan_serve(serve_entity(result.design))


def test_serve_infeasibility_names_the_limit_where_it_is_written(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    text = DSA.replace("ttft <= 2 s", "ttft <= 1 ms")
    (tmp_path / "dsa.gcl").write_text(text)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "ttft <= 1 ms" in l)
    code, out = cli(["plan", "dsa.gcl"])
    assert code == 3 and "Traceback" not in out
    reason = re.search(rf"dsa\.gcl:{line}:\d+: `ttft <= 1 ms` is broken by every one of (\d+) configurations; "
                       r"the best reaches ([\d.]+) ms; help: relax it", out)
    assert reason, out
    # the best it names is a real lower bound: a bound just above it plans
    best_ms = float(reason.group(2))
    assert best_ms > 1
    relaxed = _serve(text.replace("ttft <= 1 ms", f"ttft <= {best_ms * 1.01:.4f} ms"))
    assert relaxed.best is not None


def test_no_limit_counts_more_configurations_than_there_are():
    chosen = _serve(DSA.replace("ttft <= 2 s", "ttft <= 1 ms"))
    for reason in chosen.binding:
        counted = re.search(r"broken by (?:every one of )?(\d+)(?: of (\d+))? configurations", reason)
        assert counted, reason
        assert int(counted.group(1)) <= chosen.considered


# ----------------------------------------------------------------- serve limits mean what they say


def test_memory_of_one_byte_is_one_byte_not_the_whole_hbm():
    chosen = _serve(DSA.replace("memory <= 85%", "memory <= 1 byte"))
    assert chosen.best is None
    assert any(LOCATED.match(b) and "`memory <= 1 byte" in b and "every one of" in b for b in chosen.binding), \
        chosen.binding


def test_a_strict_gpu_bound_leaves_one_gpu_out():
    at_most = _serve(DSA.replace("memory <= 85%", "memory <= 85%\n    gpus <= 15"))
    below = _serve(DSA.replace("memory <= 85%", "memory <= 85%\n    gpus < 16"))
    assert below.gpus == at_most.gpus == 15 and below.used_gpus <= 15


def test_the_tighter_of_two_bounds_on_one_limit_binds():
    one = _serve(DSA.replace("memory <= 85%", "memory <= 85%\n    gpus <= 8"))
    both = _serve(DSA.replace("memory <= 85%", "memory <= 85%\n    gpus <= 64\n    gpus < 9"))
    assert both.gpus == one.gpus == 8 and both.used_gpus <= 8


def test_ttft_at_least_an_hour_is_a_located_direction_error(tmp_path, cli):
    (tmp_path / "x.gcl").write_text(DSA.replace("ttft <= 2 s", "ttft >= 1 h"))
    code, out = cli(["plan", str(tmp_path / "x.gcl")])
    assert code == 1 and re.search(r"x\.gcl:\d+:\d+: error\[limit-direction\]: `ttft >=`", out), out


SERVE_TARGETS = {  # block, target, values with units the target accepts (and some it does not)
    "memory": ("subject to", ["1 byte", "10 GB", "60 GB", "85%", "100%", "1 s", "0.5"]),
    "power": ("subject to", ["1 W", "20 kW", "2 MW", "50%"]),
    "gpus": ("subject to", ["1", "8", "15", "16", "8 GB"]),
    "ttft": ("slo", ["1 ms", "500 ms", "2 s", "5 GB"]),
    "tpot": ("slo", ["1 ms", "20 ms", "50 ms"]),
}


def _bytes(text: str, hbm: float) -> float:
    number, _, unit = text.partition(" ")
    if text.endswith("%"):
        return float(text[:-1]) / 100 * hbm
    return float(number) * {"byte": 1, "GB": 1e9}[unit]


def _honoured(chosen, target: str, op: str, value: str) -> None:
    """The plan's own figures against the bound, read as written."""
    check = (lambda x, b: x < b) if op == "<" else (lambda x, b: x <= b)
    sides = [s for s in (chosen.decode, chosen.prefill) if s is not None]
    if target == "memory":
        assert all(check(s.estimate.memory, _bytes(value, s.estimate.hbm)) for s in sides)
    elif target == "gpus":
        assert check(chosen.used_gpus, int(value))
    elif target == "power":
        number, unit = value.split()
        assert check(chosen.power_w, float(number) * {"W": 1, "kW": 1e3, "MW": 1e6}[unit])
    elif target in ("ttft", "tpot"):
        number, unit = value.split()
        bound = float(number) * {"ms": 1e-3, "s": 1}[unit]
        side = chosen.prefill if target == "ttft" and chosen.prefill is not None else chosen.decode
        assert check(getattr(side.estimate, target), bound)


@settings(max_examples=max(6, settings.default.max_examples // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SERVE_TARGETS)), st.sampled_from(["<=", "<", ">=", ">", "=="]), st.data())
def test_every_operator_and_unit_of_a_serve_limit_binds_or_is_located(target, op, data):
    block, values = SERVE_TARGETS[target]
    value = data.draw(st.sampled_from(values))
    bound = f"{target} {op} {value}"
    if block == "slo":
        text = DSA.replace("ttft <= 2 s", bound if target == "ttft" else "ttft <= 2 s")
        text = text.replace("tpot <= 50 ms", bound) if target == "tpot" else text
    else:
        text = DSA.replace("memory <= 85%", bound if target == "memory" else f"memory <= 85%\n    {bound}")
    result = check_text(text, "dsa.gcl")
    errors = [d for d in result.diagnostics if d.is_error]
    if errors:
        assert all(d.subject is not None and d.subject.path == "dsa.gcl" for d in errors), \
            [(d.code, d.summary) for d in errors]
        return
    assert op in ("<=", "<"), f"`{bound}` was accepted: a floor on a ceiling-only limit"
    chosen = plan_serve(serve_entity(result.design))
    if chosen.best is None:
        assert chosen.binding and all(LOCATED.match(b) or b.startswith(("the ", "demand:")) for b in chosen.binding), \
            chosen.binding
        return
    _honoured(chosen, target, op, value)
