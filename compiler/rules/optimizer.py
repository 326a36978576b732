"""Checks of a train job's optimizer precisions against the software that would hold them: each
combination a stack cannot run is refused with its fix, not modelled (model/train/optimizer.py).

What each stack can store, as read:
- Megatron-LM / Megatron-Core / NeMo 2: `--use-precision-aware-optimizer` (Transformer Engine's
  FusedAdam) with --exp-avg-dtype / --exp-avg-sq-dtype fp32, fp16, bf16 or fp8 and
  --main-params-dtype fp32 or fp16 (megatron/training/arguments.py, core_v0.16.1); without the flag
  OptimizerConfig.__post_init__ asserts every dtype fp32, and with it asserts the distributed
  optimizer (megatron/core/optimizer/optimizer_config.py). NeMo 1.0's Apex DistributedFusedAdam
  stores bf16 or fp16 state (its `dtype`) and may drop the master (`store_params`): no fp8. It is
  NeMo 1.0's only narrower optimizer, and a distributed one: MegatronBaseModel.setup_optimization
  reads `optim.dtype` only `if self.with_distributed_adam` (nemo/collections/nlp/models/
  language_modeling/megatron_base_model.py, NeMo v2.0.0); otherwise ModelPT.setup_optimization hands
  the key to Apex's FusedAdam, whose __init__ takes no `dtype` (a TypeError) and which keeps fp32
  moments (apex/optimizers/fused_adam.py: `torch.zeros_like(p.data).float()`), beside the fp32 master
  and main gradients of NeMo's MainParamsOptimizerWrapper. So NeMo narrows nothing at ZeRO 0.
- DeepSpeed: `bf16_optimizer_states` and `bf16_master_weights_and_grads` (bf16 only;
  DeepSpeedExamples training/bf16_master_weight; deepspeedai/DeepSpeed pull 8010): no fp8 moments.
- PyTorch FSDP / torchtitan: AdamW keeps its state in the sharded parameters' dtype (fp32, or bf16
  where the model is stored in bf16: NeMo AutoModel's mixed-precision guide): no fp8 moments.
- MaxText: optax.adamw, whose `mu_dtype` sets the first moment only (the second keeps the parameters'
  dtype; `second_moment` states it apart): no fp8 moments.
Only Transformer Engine's FusedAdam stores fp8 moments, and Megatron-Core is what drives it.
"""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic, Label
from ..design import Entity
from ..schema import DEFAULT_STACK as DEFAULT, MEGATRON_STACKS

MEGATRON_CORE = ("megatron", "megatron_core")   # where a narrower dtype is the precision-aware optimizer (NeMo 1.0: Apex's)
_FIELDS = ("optimizer_state", "second_moment", "master_weights", "main_grads")


def _name(value: object, default: str) -> str:
    return str(getattr(value, "name", value)) if value is not None else default


def optimizer_problems(job: Entity) -> Iterator[Diagnostic]:
    aware = job.get("precision_aware_optimizer")
    stack = _name(job.get("software"), DEFAULT)
    narrow = {k: _name(job.get(k), "fp32") for k in _FIELDS if _name(job.get(k), "fp32") != "fp32"}
    yield from _stack(job, aware, stack, narrow)
    if aware is False:
        yield from _stated_off(job, stack, narrow)
    elif aware or (narrow and stack in MEGATRON_CORE):
        yield from _needs(job, narrow)
    if stack == "nemo" and not aware and narrow and not (aware is False and "fp8" in narrow.values()):
        yield from _nemo_unsharded(job, narrow)   # (fp8 stated off is refused above)


def _stack(job: Entity, aware: object, stack: str, narrow: dict[str, str]) -> Iterator[Diagnostic]:
    """The flag and fp8 moments are Transformer Engine's FusedAdam's, which only Megatron stacks drive."""
    if stack in MEGATRON_STACKS:
        return
    label = [Label(job.span_of("software"), f"software = {stack}")] if job.get("software") is not None else []
    if aware:
        yield codes.PIN_MEANINGLESS.make(
            job.span_of("precision_aware_optimizer"), pin="precision_aware_optimizer = true",
            why=f"it is Megatron-Core's optimizer (Transformer Engine's FusedAdam), and `{stack}` does not run it",
            labels=label, notes=["help: state the narrower state your stack keeps (`optimizer_state = bf16`) "
                                 "without it, or run it on megatron_core or nemo"])
    for field in (f for f in ("optimizer_state", "second_moment") if narrow.get(f) == "fp8"):
        yield codes.PIN_MEANINGLESS.make(
            job.span_of(field), pin=f"{field} = fp8",
            why=f"only Transformer Engine's FusedAdam (Megatron's --exp-avg-dtype fp8) stores fp8 moments, and "
                f"`{stack}` keeps them in bf16 at the narrowest", labels=label,
            notes=["help: state `optimizer_state = bf16`, or run the job on megatron_core or nemo"])


def _stated_off(job: Entity, stack: str, narrow: dict[str, str]) -> Iterator[Diagnostic]:
    """`false` beside a narrower dtype: Megatron asserts fp32 dtypes without the flag; fp8 moments need it anywhere."""
    held = {k: v for k, v in narrow.items() if stack in ("megatron", "megatron_core") or v == "fp8"}
    for field, value in held.items():
        yield codes.PIN_MEANINGLESS.make(
            job.span_of(field), pin=f"{field} = {value}",
            why="Megatron-Core stores and reads optimizer state narrower than fp32 only with its precision-aware "
                "optimizer (OptimizerConfig asserts fp32 without it), and this job states it off",
            labels=[Label(job.span_of("precision_aware_optimizer"), "precision_aware_optimizer = false")],
            notes=[f"help: remove `precision_aware_optimizer = false`, or `{field}`"])


def _needs(job: Entity, narrow: dict[str, str]) -> Iterator[Diagnostic]:
    """The flag needs the distributed optimizer (or FSDP) and a master Megatron can hold."""
    stated = job.get("precision_aware_optimizer") is not None
    field = "precision_aware_optimizer" if stated else next(iter(narrow))
    here = job.span_of(field)
    pin = "precision_aware_optimizer = true" if stated else f"{field} = {narrow[field]}"
    pins = job.get("parallelism")
    if pins is not None and pins.get("zero") == 0:
        yield codes.PIN_MEANINGLESS.make(
            here, pin=pin,
            why=("Megatron-Core runs its precision-aware optimizer" + ("" if stated else ", which a narrower state "
                 "needs,") + " only with the distributed optimizer or FSDP, and this job pins ZeRO 0"),
            labels=[Label(job.span_of("parallelism.zero"), "zero = 0")],
            notes=["help: pin `zero = 1` (the distributed optimizer), or remove one of them"])
    master = narrow.get("master_weights")
    if master not in (None, "fp16"):
        yield codes.PIN_MEANINGLESS.make(
            job.span_of("master_weights"), pin=f"master_weights = {master}",
            why="Megatron's precision-aware optimizer keeps master weights in fp32 or fp16 (--main-params-dtype)",
            labels=[Label(here, pin)] if field != "master_weights" else [],
            notes=["help: state `master_weights = fp16` (or fp32), or remove `precision_aware_optimizer`"])


def _nemo_unsharded(job: Entity, narrow: dict[str, str]) -> Iterator[Diagnostic]:
    """NeMo narrows the optimizer only in a distributed optimizer (Apex's DistributedFusedAdam in NeMo 1.0,
    Megatron-Core's precision-aware one in NeMo 2): a pinned ZeRO 0 leaves it mixed-precision Adam's fp32."""
    pins = job.get("parallelism")
    if pins is None or pins.get("zero") != 0:
        return
    field = next(iter(narrow))
    yield codes.PIN_MEANINGLESS.make(
        job.span_of(field), pin=f"{field} = {narrow[field]}",
        why="NeMo keeps optimizer state, master weights or main gradients narrower than fp32 only in a distributed "
            "optimizer (NeMo 1.0 reads `optim.dtype` only for Apex's distributed_fused_adam; NeMo 2 runs "
            "Megatron-Core's precision-aware optimizer, which asserts the distributed optimizer), and this job "
            "pins ZeRO 0",
        labels=[Label(job.span_of("parallelism.zero"), "zero = 0")],
        notes=["help: pin `zero = 1` (the distributed optimizer), or state fp32 for "
               + ", ".join(f"`{k}`" for k in narrow)])
