"""The KV cache of a serving replica: bytes per token at its precision, how GPUs split it,
pages (vLLM's block size: a sequence holds whole blocks) and a shared prompt prefix.

- GQA/MHA caches K and V per KV head; tensor parallelism splits the KV heads and copies
  them once tp exceeds their number.
- MLA (DeepSeek-V2/V3) caches one latent of kv_rank + rope_dim per token and layer, the
  same for every head, so each tensor-parallel rank holds all of it (the reason MLA models
  are served with data-parallel attention: here, several `ep` attention groups).
- Sliding-window layers (Mistral 7B, Gemma 2/3, GPT-OSS) keep only the last `window` keys:
  a sequence of L tokens holds L tokens in each global layer and min(L, window) in each
  windowed one (pages past the window are freed, as vLLM's hybrid allocator and SGLang's
  SWA pool do). Sizes are counted in *layer-mean tokens*: bytes = per_token x effective(L),
  where effective(L) averages the tokens held over the layers.
"""

from __future__ import annotations

import math


from ...compiler import formats
from ..shape import ModelShape
from ...dsl.records import frozen

# Bytes per cached value: the format's width with its block scales (compiler/formats.py):
# fp8/int8 one byte; fp4 (NVFP4) half a byte plus one fp8 scale per 16 values; MXFP4 one
# E8M0 scale per 32; bf16/fp16 two.
def value_bytes(precision: str) -> float:
    return formats.value_bytes(precision)


@frozen
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

    def effective(self, length: float) -> float:
        """Layer-mean tokens a sequence of `length` tokens holds: every global layer holds all
        of them, a windowed layer at most `window` (model/shape.py `local_layers`)."""
        s = self.shape
        if not s.window or length <= s.window:
            return length
        return ((s.layers - s.local_layers) * length + s.local_layers * s.window) / s.layers

    def least_total(self, tokens: float) -> float:
        """Layer-mean tokens that sequences holding `tokens` in all read at least, whatever their
        lengths: the global layers' share of them (a windowed layer may hold few; effective() is
        at least global share x length for every length, the steepest line under it)."""
        s = self.shape
        if not s.window:
            return tokens
        return tokens * (s.layers - s.local_layers) / s.layers

    def effective_total(self, tokens: float, sequences: float) -> float:
        """Layer-mean tokens `sequences` sequences of `tokens` tokens in all hold. Only the total
        is known, so each is taken at the mean length: since effective() is concave this is an
        upper bound (Jensen), exact when the lengths are equal or within the window."""
        if not self.shape.window or sequences <= 0:
            return tokens
        return sequences * self.effective(tokens / sequences)

    def pairs(self, done: float, new: float) -> float:
        """Layer-mean (query, key) pairs of `new` prompt tokens after `done` cached ones: the
        integral of the keys each position sees, p in a global layer, min(p, window) in a
        windowed one (for a whole prompt of n in a global layer: n^2 / 2)."""
        full = new * (done + new / 2)
        w = self.shape.window
        if not w or done + new <= w:
            return full
        a, b = done, done + new
        windowed = w * new if a >= w else (w * w - a * a) / 2 + w * (b - w)
        s = self.shape
        return ((s.layers - s.local_layers) * full + s.local_layers * windowed) / s.layers

    def tokens_held(self, prompt: float, output: float) -> float:
        """Layer-mean cached tokens a sequence holds at its end, in whole pages, less its
        shared prefix (which the prefix cache holds once for all sequences).

        On average a sequence wastes half a page beyond its last token (fragmentation)."""
        own = self.effective(prompt + output) - self.effective(prompt * self.prefix_share)
        return own + self.block / 2

    def pages(self, tokens: int) -> int:
        return -(-tokens // self.block)
