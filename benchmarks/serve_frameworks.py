"""Framework benchmark tables for benchmarks/serve_accuracy.py: SGLang v0.3.0 and vLLM v0.6.0
serving Llama 3.1 on A100 and H100, online (Poisson arrivals at a stated rate) and offline
(every prompt at once). Nothing is fitted: the rows only compare.

Source (both engines, one table each): github.com/sgl-project/sglang @120affb9
benchmark/benchmark_vllm_060/README.md, "Online benchmark results" (median TTFT and TPOT, ms)
and "Offline benchmark results" (output token throughput, tokens/s); its commands state the
model, GPUs, TP, memory fractions, prompt counts and rates. ShareGPT prompts; bf16 (the
checkpoints' dtype: no quantization flag is passed).

Predicted with gclc's replica model and the continuous-batching simulation (serve_sim), at the
mean prompt length below and outputs spread around the mean below (serve_common
`output_length`), one replica of the stated TP.
"""

from __future__ import annotations

from dataclasses import dataclass

from gclc.compiler.lower import lower_cluster
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.shape import ModelShape
from gclc.solver.serve.sim import Pool, simulate
from serve_common import latency, online, poisson_arrivals, queued, result

URL = "github.com/sgl-project/sglang @120affb9 benchmark/benchmark_vllm_060/README.md"
# Output tokens per ShareGPT request: the offline table's output tokens/s over its requests/s
# (4281.51 / 22.03 = 194.3 and 3856.01 / 19.84 = 194.4 for SGLang; vLLM's give the same).
OSL = 194
ISL = 220       # ESTIMATE: mean ShareGPT prompt tokens (not stated in the table)


@dataclass(frozen=True)
class Engines:
    mem_frac: float     # the share of HBM for weights and KV cache
    max_batch: int      # running requests the scheduler allows
    chunk: int          # prompt tokens per iteration
    steps: int = 1      # decode steps per scheduling round
    fence: bool = False  # custom all-reduce built before vllm pull 8558 (Engine.all_reduce_fence)


# SGLang v0.3.0: mem_frac 0.88 (README notes: 0.88 at TP 1, set to 0.88 at TP 4); its running-request
# limit follows from the cache (ASSUMPTION: no explicit cap, 4096 here); chunked prefill of 8192
# tokens (ASSUMPTION: the default of that release). vLLM v0.6.0: gpu_memory_utilization 0.9 (README),
# max_num_seqs 256 and, with --max_model_len 4096 and no chunked prefill, 4096 batched tokens
# (ASSUMPTION: vLLM's defaults of that release).
# vLLM was started with `--num-scheduler-steps 10` (the README's Notes and commands): multi-step
# scheduling, prompts join the batch only every 10 decode steps.
# Both ran vLLM's custom all-reduce as built before vllm pull 8558 (model/serve/allreduce.py [vllm8558]):
# vLLM v0.6.0's csrc/custom_all_reduce.cuh, and SGLang v0.3.0's pinned vllm==0.5.5 (its wheel's METADATA),
# whose two-stage kernel fences its middle barrier with __threadfence_system.
ENGINES = {"SGL030": Engines(0.88, 4096, 8192, fence=True), "VLLM060": Engines(0.90, 256, 4096, 10, fence=True)}
# the engines by release (model/serve/engines.py), their knobs overridden by the commands above
PROFILES = {"SGL030": "sglang_0_3", "VLLM060": "vllm_0_6"}


@dataclass(frozen=True)
class FrameworkRow:
    source: str         # SGL030 or VLLM060
    model: str
    cluster: str
    tp: int
    rate: float | None  # requests per second (None: offline, all at once)
    prompts: int
    metric: str         # ttft_p50_s, tpot_p50_s, tok_s
    measured: float
    precision: str = "bf16"
    assumed: str = "input length, max batch, chunk size (see ENGINES)"

    @property
    def scenario(self) -> str:
        return "Offline" if self.rate is None else "Server"


def rows() -> list[FrameworkRow]:
    out = []
    online = {  # (model, cluster, tp): {rate: {engine: (median TTFT ms, median TPOT ms)}}
        ("Llama31_8B", "A100_Box", 1): {4: {"SGL030": (31.98, 13.17), "VLLM060": (100.48, 14.14)},
                                        8: {"SGL030": (35.68, 17.85), "VLLM060": (120.39, 17.09)}},
        ("Llama33_70B", "H100_Box", 4): {4: {"SGL030": (53.94, 25.03), "VLLM060": (179.15, 23.58)},
                                         8: {"SGL030": (58.11, 33.07), "VLLM060": (207.12, 29.15)}},
    }
    for (model, cluster, tp), rates in online.items():
        for rate, engines in rates.items():
            for engine, (ttft, tpot) in engines.items():
                prompts = 300 * rate  # 1200 at 4 req/s, 2400 at 8
                out.append(FrameworkRow(engine, model, cluster, tp, rate, prompts, "ttft_p50_s", ttft / 1e3))
                out.append(FrameworkRow(engine, model, cluster, tp, rate, prompts, "tpot_p50_s", tpot / 1e3))
    offline = {("Llama31_8B", "A100_Box", 1): {"SGL030": 4281.51, "VLLM060": 4132.37},
               ("Llama33_70B", "H100_Box", 4): {"SGL030": 3856.01, "VLLM060": 3700.64}}
    for (model, cluster, tp), engines in offline.items():
        for engine, tokens in engines.items():
            out.append(FrameworkRow(engine, model, cluster, tp, None, 5000, "tok_s", tokens))
    return out


def predict(row: FrameworkRow, design) -> float:
    e = ENGINES[row.source]
    shape = ModelShape.from_entity(design[row.model])   # Llama 3.3 70B has Llama 3.1 70B's shape
    partition = lower_cluster(design[row.cluster]).partitions[0]
    chip = partition.node.accelerator
    engine = profile(PROFILES[row.source]).engine(chip.hbm_capacity, chip.name, chunk=e.chunk, scheduler_steps=e.steps,
                                                  max_seqs=e.max_batch, all_reduce_fence=e.fence)
    r = replica(shape, ServeConfig(row.tp, e.max_batch, row.precision), partition, engine)
    pool = Pool(r, 1, e.max_batch, r.kv_capacity_tokens(e.mem_frac * r.hbm))
    if row.rate is None:
        return simulate(queued(row.prompts, ISL, OSL, vary=True), pool).tokens_per_s
    key = (row.source, row.model, row.cluster, row.tp, row.rate, row.prompts)
    return latency(online(key, lambda: poisson_arrivals(row.rate, row.prompts, ISL, OSL, vary=True), pool), row.metric)


def results(design) -> list[dict]:
    return [result(source=row.source, model=row.model, cluster=row.cluster, precision=row.precision, tp=row.tp,
                   batch=ENGINES[row.source].max_batch, isl=ISL, osl=OSL, metric=row.metric, measured=row.measured,
                   predicted=predict(row, design), scenario=row.scenario, log=URL, assumed=row.assumed)
            for row in rows()]
