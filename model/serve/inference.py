"""Serving (`serve` jobs): the time of one scheduler iteration of a replica, and the
steady rates and latencies it implies.

A replica is `pp` pipeline stages; a stage is `ep` attention groups of `tp` GPUs. Tensor
parallelism stays inside the scale-up domain (two all-reduces per layer on its tiers); the
attention groups hold different sequences (data-parallel attention) and share the routed
experts, spread over all tp x ep GPUs of the stage, with an all-to-all dispatch and combine
per MoE layer on the tiers the group spans; stages pass activations point to point on the
tier between them. Ranks are laid out tp innermost, then as the engine orders them
(model/serve/ranks.py: SGLang's ep then pp, vLLM's pp then ep).

One iteration (continuous batching, chunked prefill) runs every decoding sequence one step
and up to `chunk` prompt tokens. Per stage and micro-batch (the batch is cut into pp
micro-batches so every stage works) it costs two rooflines, one per kind of kernel:

- the GEMMs: the slower of reading the stage's weights (dense ones, and the routed experts
  that at least one token picks) and the matrix work at the sustained GEMM rate of each
  GEMM's shape (a routed expert's GEMM has only the rows routed to it: tokens x top_k / experts,
  padded to its tile, on the busiest GPU, at the grouped-GEMM rate: model/serve/moe.py);
- attention: the slower of reading the decoding sequences' KV cache and its arithmetic at
  the fused-attention rate;

plus the MoE routing's HBM traffic, kernel launches and the collectives, which are not
overlapped (a conservative bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from ...compiler.ir import Partition
from ...compiler.formats import dispatch_bytes, is_narrow
from .. import cache, collectives as nccl, comms
from ..compute import BEST_SHAPE, attention_rate, exp_generation, hbm_rate, kernel_overhead, mla_decode_rate
from ..expert_load import node_share
from ..network.placement import SCALE_UP_SCOPES
from . import allreduce, moe
from .config import ServeConfig, mixed_gemm_rate, weight_bytes  # noqa: F401  (ServeConfig, weight_bytes re-exported)
from .engines import Engine
from .kv import KVLayout
from . import ranks
from .pipeline import pipeline_hops
from ..shape import ModelShape
from ...dsl.records import frozen

BUFFER_BYTES = 4e9                     # runtime, allocator and communication buffers
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 20  # prefill working set per token per hidden unit
KERNELS_PER_LAYER = 6                  # ASSUMPTION: fused kernels per layer (norms, QKV, attention, out, MLP x2)
ROOFLINE_P = 3.0                       # FITTED: p-norm of compute and memory time per kernel: of
                                       # benchmarks/serve_accuracy.py's grid, the p with the least median |error|
                                       # on all 129 rows when chosen (p = 1.5, 2, 3, 4, max: 12.6, 11.9, 11.6,
                                       # 12.1, 12.3 %). Since HBM is read at the driver's capacity and Mixtral's
                                       # checkpoint at its mixed precision the grid reads 11.4, 10.6, 11.3, 12.3,
                                       # 13.0 %: p = 2 leads, not re-fitted here. The benchmark chooses p again
                                       # leaving each model (each source) out: 12.7 % (11.6 %) held out
MEMO_ENTRIES = 1 << 16                 # token counts whose stage costs a replica keeps (bounds its memory)
DRAFT_LAYERS = 1                       # ASSUMPTION: a draft token costs one layer's decode (MTP/EAGLE-style head)


@frozen
class Replica:
    """One replica's cost coefficients, so that an iteration costs a few multiplications."""

    shape: ModelShape
    config: ServeConfig
    engine: Engine
    partition: Partition
    kv: KVLayout
    dense_weights: float        # bytes per GPU: attention, dense MLPs, shared experts, embeddings
    expert_weights: float       # bytes per GPU: its routed experts
    gemm_flops_per_token: float  # per GPU of a stage, all GEMMs
    expert_flops_per_token: float  # the part in routed experts (grouped GEMMs of few rows each)
    tp_stages: tuple[comms.Stage, ...]
    ep_stages: tuple[comms.Stage, ...]
    group_stages: tuple[comms.Stage, ...]   # the attention groups' ranks of one TP index (vLLM's DP group)
    pp_hops: tuple            # the tier each stage-to-stage hop crosses, stage 0 -> 1 first
    pp_return: object         # the tier from the last stage back to the first (sampled tokens)
    _memo: dict = attrs.field(factory=dict, init=False, eq=False, repr=False)  # _stage's costs per token count

    @property
    def gpus(self) -> int:
        return self.config.gpus

    @property
    def hbm(self) -> float:
        return self.partition.node.accelerator.hbm_capacity

    @property
    def weights(self) -> float:
        return self.dense_weights + self.expert_weights

    # ------------------------------------------------------------ one iteration
    def stage_time(self, tokens: float, kv_tokens: float, pairs: float, graphed: bool = True) -> tuple[float, float]:
        """(seconds, seconds computing) of one stage on one micro-batch: `tokens` new tokens,
        `kv_tokens` cached tokens read by its decoding sequences, `pairs` prefill attention pairs;
        `graphed`: its iteration runs as a CUDA graph (`Engine.graphed`)."""
        seconds, work, _, _ = self._stage(tokens, kv_tokens, pairs, graphed)
        return seconds, work

    def _stage(self, tokens: float, kv_tokens: float, pairs: float,
               graphed: bool = True) -> tuple[float, float, float, float]:
        """stage_time, the pipeline hops of the micro-batch (pipeline_hops), and the seconds its
        SMs compute (what its power follows: _token_costs' `computing`)."""
        memo = self._memo
        key = self._costs_key(tokens, graphed)
        fixed = memo.get(key)
        if fixed is None:  # the simulator asks for the same micro-batch sizes step after step
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            fixed = memo[key] = self._token_costs(tokens, graphed)
        return _stage_of(fixed, memo.get("attention") or self._terms(), kv_tokens, pairs)

    def _costs_key(self, tokens: float, graphed: bool) -> object:
        """The stage memo's key of a micro-batch's costs: its tokens, and apart for an iteration issued
        kernel by kernel where the engine's all-reduce has a graph-captured price (allreduce.GRAPHED)."""
        if graphed or self.config.tp < 2 or self.engine.all_reduce not in allreduce.GRAPHED:
            return tokens
        return ("eager", tokens)

    def decode_steps(self, decoding: int) -> Callable[[float], float]:
        """`iteration(decoding, kv, 0, 0, 0, layer_mean=True)` as a function of `kv` alone: a step
        of `decoding` sequences that only decode, what the simulator runs most (solver/serve/sim.py
        `decode_on`). What does not depend on the cache read is found once; the rest is
        `_iteration`'s own steps (`_batch`, `_stage_of`, `_finish`), so each time is the same to the last bit.
        Kept in the stage memo: what it reads of the replica is what a shared memo's replicas share
        (`sharing_costs`)."""
        key = ("decode_steps", decoding)
        seconds = self._memo.get(key)
        if seconds is None:
            seconds = self._memo[key] = self._decode_steps(decoding)
        return seconds

    def _decode_steps(self, decoding: int) -> Callable[[float], float]:
        tokens, micro = self._batch(decoding, 0, 0)
        if tokens <= 0:
            return lambda kv: 0.0
        graphed = self.engine.graphed(decoding, tokens)
        # each micro-batch (vLLM V0's virtual engine) replays the graph captured for its own batch
        per_micro = self.engine.padded(decoding / micro, tokens / micro) if graphed else tokens / micro
        self._stage(per_micro, 0.0, 0.0, graphed)        # (fills the memo for this micro-batch)
        fixed, terms, pairs = self._memo[self._costs_key(per_micro, graphed)], self._memo.get("attention") or self._terms(), 0 / micro
        kernels = self._kernels(tokens)
        # `_stage_of` and `_finish` unfolded: what depends on the cache read is computed per step,
        # the rest once, each in the order they take it
        _, weights, gemm_roofline, routing, launches, collectives, hops, _ = fixed
        layers, per_cached, per_pair, groups, (decode_rate, rate), ep, per_token, rereads, hbm, l2 = terms
        prefill = pairs * per_pair / rate
        c, e = self.config, self.engine
        scale = 1 + e.draft * DRAFT_LAYERS / self.shape.layers if decoding and e.draft else None
        eager = None if graphed else kernels * e.eager_op_s      # (`Engine.host`)
        work, overlaps = e.step_s + e.seq_s * decoding, e.overlaps(c.pp)
        pp = c.pp

        def seconds(kv: float) -> float:
            kv_tokens = kv / micro
            attention = layers * (kv_tokens * per_cached / decode_rate + prefill) / groups
            kv_bytes = kv_tokens / ep * per_token * rereads
            if l2 is None:
                kv_read = max((weights + kv_bytes - weights) / hbm, 0.0)
            else:
                kv_read = max((weights + max(0.0, kv_bytes - l2[0]) - weights) / hbm, kv_bytes / l2[1])
            stage = gemm_roofline + _roofline(attention, kv_read) + routing + launches + collectives
            total = pp * stage + hops
            if scale is not None:
                total *= scale
            if eager is not None:
                total = max(total, eager)
            return max(total, work) if overlaps else total + work
        return seconds

    def attention_work(self, kv_tokens: float, pairs: float) -> tuple[float, float]:
        """(FLOPs, cache bytes read) per GPU of one stage's attention over `kv_tokens` cached
        tokens of decoding sequences and `pairs` prefill pairs: the terms _stage times."""
        layers, per_cached, per_pair, groups, _, ep, per_token, rereads, _, _ = self._terms()
        return layers * (kv_tokens * per_cached + pairs * per_pair) / groups, kv_tokens / ep * per_token * rereads

    def _terms(self) -> tuple:
        """_attention_terms, computed once per replica (they depend on nothing an iteration asks)."""
        memo = self._memo
        return memo.get("attention") or memo.setdefault("attention", self._attention_terms())

    def _attention_terms(self) -> tuple:
        """The replica's constants of the attention roofline and the cache read."""
        s, c, chip = self.shape, self.config, self.partition.node.accelerator
        # prefill (every kind, MLA decompressed into per-head keys and values as FlashMLA's
        # prefill path and TRT-LLM's context phase run it): scores over qk_dim, values over head_dim
        per_pair = 2 * s.heads * (s.qk_dim + s.head_dim)
        if s.is_mla:  # absorbed MLA decode: scores against the cached latent and rotary key
            # (kv_rank + rope_dim), values as a weighted sum of the latent (kv_rank), every head
            per_cached = 2 * s.heads * (2 * s.kv_rank + s.rope_dim)
        else:
            per_cached = 4 * s.heads * s.head_dim
        rereads = 1 if self.engine.grouped_kv or s.is_mla else s.heads / s.kv_heads
        l2 = (cache.RESIDENT_SHARE * chip.l2, cache.l2_bandwidth(chip)) if cache.two_level(chip) else None
        # absorbed MLA decodes with its own kernel (model/compute.py MLA_DECODE_KERNELS); prefill and
        # the other kinds' decode run the fused-attention kernels
        rates = (mla_decode_rate(chip) if s.is_mla else attention_rate(chip), attention_rate(chip))
        return (math.ceil(s.layers / c.pp), per_cached, per_pair, c.tp * c.ep, rates,
                c.ep, self.kv.per_token_per_gpu(), rereads, hbm_rate(chip), l2)

    def _token_costs(self, tokens: float, graphed: bool = True) -> tuple:
        """The parts of a stage's time that depend on its new tokens (and whether its iteration runs as a
        CUDA graph, `graphed`: the TP all-reduce's price) alone: (GEMM seconds, weight bytes read, the
        GEMMs' roofline, routing, launches, collectives, pipeline hops, the GEMMs' computing seconds)."""
        s, c, chip = self.shape, self.config, self.partition.node.accelerator
        layers = math.ceil(s.layers / c.pp)
        group = tokens / c.ep
        dense = self.gemm_flops_per_token - self.expert_flops_per_token
        # the rate at the micro-batch's mean rows, unrounded: a rate that stepped at whole rows while the
        # FLOPs grow smoothly would run 3.5 tokens faster than 2.5 (the serve floors need more tokens never faster)
        gemm = dense * tokens / mixed_gemm_rate(chip, c, max(1.0, group), s.hidden, s.hidden, c.dense_share)
        routing = 0.0
        if self.expert_flops_per_token:
            # each routed expert multiplies only the rows routed to it (tokens x top_k / experts), padded to its tile
            rate = lambda rows, n: mixed_gemm_rate(chip, c, rows, n, s.hidden)  # noqa: E731
            tile = None
            if self.engine.moe_kernel == "triton":   # Triton fused_moe: BLOCK_SIZE_M by the call's tokens
                fp8 = is_narrow(c.precision)
                tile = lambda experts, width: moe.triton_tile(tokens, experts, width, chip.name, fp8)  # noqa: E731
            gemm += moe.expert_gemm_time(self.expert_flops_per_token, tokens, rate, s, c.tp * c.ep,
                                         self.engine.moe_path, c.tp, tile)
            routing = moe.routing_bytes(s, group, math.ceil(s.moe_layers / c.pp)) / hbm_rate(chip)
        weights = self.dense_weights + self.expert_weights * moe.touched_share(s, tokens, self.engine.moe_path,
                                                                               c.tp * c.ep, c.tp)
        collectives = 0.0
        if c.tp > 1:
            # two all-reduces per layer; one where a parallel block sums attention and MLP first
            reductions = 1 if s.parallel_block else 2
            hosts = math.ceil(c.tp / self.partition.node.gpus)   # tp innermost: whole hosts, then a part of one
            collectives += (reductions * layers - self._reductions_gathered()) * tp_all_reduce(group * s.hidden * 2, self.tp_stages,
                                                               hosts > 1 and not self.engine.mnnvl,
                                                               self.engine.all_reduce, c.tp,
                                                               self.engine.nccl_nvls, self.engine.nccl_collnet,
                                                               self.engine.fallback_all_reduce, exp_generation(chip),
                                                               graphed, self.engine.all_reduce_fence)
        if s.is_moe and c.tp * c.ep > 1:
            collectives += math.ceil(s.moe_layers / c.pp) * self._expert_exchange(tokens)
        loops = moe.loop_kernels(s, c.tp * c.ep, self.engine.moe_path) * math.ceil(s.moe_layers / c.pp) if s.is_moe else 0
        launches = (layers * moe.kernels_per_layer(s, self.engine.layer_kernels) + loops) * kernel_overhead(chip)
        gemm_roofline = _roofline(gemm, weights / hbm_rate(chip))
        # The SMs compute for the GEMMs' FLOPs at a well-filled shape's rate: a GEMM of few rows
        # (decode) takes longer at its own rate, but for that time its SMs stall on the weights
        # streaming in, drawing a memory-bound kernel's power (model/power.py serving_activity)
        computing = self.gemm_flops_per_token * tokens / mixed_gemm_rate(chip, c, max(float(BEST_SHAPE[0]), group), s.hidden, s.hidden)
        return gemm, weights, gemm_roofline, routing, launches, collectives, pipeline_hops(self, tokens), computing

    def _reductions_gathered(self) -> int:
        """TP all-reduces of a stage that SGLang's data-parallel attention replaces ([sgldpa], dp_attention.py):
        on a MoE layer, the attention's all-reduce becomes a reduce-scatter in the attention TP group then an
        all-gather over the whole TP group, and the MoE's a reduce-scatter over the whole group then an all-gather
        in the attention TP group; the two attention-group halves make one all-reduce, the two whole-group
        halves the exchange `_expert_exchange` prices, so each MoE layer has one all-reduce fewer."""
        s, c, e = self.shape, self.config, self.engine
        if not (s.is_moe and e.dispatcher == "allgather" and e.gather_stage and c.ep > 1 and not s.parallel_block):
            return 0
        return math.ceil(s.moe_layers / c.pp)

    def exchange_route(self) -> tuple[str, tuple]:
        """How a MoE layer's routed tokens move, and over which stages (what `_expert_exchange` prices and the
        placement view names): "sharded", nothing (every expert TP-sharded in one attention group); "one_group",
        nothing (one attention group holds every token, on an all-gathering or `grouped_exchange` engine);
        "allgather" (over the stage's whole TP group for SGLang, `gather_stage`, else one TP index's groups);
        or the dispatcher's all-to-all, "alltoall" or "deepep", over the expert stages."""
        c, e = self.config, self.engine
        if e.dispatcher == "allgather" and c.ep > 1:
            return "allgather", self.ep_stages if e.gather_stage else self.group_stages
        if moe.expert_layout(e.moe_path, c.tp, c.ep)[1] == 1:
            return "sharded", self.ep_stages
        if c.ep == 1 and (e.grouped_exchange or e.dispatcher == "allgather"):
            return "one_group", self.ep_stages
        return e.dispatcher, self.ep_stages

    def _expert_exchange(self, tokens: float) -> float:
        """Seconds one MoE layer of a stage spends moving `tokens` (all attention groups') to their experts
        and back, as the engine's dispatcher does (model/serve/moe.py): an all-to-all of every top_k copy
        (alltoall); DeepEP's normal kernels, once per rank holding any of a token's experts and, beyond a
        node, once per node forwarded over NVLink (deepep); or vLLM's default, every attention group's
        tokens all-gathered on every GPU of the others' groups and the outputs reduce-scattered back
        (allgather; SGLang's data-parallel attention does so over the stage's whole TP group, in bf16).
        Nothing moves where every expert is TP-sharded in one attention group, whatever the dispatcher,
        nor in one attention group at all on an engine that exchanges only between groups
        (`grouped_exchange`, TensorRT-LLM's): its TP all-reduce sums the experts' outputs."""
        s, c, dispatcher = self.shape, self.config, self.engine.dispatcher
        route, stages = self.exchange_route()
        if route in ("sharded", "one_group"):
            return 0.0
        if route == "allgather":
            gathered = tokens * s.hidden    # every group's tokens, on each GPU (its TP ranks each gather them)
            # vLLM's DP group of one TP index, rows quantized first; SGLang's whole TP group, in bf16
            width = 2 if self.engine.gather_stage else dispatch_bytes(c.precision)
            # through NCCL (vLLM's PyNccl, SGLang's and TensorRT-LLM's NCCL groups): priced as NCCL runs the
            # call (model/collectives.py: its algorithm and protocol pick, base and steps), as the training step's
            return nccl.all_gather(gathered * width, stages) + nccl.reduce_scatter(gathered * 2, stages)
        spread = moe.expert_layout(self.engine.moe_path, c.tp, c.ep)[1]   # the ranks a token's experts lie on
        copies = tokens / c.ep / c.tp * s.top_k * s.hidden
        sent = copies * moe.sent_share(s, dispatcher, spread)
        if dispatcher != "deepep":
            return (comms.all_to_all(sent * dispatch_bytes(c.precision), self.ep_stages)
                    + comms.all_to_all(sent * 2, self.ep_stages))
        # the expert groups of a DeepEP node (8 consecutive ranks over NVLink whatever the OS node, as training's:
        # model/comms.py DEEPEP_NVL_PEERS): its GPUs over the GPUs each group's experts are sharded on
        gpus = comms.node_members(self.ep_stages, SCALE_UP_SCOPES, comms.DEEPEP_NVL_PEERS)
        per_node = max(1, gpus * spread // (c.tp * c.ep))
        crossing = copies * node_share(s, spread, per_node)
        return sum(comms.forwarded_all_to_all(sent * width, crossing * width, self.ep_stages, domain=SCALE_UP_SCOPES,
                                              most=comms.DEEPEP_NVL_PEERS)
                   for width in (dispatch_bytes(c.precision), 2))

    def iteration(self, decoding: float, kv_tokens: float, prefill: float = 0.0, pairs: float = 0.0,
                  prefilling: float | None = None, layer_mean: bool = False) -> float:
        """Seconds for one scheduler iteration of the replica: every one of `decoding`
        sequences advances a step while `prefill` prompt tokens of `prefilling` sequences
        (default: one) are processed. It is also each of those sequences' latency for the step.

        `kv_tokens` are the decoding sequences' tokens in all; with sliding-window layers they
        are read as if each sequence had the mean length (an upper bound, KVLayout.effective_total)
        unless `layer_mean` says they are already the layer-mean tokens read, summed sequence by
        sequence (exact: the simulator knows each sequence's length)."""
        return self._iteration(decoding, kv_tokens, prefill, pairs, prefilling, layer_mean)[0]

    def _iteration(self, decoding: float, kv_tokens: float, prefill: float, pairs: float,
                   prefilling: float | None = None, layer_mean: bool = False) -> tuple[float, float]:
        tokens, micro = self._batch(decoding, prefill, prefilling)
        if tokens <= 0:
            return 0.0, 0.0
        if not layer_mean:
            kv_tokens = self.kv.effective_total(kv_tokens, decoding)  # windowed layers read at most their window
        graphed = self.engine.graphed(decoding, tokens)
        # each micro-batch runs the graph captured for its own batch, padding rows and all
        run = self.engine.padded(decoding / micro, tokens / micro) if graphed else tokens / micro
        stage, _, hops, computing = self._stage(run, kv_tokens / micro, pairs / micro, graphed)
        return self._finish(decoding, tokens, self._kernels(tokens), stage, hops), self.config.pp * computing

    def _batch(self, decoding: float, prefill: float, prefilling: float | None) -> tuple[float, float]:
        """(new tokens, micro-batches) of an iteration. Pipeline: micro-batches are whole sequences
        (as vLLM's virtual engines and TRT-LLM's micro-batches are), so fewer sequences than stages
        leave the pipeline partly empty, and every sequence passes the pp stages in turn: a lone
        prompt pays pp stage times and the hops between them (pipeline fill), and so does every
        decode step."""
        tokens = decoding * (1 + self.engine.draft) + prefill
        sequences = decoding + (prefilling if prefilling is not None else (1.0 if prefill > 0 else 0.0))
        return tokens, min(self.config.pp, max(1.0, sequences))

    def _finish(self, decoding: float, tokens: float, kernels: float, stage: float, hops: float) -> float:
        """An iteration's seconds from one stage's time on a micro-batch and its hops: pp stages in
        turn, the draft model's layers, and the host's share (Engine.host)."""
        c, e = self.config, self.engine
        total = c.pp * stage + hops
        if decoding and e.draft:
            total *= 1 + e.draft * DRAFT_LAYERS / self.shape.layers
        return e.host(decoding, tokens, kernels, total, c.pp)

    def _kernels(self, tokens: float) -> float:
        """Kernels of one pass through every stage: a layer's own, its tensor-parallel
        all-reduces, and (a loop over experts) a few per expert its tokens touch. The same for
        every batch: counted once, in the stage memo."""
        kernels = self._memo.get("kernels")
        if kernels is None:
            kernels = self._memo["kernels"] = self._count_kernels()
        return kernels

    def _count_kernels(self) -> float:
        s, c = self.shape, self.config
        per_layer = moe.kernels_per_layer(s, self.engine.layer_kernels) + (2 if c.tp > 1 else 0)
        loops = moe.loop_kernels(s, c.tp * c.ep, self.engine.moe_path) * s.moe_layers if s.is_moe else 0.0
        return s.layers * per_layer + loops

    # ------------------------------------------------------------ memory
    def memory(self, sequences: float, prompt: float, output: float) -> float:
        """Bytes per GPU with `sequences` in flight (their KV pages) and one prefill chunk."""
        c = self.config
        kv = sequences / c.ep * self.kv.tokens_held(prompt, output) * self.kv.per_token_per_gpu()
        chunk = min(self.engine.chunk, max(prompt, 1))
        activations = chunk / c.ep * self.shape.hidden * ACTIVATION_BYTES_PER_TOKEN_HIDDEN / c.tp
        return self.weights + kv + activations + BUFFER_BYTES

    def kv_capacity_tokens(self, limit: float) -> float:
        """Cached tokens the replica can hold with HBM filled to `limit` bytes per GPU."""
        c = self.config
        activations = self.engine.chunk / c.ep * self.shape.hidden * ACTIVATION_BYTES_PER_TOKEN_HIDDEN / c.tp
        free = limit - self.weights - activations - BUFFER_BYTES
        return max(0.0, free) / self.kv.per_token_per_gpu() * c.ep


def tp_all_reduce(nbytes: float, stages: tuple, across_hosts: bool = False, kernel: str = "tiers",
                  tp: int = 1, nvls: bool = True, collnet: bool = True, fallback: str = "",
                  generation: str | None = None, graphed: bool = False, fenced: bool = False) -> float:
    """A decode step's tensor-parallel all-reduce. Inside one host the engines run their own
    one-shot kernels (vLLM's CustomAllreduce, SGLang's and TensorRT-LLM's), priced on the tiers'
    rates and latencies (model/comms.py); a group that spans hosts (`across_hosts`: the trays of
    an NVL72 rack, or any scale-out tier) vLLM's custom all-reduce refuses ("Custom allreduce is
    disabled because this process group spans across nodes": model/serve/engines.py [vllmcar]), so
    the call runs through NCCL, priced as NCCL picks its algorithm, protocol and latency
    (model/collectives.py: a small message is latency-bound at tens of microseconds). An engine with
    a multi-node NVLink kernel (`Engine.mnnvl`) keeps its one-shot inside the NVLink domain. An
    engine whose kernel was measured (`Engine.all_reduce`, model/serve/allreduce.py) takes no less
    than the measured time: a decode step's all-reduce is latency-bound, far from the tiers' rate;
    `graphed`: the call is captured in a CUDA graph (its iteration's, `Engine.graphed`), priced from the
    kernel's graph-captured table where it has one (allreduce.GRAPHED: vLLM's custom all-reduce);
    `fenced`: vLLM's custom all-reduce as built before vllm pull 8558 (Engine.all_reduce_fence, allreduce.FENCE_S).
    `nvls` / `collnet`: the NCCL algorithms the engine's environment allows (Engine.nccl_nvls).
    `fallback`: the kernel that takes the calls vLLM's custom all-reduce (`kernel` vllm) refuses
    (Engine.fallback_all_reduce: vLLM's symmetric-memory all-reduce), for the parts, group sizes and calls
    under the maximum it takes (allreduce.takes: SM 9.0 and 10.x, 64 MiB at TP 8 on Hopper): a group across
    hosts of one NVLink domain (over fabric handles), and inside a host a call at or above the custom
    all-reduce's size limit for the GPUs' generation (allreduce.hands_over: 256 KiB at TP 8 on Hopper); NCCL
    across hosts otherwise, and inside a host for a call custom all-reduce hands over and it refuses.
    Inside a host the price never falls as the call grows past a limit (allreduce's docstring): custom
    all-reduce is priced under its limit from its rows under it, extended past the last by the kernel's
    peer reads over the scale-up tier's NVLink (allreduce.beyond), a handed-over call no lower than that
    price at the limit, and a call past symmetric memory's maximum no lower than symmetric memory's there.
    `generation`: the GPUs' as model/compute.py exp_generation reads it (Blackwell Ultra, SM 10.3, apart
    from Blackwell, SM 10.0: vLLM's tables differ); None: the scale-up tier's."""
    scale_up = all(stage.tier.scope in SCALE_UP_SCOPES for stage in stages)
    generation = generation or next((s.tier.generation for s in stages if s.tier.scope in SCALE_UP_SCOPES), None)
    # the NVLink rate a direction the custom kernels read their peers over past their tables (allreduce.p2p_rate)
    link = min((s.tier.bandwidth for s in stages if s.tier.scope in SCALE_UP_SCOPES), default=allreduce.MEASURED_LINK)
    # the fallback is vLLM's (CudaCommunicator tries it after its custom all-reduce), so another engine's
    # kernel never hands a call to it; a call it does not take (a part or group size outside its tables, a
    # call at or above its maximum) is NCCL's
    takes = kernel == "vllm" and fallback and allreduce.takes(fallback, tp, generation, nbytes)
    if across_hosts and scale_up and takes:
        return max(comms.all_reduce(nbytes, stages), allreduce.measured(allreduce.algorithm(fallback, tp, generation),
                                                                        nbytes, tp, graphed))
    if across_hosts or not scale_up:
        return nccl.all_reduce(nbytes, stages, nvls, collnet)
    limit = allreduce.custom_limit(tp, generation)
    if kernel != "vllm" or not fallback or limit is None:
        return max(comms.all_reduce(nbytes, stages), allreduce.measured(kernel, nbytes, tp, graphed, fenced=fenced, link=link))
    # vLLM's chain inside a host: custom all-reduce under its limit, then symmetric memory, NCCL past its maximum
    custom = lambda n: max(comms.all_reduce(n, stages), allreduce.measured(kernel, n, tp, graphed, limit, fenced, link))  # noqa: E731
    if not allreduce.hands_over(kernel, nbytes, tp, generation):
        return custom(nbytes)
    floor = custom(limit)
    symm = lambda n: max(comms.all_reduce(n, stages), floor,  # noqa: E731
                         allreduce.measured(allreduce.algorithm(fallback, tp, generation), n, tp, graphed))
    if takes:
        return symm(nbytes)
    top = allreduce.SYMM_MAX.get(allreduce.capability(generation), {}).get(tp, 0.0)
    # inside one host a graph-captured call's buffers are NCCL's registered ones: no NVLS fill
    return max(nccl.all_reduce(nbytes, stages, nvls, collnet, registered=graphed), symm(top) if top > limit else floor)


def _roofline(compute: float, memory: float) -> float:
    """A kernel's time from its compute and memory times: near the ridge neither pipe runs at
    its own rate, so the time is their p-norm, tending to the larger far from the ridge."""
    slower = max(compute, memory)
    if ROOFLINE_P == math.inf or slower <= 0:
        return slower
    # scaled by the slower pipe, so that tiny times do not underflow to zero when raised to p
    return slower * ((compute / slower) ** ROOFLINE_P + (memory / slower) ** ROOFLINE_P) ** (1 / ROOFLINE_P)


def _stage_of(fixed: tuple, terms: tuple, kv_tokens: float, pairs: float) -> tuple[float, float, float, float]:
    """`Replica._stage` from its micro-batch's fixed costs and the replica's attention terms."""
    gemm, weights, gemm_roofline, routing, launches, collectives, hops, computing = fixed
    layers, per_cached, per_pair, groups, (decode_rate, rate), ep, per_token, rereads, hbm, l2 = terms
    attention = layers * (kv_tokens * per_cached / decode_rate + pairs * per_pair / rate) / groups
    kv_bytes = kv_tokens / ep * per_token * rereads
    # the cache that fits in on-chip SRAM beside the streamed weights is read from there
    # (model/cache.py decode_bytes and l2_time, with the chip's figures looked up once)
    if l2 is None:
        kv_read = max((weights + kv_bytes - weights) / hbm, 0.0)
    else:
        resident, bandwidth = l2
        kv_read = max((weights + max(0.0, kv_bytes - resident) - weights) / hbm, kv_bytes / bandwidth)
    work = gemm + attention
    # the GEMMs and the attention are separate kernels: each is its own roofline
    rooflines = gemm_roofline + _roofline(attention, kv_read)
    return rooflines + routing + launches + collectives, work, hops, computing + attention


def replica(shape: ModelShape, cfg: ServeConfig, partition: Partition, engine: Engine = Engine()) -> Replica:
    tiers = partition.tiers
    routed = shape.routed * shape.expert_params * shape.moe_layers
    dense = shape.params - routed
    w = weight_bytes(cfg.precision, cfg.wide_share)
    stage = 1 / cfg.pp
    active = shape.active_params
    kv = KVLayout(shape, cfg.kv, cfg.tp, cfg.pp, engine.block, engine.prefix_share)
    return Replica(shape, cfg, engine, partition, kv,
                   dense_weights=dense * stage / cfg.tp * weight_bytes(cfg.precision, cfg.dense_share),
                   expert_weights=routed * stage / (cfg.tp * cfg.ep) * w,
                   gemm_flops_per_token=2 * active * stage / (cfg.tp * cfg.ep),
                   expert_flops_per_token=2 * shape.top_k * shape.expert_params * shape.moe_layers * stage
                   / (cfg.tp * cfg.ep) if shape.is_moe else 0.0,
                   tp_stages=comms.place(cfg.tp, 1, tiers),
                   ep_stages=ranks.expert_stages(cfg, engine.rank_order, tiers),
                   group_stages=ranks.group_stages(cfg, engine.rank_order, tiers),
                   pp_hops=ranks.hops(cfg, engine.rank_order, tiers),
                   pp_return=ranks.return_hop(cfg, engine.rank_order, tiers))


def sharing_costs(replicas: list[Replica]) -> list[Replica]:
    """The replicas, those that differ only in their batch limit sharing one memo of stage
    costs: no cost of an iteration reads the limit (the iteration's contents are given), so a
    planner weighing every batch limit of a layout works each cost out once."""
    memos: dict = {}
    for r in replicas:
        key = (attrs.evolve(r.config, batch=0), id(r.shape), id(r.partition), id(r.engine))
        object.__setattr__(r, "_memo", memos.setdefault(key, r._memo))
    return replicas


@frozen
class ServeEstimate:
    """Steady state of one replica at full batch, and its unloaded time to first token."""

    config: ServeConfig
    role: str                   # "both" (aggregated), "prefill" or "decode"
    ttft: float                 # seconds: one mean prompt's prefill on an idle replica
    tpot: float                 # seconds per output token at full batch, prefills interleaved
    requests_per_s: float       # per replica, at full batch
    tokens_per_s: float         # output tokens per second, per replica
    memory: float               # bytes per GPU
    hbm: float
    busy: float                 # share of time the GPUs' SMs compute (FLOPs at a well-filled GEMM's rate)
    lone_flight: float = 0.0    # requests held at capacity were every step a lone sequence's: by Little's
                                # law a floor on those in flight at any rate, times its share of capacity
                                # (0: unknown; solver/serve/screen.py pool_share)

    @property
    def gpus(self) -> int:
        return self.config.gpus

    @property
    def fits(self) -> bool:
        return self.memory <= self.hbm


# Prefill chunks timed one by one; a longer prefill is timed in this many runs of equal
# chunks, so a planner's cost stays bounded whatever the lengths (a 1e8-token prompt, `chunk = 1`).
EXACT_CHUNKS = 512


def first_token_time(r: Replica, prompt: float) -> float:
    """A prompt's prefill alone, in chunks: the floor of the time to the first token. Up to
    EXACT_CHUNKS chunks each is timed; beyond, each run of equal chunks is timed at its
    middle chunk's cached tokens (the midpoint rule: a chunk's time grows smoothly with them)."""
    (todo, done), time = r.engine.split(prompt), 0.0
    full = math.floor(todo / r.engine.chunk)
    run = max(1, math.ceil(full / EXACT_CHUNKS)) if full > EXACT_CHUNKS else 1
    while todo > 0:
        chunk = min(todo, r.engine.chunk)
        count = min(run, math.floor(todo / chunk))
        middle = done + (count - 1) / 2 * chunk
        time += count * r.iteration(0, 0, chunk, r.kv.pairs(middle, chunk))
        todo, done = todo - count * chunk, done + count * chunk
    return time


def estimate(r: Replica, prompt: float, output: float, role: str = "both") -> ServeEstimate:
    """The replica at full batch: an aggregated replica interleaves the prefills its own
    completions call for; a prefill replica runs full chunks; a decode replica only decodes."""
    c, e = r.config, r.engine
    steps = output / e.tokens_per_step
    fresh, _ = e.split(prompt)
    cached = c.batch * (prompt + output / 2)
    ttft = first_token_time(r, prompt)
    keys = r.kv.pairs(0, prompt) / prompt if prompt else 0.0   # mean keys a prompt token attends to
    if role == "prefill":
        chunk = e.chunk
        time, work = r._iteration(0, 0, chunk, chunk * keys, max(1.0, chunk / max(fresh, 1.0)))
        rate = chunk / max(fresh, 1.0) / time
        return ServeEstimate(c, role, ttft, 0.0, rate, rate * output, r.memory(0, prompt, 0), r.hbm, work / time)
    prefill = 0.0 if role == "decode" else min(c.batch * fresh / max(steps, 1e-9), e.chunk)
    time, work = r._iteration(c.batch, cached, prefill, prefill * keys)
    rate = prefill / fresh / time if prefill and fresh else c.batch / steps / time
    held = c.batch if role == "decode" else c.batch + 1
    return ServeEstimate(c, role, ttft, time / e.tokens_per_step, rate, rate * output,
                         r.memory(held, prompt, output), r.hbm, work / time,
                         rate * steps * _lone_step(r, prompt, output, fresh / max(steps, 1e-9), keys, role))


def _lone_step(r: Replica, prompt: float, output: float, prefill: float, keys: float, role: str) -> float:
    """Seconds of one iteration holding a single mid-output sequence (with its share of prefill
    per step where the replica prefills too): no step of a replica that holds any is shorter."""
    one = 0.0 if role == "decode" else min(prefill, r.engine.chunk)
    return r._iteration(1, prompt + output / 2, one, one * keys)[0]


def estimate_serve(shape: ModelShape, cfg: ServeConfig, partition: Partition, prompt: float, output: float,
                   engine: Engine = Engine()) -> ServeEstimate:
    return estimate(replica(shape, cfg, partition, engine), prompt, output)


def kv_bytes_per_token(shape: ModelShape, cfg: ServeConfig) -> float:
    """K and V of one token in every layer, on one GPU of an attention group (a token inside
    every window: windowed layers bound what a long sequence holds, KVLayout.effective)."""
    return KVLayout(shape, cfg.kv, cfg.tp, cfg.pp).per_token_per_gpu()


def kv_transfer_time(prefill: Replica, decode: Replica, prompt: float) -> float:
    """Moving a prompt's cache from a prefill replica to a decode replica: every GPU of the
    smaller side sends its share at once over the tier that joins the two replicas."""
    tier = comms.outermost(2, max(prefill.gpus, decode.gpus), prefill.partition.tiers)
    if tier is None:
        return 0.0
    senders = min(prefill.gpus, decode.gpus)
    return comms.point_to_point(prefill.kv.effective(prompt) * prefill.kv.per_token() / senders, tier)

