"""MLPerf Inference datacenter results for benchmarks/serve_accuracy.py: the published rows and
how gclc predicts each one. Nothing is fitted: the rows only compare.

Scenarios (MLPerf Inference rules, LoadGen):
  Offline  every sample queued at once; the result is output tokens per second of the whole
           system. Predicted: one replica simulated (serve_sim) on a queue of requests at the
           benchmark's mean lengths, with the batch limit the submitter's config states (or the
           largest that fits), times the replicas the system holds.
  Server   Poisson arrivals at the scheduled rate for the run's duration; the log states the P50/P99
           first-token latency and time per output token over every query of the run (LoadGen counts
           them all: loadgen/results.cc ProcessTokenLatencies). Predicted: the system's replicas
           simulated at that rate for that duration (join the least-loaded replica), the same
           percentiles read over every request. The duration matters near saturation: a queue that
           grows slowly needs minutes to reach the lengths it keeps. A submitter may raise the rate
           until a P99 meets the constraints (github.com/mlcommons/inference loadgen/mlperf.conf:
           llama2-70b and mixtral-8x7b Server ttft_latency = 2000, tpot_latency = 200, ms; results.cc
           PerfConstraintsMet), but these did not: their logs' P99s sit well inside (TPOT 175 and 146 ms,
           TTFT 0.46 and 0.45 s), so the runs are read at their published rate, not at a knee
           (`margin` finds the modeled system's own knee, solver/serve/knee.py, for comparison).
  Engine   as each submission ran TensorRT-LLM (NVIDIA's harness configs, `KNOBS`): in-flight batching
           with chunked context (first come, first served) within max_num_tokens per iteration, and the
           max_util capacity scheduler, which admits while the cache holds the sequences' current
           lengths and pauses (evicts and later recomputes) the newest when it fills, instead of the
           release's default GUARANTEED_NO_EVICT reservation of each sequence's whole length.

Every row names its log (repository, commit, path). Lengths: the mean output per sample is
the log's tokens/s divided by samples/s, each request's drawn around it (serve_common
`output_length`: the data sets' answers differ in length); input lengths are not in the logs
(ESTIMATE, see `ISL`). Settings the submission does not state are marked in the row's `assumed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gclc.compiler.lower import lower_cluster
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.shape import ModelShape
from gclc.solver.serve.knee import knee
from gclc.solver.serve.sim import Pool, simulate
from serve_common import kept, latency, online, poisson_arrivals, queued, result

V41 = "github.com/mlcommons/inference_results_v4.1 @a2f5d66d closed/NVIDIA/results/"
V50 = "github.com/ntuhpc/mlperf_inference_results_v5.0 (mirror of mlcommons v5.0) @cf354115 closed/NVIDIA/results/"
V51 = "github.com/ntuhpc/inference_results_v5.1 (mirror of mlcommons v5.1) @a634ab77 closed/NVIDIA/results/"
CFG41 = "github.com/mlcommons/inference_results_v4.1 @a2f5d66d closed/NVIDIA/configs/llama2-70b/{Offline,Server}/__init__.py"

# Mean input tokens per benchmark. ESTIMATE: the result logs state output tokens only; these are
# the datasets' means as we understand them (Llama 2 70B: OpenOrca subset, inputs capped at 1,024;
# Mixtral: OpenOrca + GSM8K + MBXP mix; Llama 3.1 405B: long-context mix up to 128k; DeepSeek-R1:
# math/code/QA reasoning prompts) and are the largest uncertainty of these rows.
# DeepSeek-R1: TensorRT-LLM's ADP-balance study ran DeepSeek on "average input length: 803 tokens, average
# output length: 3,653 tokens" (github.com/NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/
# blog10_ADP_Balance_Strategy.md, "Dataset Configuration"), an output mean within 2 % of the v5.1 logs' 3,715-3,736
ISL = {"Llama2_70B": 294, "Mixtral_8x7B": 450, "Llama31_405B": 9400, "DeepSeekR1": 803}
KV_SHARE = 0.90           # CFG41: kvcache_free_gpu_mem_frac = 0.90 (TRT-LLM: of the memory left after the weights)
MAX_BATCH = 2048          # ASSUMPTION: the batch limit where a config states none
QUEUE = 16                # offline: queued requests per batch slot (MLPerf queues ~10^5; the ramp and drain stay < 1/16)
# Server run length, seconds: CFG41's ServerGPUBaseConfig sets min_duration = 2400000 ms for
# Llama 2 70B; elsewhere LoadGen's default of 10 minutes (mlperf.conf *.Server.min_duration =
# 600000; ASSUMPTION for the submissions whose configs are not published)
DURATION = {"Llama2_70B": 2400.0}
DEFAULT_DURATION = 600.0
# The Server scenario's latency constraints (loadgen/mlperf.conf, ms -> s): P99 over every sample
CONSTRAINTS = {"Llama2_70B": {"ttft.p99": 2.0, "tpot.p99": 0.2}, "Mixtral_8x7B": {"ttft.p99": 2.0, "tpot.p99": 0.2}}
# The knee is sought between these shares of the modeled system's own Offline capacity (never the
# published rate): Poisson arrivals break a P99 bound below capacity, a finite run may pass above it
KNEE_BRACKET = (0.5, 1.2)

XXD = "github.com/sheldon-xiong/xxd-mlpinf @a7e9579c (a copy of NVIDIA's later closed/NVIDIA code) closed/NVIDIA/configs/"
# TensorRT-LLM runtime flags of NVIDIA's Server configs: batch_scheduler_policy max_util (-> preemption by
# recompute, not the default reservation), enable_chunked_context with context_chunking_policy
# first_come_first_served, and max_num_tokens (-> chunk: tokens per iteration). ASSUMPTION: the v4.1
# submissions ran the same flags (their results repository states batch, tp and the KV share only).
KNOBS = {
    # XXD DGX-H100_H100-SXM-80GBx2/Server/llama2-70b.py and DGX-H100_H100-SXM-80GBx8/Server/llama2-70b.py:
    # the TP 2 settings build max_num_tokens = 2048
    ("Llama2_70B", "H100_Box"): {"preemption": "recompute", "chunk": 2048},
    # XXD H200-SXM-141GBx8/Server/llama2-70b.py (TP 1): max_num_tokens = 1536
    ("Llama2_70B", "H200_Box"): {"preemption": "recompute", "chunk": 1536},
    # XXD DGX-H100_H100-SXM-80GBx8/Server/mixtral-8x7b.py (TP 1, server_target_qps 348.0; v4.1's log
    # scheduled 348.37): max_num_tokens = 16384
    ("Mixtral_8x7B", "H100_Box"): {"preemption": "recompute", "chunk": 16384},
}
# DeepSeek-R1 Offline as NVIDIA's v5.1 submissions ran it (V51CFG {B200-SXM-180GBx8,
# GB200-NVL72_GB200-186GB_aarch64x72}/Offline/deepseek-r1.py, the same settings on both): TensorRT-LLM's
# PyTorch backend with enable_attention_dp (tensor_parallelism 8 over attention data parallelism: eight
# attention groups of one GPU, here tp 1 x ep 8) and moe_expert_parallelism 8; gpu_batch_size 512 is the
# engine's max_batch_size, which "applies per attention-rank" (V51CODE llmlib/config.py), so 8 x 512 per
# replica; max_num_tokens 4608 with enable_chunked_context False (a prompt joins whole; the 803-token
# prompts fit) and batch_scheduler_policy max_util (preemption by recompute); kvcache_free_gpu_mem_frac 0.9;
# cuda_graph_batch_sizes up to 512 per rank (decode batches up to 8 x 512 per replica run as CUDA graphs)
OFFLINE_KNOBS = {("DeepSeekR1", "B200_Box"): {"preemption": "recompute", "chunk": 4608, "graph_batch": 8 * 512},
                 ("DeepSeekR1", "GB200_Rack"): {"preemption": "recompute", "chunk": 4608, "graph_batch": 8 * 512}}
DEEPSEEK_BATCH = 8 * 512
V51CFG = "github.com/mlcommons/inference_results_v5.1 @965182b0 closed/NVIDIA/configs/"
V51CODE = "github.com/mlcommons/inference_results_v5.1 @965182b0 closed/NVIDIA/code/"
V51LOG = "github.com/mlcommons/inference_results_v5.1 @965182b0 closed/NVIDIA/results/"

# Mixtral's checkpoint mixes fp8 with bf16 layers: NVIDIA's MLPerf configs for it (github.com/sheldon-xiong/
# xxd-mlpinf @a7e9579c, a copy of NVIDIA's later closed/NVIDIA code: configs/DGX-H100_H100-SXM-80GBx1/{Offline,
# Server}/mixtral-8x7b.py and H200-SXM-141GBx8/Offline/mixtral-8x7b.py) set trtllm_checkpoint_flags
# effective_bits = 8.75 (ModelOpt AutoQuantize over fp8 and bf16), so (8.75 - 8) / (16 - 8) of the weights
# stay bf16. ASSUMPTION: the v4.1 submission's checkpoint was built the same way (its configs are not published)
WIDE_SHARE = {"Mixtral_8x7B": (8.75 - 8) / (16 - 8)}


def nvfp4_wide_share(shape: ModelShape) -> float:
    """The share of DeepSeek-R1's non-expert weights NVIDIA's NVFP4 checkpoint keeps in bf16: its
    quantization config (V51CODE deepseek-r1/tensorrt/hf_quant_config.json, quant_algo NVFP4)
    excludes lm_head, embed_tokens, every layer's self_attn.fused_a (query and KV down-projections,
    rotary key), q_b_proj and kv_b_proj (the query and KV up-projections) and the MoE layers'
    router gate; o_proj, the dense MLPs and every expert are fp4."""
    h, heads = shape.hidden, shape.heads
    down = h * (shape.q_rank + shape.kv_rank + shape.rope_dim)
    up = shape.q_rank * heads * shape.qk_dim + shape.kv_rank * heads * 2 * shape.head_dim
    wide = shape.layers * (down + up) + shape.embedding_params + shape.moe_layers * h * shape.routed
    return wide / (shape.params - shape.routed * shape.expert_params * shape.moe_layers)


# the checkpoints whose non-expert weights stay partly bf16 (ServeConfig.dense_wide_share)
DENSE_WIDE = {"DeepSeekR1": nvfp4_wide_share}


# The TensorRT-LLM release of each round (model/serve/engines.py): v4.1 (2024-08) and v5.0 (2025-04)
# ran TensorRT engines, v5.1 (2025-09) the PyTorch backend (ASSUMPTION: by the rounds' dates; the
# submissions name their TensorRT-LLM commit, not a release)
ENGINE = {"MLPerf41": "trtllm_0_12", "MLPerf50": "trtllm_0_12", "MLPerf51": "trtllm_pytorch"}


@dataclass(frozen=True)
class MLPerfRow:
    source: str              # MLPerf41, MLPerf50, MLPerf51
    model: str
    cluster: str
    gpus: int                # accelerators of the submission
    precision: str
    tp: int
    ep: int
    batch: int | None        # the config's gpu_batch_size per replica (None: the largest that fits)
    scenario: str            # Offline or Server
    samples_per_s: float     # the log's (Server: scheduled samples per second)
    tokens_per_s: float      # the log's output tokens per second
    metric: str              # tok_s, ttft_p50_s, tpot_p50_s
    measured: float
    log: str                 # where the numbers are
    assumed: str = ""        # settings not stated by the submission (ASSUMPTION)

    @property
    def osl(self) -> float:
        return self.tokens_per_s / self.samples_per_s

    @property
    def isl(self) -> int:
        return ISL[self.model]


def _offline(source, model, cluster, gpus, precision, tp, ep, batch, samples, tokens, log, assumed=""):
    return MLPerfRow(source, model, cluster, gpus, precision, tp, ep, batch, "Offline", samples, tokens,
                     "tok_s", tokens, log, assumed)


def _server(source, model, cluster, gpus, precision, tp, ep, batch, scheduled, tokens, latencies, log, assumed=""):
    """A Server run's rows: its TTFT and TPOT percentiles (metric -> seconds) at the scheduled rate."""
    args = (source, model, cluster, gpus, precision, tp, ep, batch, "Server", scheduled, tokens)
    return [MLPerfRow(*args, metric, value, log, assumed) for metric, value in latencies.items()]


def rows() -> list[MLPerfRow]:
    h100, h200 = "DGX-H100_H100-SXM-80GBx8_TRT/", "H200-SXM-141GBx8_TRT/"
    out = [
        # v4.1, Llama 2 70B: H100 TP2 x 4 (batch 896 offline, 1024 server), H200 TP1 x 8 (806 / 896), fp8 (CFG41)
        _offline("MLPerf41", "Llama2_70B", "H100_Box", 8, "fp8", 2, 1, 896, 84.4792, 24524.9,
                 V41 + h100 + "llama2-70b-99.9/Offline/performance/run_1/mlperf_log_summary.txt"),
        _offline("MLPerf41", "Llama2_70B", "H200_Box", 8, "fp8", 1, 1, 806, 107.477, 31302.7,
                 V41 + h200 + "llama2-70b-99/Offline/performance/run_1/mlperf_log_summary.txt"),
        # Server: P50 and P99 TTFT / TPOT (the log's "percentile first token latency" and "time to output token")
        *_server("MLPerf41", "Llama2_70B", "H100_Box", 8, "fp8", 2, 1, 1024, 75.10, 21605.79,
                 {"ttft_p50_s": 0.272954995, "tpot_p50_s": 0.156419276, "ttft_p99_s": 0.461278089,
                  "tpot_p99_s": 0.175354317},
                 V41 + h100 + "llama2-70b-99.9/Server/performance/run_1/mlperf_log_summary.txt"),
        *_server("MLPerf41", "Llama2_70B", "H200_Box", 8, "fp8", 1, 1, 896, 101.25, 29228.22,
                 {"ttft_p50_s": 0.180758928, "tpot_p50_s": 0.124285539, "ttft_p99_s": 0.452744202,
                  "tpot_p99_s": 0.146040006},
                 V41 + h200 + "llama2-70b-99/Server/performance/run_1/mlperf_log_summary.txt"),
        # v4.1, Mixtral 8x7B: the per-scenario configs are not in the results repository
        _offline("MLPerf41", "Mixtral_8x7B", "H100_Box", 8, "fp8", 1, 1, None, 359.173, 52415.9,
                 V41 + h100 + "mixtral-8x7b/Offline/performance/run_1/mlperf_log_summary.txt",
                 "tp 1 per GPU, fp8 with 8.75 effective bits (WIDE_SHARE), batch: the largest that fits"),
        _offline("MLPerf41", "Mixtral_8x7B", "H200_Box", 8, "fp8", 1, 1, None, 404.431, 59022.3,
                 V41 + h200 + "mixtral-8x7b/Offline/performance/run_1/mlperf_log_summary.txt",
                 "tp 1 per GPU, fp8 with 8.75 effective bits (WIDE_SHARE), batch: the largest that fits"),
        # batch 896: XXD DGX-H100_H100-SXM-80GBx8/Server/mixtral-8x7b.py gpu_batch_size
        *_server("MLPerf41", "Mixtral_8x7B", "H100_Box", 8, "fp8", 1, 1, 896, 348.37, 50795.57,
                 {"ttft_p50_s": 0.154281665, "tpot_p50_s": 0.102777619},
                 V41 + h100 + "mixtral-8x7b/Server/performance/run_1/mlperf_log_summary.txt",
                 "tp 1 per GPU, fp8 with 8.75 effective bits (WIDE_SHARE), NVIDIA's later Server flags (KNOBS)"),
        # v5.0, Llama 3.1 405B: no configs published in the mirror
        _offline("MLPerf50", "Llama31_405B", "B200_Box", 8, "fp4", 8, 1, None, 2.32353, 1526.29,
                 V50 + "B200-SXM-180GBx8_TRT/llama3_1-405b/Offline/performance/run_1/mlperf_log_summary.txt",
                 "fp4 weights (NVIDIA's Blackwell submissions), tp 8, batch: the largest that fits"),
        _offline("MLPerf50", "Llama31_405B", "GB200_Rack", 72, "fp4", 8, 1, None, 21.1733, 13886.4,
                 V50 + "GB200-NVL72_GB200-186GB_aarch64x72_TRT_Triton/llama3_1-405b/Offline/performance/run_1/"
                 "mlperf_log_summary.txt", "fp4, 9 replicas of tp 8, batch: the largest that fits"),
        # v5.1, DGX B200 results table (summary.html): offline tokens/s. Its TOKENS_PER_SAMPLE is the
        # accuracy floor, 90 % of the reference run's mean (as 265.005 = 0.9 x 294.45 for Llama 2 70B),
        # so output per sample = floor / 0.9 and samples/s = tokens / that
        # DeepSeek-R1 (OFFLINE_KNOBS): the run's own log, samples and tokens per second
        _offline("MLPerf51", "DeepSeekR1", "B200_Box", 8, "fp4", 1, 8, DEEPSEEK_BATCH, 8.93431, 33379.0,
                 V51LOG + "B200-SXM-180GBx8_TRT/deepseek-r1/Offline/performance/run_1/mlperf_log_summary.txt"),
        _offline("MLPerf51", "Llama31_405B", "B200_Box", 8, "fp4", 8, 1, None, 1624.11 / (616.212 / 0.9), 1624.11,
                 V51 + "B200-SXM-180GBx8_TRT/summary.html (llama3.1-405b Offline)",
                 "fp4, tp 8, batch: the largest that fits"),
        _offline("MLPerf51", "Llama2_70B", "B200_Box", 8, "fp4", 1, 1, None, 101527.0 / (265.005 / 0.9), 101527.0,
                 V51 + "B200-SXM-180GBx8_TRT/summary.html (llama2-70b-99 Offline)",
                 "fp4, tp 1 x 8, batch: the largest that fits"),
        # v5.1, GB200 NVL72 (72 GPUs) results table (summary.html), offline tokens/s
        _offline("MLPerf51", "DeepSeekR1", "GB200_Rack", 72, "fp4", 1, 8, DEEPSEEK_BATCH, 77.995, 289712.0,
                 V51LOG + "GB200-NVL72_GB200-186GB_aarch64x72_TRT/deepseek-r1/Offline/performance/run_1/"
                 "mlperf_log_summary.txt", "9 replicas of 8 GPUs (72 GPUs, the configuration's 8 per replica)"),
        _offline("MLPerf51", "Llama31_405B", "GB200_Rack", 72, "fp4", 8, 1, None, 14774.30 / (616.212 / 0.9), 14774.30,
                 V51 + "GB200-NVL72_GB200-186GB_aarch64x72_TRT/summary.html (llama3.1-405b Offline)",
                 "fp4, 9 replicas of tp 8, batch: the largest that fits"),
    ]
    return out


def _replica(row: MLPerfRow, design, batch: int = 1):
    shape = ModelShape.from_entity(design[row.model])
    partition = lower_cluster(design[row.cluster]).partitions[0]
    kv = "fp8" if row.precision in ("fp8", "fp4") else None
    cfg = ServeConfig(row.tp, batch, row.precision, ep=row.ep, kv_precision=kv,
                      wide_share=WIDE_SHARE.get(row.model, 0.0),
                      dense_wide_share=DENSE_WIDE[row.model](shape) if row.model in DENSE_WIDE else 0.0)
    chip = partition.node.accelerator
    # NVIDIA's harness runs TensorRT-LLM in process (no HTTP front end); the round's release
    knobs = (KNOBS if row.scenario == "Server" else OFFLINE_KNOBS).get((row.model, row.cluster), {})
    engine = profile(ENGINE[row.source]).engine(chip.hbm_capacity, chip.name, frontend_s=0.0,
                                                block=64 if shape.is_mla else None, **knobs)
    return replica(shape, cfg, partition, engine)


def _kv_tokens(r) -> float:
    """The cache TRT-LLM allocates: KV_SHARE of the memory the weights leave free."""
    return r.kv_capacity_tokens(r.hbm - (1 - KV_SHARE) * (r.hbm - r.weights))


def _batch(row: MLPerfRow, design) -> int:
    if row.batch is not None:
        return row.batch
    probe = _replica(row, design)
    fits = int(_kv_tokens(probe) // probe.kv.tokens_held(row.isl, row.osl))
    return max(1, min(MAX_BATCH, fits))


def predict(row: MLPerfRow, design) -> float:
    batch = _batch(row, design)
    r = _replica(row, design, batch)
    replicas = row.gpus // r.gpus
    kv_tokens = _kv_tokens(r)
    osl = max(1, round(row.osl))
    if row.scenario == "Offline":
        requests = queued(QUEUE * batch, row.isl, osl, vary=True)
        return replicas * simulate(requests, Pool(r, 1, batch, kv_tokens)).tokens_per_s
    return latency(server_run(row, design), row.metric)


def server_run(row: MLPerfRow, design):
    """The Server run simulated at its published rate for its duration, every sample measured."""
    pool = _server_pool(row, design)
    osl = max(1, round(row.osl))
    count = round(row.samples_per_s * DURATION.get(row.model, DEFAULT_DURATION))
    key = (row.source, row.model, row.cluster, row.tp, row.ep, row.batch, row.samples_per_s)
    return online(key, lambda: poisson_arrivals(row.samples_per_s, count, row.isl, osl, vary=True), pool,
                  warmup_s=0.0)


def _server_pool(row: MLPerfRow, design) -> Pool:
    """The Server system's replicas (least-loaded routing)."""
    batch = _batch(row, design)
    r = _replica(row, design, batch)
    return Pool(r, row.gpus // r.gpus, batch, _kv_tokens(r))


def _offline_rate(row: MLPerfRow, pool: Pool) -> float:
    """The modeled system's own Offline capacity, samples per second (queued requests, full batches)."""
    osl = max(1, round(row.osl))
    one = Pool(pool.replica, 1, pool.max_batch, pool.kv_tokens)
    return pool.count * simulate(queued(QUEUE * pool.max_batch, row.isl, osl, vary=True), one).tokens_per_s / row.osl


def server_knee(row: MLPerfRow, design):
    """(rate, run): the highest Poisson rate at which the modeled system meets the Server
    constraints over the run's duration, as a submitter finds it, and that run."""
    def find():
        pool = _server_pool(row, design)
        capacity = _offline_rate(row, pool)
        osl = max(1, round(row.osl))
        duration = DURATION.get(row.model, DEFAULT_DURATION)

        def run(rate, slo, stop):
            requests = poisson_arrivals(rate, round(rate * duration), row.isl, osl, vary=True)
            return simulate(requests, pool, slo=slo, warmup_s=0.0, stop=stop)
        low, high = (share * capacity for share in KNEE_BRACKET)   # never the published rate
        return knee(run, CONSTRAINTS[row.model], low, high) or (low, run(low, {}, None))
    return kept(("knee", row.source, row.model, row.cluster, row.tp, row.ep, row.batch), find)


def results(design) -> list[dict]:
    return [result(source=row.source, model=row.model, cluster=row.cluster, precision=row.precision, tp=row.tp,
                   batch=row.batch, isl=row.isl, osl=round(row.osl), metric=row.metric, measured=row.measured,
                   predicted=predict(row, design), scenario=row.scenario, log=row.log, assumed=row.assumed)
            for row in rows()]



def margin(design) -> list[str]:
    """Each Server run's distance from the modeled system's knee (the highest Poisson rate whose
    P99s meet the constraints over the run's duration) and the log's own P99s against them: a
    submission at its knee would have a P99 at its bound."""
    lines = []
    for row in rows():
        if row.metric != "ttft_p50_s":
            continue
        rate, run = server_knee(row, design)
        logged = {r.metric: r.measured for r in rows() if r.scenario == "Server" and r.model == row.model
                  and r.cluster == row.cluster and r.source == row.source}
        metrics = [key.split(".")[0] for key in CONSTRAINTS[row.model]]
        tails = ", ".join(f"{m.upper()} P99 {logged[m + '_p99_s']:.3g} s" for m in metrics if m + "_p99_s" in logged)
        lines.append(f"  {row.source} {row.model} {row.cluster} Server: the modeled knee is "
                     f"{rate / row.samples_per_s - 1:+.1%} from the published rate (its P50s there: TTFT "
                     f"{latency(run, 'ttft_p50_s'):.3g} s, TPOT {latency(run, 'tpot_p50_s'):.3g} s); the log's "
                     f"{tails or 'P99s are not stated'} against the bounds {CONSTRAINTS[row.model]}")
    return lines


def in_flight(design) -> list[str]:
    """Each Server run's sequences decoding at once, measured (Little's law: scheduled rate per
    replica x output tokens x the log's TPOT P50) and predicted (the same with the simulated
    TPOT P50), beside the sequences the replica's KV cache holds at the mean lengths and the
    batch limit; and the model's own iteration with the measured number decoding (and the
    prompt tokens that rate brings per iteration) against the log's TPOT P50: where those two
    agree the gap is queueing, where they do not it is the cost of an iteration."""
    return [in_flight_line(row, design) for row in rows() if row.metric == "tpot_p50_s"]


def in_flight_line(row: MLPerfRow, design, simulated: bool = True) -> str:
    """`in_flight`'s line for one Server run's TPOT row; without `simulated` the predicted count
    (a simulation of the whole run, the slow part) is left out."""
    pool = _server_pool(row, design)
    per_tpot = row.samples_per_s / pool.count * row.osl   # sequences decoding per second of TPOT
    fits = _kv_tokens(pool.replica) / pool.replica.kv.tokens_held(row.isl, row.osl)
    decoding = per_tpot * row.measured
    prompts = row.samples_per_s / pool.count * row.measured * row.isl     # prompt tokens per iteration
    step = pool.replica.iteration(decoding, decoding * (row.isl + row.osl / 2), prompts, prompts * row.isl / 2,
                                  max(1, round(prompts / row.isl)), layer_mean=True)
    predicted = f"{per_tpot * predict(row, design):,.0f} predicted" if simulated else "not simulated"
    return (f"  {row.source} {row.model} {row.cluster} Server: about {decoding:,.0f} "
            f"sequences decoding per replica (Little's law on the log; {predicted}), the KV cache holds "
            f"{fits:,.0f}, the batch limit is {pool.max_batch}; the model's iteration with {decoding:,.0f} "
            f"decoding takes {step * 1e3:.0f} ms against the log's {row.measured * 1e3:.0f} ms")
