"""Adam's state by precision: the bytes per parameter the optimizer keeps (memory, checkpoint)
and the bytes its step reads and writes (the optimizer term of the step).

Mixed-precision Adam keeps fp32 master weights and two fp32 moments, 12 bytes per parameter
(Rajbhandari et al., ZeRO, SC'20, section 3.1). A train job may state narrower ones:
- `optimizer_state`: the dtype Adam's two moments are stored in (Megatron-LM's
  --exp-avg-dtype and --exp-avg-sq-dtype of its precision-aware optimizer, choices fp32, fp16,
  bf16, fp8: megatron/training/arguments.py; Transformer Engine's FusedAdam computes in fp32
  and stores in that dtype; Apex's DistributedFusedAdam `dtype`, which NeMo 1.0's
  `optim.dtype` sets); `second_moment` states the second apart (--exp-avg-sq-dtype; optax.adamw's
  `mu_dtype` narrows the first only).
- `precision_aware_optimizer`: Megatron's --use-precision-aware-optimizer stated with fp32 dtypes too
  (a narrower dtype implies it): Transformer Engine's FusedAdam then keeps the fp32 master as
  remainders (below), 10 bytes a parameter, as NeMo-RL runs it (model/rl/stacks.py [pao]).
- `master_weights`: the copy of the weights Adam updates (Megatron --main-params-dtype fp32 or
  fp16; Apex `store_params` with its state dtype, bf16 beside fp8 parameters; `none`: no copy,
  Adam updates the weights the GEMMs read, as NeMo 1.0 runs Apex's DistributedFusedAdam when
  its dtype is the model's: `store_params = False`, nemo/collections/nlp/models/language_modeling/
  megatron_base_model.py, NeMo v2.0.0).
- `main_grads`: the gradients Adam reads (Megatron --main-grads-dtype fp32 or bf16, of the
  precision-aware optimizer: megatron/training/arguments.py; OptimizerConfig.main_grads_dtype,
  megatron/core/optimizer/optimizer_config.py). With bf16 ones the gradient buffer is bf16,
  the data-parallel reduction moves it as it is and Adam reads its shard without a cast
  (`grad_bytes`, `step_bytes`).
The master weights are a field of their own because frameworks set them apart from the
moments (Megatron keeps fp32 or fp16 masters whatever the moments' dtype; NeMo 1.0 drops them)
and because they decide the update's numerics: a bf16 master loses updates below 2^-8 of a
weight, a bf16 moment only rounds a running average.
"""

from __future__ import annotations

from ...compiler.schema import MAIN_GRADS, MASTER_WEIGHTS, OPTIMIZER_STATES
from ..config import TrainConfig

# The bytes each format the language accepts stores.
_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "none": 0}
assert set(OPTIMIZER_STATES) | set(MASTER_WEIGHTS) | set(MAIN_GRADS) == set(_BYTES), "every accepted format has a width"
MIXED_PRECISION_BYTES = 12.0   # fp32 master and two fp32 moments: the state without the fields
WEIGHT_BYTES = 2    # the bf16 weights the GEMMs read (their fp8 copy apart: model/train/memory.py)
# Megatron-Core's precision-aware optimizer with bf16 weights keeps an fp32 master as the 16 low
# bits the bf16 weight lacks (OptimizerConfig.store_param_remainders, default True with
# Transformer Engine >= 2.1: megatron/core/optimizer/optimizer_config.py; the distributed
# optimizer allocates it as int16, distrib_optimizer.py). Stacks that run it: Megatron-Core, NeMo.
REMAINDER_STACKS = ("megatron_core", "nemo")


def second_moment(cfg: TrainConfig) -> str:
    """The second moment's format: stated apart (`second_moment`, Megatron's --exp-avg-sq-dtype), else
    `optimizer_state`'s."""
    return cfg.second_moment or cfg.optimizer_state


def narrower(cfg: TrainConfig) -> bool:
    """True when the optimizer stores or reads anything narrower than mixed-precision Adam's fp32."""
    return (cfg.optimizer_state != "fp32" or second_moment(cfg) != "fp32" or cfg.master_weights != "fp32"
            or cfg.main_grads != "fp32")


def moment_bytes(cfg: TrainConfig) -> int:
    """Bytes per parameter of Adam's two moments (8 by default)."""
    return _BYTES[cfg.optimizer_state] + _BYTES[second_moment(cfg)]


def precision_aware(cfg: TrainConfig) -> bool:
    """Megatron's --use-precision-aware-optimizer: stated (`precision_aware_optimizer = true`, fp32
    dtypes too), or implied by a narrower dtype, which needs it (OptimizerConfig.__post_init__ asserts
    fp32 without it; compiler/rules/optimizer.py refuses a narrower dtype stated beside `false` on
    Megatron-LM, and on nemo `false` is NeMo 1.0's Apex DistributedFusedAdam, which narrows without it)."""
    return bool(cfg.precision_aware_optimizer) or (cfg.precision_aware_optimizer is None and narrower(cfg))


def te_holds_master(cfg: TrainConfig) -> bool:
    """Transformer Engine's FusedAdam holds the master (where it may keep remainders) unless an fp8
    recipe other than delayed scaling makes Megatron-Core keep an fp32 one itself:
    OptimizerConfig.use_precision_aware_optimizer_no_fp8_or_ds_fp8 (megatron/core/optimizer/
    optimizer_config.py, core_v0.16.1) is false with main_params_dtype fp32 and fp8_recipe mxfp8,
    tensorwise or blockwise. gclc's recipes: `mxfp8`, and `fp8` on a chip that runs it with MX block
    scaling (`mx_fp8`, compiler/formats.py `block_scaled`, which views/export/megatron.py writes as
    --fp8-recipe mxfp8); `fp8` elsewhere is delayed scaling."""
    return cfg.master_weights != "fp32" or not (cfg.precision == "mxfp8" or cfg.mx_fp8)


def narrowed(cfg: TrainConfig) -> str:
    """`optimizer_state = bf16, main_grads = bf16`: the precisions a job narrows from fp32, as
    written (for messages)."""
    stated = {"optimizer_state": cfg.optimizer_state, "second_moment": second_moment(cfg),
              "master_weights": cfg.master_weights, "main_grads": cfg.main_grads}
    if stated["second_moment"] == cfg.optimizer_state:
        del stated["second_moment"]   # said once, by optimizer_state
    return ", ".join(f"{k} = {v}" for k, v in stated.items() if v != "fp32")


def grad_bytes(cfg: TrainConfig) -> int:
    """Bytes per element of the gradient buffer and of the data-parallel reduction: the stack's
    (model/config.py STACKS `grad_bytes`), or the job's `grad_reduce`, with fp32 main gradients; with
    bf16 ones at most 2.
    Megatron-LM accumulates and reduces in fp32 only while --main-grads-dtype is fp32
    (validate_args sets accumulate_allreduce_grads_in_fp32 then, and asserts fp32 main grads
    with it: megatron/training/arguments.py); otherwise the buffer takes the parameters' dtype
    (group_params_for_buffers, megatron/core/distributed/param_and_grad_buffer.py) and the
    reduce-scatter moves it as it is."""
    stack = int(cfg.behaviour("grad_bytes"))
    return min(stack, _BYTES[cfg.main_grads])


def stores_remainders(cfg: TrainConfig) -> bool:
    """An fp32 master kept as 16-bit remainders of the bf16 weights by the distributed optimizer
    (ZeRO 1-2; fp16 training keeps it whole)."""
    return (precision_aware(cfg) and cfg.master_weights == "fp32" and cfg.stack in REMAINDER_STACKS
            and cfg.zero in (1, 2) and cfg.precision != "fp16" and te_holds_master(cfg))


def master_bytes(cfg: TrainConfig) -> float:
    """Bytes per parameter of the master weights the optimizer keeps."""
    return 2.0 if stores_remainders(cfg) else float(_BYTES[cfg.master_weights])


def state_bytes(cfg: TrainConfig) -> float:
    """Bytes per parameter the optimizer keeps: two moments and the master weights (12 by default)."""
    return moment_bytes(cfg) + master_bytes(cfg)


def step_bytes(cfg: TrainConfig) -> float:
    """HBM bytes per parameter one Adam step moves: it reads the main gradient (fp32: the
    distributed optimizer's cast of its shard; bf16: the buffer's shard itself, as the
    precision-aware optimizer's `decoupled_grad`, megatron/core/optimizer/distrib_optimizer.py
    `_copy_model_grads_to_main_grads`), reads and writes both moments and the master, and writes
    the bf16 weights from the master (30 by default); it reads the bf16 weights too where they
    hold the master's high bits (remainders) or are the master themselves (`none`)."""
    weights = WEIGHT_BYTES * (2 if stores_remainders(cfg) or cfg.master_weights == "none" else 1)
    return _BYTES[cfg.main_grads] + 2 * moment_bytes(cfg) + 2 * master_bytes(cfg) + weights


def checkpoint_bytes(cfg: TrainConfig | None) -> float:
    """Bytes per parameter of a checkpoint: the bf16 weights and the optimizer's state (14 by
    default; gradients are not kept)."""
    return WEIGHT_BYTES + (MIXED_PRECISION_BYTES if cfg is None else state_bytes(cfg))
