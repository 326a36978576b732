"""What a pipeline engine's sends between stages cost one micro-batch, by the stack that runs
them (model/config.py STACKS `pipe_p2p`).

- "batched" (Megatron-LM, Megatron-Core, NeMo; the other stacks' engines alike): each stage's
  activation goes out scattered over the TP ranks (SC21 Sec 4.1, scatter/gather), and the
  send forward and the receive backward go out as one batched exchange
  (`send_forward_recv_backward`), so a micro-batch pays two exchanges.
- "partitioned" (DeepSpeed's PipelineEngine from v0.5.4, PR #1407 of 2021-09-29, as
  Megatron-DeepSpeed runs it): the activation and its gradient are both partitioned over the
  TP ranks (`is_pipe_partitioned`, `is_grad_partitioned`) and gathered again on arrival
  (`PartitionedTensor.full()`: the input before the forward, the stage's output and the
  received gradient before the backward: three TP all-gathers of the whole activation); the
  transfers are blocking calls one after another (TrainSchedule: RecvGrad then
  SendActivation in a backward step, SendGrad then RecvActivation in a forward step), so the
  four transfers of a micro-batch add up instead of pairing. Megatron-DeepSpeed's
  `GPT2ModelPipe` also ships its attention mask (1 x 1 x s x s, cast to half: "NCCL does not
  like to send torch.BoolTensor") with every activation, whole on each TP rank.
- "whole_grads" (DeepSpeed's PipelineEngine before v0.5.4, 2020-09 to 2021-09): the same, but
  the gradient goes back whole from every TP rank (`is_grad_partitioned = False`), tp times
  the bytes, and only two TP all-gathers (input, output restore); its sends were
  `dist.broadcast` calls in two-rank groups, blocking (`async_op = False`).

Source: deepspeedai/DeepSpeed `deepspeed/runtime/pipe/engine.py`, `p2p.py` and `schedule.py`
as of 2021-08 (commit 1ff25748b) and 2021-10 (1fc74cb9c, after PR #1407 "Big science related
changes: pipeline parallelism support for NCCL send/recv"). That the sequential transfers
add up on the critical path where the batched exchange pays one per direction was checked by
simulating both engines' per-stage programs with rendezvous sends (tests/model/train/
test_pipeline_engine.py): 2 x (activation + gradient) per micro-batch against Megatron's 2 x
one exchange.
"""

from __future__ import annotations

from ...compiler.ir import Tier
from .. import collectives, comms
from ..config import TrainConfig
from ..memo import remember
from ..shape import ModelShape
from .layer_cost import activation_message

MASK_BYTES = 2   # the attention mask sent as half (engine.py `_exec_send_activations`)
ENGINES = ("batched", "partitioned", "whole_grads")


def micro_batch_sends(shape: ModelShape, cfg: TrainConfig, tiers: tuple[Tier, ...]) -> float:
    """Seconds one micro-batch's pipeline transfers add to a stage, forward and backward, all
    its model chunks (0 without a pipeline)."""
    if cfg.pp == 1:
        return 0.0
    # read for every estimate: memoized by the fields it reads (`activation_message`'s, where
    # the stages and TP groups sit, the model chunks and the engine), not the configuration
    engine = cfg.behaviour("pipe_p2p")
    key = (shape, cfg.microbatch, cfg.seq, cfg.cp, cfg.tp, cfg.sp, cfg.pp, cfg.stride("pp"), cfg.virtual_stages,
           engine, cfg.stride("tp") if engine != "batched" and cfg.tp > 1 else 0, tiers)
    seconds = _SENDS.get(key)
    if seconds is None:
        seconds = remember(_SENDS, key, _sends(shape, cfg, tiers, engine))
    return seconds


def _sends(shape: ModelShape, cfg: TrainConfig, tiers: tuple[Tier, ...], engine: str) -> float:
    whole = activation_message(shape, cfg) * (cfg.tp if cfg.sp else 1)   # the stage's output, all TP ranks' worth
    share = whole / cfg.tp
    send = lambda nbytes: collectives.pipeline_send(nbytes, cfg.pp, cfg.stride("pp"), tiers)  # noqa: E731
    if engine == "batched":
        return 2 * cfg.virtual_stages * send(share)
    mask = MASK_BYTES * cfg.seq * cfg.seq
    grad = share if engine == "partitioned" else whole
    gathers = 3 if engine == "partitioned" else 2
    gather = collectives.all_gather(whole, comms.place(cfg.tp, cfg.stride("tp"), tiers)) if cfg.tp > 1 else 0.0
    return cfg.virtual_stages * (2 * (send(share + mask) + send(grad)) + gathers * gather)


_SENDS: dict[tuple, float] = {}


def clear_caches() -> None:
    _SENDS.clear()
