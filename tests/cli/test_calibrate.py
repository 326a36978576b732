"""`gclc calibrate`: the whole loop on the command line (measurements in, a calibrated design
out, `gclc plan` on it with the band of the operator's runs), and its exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import pytest

from gclc.dsl.numbers import number
from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.solver.calibrate.params import applied

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def megatron_log(seconds: float, dp: int, batch: int = 64) -> str:
    """A log in Megatron-LM's format with a step time the test chooses (SYNTHETIC: the CLI's
    path is tested here; the reader is tested on published logs in tests/compiler/test_measure.py)."""
    dump = (f"  tensor_model_parallel_size ...................... 2\n"
            f"  pipeline_model_parallel_size .................... 1\n"
            f"  data_parallel_size .............................. {dp}\n"
            f"  global_batch_size ............................... {batch}\n")
    lines = [f" [2026-01-01 00:00:{i:02d}] iteration {i:8d}/     100 | consumed samples: {batch * i:12d} | "
             f"elapsed time per iteration (ms): {seconds * 1e3:.1f} | global batch size: {batch:4d} |"
             for i in range(1, 9)]
    return dump + "\n".join(lines) + "\n"


@pytest.fixture
def workspace(tmp_path):
    """The pod design and published measurements, plus three synthetic runs of the job made at
    a bf16 training efficiency of 58 % (the design states 64 %)."""
    shutil.copy(DATA / "calibrate" / "h100_pod.gcl", tmp_path / "pod.gcl")
    runs = tmp_path / "measurements"
    runs.mkdir()
    shutil.copy(DATA / "measurements" / "nccl" / "bitdeer_h100_1node_all_reduce.txt", runs / "nccl_1node.txt")
    shutil.copy(DATA / "measurements" / "kernels" / "h100_mamf.csv", runs / "mamf.csv")
    job = train_job(check_file(str(tmp_path / "pod.gcl")).design)
    slower = applied(job.partition, {("chip", "H100_SXM", "bf16"): 0.58})
    for dp in (2, 4, 8):
        cfg = attrs.evolve(pinned_config(job), dp=dp)
        (runs / f"megatron_dp{dp}.log").write_text(megatron_log(estimate(job.shape, cfg, slower).step_time, dp))
    return tmp_path


def test_calibrate_writes_a_design_that_plans_with_the_operators_band(workspace, capsys, monkeypatch):
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 0
    report = capsys.readouterr().out
    assert "calibrated on 3 of your runs" in report and "H100_SXM bf16 efficiency" in report
    # the largest run, held out, was predicted beyond the others' GPUs: the report says its error
    # counts divided by the shipped factor a plan beyond them takes
    from gclc.model.calibration import FACTORS
    assert f"÷{number(FACTORS['scale'])}" in report and "what that run had that the others had not" in report
    written = (workspace / "mine.gcl").read_text()
    assert 'import "pod"' in written and "chip H100_SXM_mine extends H100_SXM" in written
    # each value names the measurements it came from (the writer names three, then counts the rest)
    assert "measurements/megatron_dp2.log:" in written and "measurements/mamf.csv" in written
    assert "fabric NVLink4_mine extends NVLink4" in written and "measurements/nccl_1node.txt:" in report
    result = check_file(str(workspace / "mine.gcl"))
    assert not [d for d in result.diagnostics if d.is_error]
    # runs at three sizes: the band's factor beyond the largest (16 GPUs) is read from them, written, read back
    from gclc.model.calibration import Own
    own = Own.of(next(e for e in result.design.entities if e.name == "Pod_mine"))
    assert "beyond = " in written and own.gpus == 16 and own.beyond >= 1.0
    assert main(["plan", "mine.gcl"]) == 0
    plan = capsys.readouterr().out
    assert "plan pretrain_mine on Pod_mine" in plan and "band       calibrated on 3 of your runs: ±" in plan
    assert main(["plan", "mine.gcl", "--json"]) == 0
    band = json.loads(capsys.readouterr().out)["error_band"]
    assert band["calibrated"]["runs"] == 3 and band["calibrated"]["low"] < 1 < band["calibrated"]["high"]
    # the calibrated plan's throughput is the model's at the fitted efficiency
    chip = next(e for e in result.design.entities if e.name == "H100_SXM_mine")
    fitted = chip.get("efficiency.bf16")
    assert 0.58 <= float(fitted) < 0.64


def test_a_precision_your_runs_did_not_run_on_the_written_chip_takes_the_published_band(workspace, capsys,
                                                                                       monkeypatch):
    """The written chip is `H100_SXM_mine extends H100_SXM` with the fitted bf16 efficiency: the
    published fit calibrated H100_SXM at fp8, and the written chip keeps the rest of its physics, so
    an fp8 plan on the calibrated cluster takes at least the published band (model/calibration.py
    own_reasons `published`; benchmarks/calibrate_own.py measured it so), not the operator's band
    widened by the factor for a precision no run calibrated."""
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 0
    (workspace / "fp8.gcl").write_text('import "mine"\n\ntrain at_fp8 extends pretrain_mine { precision = fp8 }\n')
    capsys.readouterr()
    assert main(["plan", "fp8.gcl", "--job", "at_fp8", "--json"]) == 0
    reasons = [r["reason"] for r in json.loads(capsys.readouterr().out)["error_band"]["reasons"]]
    assert "published" in reasons and "precision" not in reasons and "chip" not in reasons


def test_the_report_as_json_carries_the_same_numbers(workspace, capsys, monkeypatch):
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "gclc-calibration" and out["band"]["runs"] == 3
    # the same held-out errors and divisions as the text report (the largest run's: the shipped factor)
    from gclc.model.calibration import FACTORS
    assert len(out["band"]["widening"]) == len(out["band"]["held_out"]) == 3
    assert sorted(out["band"]["widening"]) == pytest.approx([1.0, 1.0, FACTORS["scale"]])
    assert {m["kind"] for m in out["measurements"]} == {"collective", "kernel", "train"}
    assert any(m["constant"] == "chip/H100_SXM/bf16" for m in out["moved"])
    assert not (workspace / "mine.gcl").exists()     # no -o: the report only


def test_a_broken_measurement_is_located_and_nothing_is_written(workspace, capsys, monkeypatch):
    monkeypatch.chdir(workspace)
    log = workspace / "measurements" / "megatron_dp2.log"
    log.write_text(log.read_text().replace("elapsed time per iteration (ms): ", "elapsed time per iteration (ms): x", 1))
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 1
    err = capsys.readouterr().err
    assert "measurements/megatron_dp2.log:5:" in err and "error[measurement]" in err
    assert not (workspace / "mine.gcl").exists()


def test_an_nccl_version_that_cannot_be_read_is_located_and_nothing_is_written(workspace, capsys, monkeypatch):
    monkeypatch.chdir(workspace)
    nccl = workspace / "measurements" / "nccl_1node.txt"
    nccl.write_text("# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22.8.O\n" + nccl.read_text())
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 1
    err = capsys.readouterr().err
    column = "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=".__len__() + 1
    assert f"measurements/nccl_1node.txt:1:{column}:" in err and "cannot read the NCCL version `22.8.O`" in err
    assert not (workspace / "mine.gcl").exists()


def test_a_blackwell_table_without_its_nccl_version_says_what_it_assumed(tmp_path, capsys, monkeypatch):
    """The report's `assumed` section names the NVLS channels a run with no NCCL version was priced on
    (SYNTHETIC: the 8 x H100 output's layout with B200s and sizes of 8 to 64 MiB, where Blackwell's
    NVLS channels may bind)."""
    shutil.copy(DATA / "calibrate" / "dgx_b200.gcl", tmp_path / "b200.gcl")
    text = (DATA / "measurements" / "nccl" / "bitdeer_h100_1node_all_reduce.txt").read_text()
    rows = {"268435456      67108864": "8388608      2097152", "536870912     134217728": "16777216      4194304",
            "1073741824     268435456": "33554432      8388608", "2147483648     536870912": "67108864     16777216"}
    for old, new in rows.items():
        text = text.replace(old, new)
    text = text.replace("H100 80GB HBM3", "B200")
    (tmp_path / "all_reduce.txt").write_text(text)
    monkeypatch.chdir(tmp_path)
    main(["calibrate", "b200.gcl", "all_reduce.txt"])
    out = capsys.readouterr().out
    assert "\nassumed\n  all_reduce.txt:3:1: the output names no NCCL version" in out
    # NCCL's own table runs all four as NVLS on 8 Blackwell GPUs (from 4 MiB: nccl.predicted); 16 MiB is
    # priced the same on 24 and 32 channels and 32 MiB within a collective's noise (7 %: observe.NOISE)
    assert "prices 2 of its sizes (8 MiB to 64 MiB) otherwise" in out
    (tmp_path / "all_reduce.txt").write_text("# nccl-tests version 2.17.6 nccl-headers=22503 nccl-library=22503\n" + text)
    main(["calibrate", "b200.gcl", "all_reduce.txt"])
    assert "names no NCCL version" not in capsys.readouterr().out


def test_usage_errors(workspace, capsys, monkeypatch, tmp_path_factory):
    monkeypatch.chdir(workspace)
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "mine.gcl"
    assert main(["calibrate", "pod.gcl", "measurements", "-o", str(elsewhere)]) == 2
    assert "imports only files below its own folder" in capsys.readouterr().err
    assert main(["calibrate", "pod.gcl", "measurements", "--job", "nope"]) == 2
    assert "no train job `nope`" in capsys.readouterr().err
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "pod.gcl"]) == 2


def test_a_serving_benchmark_calibrates_the_serve_job_and_its_plan_carries_the_serving_band(tmp_path, capsys,
                                                                                               monkeypatch):
    """vLLM's `bench serve` summary (published, tests/data/measurements/SOURCES.md) on a serve
    design: the engine's host time is written into the derived serve job, the serving band into
    the cluster, and `gclc plan` prints the band of the operator's serving runs."""
    shutil.copy(DATA / "calibrate" / "llama8b_serve.gcl", tmp_path / "serve.gcl")
    shutil.copy(DATA / "measurements" / "serving" / "vllm_sharegpt_llama31_8b.txt", tmp_path / "vllm.txt")
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "serve.gcl", "vllm.txt", "--job", "chat", "-o", "mine.gcl"]) == 0
    report = capsys.readouterr().out
    assert "chat engine host time per iteration" in report and "serving: calibrated on 1 of your serving runs" in report
    written = (tmp_path / "mine.gcl").read_text()
    assert "serve chat_mine extends chat" in written and "host_step = " in written and "serve_runs = 1" in written
    assert not [d for d in check_file(str(tmp_path / "mine.gcl")).diagnostics if d.is_error]
    assert main(["plan", "mine.gcl", "--json"]) == 0
    band = json.loads(capsys.readouterr().out)["error_band"]
    assert band["calibrated"]["serving_runs"] == 1
    assert band["calibrated"]["low"] < 1 < band["calibrated"]["high"]
    low, high = band["tokens_per_s"]
    assert low < high


def overhead_workspace(tmp_path, dps, overhead=0.03, batch=64, stated_ms=None, seq=None):
    """The pod design (its node stating `stated_ms` of host time per step where given, its model
    trained on sequences of `seq` where given) and runs of the job at `dps` (each a different work
    per GPU: the global batch `batch` is fixed) made at a bf16 efficiency of 58 % with `overhead`
    seconds of host work per step."""
    shutil.copy(DATA / "calibrate" / "h100_pod.gcl", tmp_path / "pod.gcl")
    if seq is not None:
        text = (tmp_path / "pod.gcl").read_text()
        (tmp_path / "pod.gcl").write_text(text.replace("seq      = 8192", f"seq      = {seq}"))
    if stated_ms is not None:
        text = (tmp_path / "pod.gcl").read_text().replace("units    = 4 x DGX_H100", "units    = 4 x SlowHost")
        (tmp_path / "pod.gcl").write_text(text + f"\nnode SlowHost extends DGX_H100 {{ step_overhead = {stated_ms:g} ms }}\n")
    runs = tmp_path / "measurements"
    runs.mkdir()
    job = train_job(check_file(str(tmp_path / "pod.gcl")).design)
    slower = applied(job.partition, {("chip", "H100_SXM", "bf16"): 0.58,
                                     ("node", job.partition.node.name, "step_overhead"): overhead})
    for dp in dps:
        cfg = attrs.evolve(pinned_config(job), dp=dp, batch=batch)
        (runs / f"megatron_dp{dp}.log").write_text(megatron_log(estimate(job.shape, cfg, slower).step_time, dp, batch))
    return tmp_path, job.partition.node.name


def test_runs_of_two_works_per_gpu_fit_the_nodes_step_overhead_and_the_plan_carries_it(tmp_path, capsys,
                                                                                     monkeypatch):
    """300 ms of host work beside 1.3 s and 4.3 s steps (16 sequences on 16 and 4 GPUs), the node
    stating 100 ms: a visible share of each, so the runs narrow it (judged at the stated 100 ms)
    and it is fitted."""
    workspace, node = overhead_workspace(tmp_path, (2, 8), overhead=0.3, batch=16, stated_ms=100)
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 0
    report = capsys.readouterr().out
    line = next(x for x in report.splitlines() if f"{node} host time between training steps" in x)
    # the report starts from the design's value, names the runs, the prior and the posterior width
    assert "100 ms ->" in line and "fitted from runs measurements/megatron_dp" in line
    assert "prior 100 ms ->" in line and "posterior width e^±" in line
    written = (workspace / "mine.gcl").read_text()
    line = next(x for x in written.splitlines() if x.strip().startswith("step_overhead ="))
    # the comment names the runs it came from and the design's value it replaces
    assert "was 100 ms" in line and "(prior 100 ms ->" in line and "posterior width e^±" in line
    assert "measurements/megatron_dp2.log:" in line and "measurements/megatron_dp8.log:" in line
    result = check_file(str(workspace / "mine.gcl"))
    assert not [d for d in result.diagnostics if d.is_error]
    nodes = [e for e in result.design.entities if e.kind == "node" and e.name == f"{node}_mine"]
    fitted = float(nodes[0].get("step_overhead"))
    # the runs took 300 ms of host work a step: the fit, from the stated 100 ms, lands near it
    assert 0.2 < fitted < 0.45
    # the calibrated plan's step carries it
    mine = train_job(result.design)
    assert mine.partition.node.step_overhead == pytest.approx(fitted)
    assert main(["plan", "mine.gcl", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step_breakdown_s"]["step_overhead"] == pytest.approx(fitted)


def test_a_step_overhead_the_runs_barely_see_is_kept_at_the_designs_value(tmp_path, capsys, monkeypatch):
    """30 ms beside 3.7 s and 15 s steps (0.2-0.8 %): the fit is within Z posterior deviations of
    the design's 0 s; it is kept at the design's value, and the report and the file say what was
    measured and why (rewritten from "near its prior": the rule is now a test in seconds)."""
    workspace, node = overhead_workspace(tmp_path, (2, 8))
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 0
    report = capsys.readouterr().out
    assert "host time between training steps" not in report
    head = f"node `{node}`: its per-step host time (`step_overhead`) kept at the design's value, 0 s (unstated): " \
           "fitted "
    why = next(line.strip() for line in report.splitlines() if head in line)
    assert "from the design's value 0 ms, within 1.33 sigma of it: kept" in why
    written = (workspace / "mine.gcl").read_text()
    assert not any(x.strip().startswith("step_overhead =") for x in written.splitlines())
    assert f"# {why}" in written


def test_runs_of_one_step_length_leave_the_step_overhead_at_the_designs_value(tmp_path, capsys, monkeypatch):
    workspace, node = overhead_workspace(tmp_path, (8,))
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl"]) == 0
    report = capsys.readouterr().out
    assert "host time between training steps" not in report
    assert f"node `{node}`: its per-step host time (`step_overhead`) kept at the design's value, 0 s (unstated): " \
           "1 training run of one work per GPU" in report
    assert not any(x.strip().startswith("step_overhead =") for x in (workspace / "mine.gcl").read_text().splitlines())


def test_the_reports_before_is_the_design_as_written_not_the_fits_prior(tmp_path, capsys, monkeypatch):
    """The design states no `step_overhead` (0 s); the fit's prior is 20 ms. The report's "before"
    is the design's prediction: the run of the plan's own configuration is predicted before the fit
    exactly as `gclc plan` predicts the design, and the moved per-step time starts from 0 s.
    Sequences of 1024 make steps of tenths of a second, where the runs would see the prior's 20 ms
    (the rule judges them there), so the per-step time is fitted."""
    workspace, node = overhead_workspace(tmp_path, (2, 8), overhead=0.3, batch=16, seq=1024)
    design = workspace / "pod.gcl"
    design.write_text(design.read_text().replace("batch     = 64", "batch     = 16"))   # the plan runs dp 8's config
    monkeypatch.chdir(workspace)
    assert main(["calibrate", "pod.gcl", "measurements", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    moved = next(m for m in report["moved"] if m["constant"] == f"node/{node}/step_overhead")
    assert moved["before"] == 0 and moved["prior"] == pytest.approx(0.02) and moved["after"] > 0.1
    run = next(m for m in report["measurements"] if "megatron_dp8.log" in m["where"])
    before = run["measured"] * (1 + run["error_before"])   # tokens/s per GPU as the design predicts it
    assert main(["plan", "pod.gcl", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["gpus"] == 16 and plan["step_breakdown_s"]["step_overhead"] == 0
    assert before == pytest.approx(plan["tokens_per_s"] / plan["gpus"], rel=1e-9)
