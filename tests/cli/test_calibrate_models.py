"""`gclc calibrate` on runs of two models on one cluster: each training log is related to the
design's train job whose model its argument dump states; with `--model-offsets` each model's runs
take their own offset (solver/calibrate/params.py model_param), the report names each offset with
the runs it came from, and the written design stays cluster constants."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate
from gclc.solver.calibrate.params import applied

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# A second model on the pod: Llama 2 7B's shape (Touvron et al. 2023, arXiv:2307.09288, Table 1 and
# the released config: 32 layers, d 4096, FFN 11008, 32 heads, vocab 32000).
SECOND = """
model Llama2_7B {
  arch     = dense
  layers   = 32
  hidden   = 4096
  heads    = 32
  kv_heads = 32
  ffn      = 11008
  vocab    = 32000
  seq      = 4096
  params   = 6.74 B
}

train pretrain_7b extends pretrain {
  model = Llama2_7B
}
"""
EFFICIENCY = 0.58   # the cluster's bf16 efficiency both models' runs are made at (the design states 64 %)
SLOWER = 1.15       # the second model's own miss: its steps this much longer than the model's


def megatron_log(seconds: float, dp: int, shape: dict[str, int] | None = None) -> str:
    """A Megatron-LM log with a chosen step time (SYNTHETIC: the CLI's path is tested here), its
    argument dump stating the model's shape where `shape` is given."""
    stated = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1, "data_parallel_size": dp,
              "global_batch_size": 64, **(shape or {})}
    dump = "".join(f"  {k} {'.' * (48 - len(k))} {v}\n" for k, v in stated.items())
    lines = [f" [2026-01-01 00:00:{i:02d}] iteration {i:8d}/     100 | consumed samples: {64 * i:12d} | "
             f"elapsed time per iteration (ms): {seconds * 1e3:.1f} | global batch size:    64 |" for i in range(1, 9)]
    return dump + "\n".join(lines) + "\n"


def test_two_models_runs_each_take_an_offset_and_the_written_design_stays_cluster_constants(
        tmp_path, capsys, monkeypatch):
    (tmp_path / "pod.gcl").write_text((DATA / "calibrate" / "h100_pod.gcl").read_text() + SECOND)
    runs = tmp_path / "measurements"
    runs.mkdir()
    shutil.copy(DATA / "measurements" / "kernels" / "h100_mamf.csv", runs / "mamf.csv")
    design = check_file(str(tmp_path / "pod.gcl")).design
    for name, factor, shape in (("pretrain", 1.0, None),
                                ("pretrain_7b", SLOWER, {"num_layers": 32, "hidden_size": 4096,
                                                          "ffn_hidden_size": 11008})):
        job = train_job(design, name)
        slower = applied(job.partition, {("chip", "H100_SXM", "bf16"): EFFICIENCY})
        for dp in (2, 4):
            cfg = attrs.evolve(pinned_config(job), dp=dp)
            seconds = estimate(job.shape, cfg, slower).step_time * factor
            (runs / f"{name}_dp{dp}.log").write_text(megatron_log(seconds, dp, shape))
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "pod.gcl", "measurements", "-o", "mine.gcl", "--model-offsets"]) == 0
    report = capsys.readouterr().out
    assert "calibrated on 4 of your runs" in report
    head, _, offsets = report.partition("model offsets")
    assert offsets, report
    # each model's line names its own runs: the 7B's logs were related to its job by their shape
    seven = next(line for line in offsets.splitlines() if "ffn 11008" in line)
    eight = next(line for line in offsets.splitlines() if "ffn 14336" in line)
    assert "pretrain_7b_dp2.log:" in seven and "pretrain_7b_dp4.log:" in seven and "pretrain_dp" not in seven
    assert "pretrain_dp2.log:" in eight and "pretrain_7b" not in eight
    written = (tmp_path / "mine.gcl").read_text()
    assert "offset" not in written and "chip H100_SXM_mine extends H100_SXM" in written
    assert "train pretrain_7b_mine extends pretrain_7b" in written
    assert not [d for d in check_file(str(tmp_path / "mine.gcl")).diagnostics if d.is_error]
    assert main(["calibrate", "pod.gcl", "measurements", "--json", "--model-offsets"]) == 0
    found = {o["model"]: o for o in json.loads(capsys.readouterr().out)["model_offsets"]}
    by_ffn = {("11008" if "ffn 11008" in m else "14336"): o for m, o in found.items()}
    # the slower model's offset lengthens its steps beyond the other's by part of its planted miss:
    # the rest is shrunk toward none by the offset's prior
    assert 1.0 < by_ffn["11008"]["factor"] / by_ffn["14336"]["factor"] < SLOWER
    assert len(by_ffn["11008"]["runs"]) == 2


def test_without_the_option_another_models_logs_calibrate_the_cluster_and_no_offset_is_fitted(
        tmp_path, capsys, monkeypatch):
    """The default: the second model's logs, related to its job, inform the cluster's constants
    as any run does (no `model offsets` in the report)."""
    (tmp_path / "pod.gcl").write_text((DATA / "calibrate" / "h100_pod.gcl").read_text() + SECOND)
    runs = tmp_path / "measurements"
    runs.mkdir()
    design = check_file(str(tmp_path / "pod.gcl")).design
    job = train_job(design, "pretrain_7b")
    slower = applied(job.partition, {("chip", "H100_SXM", "bf16"): EFFICIENCY})
    for dp in (2, 4):
        cfg = attrs.evolve(pinned_config(job), dp=dp)
        (runs / f"b_dp{dp}.log").write_text(megatron_log(estimate(job.shape, cfg, slower).step_time, dp,
                                                         {"num_layers": 32, "ffn_hidden_size": 11008}))
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "pod.gcl", "measurements", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model_offsets"] == [] and out["band"]["runs"] == 2 and not out["not_used"]
    fitted = next(m["after"] for m in out["moved"] if m["constant"] == "chip/H100_SXM/bf16")
    assert EFFICIENCY <= fitted < 0.64
