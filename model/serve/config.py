"""A serving replica's configuration (`ServeConfig`: its widths, batch limit and number formats)
and what the formats cost: bytes per weight, and the GEMM rate of a checkpoint that keeps a share
of its weights at bf16 (a serve job's `checkpoint { wide_share, dense_wide_share }`)."""

from __future__ import annotations

import attrs

from ...compiler.formats import family
from ..compute import gemm_rate
from .kv import value_bytes
from ...dsl.records import frozen


@frozen
class ServeConfig:
    tp: int
    batch: int                  # sequences decoding at once per replica (the scheduler's limit)
    precision: str = "bf16"     # weights and GEMMs
    ep: int = 1                 # attention groups per stage sharing the experts
    pp: int = 1
    kv_precision: str | None = None
    wide_share: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])
    # share of the weights a mixed-precision checkpoint keeps at bf16 beside `precision` (ModelOpt
    # AutoQuantize's "effective bits": 8.75 over fp8 is (8.75 - 8) / (16 - 8) = 0.094)
    dense_wide_share: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])
    # share of the non-expert weights (attention, dense MLPs, shared experts, embeddings) kept at bf16
    # where a checkpoint quantizes the routed experts and leaves some of the rest wide (NVIDIA's NVFP4
    # DeepSeek-R1 keeps the attention's down/up projections, the embeddings and the router in bf16)

    @property
    def gpus(self) -> int:
        return self.tp * self.ep * self.pp

    @property
    def dense_share(self) -> float:
        """The share of the non-expert weights at bf16: the checkpoint's whole-model share, or more."""
        return max(self.wide_share, self.dense_wide_share)

    @property
    def kv(self) -> str:
        """The cache's precision: as declared; else fp8 with fp8/fp4 weights, bf16 otherwise."""
        return self.kv_precision or ("fp8" if family(self.precision) in ("fp8", "fp6", "fp4") else "bf16")


def weight_bytes(precision: str, wide_share: float = 0.0) -> float:
    """Bytes per weight: fp8/int8 one, fp4 half plus a scale per 16 (NVFP4), bf16 two; with
    `wide_share` of the weights kept at bf16, the mean of the two."""
    return (1 - wide_share) * value_bytes(precision) + wide_share * value_bytes("bf16")


def mixed_gemm_rate(chip, cfg: ServeConfig, m: float, n: int, k: int, wide: float | None = None) -> float:
    """FLOP/s of GEMMs whose weights are `cfg.precision` but for a share `wide` (default
    `cfg.wide_share`) of them at bf16: each part runs at its own precision's rate, so the times
    add (a harmonic mean)."""
    wide = cfg.wide_share if wide is None else wide
    narrow = gemm_rate(chip, cfg.precision, m, n, k)
    if not wide:
        return narrow
    return 1 / ((1 - wide) / narrow + wide / gemm_rate(chip, "bf16", m, n, k))
