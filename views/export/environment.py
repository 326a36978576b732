"""The environment a planned run needs, written the same by every launcher: the Megatron-LM
args file, the sbatch script and the JobSet's containers.

- `CUDA_DEVICE_MAX_CONNECTIONS=1`: Megatron-LM's validate_args (megatron/training/arguments.py,
  core_v0.16.1) asserts it whenever tensor or context parallelism runs on a GPU before
  Blackwell (compute capability < 10), unless Megatron-FSDP or the MoE dispatch overlap is
  on: one hardware work queue keeps a TP collective ahead of the GEMM it overlaps. Megatron-FSDP
  asserts the opposite (it must not be 1), so an FSDP plan leaves it unset.
- `NCCL_NVLS_ENABLE=1`, `NCCL_COLLNET_ENABLE=1`: the plan reduces in the switches of every tier
  that says `in_network_reduction` (model/comms.py `all_reduce`), NVLink SHARP (NVLS) on
  NVLink tiers and SHARP through NCCL's CollNet on InfiniBand ones; CollNet is off unless
  asked for (NCCL's environment variables: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html).
"""

from __future__ import annotations


from .target import JobPlan
from ...compiler.formats import generation
from ...compiler.ir import Accelerator
from ...compiler.schema import MEGATRON_STACKS
from ...dsl.records import frozen

# CUDA compute capability majors by NVIDIA generation (compiler/formats.py generation, read off the chip's
# peaks, not its name; https://developer.nvidia.com/cuda-gpus: A100 8.0, L40S 8.9, H100 9.0, B200 10.0, B300 10.3).
ARCH = {"ampere": 8, "ada": 8, "hopper": 9, "blackwell": 10}
# Any other chip: what Hopper needs. ROCm reports the gfx major where Megatron asks torch.cuda, 9 on every AMD
# part in std (gfx942 MI300X / MI325X, gfx950 MI355X).
PRE_BLACKWELL = 9


@frozen
class Variable:
    name: str
    value: str
    why: str


def arch(chip: Accelerator | None) -> int:
    """The compute capability major Megatron-LM reads on `chip` (PRE_BLACKWELL when unknown)."""
    return ARCH.get(generation(chip), PRE_BLACKWELL) if chip is not None else PRE_BLACKWELL


def needs_one_connection(job: JobPlan) -> bool:
    """Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 for this plan (see the module)."""
    if job.serve or job.stack not in MEGATRON_STACKS:
        return False
    c = job.config
    ep_overlap = c.overlaps_ep and c.ep > 1     # --overlap-moe-expert-parallel-comm (megatron.py)
    return ((c.tp > 1 or c.cp > 1) and c.zero != 3 and not ep_overlap
            and min(arch(s.accelerator) for s in job.shares) < 10)


def environment(job: JobPlan) -> tuple[Variable, ...]:
    """What a training run needs set (a serve plan's engine sets its own)."""
    if job.serve:
        return ()
    out = []
    if needs_one_connection(job):
        out.append(Variable("CUDA_DEVICE_MAX_CONNECTIONS", "1",
                            "Megatron-LM asserts it for tensor/context parallelism before Blackwell"))
    kinds = {tier.kind for share in job.shares for tier in _spanned(share) if tier.in_network_reduction}
    if "nvlink" in kinds:
        out.append(Variable("NCCL_NVLS_ENABLE", "1", "the plan reduces in the NVLink switches (NVLS)"))
    if "infiniband" in kinds:
        out.append(Variable("NCCL_COLLNET_ENABLE", "1", "the plan reduces in the InfiniBand switches (SHARP)"))
    return tuple(out)


def _spanned(share):
    """The tiers the share's GPUs reach: up to the first that holds them all."""
    out = []
    for tier in share.tiers:
        if tier.group_gpus > 1:
            out.append(tier)
        if tier.group_gpus >= share.gpus:
            break
    return out


def shell_lines(job: JobPlan) -> list[str]:
    """`export NAME=value  # why` lines."""
    return [f"export {v.name}={v.value}  # {v.why}" for v in environment(job)]
