"""The routed experts of a serving iteration (model/serve/inference.py): what a mixture-of-experts
layer costs beyond a dense layer of the same active width.

- Distinct experts touched: with B tokens each picking k of E experts, only the experts some
  token picks have their weights read from HBM: training's law of how tokens land on ranks,
  one expert a rank (model/expert_load.py `experts_touched`, group-limited routing included).
- Grouped GEMM: each touched expert multiplies only its rows, padded up to the kernel's row
  tile (CUTLASS grouped GEMM and vLLM's fused_moe pad every expert's rows to a tile), at a
  dense GEMM's rate of the padded rows' shape (`GROUPED_GEMM_EFFICIENCY`).
- Expert parallelism: the GPU holding the most routed rows sets the pace; with G GPUs and a
  mean of m rows each, the expected maximum of the (near-Poisson) loads is m + sqrt(2 m ln G).
- Dispatch and combine: the all-to-all sends each token's top_k copies, or once per EP rank holding
  any of its experts where the dispatcher dedupes (DeepEP's normal kernels: `sent_share`, over the
  scale-out network once per node, model/expert_load.py `node_share`); or every attention group's tokens are all-gathered on
  every GPU and the outputs reduce-scattered (vLLM's default backend; never deduped: more groups move
  more). With the experts TP-sharded in one attention group nothing is exchanged: the TP all-reduce sums them.
- Routing traffic: the permute before the expert GEMMs and the un-permute and weighted sum
  after them move every routed row through HBM: k x hidden activations, written and read on
  each side (four passes, 16-bit).
- Kernels: routing adds its own kernels to every MoE layer, MLA its projections to every layer.
- Kernel paths by era (the engine's `moe_path`, model/serve/engines.py): grouped GEMMs over
  expert-parallel GPUs, TP-sharded experts, or a loop over experts (`expert_gemm_time`);
  `ep_with_dp` is vLLM's: TP-sharded experts in a replica of one attention group, whole experts
  over all its TP x DP GPUs once it has several (`run_path`, `expert_layout`).
"""

from __future__ import annotations

import functools
import math

from ..expert_load import busiest_load, distinct_share, experts_touched
from ..shape import ModelShape

TILE_ROWS = 64                 # ASSUMPTION: row tile of the grouped GEMMs (vLLM fused_moe BLOCK_SIZE_M 16-128
                               # by token count, TRT-LLM's CUTLASS MoE tiles 64-128); the middle of that range
GROUPED_GEMM_EFFICIENCY = 1.0  # a grouped expert GEMM's rate / a dense GEMM's of the shape of one expert's padded
                               # rows: grouped kernels fill the GPU with every expert's tiles at once and run
                               # near the dense rate (github.com/deepseek-ai/DeepGEMM pull 74, H800 fp8, 128 x 128
                               # tiles: grouped contiguous, 4 groups of 8192 x 4096 x 7168, 1,317 TFLOP/s; dense
                               # 4096 x 7168 x 16384, 1,404: the 6 % between them is within the shapes' own
                               # difference). What small groups lose is the tile padding and the row count's
                               # shape factor, modelled apart. (It was 0.7, fitted on the MoE rows: that did
                               # not transfer between models, 49 % median error held out by model.)
# vLLM's Triton fused_moe (and SGLang's, ported from it) picks its row tile BLOCK_SIZE_M by the call's
# token count M: from a tuned file for (E experts, N = the shard's expert width, device) when one ships,
# the entry of the nearest M; else get_default_config: 16 rows when M <= E, else 64 (bf16; fp8 with
# block scales 64 at every M). Sources: vllm-project/vllm @000d1458 vllm/model_executor/layers/
# fused_moe/fused_moe.py fused_experts_impl (M = min(num_tokens, CHUNK_SIZE), config = get_config_func(M)),
# get_default_config, try_get_optimal_moe_config (E, N from w2's shape; the tuned entry
# `min(configs.keys(), key=lambda x: abs(x - M))`); sgl-project/sglang python/sglang/srt/layers/moe/fused_moe_triton/
# fused_moe_triton_config.py @c050f40d get_default_config (the same rule; ASSUMPTION: vLLM's tuned files
# stand in for SGLang's own, not read).
TRITON_SMALL_TILE, TRITON_TILE = 16, 64
# BLOCK_SIZE_M by M of the tuned files read (a shape without one takes the default rule), each
# vllm-project/vllm vllm/model_executor/layers/fused_moe/configs/E=<E>,N=<N>,device_name=<device>.json:
# H100 = NVIDIA_H100_80GB_HBM3 (N=192 @0f17ee06, N=384 @cd20a578), GB200 = NVIDIA_GB200 (@47c4439a).
# ASSUMPTION: the vLLM each run used shipped them (the N=384 and GB200 files carry "triton_version":
# "3.5.1", a late-2025 tuning; which vLLM each NeMo-RL release pinned is not checked here).
_SMALL = ((1, 16), (2, 16), (4, 16), (8, 16), (16, 16), (24, 16), (32, 16), (48, 16), (64, 16), (96, 16),
          (128, 16))
TUNED_TILES = {
    ("h100", 128, 192): _SMALL + ((256, 32), (512, 64), (1024, 64), (1536, 128), (2048, 128), (3072, 128),
                                  (4096, 128)),
    ("h100", 128, 384): _SMALL + ((256, 32), (512, 64), (1024, 64), (1536, 128), (2048, 128), (3072, 128),
                                  (4096, 128)),
    ("gb200", 128, 192): _SMALL + ((256, 16), (512, 32), (1024, 64), (1536, 128), (2048, 128), (3072, 256),
                                   (4096, 256), (8192, 256)),
    ("gb200", 128, 768): _SMALL + ((256, 16), (512, 64), (1024, 64), (1536, 128), (2048, 128), (3072, 256),
                                   (4096, 256), (8192, 256)),
    ("gb200", 256, 128): _SMALL + ((256, 16), (512, 32), (1024, 32), (1536, 64), (2048, 128), (3072, 128),
                                   (4096, 128), (8192, 128)),
}
ROUTING_PASSES = 4             # permute write + read, un-permute write + read of each routed row
ACTIVATION_BYTES = 2           # the routed rows move in bf16
MOE_KERNELS = 5                # ASSUMPTION: router GEMM, top-k softmax, permute, un-permute/combine, row expansion
MLA_KERNELS = 6                # ASSUMPTION: q down/up, kv down, two norms and rope beside GQA's QKV kernel
LOOP_KERNELS = 4               # per expert in vLLM 0.2's loop: the gate-up GEMM, SiLU-and-multiply, the down
                               # GEMM, the routing weight's multiply-add (vllm-project/vllm issue 2459 quotes it)


EP_WITH_DP = "ep_with_dp"


def run_path(path: str, ep: int) -> str:
    """The kernel path a replica of `ep` attention groups runs. `ep_with_dp` is vLLM's layout as
    its export launches it (views/export/vllm.py): one attention group shards every expert over
    its TP GPUs (vLLM without --enable-expert-parallel); several spread whole experts over all
    TP x DP GPUs (--enable-expert-parallel; vLLM 0.33.0 vllm/model_executor/layers/fused_moe/
    config.py FusedMoEParallelConfig.make: with the flag, ep_size = tp x dp and tp_size = 1)."""
    if path == EP_WITH_DP:
        return "grouped" if ep > 1 else "tp_sharded"
    return path


def expert_layout(path: str, tp: int, ep: int) -> tuple[int, int]:
    """(GPUs each expert is sharded over, groups the experts are spread over) of one stage of a
    replica of tp x ep GPUs on `path`: what the costs below assume, and what an engine's own MoE
    configuration must match (tests/views/test_export_vllm.py asks vLLM's)."""
    path = run_path(path, ep)
    return (tp, ep) if path == "tp_sharded" else (1, tp * ep)


def triton_tile(tokens: float, experts: int, width: int, chip: str, fp8: bool) -> int:
    """BLOCK_SIZE_M of vLLM's / SGLang's Triton fused_moe for a call of `tokens` rows over `experts`
    local experts of `width` columns each (the shard's intermediate size) on `chip` (sources above)."""
    name = chip.lower()
    device = "h100" if "h100" in name and "pcie" not in name and "nvl" not in name else name
    table = None if fp8 else TUNED_TILES.get((device, experts, width))
    if table:
        return min(table, key=lambda entry: abs(entry[0] - tokens))[1]
    return TRITON_SMALL_TILE if tokens <= experts and not fp8 else TRITON_TILE


def padded_rows(shape: ModelShape, tokens: float, tile: int = TILE_ROWS) -> tuple[float, float]:
    """(rows each touched expert's GEMM computes, those over its routed rows): the routed rows
    rounded up to the tile (on average half a tile more, at least one tile)."""
    share = experts_touched(shape, tokens)
    if share <= 0:
        return float(tile), 1.0
    per_expert = tokens * shape.top_k / (shape.routed * share)
    rows = max(tile, per_expert + tile / 2)
    return rows, rows / per_expert


def imbalance(shape: ModelShape, tokens: float, gpus: int) -> float:
    """The busiest of `gpus` GPUs' routed rows over the mean: the law training prices its expert-
    parallel ranks by (model/expert_load.py: each token's top_k distinct experts, within its groups
    under group-limited routing, the expected maximum of the ranks' loads)."""
    return busiest_load(shape, tokens, gpus) if tokens > 0 else 1.0


def expert_gemm_time(flops_per_token: float, tokens: float, rate, shape: ModelShape, gpus: int,
                     path: str = "grouped", tp: int = 1, tile=None) -> float:
    """Seconds of the expert GEMMs of one stage GPU: `flops_per_token` of routed work per token on
    this GPU; `rate(rows, n)` is a dense GEMM's rate at that many rows and output columns.

    - grouped (fused MoE, CUTLASS/DeepGEMM grouped GEMM): the experts spread over all `gpus`,
      each expert's rows padded to the tile (the padded tile count sets the shape, so small
      groups are not charged twice), the busiest GPU setting the pace;
    - tp_sharded (TensorRT-LLM's MoE plugin in tensor-parallel mode): every GPU of a tensor-
      parallel group holds 1/tp of each expert, so its GEMMs are 1/tp as wide; the load spreads
      over the gpus / tp groups only;
    - per_expert (vLLM 0.2 after its expert-parallel Mixtral, before the fused kernel: engines.py
      [moe2542]): each GPU loops over its own whole experts, each GEMM a kernel of its own on
      the rows routed to it (a tile's rows at least, as a grouped GEMM's); LOOP_KERNELS kernels
      per local expert (`loop_kernels`). A GEMM of fewer rows costs the same tile: charging it
      at its unpadded rows' rate made more tokens run faster (GCLC_HYPOTHESIS=deep);
    - ep_with_dp: tp_sharded in one attention group, grouped over several (`run_path`).
    `tile(experts, width)`: the row tile of a call over that many local experts of that width
    (vLLM's / SGLang's Triton fused_moe: `triton_tile`); None: TILE_ROWS."""
    path = run_path(path, gpus // max(1, tp))
    if path in ("grouped", "per_expert"):   # the mean GPU's padded rows, the busiest's routed rows beyond
        rows, padding = padded_rows(shape, tokens, tile(max(1, shape.routed // gpus), shape.expert_ffn)
                                    if tile else TILE_ROWS)
        work = flops_per_token * tokens * (padding + imbalance(shape, tokens, gpus) - 1)
        return work / (rate(max(1.0, rows), shape.expert_ffn) * GROUPED_GEMM_EFFICIENCY)  # unrounded rows
    spread, width = max(1, gpus // tp), shape.expert_ffn / tp
    rows, padding = padded_rows(shape, tokens, tile(max(1, shape.routed // spread), round(width))
                                if tile else TILE_ROWS)
    work = flops_per_token * tokens * (padding + imbalance(shape, tokens, spread) - 1)
    return work / (rate(max(1.0, rows), width) * GROUPED_GEMM_EFFICIENCY)


def routed_rows(shape: ModelShape, tokens: float) -> float:
    """The mean rows a touched expert receives from `tokens` tokens."""
    share = experts_touched(shape, tokens)
    return tokens * shape.top_k / (shape.routed * share) if share > 0 else 1.0


def touched_share(shape: ModelShape, tokens: float, path: str, gpus: int, tp: int = 1) -> float:
    """Share of a GPU's routed experts whose weights the busiest GPU reads in an iteration. With
    expert parallelism each GPU holds whole experts and reads those its tokens pick, so at small
    batches the GPU that drew the most sets the pace (the expected maximum over the GPUs of a
    binomial count); TP-sharded experts spread every expert over the tensor-parallel GPUs, whose
    reads are then even within a group (the groups differ: expert parallel over gpus / tp)."""
    q = experts_touched(shape, tokens)
    path = run_path(path, gpus // max(1, tp))
    groups = max(1, gpus // tp) if path == "tp_sharded" else gpus
    local = shape.routed / groups if groups else shape.routed
    if q <= 0 or groups <= 1 or q >= 1:
        return q
    if local < 1:   # a GPU holds a slice of one expert: the busiest reads it whole if any expert is picked
        return 1 - (1 - q) ** shape.routed
    return _expected_max(round(local), q, groups) / round(local)


# Experts a GPU holds beyond which `_expected_max` sums only the window of counts that carry
# probability (a model's 256 or 384 routed experts sum every count, as before)
EXACT_SUM_UP_TO = 4096
TAIL_SIGMAS = 12             # beyond mean +- 12 sd (+ 50 for a skewed, Poisson-like count) the
TAIL_SLACK = 50              # binomial's tails weigh < 1e-30: each term adds 1 or 0 to the sum


@functools.lru_cache(maxsize=4096)
def _expected_max(n: int, q: float, groups: int) -> float:
    """E[max of `groups` independent Binomial(n, q)] = sum over j >= 1 of P(max >= j)."""
    if n > EXACT_SUM_UP_TO:
        return _expected_max_window(n, q, groups)
    cdf, total, term = 0.0, 0.0, (1 - q) ** n
    for j in range(n):
        cdf += term      # P(X <= j)
        total += 1 - min(1.0, cdf) ** groups
        term *= (n - j) / (j + 1) * q / (1 - q)
    return total


def _expected_max_window(n: int, q: float, groups: int) -> float:
    """`_expected_max` in time independent of n: below the window every P(max >= j) is 1, above
    it 0 (to 1e-30 x groups); inside it the binomial's terms from the log-pmf, normalized to the
    window's mass (which is 1 to 1e-30), so that the cdf ends at 1 and not a rounding error off it
    (an error the tail's terms would each add, times `groups`)."""
    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(mean - TAIL_SIGMAS * sd - TAIL_SLACK))
    hi = min(n, math.ceil(mean + TAIL_SIGMAS * sd + TAIL_SLACK))
    term = math.exp(math.lgamma(n + 1) - math.lgamma(lo + 1) - math.lgamma(n - lo + 1)
                    + lo * math.log(q) + (n - lo) * math.log1p(-q))
    terms = []
    for j in range(lo, hi + 1):   # P(X = lo) .. P(X = hi), hi <= n: the mass the window holds
        terms.append(term)
        term *= (n - j) / (j + 1) * q / (1 - q)
    mass = math.fsum(terms)
    cdf, total = 0.0, float(lo)
    for term in terms[:min(hi, n - 1) - lo + 1]:   # the sum runs over j < n
        cdf += term / mass
        total += 1 - min(1.0, cdf) ** groups
    return total


def sent_share(shape: ModelShape, dispatcher: str, ranks: int) -> float:
    """Share of a token's top_k routed copies the expert all-to-all sends over `ranks` EP ranks (those the
    experts are spread over, `expert_layout`): every copy (alltoall), or one per rank holding any of the
    token's experts (deepep: DeepEP's normal kernels, model/serve/engines.py [deepep]): expert_load's
    distinct destinations over top_k, the same law training's flex dispatchers are priced by (DeepSeek-V3,
    8 of 256 within 4 of 8 groups, on 8 ranks: 3.63 of 8)."""
    return distinct_share(shape, ranks) if dispatcher == "deepep" and ranks > 1 else 1.0


def loop_kernels(shape: ModelShape, gpus: int, path: str) -> float:
    """Kernels a loop over experts adds to one MoE layer of a GPU: LOOP_KERNELS per local expert
    (vLLM 0.2 skipped an expert no token picked: ASSUMPTION every local expert, an upper bound)."""
    return shape.routed / max(1, gpus) * LOOP_KERNELS if path == "per_expert" else 0.0


def routing_bytes(shape: ModelShape, tokens_per_gpu: float, layers: int) -> float:
    """HBM bytes one GPU moves to permute and un-permute its routed rows over `layers` MoE layers."""
    return layers * tokens_per_gpu * shape.top_k * shape.hidden * ACTIVATION_BYTES * ROUTING_PASSES


def kernels_per_layer(shape: ModelShape, base: int) -> float:
    """Kernels of the mean layer: `base` for a dense GQA layer, plus routing in MoE layers and
    the latent projections of MLA."""
    extra = MOE_KERNELS * shape.moe_layers / shape.layers if shape.is_moe else 0.0
    return base + extra + (MLA_KERNELS if shape.is_mla else 0)
