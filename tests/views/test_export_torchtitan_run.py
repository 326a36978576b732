"""The scaled-down run: the torchtitan TOML `gclc export` writes for the DGX H100 example (Llama
3 405B, tp 8 pp 7 cp 2 FSDP 9, 1F1B) trains for a few steps on this machine's CPU in torchtitan
0.2.2's own Trainer, on a gloo group of four forked processes, with the scale-down given as
CLI overrides: pipeline 2 x FSDP 2 at the exported schedule, micro-batch size, reshard policy
and mixed precision, on the exported flavor at tiny dimensions. tests/views/torchtitan_run.py
names every stub (device type, model size, data, metrics, gloo's missing PREMUL_SUM, the loop's
checkpoint and closing sleep) and what a CPU cannot run (context parallelism: no CPU sharding
rule for flash attention; tensor parallelism runs, but adds four ranks to keep FSDP and the
pipeline, ~7 s here, so it is scaled to 1).
"""

from __future__ import annotations

import math

import pytest

from gclc.views.export import torchtitan

pytest.importorskip("torchtitan", reason="torchtitan 0.2.2 from PyPI (.ci/setup installs it with the dev extras)")

from . import torchtitan_real as real  # noqa: E402
from gclc.compiler.std_chips import std_chip  # noqa: E402
from . import torchtitan_run as run  # noqa: E402


def _scaled(toml, tmp_path, pp: int, dp: int, microbatches: int) -> list[str]:
    """The exported file with the sizes of a CPU run as overrides (everything else as written)."""
    path = tmp_path / "torchtitan.toml"
    path.write_text(toml)
    exported = real.parse(["--job.config_file", str(path)])
    micro = exported.parallelism.pipeline_parallel_microbatch_size
    return ["--job.config_file", str(path), "--job.dump_folder", str(tmp_path),
            "--parallelism.tensor_parallel_degree", "1", "--parallelism.context_parallel_degree", "1",
            "--parallelism.pipeline_parallel_degree", str(pp), "--parallelism.data_parallel_shard_degree", str(dp),
            "--training.local_batch_size", str(micro * microbatches),
            "--training.global_batch_size", str(micro * microbatches * dp),
            "--training.seq_len", "16", "--training.steps", "3", "--lr_scheduler.warmup_steps", "1",
            "--optimizer.lr", "1e-2"]


def test_the_exported_config_trains_scaled_down_and_a_run_torch_refuses_fails(named, tmp_path):
    job = named("dgx_h100_superpod").job
    toml = torchtitan.export(job, std_chip("H100_SXM"), "examples/dgx_h100_superpod.gcl")["torchtitan.toml"]
    words = _scaled(toml, tmp_path, pp=2, dp=2, microbatches=2)
    config = real.parse(words)     # what the ranks run: the exported schedule and FSDP policy
    assert (config.model.name, config.model.flavor) == ("llama3", "405B")
    assert config.parallelism.pipeline_parallel_schedule == "1F1B"
    assert config.parallelism.fsdp_reshard_after_forward == "never"
    results = run.train(words, world=4)
    assert all(r[0] == "ok" for r in results.values()), results
    last = [losses for status, losses, is_last in results.values() if is_last]
    assert len(last) == 2 and last[0] == last[1]          # the two FSDP ranks of the last stage agree
    losses = last[0]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert losses[0] > losses[1] > losses[2]               # the same batch each step: it learns
    assert losses[0] < 2 * math.log(run.VOCAB)             # and started near chance
    # negative control: one micro-batch for two stages, which torch's Schedule1F1B refuses
    refused = run.train(_scaled(toml, tmp_path, pp=2, dp=1, microbatches=1), world=2)
    assert any(r[0] == "error" and "number of stages" in r[1] for r in refused.values()), refused
