"""torchtitan 0.2.2's own checks (PyPI's torchtitan==0.2.2 on torch 2.13.0's CPU wheel), run on
an exported configuration:

- `ConfigManager().parse_args` reads the TOML and the CLI overrides (tyro, as `run_train.sh`);
- `ParallelDims(...)` validates the degrees against the world size, and `build_mesh()` builds
  every mesh torchtitan trains on and checks their sizes (`_validate_meshes`), over torch's
  fake process group of the job's world size (torch.testing's FakeStore: no peers are needed
  to lay out a mesh);
- `model` builds the `[model]` flavor from its train spec (args updated from the config) on
  the meta device;
- `build_pipeline_schedule` constructs torch's schedule class for the pipeline (Schedule1F1B,
  ScheduleGPipe, ScheduleInterleaved1F1B), with PipelineStages on the mesh's `pp` group: the
  constructors hold torch's own micro-batch rules.

Nothing of torchtitan's or torch's is stubbed; `triton` is the released package (imported by
torchtitan's MoE kernels module; nothing is compiled here).
"""

from __future__ import annotations

import functools
import logging


@functools.cache
def config_manager():
    from torchtitan.config.manager import ConfigManager

    logging.getLogger("torchtitan").setLevel(logging.ERROR)
    return ConfigManager


def parse(words: list[str]):
    return config_manager()().parse_args(words)


def _fake_world(world: int) -> None:
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        if dist.get_world_size() == world:
            return
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())


def parallel_dims(job_config, world: int, meshes: bool = True):
    """torchtitan's ParallelDims of the parsed config on `world` ranks (its _validate runs on
    construction), with every mesh built and size-checked when `meshes`."""
    from torchtitan.distributed.parallel_dims import ParallelDims

    p = job_config.parallelism
    dims = ParallelDims(dp_replicate=p.data_parallel_replicate_degree, dp_shard=p.data_parallel_shard_degree,
                        cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                        ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=world)
    if meshes:
        _fake_world(world)
        dims.build_mesh()
    return dims


def pipeline_schedule(job_config, dims, layers: int):
    """torchtitan's build_pipeline_schedule for rank 0's stages (one, or one per virtual stage,
    as its `pipeline_parallel_layers_per_stage` gives), or None without a pipeline."""
    import torch
    from torch.distributed.pipelining import PipelineStage
    from torchtitan.distributed.pipeline_parallel import build_pipeline_schedule

    p = job_config.parallelism
    if p.pipeline_parallel_degree == 1:
        return None
    pp = p.pipeline_parallel_degree
    looped = p.pipeline_parallel_schedule == "Interleaved1F1B"
    per_rank = 1
    if looped:
        per_rank = layers // (pp * p.pipeline_parallel_layers_per_stage)
    group = dims.get_mesh("pp").get_group()
    stages = [PipelineStage(torch.nn.Identity(), index * pp, pp * per_rank, torch.device("cpu"), group=group)
              for index in range(per_rank)]
    return build_pipeline_schedule(job_config, stages, lambda output, target: output)


def model(job_config):
    """torchtitan's model of the config's `[model]` name and flavor: its registered args (a copy:
    `update_from_config` sets the sequence length on them) updated from the config, and the model
    its train spec's class builds from them on the meta device (no memory)."""
    import copy

    import torch
    from torchtitan.protocols.train_spec import get_train_spec

    spec = get_train_spec(job_config.model.name)
    args = copy.deepcopy(spec.model_args[job_config.model.flavor])
    args.update_from_config(job_config)
    with torch.device("meta"):
        return args, spec.model_cls(args)
