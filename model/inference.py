"""Serving (`serve` jobs): prefill is compute-bound, decode is memory-bandwidth-bound.

One replica holds the model over `tp` x `ep` GPUs inside the scale-up domain and decodes
`batch` sequences at once (continuous batching). Per replica and step:

- prefill of one prompt: 2 x active params x prompt tokens (+ causal attention) at the
  sustained GEMM rate, plus two TP all-reduces per layer;
- decode of one token for the whole batch: the slower of reading the weights and the
  KV cache from HBM and the batch's matrix work, plus two (latency-bound) all-reduces
  per layer;
- new requests' prefills share the GPUs with decoding: a replica finishes
  R = 1 / (prefill + output x decode / batch) requests per second.
"""

from __future__ import annotations

import attrs

from ..compiler.ir import Partition
from . import comms
from . import cache
from .compute import attention_rate as fused_attention_rate, clock, gemm_efficiency, hbm_rate, peak
from .shape import ModelShape

WEIGHT_BYTES = {"fp4": 0.5, "fp8": 1.0}       # per parameter; 2 otherwise (bf16)
KV_BYTES = {"fp4": 1.0, "fp8": 1.0}           # fp8 KV cache with fp8 recipes; 2 otherwise
BUFFER_BYTES = 4e9                            # runtime, allocator and communication buffers
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 20        # prefill working set per token per hidden unit


@attrs.frozen
class ServeConfig:
    tp: int
    batch: int                  # sequences decoded together per replica
    precision: str = "bf16"
    ep: int = 1


@attrs.frozen
class ServeEstimate:
    config: ServeConfig
    ttft: float                 # seconds to the first token (one prompt's prefill)
    tpot: float                 # seconds per output token while prefills interleave
    requests_per_s: float       # per replica
    tokens_per_s: float         # output tokens per second, per replica
    memory: float               # bytes per GPU
    hbm: float
    busy: float                 # share of time the tensor cores compute

    @property
    def gpus(self) -> int:
        return self.config.tp * self.config.ep

    @property
    def fits(self) -> bool:
        return self.memory <= self.hbm


def kv_bytes_per_token(shape: ModelShape, cfg: ServeConfig) -> float:
    """K and V of one token in every layer, on one GPU (KV heads split by TP, never below one)."""
    heads = max(1.0, shape.kv_heads / cfg.tp)
    return shape.layers * 2 * heads * shape.head_dim * KV_BYTES.get(cfg.precision, 2.0)


def weights_per_gpu(shape: ModelShape, cfg: ServeConfig) -> float:
    experts = shape.routed * shape.expert_params * shape.moe_layers
    dense = shape.params - experts
    return (dense / cfg.tp + experts / (cfg.tp * cfg.ep)) * WEIGHT_BYTES.get(cfg.precision, 2.0)


def estimate_serve(shape: ModelShape, cfg: ServeConfig, partition: Partition, prompt: int, output: int) -> ServeEstimate:
    chip, tiers = partition.node.accelerator, partition.tiers
    rate = peak(chip, cfg.precision) * gemm_efficiency(chip, cfg.precision) * clock(chip, cfg.precision)
    attention_rate = fused_attention_rate(chip)
    stages = comms.place(cfg.tp, 1, tiers)
    active = shape.active_params / (cfg.tp * cfg.ep)  # each GPU's share of one token's work
    context = prompt + output / 2
    prefill = (2 * active * prompt / rate
               + shape.layers * 2 * prompt * prompt * shape.heads * shape.head_dim / cfg.tp / attention_rate
               + 2 * shape.layers * comms.all_reduce(2 * prompt * shape.hidden, stages))
    weights = weights_per_gpu(shape, cfg)
    kv_read = cfg.batch * context * kv_bytes_per_token(shape, cfg)
    compute = (2 * active * cfg.batch / rate
               + cfg.batch * shape.layers * 4 * context * shape.heads * shape.head_dim / cfg.tp / attention_rate)
    streamed = cache.decode_bytes(weights, kv_read, chip) / hbm_rate(chip)
    decode = max(streamed, cache.l2_time(weights + kv_read, chip), compute) + 2 * shape.layers * comms.all_reduce(
        2 * cfg.batch * shape.hidden, stages)
    requests = 1 / (prefill + output * decode / cfg.batch)
    tpot = decode / max(1e-9, 1 - requests * prefill)
    memory = (weights + cfg.batch * (prompt + output) * kv_bytes_per_token(shape, cfg)
              + prompt * shape.hidden * ACTIVATION_BYTES_PER_TOKEN_HIDDEN / cfg.tp + BUFFER_BYTES)
    busy = min(1.0, requests * (prefill + output * compute / cfg.batch))
    return ServeEstimate(cfg, prefill, tpot, requests, requests * output, memory, chip.hbm_capacity, busy)
