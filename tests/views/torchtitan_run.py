"""A few real training steps of an exported torchtitan configuration, scaled down, on this
machine's CPU: torchtitan 0.2.2's own `Trainer` (torchtitan/train.py) on a gloo process group
of a few forked processes.

What runs is torchtitan's and torch's own code: `ConfigManager.parse_args` reads the exported
TOML with the scale-down given as CLI overrides (as `run_train.sh` passes them), and
`Trainer.__init__` builds everything from it: `init_distributed` (gloo), `ParallelDims` and
its meshes, the model from the exported `[model]` name and flavor on the meta device,
`pipeline_llm` (the stage split and the pipeline schedule class the TOML names),
`parallelize_llama` (tensor + sequence parallelism with the loss-parallel output,
activation checkpointing, FSDP2 with the TOML's reshard policy and mixed precision),
`init_weights`, the AdamW and LR-scheduler builders, the cross-entropy loss. Each step is
`Trainer.train_step` (micro-batches through the schedule, gradient clipping across the
pipeline mesh, optimizer and scheduler steps) fed by `Trainer.batch_generator`.

Stubs, each named (what a CPU or this offline machine cannot provide):
- DEVICE: `torchtitan.tools.utils.device_type`/`device_module` (and the modules that bound
  them by name) are "cpu"/`torch.cpu`: torchtitan asks torch for the accelerator and falls
  back to "cuda" when there is none.
- MODEL SIZE: the flavor the TOML names is registered (torchtitan's `register_train_spec`,
  its extension point) with the same family's arguments at tiny dimensions (`TINY`); every
  other builder of the spec is torchtitan's own.
- DATA: `build_dataloader_fn` yields one fixed batch of random tokens per data-parallel rank
  (no tokenizer: `build_tokenizer_fn=None`, which the Trainer allows); the real dataloader
  downloads a Hugging Face dataset and tokenizer, which this machine cannot reach.
- METRICS: `build_metrics_processor_fn` records the global loss `train_step` logs; the real
  one reads CUDA memory statistics.
- GLOO: gloo has no PREMUL_SUM reduction, which FSDP2 picks for torchtitan's gradient divide
  factor 1.0; each FSDP module is told to reduce with SUM and scale after
  (`set_force_sum_reduction_for_comms`, FSDP2's own switch): the same arithmetic.
- LOOP: the loop of `Trainer.train` without its checkpoint load/save, profiler and the
  two-second sleep of rank 0 at the end.

Not run on a CPU: context parallelism (torch has no sharding rule for the CPU flash-attention
kernel, `aten._scaled_dot_product_flash_attention_for_cpu`), FP8 converters and torch.compile.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import socket
import traceback
import warnings

VOCAB = 256
# the tiny dimensions the exported flavor is built at (heads:kv_heads stays grouped-query)
TINY = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": VOCAB, "multiple_of": 32}


class Batches:
    """DATA stub: the same batch of random tokens every step (so the loss must drop)."""

    def __init__(self, dp_world_size, dp_rank, tokenizer, job_config):
        self.rank, self.batch, self.seq = dp_rank, job_config.training.local_batch_size, job_config.training.seq_len

    def __iter__(self):
        import torch

        tokens = torch.randint(0, VOCAB, (self.batch, self.seq + 1), generator=torch.Generator().manual_seed(self.rank))
        while True:
            yield {"input": tokens[:, :-1]}, tokens[:, 1:]

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class _NoMemory:
    device_name = "cpu"

    def get_peak_stats(self):
        return type("Stats", (), {"max_reserved_gib": 0.0, "max_reserved_pct": 0.0})()


class Losses:
    """METRICS stub: keeps the global average loss of each logged step."""

    def __init__(self, job_config, parallel_dims, model_args=None):
        from torchtitan.components.metrics import NoColor

        self.color, self.device_memory_monitor = NoColor(), _NoMemory()
        self.losses: list[float] = []
        self.ntokens_since_last_log, self.data_loading_times = 0, []

    def should_log(self, step):
        return True

    def log(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=None):
        self.losses.append(float(global_avg_loss))

    def close(self):
        pass


def _cpu_device() -> None:
    """DEVICE stub."""
    import torch
    import torchtitan.components.metrics as metrics
    import torchtitan.distributed.parallel_dims as parallel_dims
    import torchtitan.distributed.utils as dist_utils
    import torchtitan.tools.utils as utils

    for module in (utils, parallel_dims, dist_utils, metrics):
        module.device_type = "cpu"
        if hasattr(module, "device_module"):
            module.device_module = torch.cpu


def _register(name: str, flavor: str) -> None:
    """MODEL SIZE, DATA, METRICS and GLOO stubs, in a spec under the exported model's name."""
    from torch.distributed.fsdp import FSDPModule
    from torchtitan.protocols import train_spec

    real = train_spec.get_train_spec(name)

    def parallelize(model, dims, job_config):
        model = real.parallelize_fn(model, dims, job_config)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_force_sum_reduction_for_comms(True)
        return model

    tiny = dataclasses.replace(real.model_args[flavor], **TINY)
    train_spec.register_train_spec(name, dataclasses.replace(
        real, model_args={flavor: tiny}, parallelize_fn=parallelize, build_tokenizer_fn=None,
        build_dataloader_fn=Batches, build_metrics_processor_fn=Losses, build_validator_fn=None))


def _rank(rank: int, world: int, port: int, config, out) -> None:
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)     # torchtitan and c10d log on every rank
        if dist.is_initialized():      # a fake world the parent process built for the mesh checks
            dist.destroy_process_group()
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        from torchtitan.train import Trainer

        _cpu_device()
        _register(config.model.name, config.model.flavor)
        trainer = Trainer(config)
        batches = trainer.batch_generator(trainer.dataloader)
        while trainer.should_continue_training():
            trainer.step += 1
            trainer.train_step(batches)
        out.put((rank, "ok", trainer.metrics_processor.losses, trainer.pp_has_last_stage
                 if trainer.parallel_dims.pp_enabled else True))
        dist.destroy_process_group()
    except BaseException as error:  # reported to the parent, which raises it
        out.put((rank, "error", f"{type(error).__name__}: {error}", traceback.format_exc()))


def train(words: list[str], world: int, timeout: float = 60.0) -> dict[int, tuple]:
    """Run the Trainer on `world` forked ranks; rank -> ("ok", losses, last stage) or
    ("error", message, traceback). Every rank is stopped by `timeout` seconds. The words are
    parsed once, here, by torchtitan's ConfigManager, and the model's package imported before
    the ranks fork (they inherit both)."""
    from torchtitan.config.manager import ConfigManager
    from torchtitan.protocols.train_spec import get_train_spec

    config = ConfigManager().parse_args(words + [
        "--comm.init_timeout_seconds", str(int(timeout)), "--comm.train_timeout_seconds", str(int(timeout)),
        "--comm.trace_buf_size", "0"])
    get_train_spec(config.model.name)
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = [context.Process(target=_rank, args=(r, world, port, config, out), daemon=True) for r in range(world)]
    results: dict[int, tuple] = {}
    try:
        for process in ranks:
            process.start()
        while len(results) < world:
            rank, *result = out.get(timeout=timeout)
            results[rank] = tuple(result)
            if result[0] == "error":    # the others may wait on it in a collective
                break
    finally:
        for process in ranks:
            process.join(timeout=5 if len(results) == world else 0.1)
            if process.is_alive():
                process.kill()
                process.join()
    return results
