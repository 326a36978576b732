"""Hostile input, round 4 (benchmarks/fuzz_hostile.py): each finding of the fuzz of the shipped
examples, the docs' designs and the newer surfaces, kept as a regression: a located error with
its fix, where a traceback, a hang or an unlocated error was."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

from gclc.solver.sweep import axes
from gclc.testing import load_profile
from gclc.testing.edit import edit_source

PROFILE = load_profile()
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def examples(ci: int) -> int:
    """`ci` examples in CI, many more under GCLC_HYPOTHESIS=deep."""
    return ci if PROFILE == "ci" else 50 * ci



# ------------------------------------------------------------------ schedule --cluster


@pytest.mark.parametrize("name", ["Nope", "", "chat"])
def test_schedule_names_an_unknown_cluster_as_plan_and_export_do(cli, name):
    """Was `error[no-size]: no cluster ... to schedule on` with no file or position, exit 1."""
    code, out = cli(["schedule", str(EXAMPLES / "shared_cluster.gcl"), "--cluster", name, "--no-failures",
                     "--epochs", "0"])
    assert code == 2 and "Traceback" not in out
    assert f"no cluster `{name}` in " in out and "the design has: Shared" in out


# ------------------------------------------------------------------ sweep ranges


RANGE_ENDS = st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(10**6)) | st.sampled_from(
    [Fraction(10) ** 30, Fraction(1, 10**30), Fraction(10**9), Fraction(15, 10)])   # GCL's limits: 1e-30..1e30


@settings(deadline=None)
@given(low=RANGE_ENDS, high=RANGE_ENDS, op=st.sampled_from("+*"),
       step=st.fractions(min_value=Fraction(1, 10**12), max_value=Fraction(100)) | st.sampled_from(
           [Fraction(1, 10**30), Fraction(10001, 10000), Fraction(3, 2), Fraction(2)]))
def test_a_range_is_all_its_values_or_refused_before_any_is_written(low, high, op, step):
    """`--vary n=1..1e9` built ten million values before it said "more than" (>10 s), and a
    geometric range of a fractional factor multiplied ever longer Fractions (1e-6..1e30*1.0001:
    minutes). Law: the values, from `low` by `step` up to `high` (a geometric one to 12 digits),
    or the refusal, at once."""
    started = time.process_time()
    try:
        with mock.patch.object(axes, "MAX_POINTS", 200):
            values = axes.range_values(low, high, op, step)
    except ValueError as error:
        why = str(error)
        assert "step" in why or "empty" in why or ("more than 200 values" in why and "narrower range" in why)
    else:
        assert 1 <= len(values) <= 200
        grown = [low + k * step if op == "+" else low * step ** k for k in range(len(values) + 1)]
        close = [abs(float(Fraction(v)) / float(g) - 1) < 1e-9 for v, g in zip(values, grown)]
        assert all(close) and all(g <= high * (1 + Fraction(1, 10**9)) for g in grown[:-1]) and grown[-1] > high
    assert time.process_time() - started < 5   # CPU time (not wall): a range that computes its values exactly ran minutes


@pytest.mark.parametrize("vary, said", [("n=1..1e400*1.0000001", "`1e400` is out of range"),
                                        ("n=1.5..1e400*1.5", "`1e400` is out of range"),
                                        ("n=1..1e5000*10", "`1e5000` is out of range"),
                                        ("n=1..3+1e-300", "`1e-300` is out of range"),
                                        ("n=100.001..1e400*1.00000000000000000014", "`1e400` is out of range"),
                                        ("n=1..1e9", "narrower range")])
def test_a_range_beyond_gcl_s_numbers_is_a_located_usage_error(cli, vary, said):
    """`1.5..1e400*1.5` was an internal error (a float overflow writing 1.5**1751), `1..1e5000*10`
    quoted Python's int-to-string limit: the ends and step are GCL numbers, checked first."""
    code, out = cli(["sweep", str(EXAMPLES / "a100_cluster.gcl"), "--in-process", "--vary", vary])
    assert code == 2 and "<--vary 1>:1:" in out and said in out and "internal error" not in out


# ------------------------------------------------------------------ moe_path on a dense model


MOE_PATHS = ("grouped", "tp_sharded", "per_expert", "ep_with_dp")


def _with_field(tmp_path: Path, example: str, key: str, value: str) -> Path:
    from gclc.testing.edit import edit_source

    source = tmp_path / example
    source.write_text((EXAMPLES / example).read_text(encoding="utf-8"), encoding="utf-8")
    text, _ = edit_source(source.read_text(encoding="utf-8"), str(source), {}, {key: value})
    source.write_text(text, encoding="utf-8")
    return source


@pytest.mark.parametrize("path", MOE_PATHS)
@pytest.mark.parametrize("example, key", [("chat_serve_features.gcl", "chat.engine.moe_path"),
                                          ("rl_grpo_70b.gcl", "grpo_70b.generate.engine.moe_path")])
def test_moe_path_on_a_dense_model_is_refused_where_it_is_written(tmp_path, cli, example, key, path):
    """Was accepted, printed in the plan's engine line and changed nothing (the fuzz's sensitivity
    probe: plan --json differed only in the echoed name)."""
    source = _with_field(tmp_path, example, key, path)
    code, out = cli(["check", str(source)])
    line = next(n for n, text in enumerate(source.read_text().splitlines(), 1) if f"moe_path = {path}" in text)
    assert code == 1 and f"{source}:{line}:" in out and "error[pin-meaningless]" in out
    assert "has none" in out and "help: remove `moe_path`" in out


@pytest.mark.parametrize("path", MOE_PATHS)
def test_moe_path_on_an_moe_model_is_still_accepted(tmp_path, cli, path):
    source = _with_field(tmp_path, "deepseek_v3_serve.gcl", "chat.engine.moe_path", path)
    code, out = cli(["check", str(source)])
    assert code == 0 and "pin-meaningless" not in out, out


@pytest.mark.parametrize("example, key", [("chat_serve_features.gcl", "chat.engine.dispatcher"),
                                          ("rl_grpo_70b.gcl", "grpo_70b.generate.engine.dispatcher")])
def test_a_dispatcher_on_a_dense_model_is_refused_where_it_is_written(tmp_path, cli, example, key):
    """`dispatcher` sends tokens to routed experts: on a dense model it would change nothing."""
    source = _with_field(tmp_path, example, key, "deepep")
    code, out = cli(["check", str(source)])
    line = next(n for n, text in enumerate(source.read_text().splitlines(), 1) if "dispatcher = deepep" in text)
    assert code == 1 and f"{source}:{line}:" in out and "error[pin-meaningless]" in out
    assert "has none" in out and "help: remove `dispatcher`" in out


def test_deepep_beside_a_graph_ceiling_is_refused_where_it_is_written(tmp_path, cli):
    """DeepEP's normal kernels run without CUDA graphs (vLLM and SGLang turn them off), so a stated
    `graph_batch` beside `dispatcher = deepep` could not hold; each alone is accepted."""
    deepep = _with_field(tmp_path, "deepseek_v3_serve.gcl", "chat.engine.dispatcher", "deepep")
    code, out = cli(["check", str(deepep)])
    assert code == 0 and "pin-meaningless" not in out, out
    text, _ = edit_source(deepep.read_text(encoding="utf-8"), str(deepep), {}, {"chat.engine.graph_batch": "64"})
    deepep.write_text(text, encoding="utf-8")
    code, out = cli(["check", str(deepep)])
    line = next(n for n, text in enumerate(deepep.read_text().splitlines(), 1) if "graph_batch = 64" in text)
    assert code == 1 and f"{deepep}:{line}:" in out and "cannot be captured in a CUDA graph" in out


# ------------------------------------------------------------------ routing where there are no uplinks


FABRIC = """import "std/nvidia"
import "std/network"
fabric NV extends NVLink4 {{ topology = {topology}  {fields} }}
node N extends DGX_H100 {{ scaleup = NV }}
cluster C {{ units = 2 x N  scaleout = NDR_FatTree }}
"""


@settings(deadline=None, max_examples=examples(20))
@given(topology=st.sampled_from(["switched", "full_mesh", "torus(dims = [2, 4])"]),
       fields=st.sampled_from(["routing = ecmp", "routing = adaptive", "routing = ecmp  flows = 4", "flows = 2"]))
def test_routing_or_flows_without_uplinks_is_refused(topology, fields):
    """`routing = ecmp` on an NVLink switch (no equal-cost uplinks) was accepted and changed
    neither plan nor explain: the routing and the flows are read only above a fat tree's leaves."""
    from gclc.compiler.driver import check_file

    result = check_file("fabric.gcl", text=FABRIC.format(topology=topology, fields=fields))
    problems = [d for d in result.diagnostics if d.code == "routing-flows"]
    assert len(problems) == 1 and f"its topology is `{topology.split('(')[0]}`" in problems[0].summary
    assert problems[0].subject.path == "fabric.gcl" and problems[0].subject.line == 3 and problems[0].subject.column > 1
    assert any("drop `" in note for note in problems[0].notes)


def test_routing_on_a_fat_tree_is_still_read():
    from gclc.compiler.driver import check_file

    text = ('import "std/nvidia"\nimport "std/network"\nfabric IB extends NDR_FatTree { routing = ecmp  flows = 4 }\n'
            "cluster C { units = 2 x DGX_H100  scaleout = IB }\n")
    assert not [d for d in check_file("fabric.gcl", text=text).diagnostics if d.is_error]


# ------------------------------------------------------------------ an rl job's training pool pins


PINS = st.sampled_from(["dispatcher = deepep", "dispatcher = allgather", "ep = 2", "ep = 1", "dp = 512", "dp = 4",
                        "microbatch = 1000", "microbatch = 2", "recompute_modules = [moe_act]", "tp = 3", "tp = 4",
                        "grad_reduce = bf16", "dropout = true", "shard = 2", "ep_overlap = true", "ep_overlap = false"])


def _rl_and_train(pin: str) -> tuple[str, int, int]:
    """The RL example with `pin` in its training pool, beside a train job of the same policy, on
    the same cluster, with the pool's optimizer batch (256 x 4 samples / 4 mini-batches); the
    lines of the two `parallelism` blocks."""
    pins = ("" if pin.startswith("tp ") else "tp = 8  ") + f"recompute = full  {pin}"
    text = (EXAMPLES / "rl_grpo_70b.gcl").read_text(encoding="utf-8")
    text = text.replace("parallelism { tp = 8  recompute = full }", f"parallelism {{ {pins} }}")
    text += f"\ntrain same {{\n  model = Llama3_70B\n  on = Lab\n  batch = 256\n  parallelism {{ {pins} }}\n}}\n"
    lines = [n for n, line in enumerate(text.splitlines(), 1) if f"parallelism {{ {pins} }}" in line]
    return text, lines[0], lines[-1]


def _pool_is_checked_as_a_train_job(pin: str) -> list[str]:
    from gclc.compiler.driver import check_file

    text, pool_line, train_line = _rl_and_train(pin)
    errors = [d for d in check_file("rl.gcl", text=text).diagnostics if d.is_error]
    in_pool = sorted(d.code for d in errors if d.subject.line == pool_line)
    in_train = sorted(d.code for d in errors if d.subject.line == train_line)
    assert in_pool == in_train, (pin, [(d.subject.line, d.code, d.summary) for d in errors])
    assert all(d.subject.line in (pool_line, train_line) for d in errors)
    return in_pool


@settings(deadline=None, max_examples=examples(8))
@given(PINS)
def test_an_rl_training_pool_pin_is_checked_as_a_train_job_s(pin):
    """The pool is planned as a train job (model/rl/job.py), but its pins went unchecked. Law:
    each error a train job of the same policy and batch gets for a pin, the pool gets, located
    in the pool's block."""
    _pool_is_checked_as_a_train_job(pin)


@pytest.mark.parametrize("pin, code", [("dispatcher = deepep", "pin-meaningless"), ("ep = 2", "pin-meaningless"),
                                       ("ep_overlap = true", "pin-meaningless"),
                                       ("dp = 512", "parallelism"), ("microbatch = 1000", "parallelism")])
def test_the_pool_pins_the_fuzz_found_accepted(pin, code):
    """`dispatcher = deepep` or `ep = 2` on a dense policy, `dp = 512` over 256 samples, a
    micro-batch larger than the batch: each was accepted and planned around. `ep_overlap = true`
    on a dense model was accepted in a train job too (its plan --json came out identical)."""
    assert _pool_is_checked_as_a_train_job(pin) == [code]


# ------------------------------------------------------------------ calibration coverage without a training band


CALIBRATED = """import "std/nvidia"
import "std/network"
cluster C {{
  units    = 2 x DGX_H100
  scaleout = NDR_FatTree
  calibration {{ {fields} }}
}}
"""


@settings(deadline=None, max_examples=examples(10))
@given(st.lists(st.sampled_from(["gpus = 8", "moe = true", "precisions = [fp8]", "beyond = 1.5"]), min_size=1, max_size=4,
                unique=True),
       st.booleans())
def test_coverage_fields_need_the_training_band_they_describe(coverage, training):
    """`gpus`, `moe` and `precisions` beside only a serving band were accepted and read by no plan
    (model/calibration.py reads them with `runs`, `low`, `high` only)."""
    from gclc.compiler.driver import check_file

    band = "runs = 3  low = 90%  high = 110%  " if training else ""
    text = CALIBRATED.format(fields=band + "serve_runs = 2  serve_low = 50%  serve_high = 150%  " + "  ".join(coverage))
    errors = [d for d in check_file("cal.gcl", text=text).diagnostics if d.is_error]
    if training and ("beyond = 1.5" not in coverage or "gpus = 8" in coverage):
        assert not errors
    elif training:   # `beyond` widens plans beyond `gpus`: without it, nothing reads it
        assert [d.summary.split("`")[1] for d in errors] == ["calibration { beyond }"]
    else:
        assert sorted(d.summary.split("`")[1] for d in errors) == sorted(f"calibration {{ {c.split()[0]} }}" for c in coverage)
        line = text.splitlines()[5]
        assert all(d.subject.line == 6 and line[d.subject.column - 1:].startswith(d.summary.split("{ ")[1].split(" }")[0])
                   for d in errors)
        assert all("help: remove it" in d.notes[0] for d in errors)


# ------------------------------------------------------------------ calibrate --job NAME on a design without train jobs


def test_calibrate_names_an_unknown_job_with_the_design_s_jobs(tmp_path, cli):
    """Was `gclc: the design has no `train` job` for a serving design whose job is `chat`."""
    design = tmp_path / "serving.gcl"
    design.write_text((ROOT / "tests/data/calibrate/llama8b_serve.gcl").read_text(encoding="utf-8"), encoding="utf-8")
    run = ROOT / "tests/data/measurements/serving/vllm_sharegpt_llama31_8b.txt"
    code, out = cli(["calibrate", str(design), str(run), "--job", "nope"])
    assert code == 2 and "no job `nope`; the design's jobs: chat" in out and "has no `train` job" not in out


@pytest.mark.parametrize("ep, refused", [(2, True), (8, True), (1, False)])
def test_generation_pool_experts_on_a_dense_policy_are_refused_as_a_serve_job_s(ep, refused):
    """`generate { parallelism { ep = 2 } }` on the dense 70B policy was accepted; a serve job of
    a dense model with `ep = 2` is the pin-meaningless error at the pin."""
    from gclc.compiler.driver import check_file

    text = (EXAMPLES / "rl_grpo_70b.gcl").read_text(encoding="utf-8")
    marker = "  generate {\n"
    assert marker in text
    text = text.replace(marker, marker + f"    parallelism {{ ep = {ep} }}\n", 1)
    line = text.splitlines().index(f"    parallelism {{ ep = {ep} }}") + 1
    errors = [d for d in check_file("rl.gcl", text=text).diagnostics if d.is_error]
    if refused:
        assert [(d.code, d.subject.line) for d in errors] == [("pin-meaningless", line)]
        assert "is dense: it has no experts" in errors[0].summary and "help: remove `ep`" in errors[0].notes[0]
    else:
        assert not errors


@pytest.mark.parametrize("example, said", [("rl_grpo_70b.gcl", "; `grpo_70b` is an rl job"),
                                           ("chat_serve_features.gcl", "; `chat` is a serve job"),
                                           # a train job on several partitions: not "a hetero job", a kind no design writes
                                           ("hetero_h100_a100.gcl", "on one partition; `llama3_70b_hetero` is a train job "
                                                                    "split over several partitions")])
def test_degrade_names_the_job_kind_it_does_not_plan(cli, example, said):
    code, out = cli(["degrade", str(EXAMPLES / example), "nic=down"])
    assert code == 2 and "gclc: `gclc degrade` plans train jobs" in out and said in out


# ------------------------------------------------------------------ a partition too large to simulate


@pytest.mark.parametrize("line, old, new", [(36, "8 x A100_Aged", "1e30 x A100_Aged"),
                                            (36, "8 x A100_Aged", "9223372036854775808 x A100_Aged")])
def test_schedule_refuses_a_partition_it_cannot_simulate_at_its_units(tmp_path, cli, line, old, new):
    """`gpus = 1e30 x A100_Aged` in shared_cluster.gcl's node checked (with a warning) and then
    `gclc schedule` was an internal error: numpy cannot hold 1e30 in an int64 (fuzz)."""
    text = (EXAMPLES / "shared_cluster.gcl").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert old in lines[line - 1]
    source = tmp_path / "shared.gcl"
    source.write_text(text.replace(old, new, 1), encoding="utf-8")
    code, out = cli(["schedule", str(source), "--no-failures", "--epochs", "0", "--json"])
    units = next(n for n, text in enumerate(lines, 1) if "partition a100" in text)
    assert code == 1 and "internal error" not in out
    assert f"{source}:{units}:" in out and "simulates at most 1,000,000 GPUs a partition" in out
