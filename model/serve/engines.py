"""Serving engines by name and release (`engine = vllm_v1`), as model/stacks.py names training
stacks: each profile states how its scheduler forms a batch, what the host does per iteration,
how it preempts, which MoE kernel path and KV page it uses, and where each figure comes from.
`Engine` holds the knobs one replica runs with: a profile's, with the job's overrides
(`engine { max_batch = 512 }`), each a plain field a launch config can be written from.

Sources, abbreviated below:
  [v1args]  vllm-project/vllm vllm/engine/arg_utils.py `_set_default_args_v1` / `get_batch_defaults`
            (v0.8-v0.11): V1 always runs chunked prefill; on GPUs of >= 70 GiB other than A100 the
            OpenAI server batches 8192 tokens and 1024 sequences, elsewhere 2048 and 256 (PR #17885)
  [v0sched] vllm/core/scheduler.py (v0.2-v0.6) `_schedule_default`: waiting prompts are scheduled
            before running decodes, which pause (no chunked prefill unless enabled); preemption by
            recompute for single-sequence requests; SchedulerConfig max_num_seqs 256; block_size 16;
            vllm/worker/model_runner.py captures CUDA graphs for decode batches up to 256
  [v0pad]   vllm-project/vllm vllm/worker/model_runner.py `_get_graph_batch_size` (v0.3.0, 0.5.5, 0.6.0, 0.6.2
            sdists): a decode batch of more than 4 runs the graph captured for the next multiple of 8
            (3-4: 4), its padding rows computed and all-reduced with the real ones
  [sglpad]  SGLang v0.3.0 (its PyPI wheel) sglang/srt/model_executor: model_runner.py captures batch_size_list
            [1, 2, 4] + [8, 16, ..., 160]; cuda_graph_runner.py `replay` pads a batch to the next of them
  [v060]    blog.vllm.ai 2024-09-05 "vLLM v0.6.0: 2.7x Throughput Improvement": on v0.5.3, Llama 3 8B
            on one H100 spends 33 % of the time in the API server, 29 % scheduling and preparing
            inputs and 38 % on the GPU; v0.6 moves the API server to its own process, processes
            outputs asynchronously (-8.7 % TPOT, 70B on 4 x H100) and offers multi-step scheduling
            (+28 % throughput, 70B on 4 x H100)
  [v1blog]  blog.vllm.ai 2025-01-27 "vLLM V1": the engine core in its own busy loop, a persistent
            batch (inputs updated by differences), piecewise CUDA graphs (torch.compile,
            cudagraph capture sizes up to 512 tokens)
  [v1graphs] vLLM 0.33.0 (PyPI) vllm/config/vllm.py `_set_cudagraph_sizes`: the capture sizes and
            --max-cudagraph-capture-size count tokens; "a decode step submits one query for the newly
            sampled token plus one for each draft token" (`uniform_decode_query_len` = 1 + the speculative
            tokens), and a batch larger than the largest capture size runs without a graph; by default the
            ceiling is min(max_num_seqs x (1 + k) x 2, 512; 1024 on data-center Blackwell), capped at
            max_num_batched_tokens
  [deepep]  deepseek-ai/DeepEP csrc/kernels/intranode.cu `dispatch` (@031a5c49): the normal kernels send a token
            to a rank once, where `is_token_in_rank` (any of its top-k experts there), with its top-k indices
            remapped to the rank's experts, and combine one reduced row back; csrc/kernels/internode_ll.cu
            `dispatch` (@005dcc9d): the low-latency kernels send one message per top-k expert. The engines turn
            CUDA graphs off with the normal kernels: vLLM 0.33.0 vllm/config/compilation.py ("DeepEP: Disabling
            CUDA Graphs since DeepEP high-throughput kernels ... are incompatible with CUDA Graphs", with data
            parallelism), SGLang 0.5.23 sglang/srt/arg_groups/moe_hook.py ("Cuda graph is disabled because
            deepep_mode=`normal`")
  [deepepnode] deepseek-ai/DeepEP csrc/kernels/internode.cu `dispatch` (@b805c0e1, normal kernels across nodes):
            the RDMA sender reads `is_token_in_rank` as one uint64 per destination node (its NUM_MAX_NVL_PEERS
            = 8 GPUs' flags) and sends the token to that node once if any flag is set (its own node's copy goes
            straight to the receive buffer); the node's forwarder sends it over NVLink to each of its ranks
            holding the token's experts (SourceMeta `is_token_in_nvl_rank_bits`); combine retraces the path
  [vllmagrs] vLLM 0.33.0 (PyPI) vllm/config/parallel.py: `all2all_backend` defaults to "allgather_reducescatter"
            ("naive" and "pplx" were removed and fall back to it); vllm/distributed/device_communicators/
            all2all.py `AgRsAll2AllManager`: dispatch all-gathers every data-parallel rank's hidden states
            (quantized first, prepare_finalize/naive_dp_ep.py) with their top-k ids and weights over the DP
            group, combine reduce-scatters the expert outputs back; each GPU receives every token
  [sgldpa]  SGLang 0.5.23 (PyPI) sglang/srt/layers/dp_attention.py: with data-parallel attention and
            --moe-a2a-backend none (its default, arg_groups/fields/exec_.py) `_dp_gather` brings every DP
            rank's rows into one global buffer on every GPU of the TP group (the replica's tp x ep GPUs of a
            stage: `_dp_gather_via_all_gather`, tp_group.all_gather_into_tensor after a reduce-scatter
            inside the attention TP group), the MoE runs on it, and `dp_reduce_scatter_tensor` reduce-
            scatters the outputs back over the same group; rows in bf16 (SGLANG_ENABLE_DP_GATHER_FP8 off,
            environ.py). `DpPaddingMode` takes an all-reduce of a zero-padded buffer instead (SUM_LEN) in
            prefill and where the custom all-reduce holds a decode buffer: up to twice the bytes, unpriced
  [moe2542] vllm-project/vllm pull 2542 (2024-01-22, in v0.3.0): the fused MoE kernel replaced the
            per-expert loop of TP-sharded experts: Mixtral 8x7B TP 8 on H100, 1000 in / 50 out,
            28,600 -> 33,600 tokens/s; latency at batch 1 0.590 -> 0.459 s
  [vllmep]  vLLM 0.33.0 (PyPI) vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make:
            without --enable-expert-parallel every expert is TP-sharded over TP x DP GPUs (TP flattened
            across DP), with it each GPU holds whole experts, ep_size = TP x DP; the export turns it on
            with data-parallel attention and off otherwise, and the profile costs what it launches
  [sgl04]   lmsys.org/blog/2024-12-04-sglang-v0-4: the zero-overhead (overlap) batch scheduler runs
            the CPU one batch ahead of the GPU, 1.1x throughput over v0.3
  [sglpp]   SGLang 0.5.23 (PyPI), sglang/srt/arg_groups/overrides.py `_pipeline_parallel_overlap_disable`:
            "Pipeline parallelism is incompatible with overlap schedule", the overlap turned off
            whenever pp_size > 1
  [sglargs] sgl-project/sglang python/sglang/srt/server_args.py (v0.3-v0.4): chunked_prefill_size
            8192; enable_mixed_chunk off (a prefill batch runs apart from the decode batch, and
            first); cuda_graph_max_bs 160; token-granular KV pool (page size 1)
  [trtifb]  NVIDIA/TensorRT-LLM docs "In-flight batching" / executor SchedulerConfig: context and
            generation requests in one batch; capacity scheduler GUARANTEED_NO_EVICT by default
            (a request starts only when the cache holds its whole length: never preempted);
            tokens_per_block 64 (TensorRT engines) and 32 (PyTorch backend)
  [trtmoe]  NVIDIA/TensorRT-LLM examples/mixtral README (v0.9-v0.11): `--moe_tp_mode`, experts
            tensor-parallel by default (every GPU holds a slice of every expert); later releases
            keep tensor-parallel experts unless moe_ep_size is set, as vLLM (until
            --enable-expert-parallel) and SGLang (until --ep-size) do: `tp_sharded`, experts
            expert-parallel only across the replica's attention groups
  [trtep]   NVIDIA/TensorRT-LLM, the PyTorch backend's MoE communication: tensorrt_llm/mapping.py (`dp_size` is
            tp_size under enable_attention_dp: each GPU its own attention group, gclc's tp 1 x ep groups);
            _torch/modules/fused_moe/ `select_alltoall_method_type` (1.0 era): no exchange without attention
            DP (each GPU holds every token; the TP all-reduce sums the experts), and with it an all-to-all
            only where moe_ep_size > top_k and either MNNVL fabric memory spans the group (NVL72) or
            TRTLLM_CAN_USE_DEEP_EP=1 (DeepEP, "no CUDA Graphs support": alltoall_method_types.py), else
            every DP rank's tokens all-gathered (quantized first) and the outputs reduce-scattered;
            communication/communication_factory.py `create_strategy` (2026): still no exchange without
            attention DP, all-gather + reduce-scatter for TP-sharded experts ("AlltoAll cannot support
            MoE TP"), else NVLinkOneSided first, DeepEP, the all-gather last; TRTLLM_FORCE_COMM_METHOD
            (NVLINK_ONE_SIDED, DEEPEP, ALLGATHER) picks one
  [trtovl]  NVIDIA/TensorRT-LLM docs/source/torch/features/overlap_scheduler.md: the PyTorch
            backend overlaps the CPU work of step n with the GPU work of step n + 1, on by default
  [vllmrank] vLLM 0.33.0 (PyPI) vllm/distributed/parallel_state.py `initialize_model_parallel`: "the
            layout order is: ExternalDP x DP x PP x PCP x TP" (TP innermost, then the pipeline
            stages, then the data-parallel attention groups), and vllm/engine/arg_utils.py
            `create_engine_config`: with --nnodes each node holds world / nnodes consecutive ranks
            (data_parallel_size_local = that over PP x TP), so a node holds whole DP ranks, each
            with all its pipeline stages, and the DP ranks (the EP group) span the nodes
  [sglrank] SGLang 0.5.23 (PyPI) sglang/srt/entrypoints/engine.py `_calculate_rank_ranges`: nodes
            split the pipeline stages first (pp_size // nnodes stages per node) and a stage's TP
            group (attention DP inside it) over nnodes // pp_size nodes: TP, then the attention
            groups, then the stages, as model/serve/inference.py lays a replica out by default
  [vllmcar] vllm-project/vllm vllm/distributed/device_communicators/custom_all_reduce.py: "Custom
            allreduce is disabled because this process group spans across nodes" (its buffers are CUDA
            IPC handles, shared inside one host); SGLang's custom all-reduce is the same code. An NVL72
            tray is a host of 4 GPUs, so a TP group across trays all-reduces through NCCL
  [trtmnnvl] NVIDIA/TensorRT-LLM tensorrt_llm/_torch/distributed/ops.py `AllReduce`: with the AUTO
            strategy the PyTorch backend builds MNNVLAllReduce where MNNVLAllReduce.is_mnnvl(mapping)
            holds (ranks on several hosts of one multi-node NVLink domain, fabric memory shared)
  [sgl2904] sgl-project/sglang pull 2904: vLLM's and SGLang's custom all-reduce latencies on H100 by
            TP size and message size (model/serve/allreduce.py)
  [llama]   vllm-project/vllm vllm/model_executor/models/llama.py LlamaDecoderLayer / LlamaAttention
            forward (SGLang's llama.py alike): fused add + RMSNorm twice, the QKV GEMM, rotary, the
            cache write, attention, the O GEMM, the gate-up GEMM, SiLU-and-multiply, the down GEMM:
            10 kernels; TensorRT engines fuse rotary and the cache write into the attention plugin
            and the gate into the MLP (model/serve/inference.py KERNELS_PER_LAYER, 6)
"""

from __future__ import annotations

import functools

import attrs

from ..compute import EAGER_OP_S
from ...dsl.records import frozen
from ...dsl.units import GIB

PREEMPTIONS = ("recompute", "swap", "reserve")   # reserve: admit only when the whole length fits
MOE_PATHS = ("grouped", "tp_sharded", "per_expert", "ep_with_dp")
DISPATCHERS = ("alltoall", "deepep", "allgather")


@frozen
class Engine:
    """The scheduler, host and cache knobs one replica runs with (`engine { ... }`). The
    defaults are an ideal engine (no host time, mixed batches); a named profile sets real ones."""

    chunk: int = 8192           # prompt tokens per iteration (the token budget less the decodes)
    block: int = 16             # KV page, tokens
    prefix_share: float = 0.0   # share of each prompt served from the shared-prefix cache
    draft: int = 0              # speculative tokens proposed per step
    acceptance: float = 0.0     # declared acceptance rate of each draft token
    grouped_kv: bool = True     # decode attention reads each KV head once for its query group
                                # (False: once per query head, as masked-MHA kernels before XQA did)
    scheduler_steps: int = 1    # decode steps per scheduling round: prompts join only between rounds
                                # (vLLM's --num-scheduler-steps; 1: every iteration, as SGLang/TRT-LLM)
    mixed: bool = True          # prompt chunks ride in decode iterations (chunked prefill, in-flight
                                # batching); False: waiting prompts run first in prompt-only iterations
    max_seqs: int | None = None  # running sequences the scheduler allows (None: the plan's batch)
    graph_batch: int = 0        # decode batches up to this run as CUDA graphs; larger ones and
                                # prompt iterations are issued kernel by kernel (0: none, where kernels cost the host `eager_op_s`;
                                # an engine without that cost runs every iteration graphed)
    graph_pad: int = 0          # a graphed decode batch runs padded to the next size captured: 1, 2, 4, then
                                # multiples of this (vLLM V0 `_get_graph_batch_size`, SGLang 0.3's
                                # batch_size_list); 0: as it is
    graph_tokens: int = 0       # iterations of at most this many tokens are graphed, prompts or not, and
                                # no larger one, decode steps included (vLLM V1's one capture ceiling, in
                                # tokens: [v1graphs]); 0: graphs counted in sequences (`graph_batch`)
    eager_op_s: float = 0.0     # host seconds per kernel of an iteration issued kernel by kernel
    step_s: float = 0.0         # host seconds per iteration: scheduling, input preparation
    seq_s: float = 0.0          # host seconds per decoding sequence per iteration: sampling, stop
                                # checks, output processing
    overlap: bool = False       # the host prepares iteration n + 1 while the GPU runs n
    overlap_pp: bool = True     # ... with pipeline stages too (SGLang turns it off under PP: [sglpp])
    preemption: str = "recompute"  # recompute, swap (KV to host memory and back) or reserve
    moe_path: str = "grouped"   # grouped GEMM, TP-sharded experts, a loop over experts, or ep_with_dp
                                # (TP-sharded in one attention group, grouped over several: vLLM's)
    dispatcher: str = "alltoall"  # how the expert all-to-all sends a token: alltoall, a copy per routed expert
                                # (top_k; DeepEP's low-latency kernels too); deepep, once per EP rank holding any of
                                # its experts (DeepEP's normal kernels, [deepep]; across nodes once per node,
                                # [deepepnode]), whose graphs the engines turn off; allgather, every attention
                                # group's tokens gathered on every GPU, the outputs reduce-scattered ([vllmagrs])
    gather_stage: bool = False  # `allgather` gathers over the whole stage's tp x ep GPUs in bf16 (SGLang's
                                # data-parallel attention, [sgldpa]); else over one TP index's attention groups,
                                # quantized first (vLLM's DP group, [vllmagrs])
    grouped_exchange: bool = False  # routed tokens move between GPUs only across attention groups: with one group
                                # every GPU holds every token and the TP all-reduce sums the experts' outputs,
                                # whatever their layout (TensorRT-LLM builds no MoE communication without
                                # attention DP: [trtep])
    moe_kernel: str = ""        # "triton": vLLM's / SGLang's Triton fused_moe, whose row tile follows the
                                # token count (model/serve/moe.py triton_tile); "": TILE_ROWS
    frontend_s: float = 0.0     # a request's path outside the engine (HTTP, tokenizing, streaming
                                # the first token back): added to its TTFT
    rank_order: tuple = ("tp", "ep", "pp")   # a replica's ranks, innermost first ([sglrank]; vLLM V1:
                                # ("tp", "pp", "ep"), [vllmrank]): which groups a node boundary cuts
    layer_kernels: int = 6      # kernels of a dense decoder layer besides its collectives (each pays
                                # model/compute.py KERNEL_OVERHEAD_S; eager ones the host's op time)
    all_reduce: str = "tiers"   # the TP all-reduce kernel inside a host: measured (model/serve/allreduce.py:
                                # vllm, sglang) or priced on the tiers alone (tiers)
    all_reduce_fence: bool = False  # vLLM's custom all-reduce as built before vllm pull 8558 (vLLM 0.5.5-0.6.1,
                                # SGLang 0.3.0's import): its two-stage calls a system fence slower
                                # (model/serve/allreduce.py FENCE_S); no profile spans only those releases,
                                # so a job that runs one sets it (benchmarks/serve_frameworks.py)
    mnnvl: bool = False         # a TP group across hosts of one NVLink domain runs the engine's one-shot
                                # kernel over fabric memory (TensorRT-LLM's MNNVL); else NCCL ([vllmcar])
    fallback_all_reduce: str = ""  # the measured kernel that takes the TP calls `all_reduce` refuses: a group
                                # across hosts of one NVLink domain (over fabric memory), and inside a host a
                                # call at or above its size limit (symm_mem: vLLM from 0.11 with PyTorch's
                                # symmetric memory, model/rl/stacks.py, model/serve/allreduce.py); "": none
                                # (NCCL across hosts, the host's kernel at every size inside one)
    nccl_nvls: bool = True      # NCCL, where a TP all-reduce runs through it, may reduce in the NVLink
                                # switches (NCCL_NVLS_ENABLE; an RL stack's engines may not: model/rl/stacks.py)
    nccl_collnet: bool = True   # ... and in the scale-out switches (CollNet/SHARP: NCCL_COLLNET_ENABLE)
    name: str = "ideal"         # the profile, and the releases it stands for
    releases: str = "no engine overheads (the replica's kernels alone)"

    def split(self, prompt: float) -> tuple[float, float]:
        """(computed, cached) tokens of a prompt: the shared prefix comes from the cache, but
        never the last token, which is computed for its logits even on a full hit (vLLM)."""
        fresh, cached = prompt * (1 - self.prefix_share), prompt * self.prefix_share
        return (1.0, prompt - 1.0) if fresh < 1 <= prompt else (fresh, cached)

    @functools.cached_property  # asked at every simulated step
    def tokens_per_step(self) -> float:
        """Expected tokens a sequence gains per verification step (Leviathan et al. 2023, eq. 1)."""
        a, k = self.acceptance, self.draft
        if k == 0:
            return 1.0
        return k + 1.0 if a >= 1 else (1 - a ** (k + 1)) / (1 - a)

    def graphed(self, decoding: float, tokens: float) -> bool:
        """Whether an iteration runs as a CUDA graph (its kernels cost the host nothing). An engine
        with token-counted graphs (`graph_tokens`: vLLM V1) graphs every iteration of at most that
        many tokens and no other, a decode step of B sequences with k draft tokens being B (1 + k)
        tokens ([v1graphs]); the others graph decode-only steps of at most `graph_batch` sequences."""
        if self.eager_op_s <= 0:
            return True
        if self.graph_tokens:
            return tokens <= self.graph_tokens
        return tokens <= decoding * (1 + self.draft) and decoding <= self.graph_batch

    def padded(self, decoding: float, tokens: float) -> float:
        """The tokens a graphed iteration's GEMMs and all-reduces run (`graph_pad`): a decode-only batch
        padded to the graph captured for it, its padding rows computed and reduced as real ones."""
        pad = self.graph_pad
        if not pad or decoding <= 2 or tokens != decoding * (1 + self.draft):
            return tokens
        size = 4 if decoding <= 4 else -(-decoding // pad) * pad
        return size * (1 + self.draft)

    def host(self, decoding: float, tokens: float, kernels: float, gpu: float, pp: int = 1) -> float:
        """Seconds an iteration takes given its GPU time `gpu`: a host that issues its `kernels`
        one by one holds the GPU to their pace, and the host's own work per iteration adds to
        it unless the engine overlaps it with the GPU's previous iteration (on `pp` stages)."""
        if not self.graphed(decoding, tokens):
            gpu = max(gpu, kernels * self.eager_op_s)
        work = self.step_s + self.seq_s * decoding
        return max(gpu, work) if self.overlaps(pp) else gpu + work

    def overlaps(self, pp: int = 1) -> bool:
        """Whether the host's work hides behind the GPU's on a replica of `pp` stages."""
        return self.overlap and (pp == 1 or self.overlap_pp)


@frozen
class Profile:
    """An engine as released: its family, the releases that behave so, its knobs and sources."""

    name: str
    family: str                 # vllm, sglang, trtllm
    first: str                  # YYYY-MM of the first release
    last: str | None            # YYYY-MM of the last (None: current)
    releases: str
    knobs: dict                 # Engine fields
    sources: dict               # knob -> where its value comes from
    small_gpu: dict = attrs.Factory(dict)   # knobs on GPUs under 70 GiB and on A100 ([v1args])

    def __attrs_post_init__(self) -> None:
        if "eager_op_s" in self.knobs:   # the one shared estimate (model/compute.py EAGER_OP_S)
            self.sources.setdefault("eager_op_s", "ESTIMATE: model/compute.py EAGER_OP_S, eager PyTorch's CPU per op")

    def engine(self, hbm: float | None = None, chip: str = "", **overrides) -> Engine:
        """The knobs on a chip of `hbm` bytes named `chip`, with the job's overrides."""
        knobs = dict(self.knobs)
        if self.small_gpu and hbm is not None and (hbm < 70 * GIB or "a100" in chip.lower()):
            knobs.update(self.small_gpu)
        given = {k: v for k, v in overrides.items() if v is not None}
        if given.get("dispatcher") == "deepep" and knobs.get("eager_op_s"):
            # DeepEP's normal kernels cannot be captured: vLLM and SGLang run every step eagerly with them ([deepep]);
            # TensorRT-LLM's PyTorch backend too ([trtep]: DeepEP's normal kernels without CUDA graphs)
            given.update(graph_batch=0, graph_tokens=0)
        if "graph_batch" in given and knobs.get("graph_tokens"):
            # one capture ceiling (vLLM V1's max_cudagraph_capture_size, in tokens) bounds its piecewise
            # graphs as well as its decode graphs: a stated `graph_batch` was left beside graph_tokens
            # = 512, which graphed every iteration up to 512 tokens whatever it said ([v1blog]); it is
            # that ceiling, in tokens ([v1graphs]), and `graphed` counts a decode step's draft tokens
            given.setdefault("graph_tokens", given["graph_batch"])
        return Engine(**knobs | given, name=self.name, releases=self.releases)


# Host time per iteration, derived from the sources' shares (ESTIMATE each; the arithmetic is
# in docs/serving.md). [v060]: on v0.5.3 the host took 62 % of a Llama 3 8B H100 run, whose
# GPU step at the benchmark's ~256 sequences is about 10 ms: about 16 ms of host time, 60 us
# per sequence and 2 ms per step. v0.6: multi-step's +28 % on 70B (4 x H100, GPU step ~20 ms
# at 256 sequences) leaves about 5.5 ms of scheduling and input preparation per step: 25 us
# per sequence and 1 ms per step, outputs processed asynchronously. [sgl04]: overlapping
# SGLang v0.3's host work gained 1.1x, so it was about a tenth of a ~10 ms step: 0.5 ms and
# 2 us per sequence. V1's persistent batch and TRT-LLM's C++ batch manager: ASSUMPTION a
# tenth of v0.6's, and the PyTorch backend's Python executor a third of v0.6's, overlapped.
_PYTORCH_EAGER = {"eager_op_s": EAGER_OP_S}  # prompt iterations and large batches issued op by op
_VLLM_ALL_REDUCE = "[sgl2904]: vLLM's CustomAllreduce, measured on H100"
_TRT_ENGINE_MOE = ("[trtmoe]: the TensorRT engines run no attention data parallelism; every GPU holds every "
                   "token and the MoE plugin's all-reduce sums the experts, so no dispatcher sends tokens")
_TRT_ENGINE_ALL_REDUCE = ("ASSUMPTION: the TensorRT engines' custom all-reduce plugin shares CUDA IPC buffers "
                          "inside one host, as [vllmcar]; the multi-node NVLink kernel came with the PyTorch "
                          "backend ([trtmnnvl])")

PROFILES = {p.name: p for p in (
    Profile("ideal", "ideal", "2023-01", None, "no engine: the replica's kernels alone, every batch mixed",
            {"mnnvl": True}, {"*": "the cost model's own iteration: a bound no engine beats"}),
    Profile("vllm_0_2", "vllm", "2023-06", "2024-01", "vLLM 0.2.0-0.2.7",
            {"chunk": 16384, "max_seqs": 256, "mixed": False, "graph_batch": 256, **_PYTORCH_EAGER,
             "step_s": 2e-3, "seq_s": 60e-6, "preemption": "recompute", "moe_path": "per_expert", "block": 16,
             "frontend_s": 2e-3, "layer_kernels": 10, "all_reduce": "vllm"},
            {"mixed": "[v0sched]", "max_seqs": "[v0sched]", "graph_batch": "[v0sched]", "block": "[v0sched]",
             "all_reduce": _VLLM_ALL_REDUCE,
             "preemption": "[v0sched]", "moe_path": "[moe2542]: before it, each GPU looped over its own whole experts (expert parallel)",
             "step_s": "ESTIMATE from [v060]", "seq_s": "ESTIMATE from [v060]",
             "chunk": "ASSUMPTION: max_num_batched_tokens = max_model_len of a 16k deployment",
             "frontend_s": "ESTIMATE: HTTP, tokenizing and streaming the first token (API server in process)",
             "layer_kernels": "[llama]"}),
    Profile("vllm_v0", "vllm", "2024-02", "2024-08", "vLLM 0.3.0-0.5.5, the V0 engine",
            {"chunk": 16384, "max_seqs": 256, "mixed": False, "graph_batch": 256, "graph_pad": 8, **_PYTORCH_EAGER,
             "step_s": 2e-3, "seq_s": 60e-6, "preemption": "recompute", "moe_kernel": "triton", "moe_path": "tp_sharded", "block": 16,
             "frontend_s": 2e-3, "layer_kernels": 10, "all_reduce": "vllm"},
            {"mixed": "[v0sched]", "max_seqs": "[v0sched]", "graph_batch": "[v0sched]", "block": "[v0sched]",
             "graph_pad": "[v0pad] (read in 0.3.0 and 0.5.5)", "all_reduce": _VLLM_ALL_REDUCE,
             "moe_kernel": "model/serve/moe.py triton_tile: vLLM's Triton fused_moe picks BLOCK_SIZE_M by token count", "preemption": "[v0sched]", "moe_path": "[moe2542]: the fused MoE kernel over TP-sharded experts",
             "step_s": "ESTIMATE from [v060] (v0.5.3)", "seq_s": "ESTIMATE from [v060] (v0.5.3)",
             "chunk": "ASSUMPTION: max_num_batched_tokens = max_model_len of a 16k deployment",
             "frontend_s": "ESTIMATE: HTTP, tokenizing and streaming the first token (API server in process)",
             "layer_kernels": "[llama]"}),
    Profile("vllm_0_6", "vllm", "2024-09", "2025-02", "vLLM 0.6.0-0.7.x, the V0 engine with its API server apart",
            {"chunk": 16384, "max_seqs": 256, "mixed": False, "graph_batch": 256, "graph_pad": 8, **_PYTORCH_EAGER,
             "step_s": 1e-3, "seq_s": 25e-6, "preemption": "recompute", "moe_kernel": "triton", "moe_path": "tp_sharded", "block": 16,
             "frontend_s": 2e-3, "layer_kernels": 10, "all_reduce": "vllm"},
            {"mixed": "[v0sched]", "max_seqs": "[v0sched]", "graph_batch": "[v0sched]", "block": "[v0sched]",
             "graph_pad": "[v0pad] (read in 0.6.0 and 0.6.2; ASSUMPTION for 0.6.3-0.7.x)", "all_reduce": _VLLM_ALL_REDUCE,
             "moe_kernel": "model/serve/moe.py triton_tile: vLLM's Triton fused_moe picks BLOCK_SIZE_M by token count", "preemption": "[v0sched]", "moe_path": "[moe2542] [trtmoe]", "step_s": "ESTIMATE from [v060] (multi-step +28 %)",
             "seq_s": "ESTIMATE from [v060]; output processing overlapped (async output)",
             "chunk": "ASSUMPTION: max_num_batched_tokens = max_model_len of a 16k deployment",
             "frontend_s": "ESTIMATE: the API server process and its ZMQ hop", "layer_kernels": "[llama]"}),
    Profile("vllm_v1", "vllm", "2025-03", None, "vLLM 0.8.0 and later, the V1 engine",
            {"chunk": 8192, "max_seqs": 1024, "mixed": True, "graph_batch": 512, "graph_tokens": 512,
             **_PYTORCH_EAGER, "step_s": 0.1e-3, "seq_s": 2.5e-6, "preemption": "recompute", "moe_kernel": "triton", "moe_path": "ep_with_dp",
             "dispatcher": "allgather", "block": 16, "frontend_s": 2e-3, "layer_kernels": 10, "rank_order": ("tp", "pp", "ep"), "all_reduce": "vllm"},
            {"chunk": "[v1args]", "all_reduce": _VLLM_ALL_REDUCE, "max_seqs": "[v1args]", "mixed": "[v1args]", "graph_batch": "[v1blog]",
             "graph_tokens": "[v1blog]", "step_s": "ASSUMPTION: a tenth of v0.6's ([v1blog] persistent batch)",
             "seq_s": "ASSUMPTION: a tenth of v0.6's", "preemption": "V1 recomputes (vllm/v1/core/sched)",
             "moe_kernel": "model/serve/moe.py triton_tile: vLLM's Triton fused_moe picks BLOCK_SIZE_M by token count", "moe_path": "[vllmep]: TP-sharded experts on one attention group, whole experts over TP x DP with "
                         "--enable-expert-parallel (as the vLLM export launches data-parallel attention)", "block": "[v0sched]", "frontend_s": "ESTIMATE: the API server process",
             "layer_kernels": "[llama]", "rank_order": "[vllmrank]",
             "dispatcher": "[vllmagrs]: vLLM's default all2all backend, which the export launches"},
            small_gpu={"chunk": 2048, "max_seqs": 256}),
    Profile("sglang_0_3", "sglang", "2024-09", "2024-11", "SGLang 0.3.x",
            {"chunk": 8192, "mixed": False, "graph_batch": 160, "graph_pad": 8, **_PYTORCH_EAGER, "step_s": 0.5e-3,
             "seq_s": 2e-6, "overlap": False, "preemption": "recompute", "moe_kernel": "triton", "moe_path": "tp_sharded", "block": 1,
             "frontend_s": 2e-3, "layer_kernels": 10, "all_reduce": "vllm"},
            {"chunk": "[sglargs]", "all_reduce": "[sgl2904]: SGLang 0.3 ran vLLM's custom all-reduce (vLLM's distributed layer)", "mixed": "[sglargs]", "graph_batch": "[sglargs]", "block": "[sglargs]",
             "graph_pad": "[sglpad] (ASSUMPTION for 0.3.1-0.3.x)",
             "step_s": "ESTIMATE from [sgl04]", "seq_s": "ESTIMATE from [sgl04]",
             "overlap": "[sgl04]: the overlap scheduler came in 0.4",
             "preemption": "SGLang retracts decoding requests and recomputes them",
             "moe_kernel": "model/serve/moe.py triton_tile: vLLM's Triton fused_moe picks BLOCK_SIZE_M by token count", "moe_path": "fused_moe ported from vLLM (sgl-project/sglang pull 460), TP-sharded experts",
             "frontend_s": "ESTIMATE: tokenizer and detokenizer processes", "layer_kernels": "[llama]"}),
    Profile("sglang", "sglang", "2024-12", None, "SGLang 0.4.0 and later",
            {"chunk": 8192, "mixed": False, "graph_batch": 160, **_PYTORCH_EAGER, "step_s": 0.5e-3,
             "seq_s": 2e-6, "overlap": True, "overlap_pp": False, "preemption": "recompute", "moe_kernel": "triton", "moe_path": "tp_sharded",
             "dispatcher": "allgather", "gather_stage": True,
             "block": 1, "frontend_s": 2e-3, "layer_kernels": 10, "all_reduce": "sglang"},
            {"chunk": "[sglargs]", "mixed": "[sglargs]", "graph_batch": "[sglargs]", "block": "[sglargs]",
             "all_reduce": "[sgl2904]: SGLang's own kernel (from 0.4.2; ASSUMPTION for 0.4.0-0.4.1)",
             "overlap": "[sgl04]", "overlap_pp": "[sglpp]", "step_s": "ESTIMATE from [sgl04]", "seq_s": "ESTIMATE from [sgl04]",
             "preemption": "SGLang retracts decoding requests and recomputes them", "moe_kernel": "model/serve/moe.py triton_tile: vLLM's Triton fused_moe picks BLOCK_SIZE_M by token count", "moe_path": "[trtmoe]: fused MoE over TP-sharded experts unless --ep-size",
             "frontend_s": "ESTIMATE: tokenizer and detokenizer processes", "layer_kernels": "[llama]",
             "rank_order": "[sglrank]", "dispatcher": "[sgldpa]: SGLang's default under data-parallel attention, "
             "which its export launches", "gather_stage": "[sgldpa]"}),
    Profile("trtllm_0_9", "trtllm", "2024-04", "2024-07", "TensorRT-LLM 0.9-0.11, TensorRT engines",
            {"chunk": 8192, "max_seqs": 256, "mixed": True, "step_s": 0.1e-3, "seq_s": 2.5e-6,
             "preemption": "reserve", "moe_path": "tp_sharded", "block": 64, "grouped_exchange": True},
            {"chunk": "trtllm-build max_num_tokens 8192 (ASSUMPTION: the builds' default)",
             "max_seqs": "trtllm-build max_batch_size 256", "mixed": "[trtifb]", "preemption": "[trtifb]",
             "block": "[trtifb]", "moe_path": "[trtmoe]", "grouped_exchange": _TRT_ENGINE_MOE,
             "step_s": "ASSUMPTION: a tenth of vLLM 0.6's (C++ batch manager)", "seq_s": "ASSUMPTION: as step_s",
             "mnnvl": _TRT_ENGINE_ALL_REDUCE}),
    Profile("trtllm_0_12", "trtllm", "2024-08", "2025-04", "TensorRT-LLM 0.12-0.18, TensorRT engines",
            {"chunk": 8192, "max_seqs": 256, "mixed": True, "step_s": 0.1e-3, "seq_s": 2.5e-6,
             "preemption": "reserve", "moe_path": "tp_sharded", "block": 64, "grouped_exchange": True},
            {"chunk": "trtllm-build max_num_tokens 8192", "max_seqs": "trtllm-build max_batch_size 256",
             "mixed": "[trtifb]", "preemption": "[trtifb]", "block": "[trtifb]",
             "moe_path": "[trtmoe]: CUTLASS grouped MoE GEMMs, TP-sharded experts unless moe_ep_size",
             "grouped_exchange": _TRT_ENGINE_MOE,
             "step_s": "ASSUMPTION: a tenth of vLLM 0.6's (C++ batch manager)", "seq_s": "ASSUMPTION: as step_s",
             "mnnvl": _TRT_ENGINE_ALL_REDUCE}),
    Profile("trtllm_pytorch", "trtllm", "2025-05", None, "TensorRT-LLM 0.19 and later, the PyTorch backend (the default from 1.0)",
            {"chunk": 8192, "max_seqs": 2048, "mixed": True, "graph_batch": 128, **_PYTORCH_EAGER,
             "step_s": 0.3e-3, "seq_s": 8e-6, "overlap": True, "preemption": "reserve", "moe_path": "tp_sharded",
             "dispatcher": "allgather", "grouped_exchange": True, "block": 32, "layer_kernels": 7, "mnnvl": True},
            {"chunk": "LLM API max_num_tokens 8192", "mnnvl": "[trtmnnvl]", "max_seqs": "LLM API max_batch_size 2048",
             "mixed": "[trtifb]", "graph_batch": "ASSUMPTION: cuda_graph_config max_batch_size 128",
             "overlap": "[trtovl]", "preemption": "[trtifb]", "block": "[trtifb]",
             "step_s": "ASSUMPTION: a third of vLLM 0.6's (Python executor)", "seq_s": "ASSUMPTION: as step_s",
             "moe_path": "[trtmoe]: CUTLASS fused MoE (DeepGEMM for fp8 on Hopper), TP-sharded unless EP",
             "dispatcher": "[trtep]: all-gather + reduce-scatter, the 1.0-era choice without MNNVL or DeepEP and "
                           "whenever the expert ranks are no more than top_k (ASSUMPTION for later releases, which "
                           "try an all-to-all first: pin `dispatcher = alltoall`, or `deepep` where it is on)",
             "grouped_exchange": "[trtep]",
             "layer_kernels": "ASSUMPTION: [llama] less rotary and cache write (fused into its attention op) and "
                              "the norms fused with the all-reduces"}),
)}
IDEAL = Engine()


def profile(name: str) -> Profile:
    return PROFILES[name]


def family_of(engine: Engine) -> str:
    """The family (vllm, sglang, trtllm) of the profile `engine` was made from; "" for one no profile names."""
    made_from = PROFILES.get(engine.name)
    return made_from.family if made_from is not None else ""


def profile_for(family: str, date: str) -> Profile:
    """The profile of `family` whose releases cover `date` (YYYY-MM)."""
    for p in PROFILES.values():
        if p.family == family and p.first <= date and (p.last is None or date <= p.last):
            return p
    spans = "; ".join(f"{p.name}: {p.first} to {p.last or 'now'}" for p in PROFILES.values() if p.family == family)
    raise KeyError(f"no {family} engine covers {date} ({spans})")


def _names_agree() -> None:
    from ...compiler.schema import SERVING_ENGINES
    assert tuple(PROFILES) == SERVING_ENGINES, "the language and the model name the same engines"


_names_agree()
