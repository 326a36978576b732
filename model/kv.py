"""The KV cache of a serving replica: bytes per token at its precision, how GPUs split it,
pages (vLLM's block size: a sequence holds whole blocks) and a shared prompt prefix.

- GQA/MHA caches K and V per KV head; tensor parallelism splits the KV heads and copies
  them once tp exceeds their number.
- MLA (DeepSeek-V2/V3) caches one latent of kv_rank + rope_dim per token and layer, the
  same for every head, so each tensor-parallel rank holds all of it (the reason MLA models
  are served with data-parallel attention: here, several `ep` attention groups).
"""

from __future__ import annotations

import math

import attrs

from ..compiler import formats
from .shape import ModelShape

# Bytes per cached value: the format's width with its block scales (compiler/formats.py):
# fp8/int8 one byte; fp4 (NVFP4) half a byte plus one fp8 scale per 16 values; MXFP4 one
# E8M0 scale per 32; bf16/fp16 two.
def value_bytes(precision: str) -> float:
    return formats.value_bytes(precision)


@attrs.frozen
class KVLayout:
    shape: ModelShape
    precision: str
    tp: int
    pp: int
    block: int = 16             # tokens per page
    prefix_share: float = 0.0   # share of each prompt found in the shared-prefix cache

    def per_layer(self) -> float:
        """Bytes of one token in one layer, whole (all heads)."""
        if self.shape.is_mla:
            return (self.shape.kv_rank + self.shape.rope_dim) * value_bytes(self.precision)
        return 2 * self.shape.kv_heads * self.shape.head_dim * value_bytes(self.precision)

    def per_token(self) -> float:
        """Bytes of one token over all layers, whole: what a prefill-to-decode transfer moves."""
        return self.shape.layers * self.per_layer()

    def per_token_per_gpu(self) -> float:
        """Bytes one GPU of an attention group holds per cached token (its layers, its heads)."""
        split = 1 if self.shape.is_mla else min(self.tp, self.shape.kv_heads)
        return math.ceil(self.shape.layers / self.pp) * self.per_layer() / split

    def tokens_held(self, prompt: float, output: float) -> float:
        """Cached tokens a sequence holds at its end, in whole pages, less its shared prefix.

        On average a sequence wastes half a page beyond its last token (fragmentation)."""
        return prompt * (1 - self.prefix_share) + output + self.block / 2

    def pages(self, tokens: int) -> int:
        return -(-tokens // self.block)
