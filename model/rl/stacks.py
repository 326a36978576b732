"""RL stacks by release (`rl run { stack = nemo_rl_0_4 }`), as model/serve/engines.py names serving
engines: each value names what a range of releases of the stack does between the phases of a step
(what model/rl/host.py copies), with its source. The language's choices (compiler/schema.py
RL_STACKS) are this table's names.

Sources:
  [1404] NVIDIA-NeMo/RL pull 1404 "Make the optimizer offloading optional" (commit d4d0ba10f, merged
         2025-11-06; in v0.5.0, not in v0.4.0, tagged 2025-11-19 from its release branch): before it,
         `prepare_for_lp_inference` called `offload_before_refit` in every placement, so a training pool
         apart from its engines also moved Adam's state to host memory (`v.to("cpu")`, each tensor) before
         scoring and back (`v.to("cuda")`) in `prepare_for_training`; after it only colocated pools do
         (`offload_optimizer_for_logprob: false` by default, grpo_math_1B.yaml).
  [pao]  examples/configs/grpo_math_1B.yaml, v0.4.0 to v0.7.0: `use_precision_aware_optimizer: true` with
         fp32 moments and master, which Megatron-Core runs as Transformer Engine's FusedAdam keeping the
         fp32 master as the 16 bits the bf16 weight lacks (OptimizerConfig.store_param_remainders, default
         True since Megatron-LM commit ed46806838, 2025-04-24, with TE >= 2.1; NeMo-RL sets no other value):
         10 bytes a parameter of optimizer state, not mixed-precision Adam's 12.
  [1352] nemo_rl/models/generation/vllm/vllm_generation.py, v0.4.0 to v0.7.0 (v0.7.0 line 217):
         `if needs_cross_node_parallelism: env_vars["NCCL_NVLS_ENABLE"] = "0"` ("See
         https://github.com/NVIDIA-NeMo/RL/issues/1352"), set in every vLLM worker whenever tp x pp
         exceeds the GPUs of a node, colocated or not: a TP group across hosts whose all-reduce runs
         through NCCL (vLLM's custom all-reduce refuses it, and symmetric memory [symm] too where it
         does not reach or take the group) reduces without NVLS.
  [collnet] NCCL's environment variables (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html,
         NCCL_COLLNET_ENABLE: "Enable the use of the CollNet plugin", default 0): SHARP runs only where
         it is set and a CollNet plugin is installed; no NeMo-RL recipe or its vLLM sets it.
  [symm] NeMo-RL pins vLLM 0.10.0 (v0.4.0), 0.11.2 (v0.5.0), 0.17.1 (v0.6.0) and 0.20.0 (v0.7.0) (pyproject.toml
         at each tag). From 0.11 vLLM's CudaCommunicator.all_reduce tries, for a TP group, custom all-reduce
         (refused across hosts), then PyTorch's symmetric memory (SymmMemCommunicator, on by default:
         VLLM_ALLREDUCE_USE_SYMM_MEM=1, vllm pull 24111; groups of 2, 4, 6 or 8 GPUs; multimem for 6 and 8 on SM 10.0, 4-8 on 9.0),
         and NCCL only when both refuse (vllm/distributed/device_communicators/cuda_communicator.py,
         v0.11.2-v0.20.0); 0.10.0 has no symmetric-memory path. PyTorch's symmetric memory exchanges fabric
         handles where the GPUs support them (pytorch pull 159319, "needed to enable symmetric memory on
         NVLS72 systems"; in torch 2.9.0-2.11.0, which NeMo-RL v0.5-v0.7 lock), so a TP 8 engine across two
         GB200 trays reduces with the multimem kernel (ASSUMPTION: fabric handles and multicast work there,
         as NCCL's own NVLink path across trays needs the same handles), not
         NCCL; NCCL_NVLS_ENABLE=0 [1352] does not reach it. At 0.17.1-0.20.0 vLLM's compile pass may fuse
         the call with the next RMSNorm into FlashInfer's all-reduce (0.20.0: its MNNVL backend across
         hosts, vllm/config/vllm.py `enable_allreduce_rms_fusion`); no measurement of it across trays was
         found, so ASSUMPTION: it takes the multimem kernel's time. Inside one host the same releases hand
         symmetric memory the calls at or above custom all-reduce's size limit, which is lowered once
         symmetric memory is up (all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES: 256 KiB at TP 8 on H100,
         512 KiB at TP 6; 2 MiB at TP 2-4 and 1 MiB at TP 6-8 on SM 10.0: model/serve/allreduce.py
         [vllmsymm]), so a TP 8 engine's decode all-reduce of 256 KiB or more runs the multimem kernel there
         too; 0.10.0's custom all-reduce takes every call under 8 MiB. Not priced: at 0.17.1-0.20.0 the
         compile pass above takes an H100 TP 8 call of up to 0.5 MiB into FlashInfer's fused kernel
         (FlashInfer pinned in NeMo-RL's vllm extra from v0.6.0; no H100 TP 8 measurement found).
  [ray]  nemo_rl/models/generation/vllm/vllm_worker.py v0.7.0 line 293: an engine of more than one GPU runs
         vLLM's workers under Ray (`distributed_executor_backend = "ray"`), which hands every iteration's
         scheduler output to the workers through Ray; line 512: every sample returns its tokens'
         log-probabilities (`logprobs=0`), host work per sequence per iteration vLLM's own serving skips.

Calibration (`Calibration`): the phases' physics (model/rl/phases.py, host.py, the serving simulator)
runs faster than NeMo-RL does on every release and system of benchmarks/data/rl_runs.csv (signed median
-23 % to -36 %, benchmarks/rl_accuracy.py), and no mechanism found in its code accounts for the gap:
sequence packing pads a pipeline's micro-batches to the longest bin (nemo_rl/models/megatron/data.py
`_get_pack_sequence_parameters_for_megatron`), but first-fit-decreasing bins of the rows' lengths pad
only 2-10 % (tried 2026-12-07, not shipped). So NeMo-RL's stacks carry four constants, one per physical
phase, fitted (bounded least squares on log step times) to the 75 published step times of rl_runs.csv, as an
operator calibrates gclc on their own runs: ESTIMATE, in sample. The benchmark prints the figures with
the four refitted without the held-out rows (by model, by system, by release): those are the ones to
quote, not the in-sample fit. The sync factor is a calibration, not the sync's physics: it also scales
the split refit, whose price is NeMo-RL's own measurement (model/rl/phases.py REFIT_PER_TENSOR_S), where
it absorbs a generation deficit of those rows (DeepSeek-V3); scaling only the colocated refit predicted
held-out rows worse and wanted 5.9 ms of host time an engine iteration (benchmarks/rl_accuracy.py).
A stack whose runs differ refits the four (`benchmarks/rl_accuracy.py --fit` on its own rows).
"""

from __future__ import annotations

from ...dsl.records import frozen


@frozen
class Calibration:
    """What a stack costs beyond the phases' physics, one number per phase (module docstring)."""

    engine_host_s: float = 0.0      # host seconds each engine iteration adds (generation)
    training: float = 1.0           # the training stack's forward and backward passes (scoring, training)
    sync: float = 1.0               # moving the weights from the training layout to the engines
    host_copies: float = 1.0        # the training pool's copies to and from host memory (model/rl/host.py)


# ESTIMATE: fitted on all 75 rows of benchmarks/data/rl_runs.csv (NeMo-RL v0.3-v0.7, H100 and GB200),
# `.venv/bin/python benchmarks/rl_accuracy.py --fit` (2026-12-07: bounded least squares from several starts, which
# reaches the loss's minimum within its bounds, 2.303 over the 75 rows, no lower from a dense multi-start search;
# Nelder-Mead from unit factors had stopped short of it at 0.161 ms, x1.65, x2.27, x1.82, 2.466 on the same tree).
# The engine's host time, as Ray's dispatch and the log-probabilities' return [ray] would spend it, is weakly
# identified (the loss falls by a tenth from 0 to its unbounded minimum at 3.5 ms) and sits at its bound, 1.5 ms an
# iteration (benchmarks/rl_accuracy.py HOST_MS: the most host time a vLLM V1 step on one H100 leaves, vllm issue
# 48229; Ray's dispatch alone measured 0.27 ms an iteration, vllm pull 11107); the others are factors on the
# phases' physics. Earlier fits (Nelder-Mead): 0.250 ms, x1.65, x2.27, x1.82 before an H100 engine's TP 8 calls of
# 256 KiB or more moved to vLLM's symmetric-memory kernel [symm]; 0.322 ms, x1.64, x2.23, x1.79 before the same
# kernel took the GB200 trays' calls from NCCL; 0.309 ms, x1.64, x2.24, x1.81 before NCCL's NVLink 5 LL step. Held
# out by model, system and release, refitted without the rows predicted: the benchmark's headline. Refitted on the
# merged tree of the same day (vLLM's symmetric-memory limits by compute capability and size, NCCL's pick by its own
# table and its per-channel caps): x2.19 -> x2.20 sync, x1.72 -> x1.71 host copies. Refitted on session 19's merged
# tree (vLLM V1's all-gather expert backend, nothing exchanged for TP-sharded experts, the custom all-reduce past its
# tables, ep_overlap's unpaired passes): x1.62 -> x1.64 training, x2.20 -> x2.23 sync, x1.71 -> x1.78 host copies.
NEMO_RL = Calibration(engine_host_s=1.5e-3, training=1.64, sync=2.23, host_copies=1.78)


@frozen
class RLStack:
    name: str
    releases: str
    optimizer_out_apart: bool       # a training pool apart from its engines still moves Adam's state out and back
    remainder_master: bool          # Megatron's precision-aware optimizer: the fp32 master kept as 16-bit remainders
    source: str
    engine_nvls: bool = False       # its vLLM engines' NCCL may reduce in the NVLink switches across hosts ([1352])
    engine_collnet: bool = False    # ... or in the scale-out switches ([collnet]: NCCL's default, no plugin)
    engine_fallback_all_reduce: str = ""   # the kernel its vLLM hands the TP calls custom all-reduce refuses ([symm])
    calibration: Calibration = Calibration()   # beyond the phases' physics (module docstring)


STACKS = {s.name: s for s in (
    RLStack("nemo_rl", "NeMo-RL v0.5.0 and later (pull 1404 in)", False, True,
            "[1404] [pao] [1352] [collnet] [symm] [ray]", engine_fallback_all_reduce="symm_mem", calibration=NEMO_RL),
    RLStack("nemo_rl_0_4", "NeMo-RL v0.4.0 and earlier (before pull 1404)", True, True,
            "[1404] [pao] [1352] [collnet] [symm] [ray]", calibration=NEMO_RL),
)}
DEFAULT = "nemo_rl"


def stack(name: str | None) -> RLStack:
    return STACKS[name or DEFAULT]


def _names_agree() -> None:
    from ...compiler.schema import RL_STACKS
    assert tuple(STACKS) == RL_STACKS, "the language and the model name the same RL stacks"


_names_agree()
