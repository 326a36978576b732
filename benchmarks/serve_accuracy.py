"""Accuracy of gclc's serving model against published serving measurements: predicted vs
measured output throughput and time to first token, one row per measurement.

    .venv/bin/python benchmarks/serve_accuracy.py [--json] [--no-holdout]

The serving model uses the per-chip GEMM, attention and HBM efficiencies that
benchmarks/calibrate.py fitted on *training* runs, so the rows are out-of-sample but for one
constant chosen here: the p of the kernels' p-norm roofline (model/serve/inference.py ROOFLINE_P).
Signed error = predicted / measured - 1.

Sources (every row names one):
  TRT061   TensorRT-LLM v0.6.1, docs/source/performance.md, "Peak Throughput / H100 GPUs (FP8)"
           (github.com/NVIDIA/TensorRT-LLM @138f96d4): gptSessionBenchmark, static batches of the
           stated size, fp8 weights and KV cache; output tokens/s per GPU. Its generation kernel
           read the cache once per query head: grouped-query (XQA) kernels came in v0.10.0
           ("Integrated the new NVIDIA Hopper XQA kernels for LLaMA 2 70B", release notes)
  TRT05L   the same file, "Low Latency" (data from v0.5): first-token latency at batch 1,
           H100 fp8 and A100 fp16
  TRT10    TensorRT-LLM v1.0, docs/source/performance/perf-overview.md (@00f37686): trtllm-bench
           offline maximum throughput (in-flight batching, CUDA graphs up to batch 8192, KV cache
           up to 95 % of free memory), fixed ISL/OSL, ModelOpt fp8 checkpoints; total output tokens/s
           over the whole run: its stated number of requests, all queued at once, is simulated here
           (serve_sim) with the batch its scheduler guarantees (KV for ISL + OSL per request)
  MLPerf41 / MLPerf50 / MLPerf51   MLPerf Inference datacenter v4.1 / v5.0 / v5.1, NVIDIA's closed
           submissions: Llama 2 70B, Mixtral 8x7B, Llama 3.1 405B, DeepSeek-R1 on H100, H200, B200 and
           GB200 NVL72; Offline output tokens/s and Server P50 TTFT/TPOT at the scheduled rate. The rows,
           their logs and what is assumed are in benchmarks/serve_mlperf.py
  SGL030 / VLLM060   SGLang v0.3.0 and vLLM v0.6.0 on Llama 3.1 8B (1 x A100) and 70B (4 x H100), bf16,
           ShareGPT: online median TTFT/TPOT at 4 and 8 requests/s, offline output tokens/s
           (benchmarks/serve_frameworks.py)

Cross-validation: the one constant chosen here, the roofline's p, is chosen from a grid
(P_GRID) as the value with the least median |error|. Leave-one-source-out: for each source,
p is chosen on the other sources' rows and the source's rows are predicted with it; likewise
leave-one-model-out (each model's rows predicted with the p the other models chose). The
summary line prints the median |error| of the rows so predicted, held out by model first: that
is the figure to judge the serving model on (MoE rows also apart: the MoE physics has no
constant fitted on serving rows). The grouped-GEMM rate is no longer fitted
(model/serve/moe.py GROUPED_GEMM_EFFICIENCY).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package
sys.path.insert(0, str(HERE))

from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower_cluster
from gclc.model.serve import inference
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import Engine, ServeConfig, first_token_time, replica
from gclc.model.shape import ModelShape
from gclc.solver.serve.sim import Pool, simulate
import serve_common  # noqa: E402  (benchmarks/ is on sys.path)
import serve_frameworks  # noqa: E402
import serve_mlperf  # noqa: E402

DESIGN = HERE / "designs" / "serving_models.gcl"
MOE_MODELS = ("Mixtral_8x7B", "DeepSeekR1")
P_GRID = (1.5, 2.0, 3.0, 4.0, math.inf)  # the roofline p-norms tried (inf: the slower of compute and memory)
MAX_BATCH = 8192          # TRT10: the largest CUDA-graph batch in its llm_options.yml
KV_SHARE = 0.95           # TRT10: --kv_cache_free_gpu_mem_fraction 0.95
# TRT10: requests per ISL/OSL ("$num_requests" table of perf-overview.md)
REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000,
            (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000}


@dataclass(frozen=True)
class Row:
    source: str
    model: str
    cluster: str
    precision: str
    tp: int
    batch: int | None        # None: the largest that fits (maximum-throughput runs)
    isl: int
    osl: int
    metric: str              # tok_s_gpu (output tokens/s per GPU), tok_s (total), ttft_s
    measured: float


def _rows() -> list[Row]:
    rows = []
    # TRT061: (model, batch, tp, isl, osl, output tok/s per GPU)
    for model, batch, tp, isl, osl, value in (
        ("GPTJ_6B", 1024, 1, 128, 128, 26150), ("GPTJ_6B", 120, 1, 128, 2048, 8011),
        ("GPTJ_6B", 64, 1, 2048, 128, 2551), ("GPTJ_6B", 64, 1, 2048, 2048, 3327),
        ("Llama2_7B", 768, 1, 128, 128, 19694), ("Llama2_7B", 112, 1, 128, 2048, 6818),
        ("Llama2_7B", 80, 1, 2048, 128, 2244), ("Llama2_7B", 48, 1, 2048, 2048, 2740),
        ("Llama2_70B", 1024, 2, 128, 128, 2657), ("Llama2_70B", 480, 4, 128, 2048, 1486),
        ("Llama2_70B", 96, 2, 2048, 128, 306), ("Llama2_70B", 64, 2, 2048, 2048, 547),
        ("Falcon_180B", 1024, 4, 128, 128, 987), ("Falcon_180B", 1024, 8, 128, 2048, 724),
        ("Falcon_180B", 64, 4, 2048, 128, 112), ("Falcon_180B", 64, 4, 2048, 2048, 264),
    ):
        rows.append(Row("TRT061", model, "H100_Box", "fp8", tp, batch, isl, osl, "tok_s_gpu", value))
    # TRT05L: (model, tp, isl, H100 fp8 ms, A100 fp16 ms)
    for model, tp, isl, h100, a100 in (
        ("GPTJ_6B", 1, 128, 7, 12), ("GPTJ_6B", 1, 2048, 29, 129), ("Llama2_7B", 1, 128, 7, 16),
        ("Llama2_7B", 1, 2048, 36, 133), ("Llama2_70B", 4, 128, 26, 47), ("Llama2_70B", 4, 2048, 109, 377),
        ("Falcon_180B", 8, 128, 27, 61), ("Falcon_180B", 8, 2048, 205, 509),
    ):
        rows.append(Row("TRT05L", model, "H100_Box", "fp8", tp, 1, isl, 1, "ttft_s", h100 / 1e3))
        rows.append(Row("TRT05L", model, "A100_Box", "fp16", tp, 1, isl, 1, "ttft_s", a100 / 1e3))
    # TRT10: ISL/OSL -> total output tok/s, per (model, cluster, tp)
    lengths = ((128, 128), (128, 2048), (128, 4096), (500, 2000), (1000, 1000), (1000, 2000), (2048, 128),
               (2048, 2048), (5000, 500), (20000, 2000))
    tables = {
        ("Llama31_8B", "H200_Box", 1): (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804),
        ("Llama31_8B", "H100_Box", 1): (28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459, 1351),
        ("Llama33_70B", "H200_Box", 1): (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283),
        ("Llama33_70B", "H100_Box", 2): (6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437),
        ("Llama31_405B", "H200_Box", 8): (3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650, 505),
        ("Llama31_405B", "H100_Box", 8): (3627, 4340, 3116, 3994, 2919, 2895, 453, 2296, 610, 345),
    }
    for (model, cluster, tp), values in tables.items():
        for (isl, osl), value in zip(lengths, values):
            rows.append(Row("TRT10", model, cluster, "fp8", tp, None, isl, osl, "tok_s", value))
    return rows


def predict(row: Row, design) -> float:
    shape = ModelShape.from_entity(design[row.model])
    partition = lower_cluster(design[row.cluster]).partitions[0]
    if row.metric == "ttft_s":  # the whole prompt in one context phase, as v0.5 ran it
        r = replica(shape, ServeConfig(row.tp, 1, row.precision), partition, Engine(chunk=row.isl))
        return first_token_time(r, row.isl)
    if row.batch is not None:   # a static batch: all prompts at once, then osl steps of all sequences
        engine = Engine(chunk=row.batch * row.isl, grouped_kv=False)
        r = replica(shape, ServeConfig(row.tp, row.batch, row.precision), partition, engine)
        tokens = row.batch * row.isl
        time = r.iteration(0, 0, tokens, tokens * row.isl / 2, row.batch)
        time += (row.osl - 1) * r.iteration(row.batch, row.batch * (row.isl + row.osl / 2))
        return row.batch * row.osl / time / row.tp
    return max_throughput(row, shape, partition)


def max_throughput(row: Row, shape: ModelShape, partition, step_s: float | None = None) -> float:
    """A TRT10 run's output tokens/s: the largest batch whose KV cache fits, continuous batching, on
    TensorRT-LLM 1.0's PyTorch backend run in process by trtllm-bench (no front end), CUDA graphs
    up to MAX_BATCH (its llm_options.yml); `step_s`: the engine's host time a step, where a
    calibration tries one (benchmarks/calibrate_serve.py)."""
    chip = partition.node.accelerator
    engine = profile("trtllm_pytorch").engine(chip.hbm_capacity, chip.name, frontend_s=0.0, graph_batch=MAX_BATCH,
                                              max_seqs=MAX_BATCH)
    if step_s is not None:
        engine = attrs.evolve(engine, step_s=step_s)
    probe = replica(shape, ServeConfig(row.tp, 1, row.precision), partition, engine)
    held = probe.kv.tokens_held(row.isl, row.osl)
    fits = int(probe.kv_capacity_tokens(KV_SHARE * probe.hbm) // held)
    batch = max(1, min(MAX_BATCH, fits))
    r = replica(shape, ServeConfig(row.tp, batch, row.precision), partition, engine)
    requests = serve_common.queued(REQUESTS[row.isl, row.osl], row.isl, row.osl)
    return simulate(requests, Pool(r, 1, batch, r.kv_capacity_tokens(KV_SHARE * r.hbm))).tokens_per_s


def all_results(design) -> list[dict]:
    """Every row, predicted with the model as it is now."""
    serve_common.forget()
    out = []
    for row in _rows():
        predicted = predict(row, design)
        out.append(asdict(row) | {"predicted": predicted, "error": predicted / row.measured - 1, "assumed": ""})
    return out + serve_mlperf.results(design) + serve_frameworks.results(design)


def results_at(design, p: float) -> list[dict]:
    """Every row, predicted with the roofline's p-norm set to `p`."""
    shipped = inference.ROOFLINE_P
    inference.ROOFLINE_P = p
    try:
        return all_results(design)
    finally:
        inference.ROOFLINE_P = shipped


def _median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else math.nan


def cross_validate(table: dict[float, list[dict]], key: str) -> tuple[list[dict], list[str]]:
    """Leave one `key` (source or model) out: p chosen on the other groups' rows (least median
    |error|), the group's rows predicted with it. Returns those rows and a line per group."""
    groups = sorted({r[key] for r in next(iter(table.values()))})
    held, lines = [], []
    for group in groups:
        def others(p):
            return _median(abs(r["error"]) for r in table[p] if r[key] != group)
        chosen = min(table, key=others)
        rows = [r | {"p": chosen} for r in table[chosen] if r[key] == group]
        held += rows
        lines.append(f"  {group:<13} p = {chosen:g} (chosen on the others): {len(rows):>3} rows, "
                     f"median |error| {_median(abs(r['error']) for r in rows):.1%}")
    return held, lines


def p_choice(design, shipped: list[dict]) -> tuple[dict, list[str], list[dict]]:
    """The p-norm grid: each p's median |error| on all rows, the cross-validated figures
    (`shipped`: the rows at the model's own p, not predicted again), and the rows held out by
    model (each predicted with the p the other models chose)."""
    table = {p: shipped if p == inference.ROOFLINE_P else results_at(design, p) for p in P_GRID}
    lines = ["roofline p-norm (model/serve/inference.py ROOFLINE_P): " + ", ".join(
        f"p = {p:g}: {_median(abs(r['error']) for r in rows):.1%}" for p, rows in table.items())
        + f"; shipped p = {inference.ROOFLINE_P:g}"]
    figures = {}
    for key in ("source", "model"):
        held, fold_lines = cross_validate(table, key)
        moe = [abs(r["error"]) for r in held if r["model"] in MOE_MODELS and r["metric"].startswith("tok_s")]
        figures[key] = (_median(abs(r["error"]) for r in held), _median(moe))
        lines += [f"leave-one-{key}-out:"] + fold_lines + [
            f"leave-one-{key}-out: {len(held)} rows, median |error| {figures[key][0]:.1%} "
            f"(MoE throughput rows {figures[key][1]:.1%})"]
    return figures, lines, held


QUANTITIES = {"throughput": "tok_s", "ttft": "ttft_", "tpot": "tpot_"}   # band quantity -> its rows' metric prefix


def ratio_band(rows: list[dict], quantity: str) -> tuple[float, float, int]:
    """The 80 % band of a quantity: the 10th and 90th percentiles of measured / predicted over
    its rows (sorted, the decile-th from each end, as for the throughput band), and their count."""
    ratios = sorted(r["measured"] / r["predicted"] for r in rows if r["metric"].startswith(QUANTITIES[quantity]))
    decile = round(len(ratios) / 10)   # the nearest count to a tenth: 29 rows leave 3 out at each end (79 % inside), not 2 (86 %)
    return ratios[decile], ratios[-1 - decile], len(ratios)


def write_residuals(path: str, rows: list[dict]) -> None:
    """The rows behind the serve plans' bands (tests/benchmarks read them back): one CSV line each."""
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(("source", "model", "cluster", "metric", "isl", "p", "measured", "predicted"))
        for r in rows:
            writer.writerow((r["source"], r["model"], r["cluster"], r["metric"], r["isl"], r.get("p", ""),
                             repr(r["measured"]), repr(r["predicted"])))


def errors_of(results: list[dict], throughput: bool) -> list[float]:
    return [abs(r["error"]) for r in results if r["metric"].startswith("tok_s") == throughput]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--no-holdout", action="store_true",
                        help="skip the cross-validation of the roofline p-norm (5x faster)")
    parser.add_argument("--residuals", metavar="CSV",
                        help="write the rows the bands come from (held out by model) to CSV")
    parser.add_argument("--knee", action="store_true",
                        help="also find each MLPerf Server system's modeled knee (about 2 minutes more)")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    design = check_file(str(DESIGN)).design
    results = all_results(design)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'source':<8} {'model':<13} {'server':<10} {'prec':<5} {'tp':>2} {'batch':>5} {'isl':>6} {'osl':>5} "
              f"{'metric':<10} {'measured':>10} {'predicted':>10} {'error':>7}")
        for r in results:
            print(f"{r['source']:<8} {r['model']:<13} {r['cluster']:<10} {r['precision']:<5} {r['tp']:>2} "
                  f"{r['batch'] or 'max':>5} {r['isl']:>6} {r['osl']:>5} {r['metric']:<10} {r['measured']:>10,.4g} "
                  f"{r['predicted']:>10,.4g} {r['error']:>+7.1%}{'  *' if r['assumed'] else ''}")
        print("* ASSUMPTION: a setting the source does not state (see serve_mlperf.py, serve_frameworks.py); "
              "every MLPerf and ShareGPT input length is an ESTIMATE")
    errors = [abs(r["error"]) for r in results]
    print()
    for source in sorted({r["source"] for r in results}):
        own = [abs(r["error"]) for r in results if r["source"] == source]
        others = [abs(r["error"]) for r in results if r["source"] != source]
        print(f"{source:<7} {len(own):>3} rows: median |error| {statistics.median(own):.1%} "
              f"(held out; the other sources' median {statistics.median(others):.1%})")
    for label, keep in (("throughput rows", lambda r: r["metric"].startswith("tok_s")),
                         ("latency rows", lambda r: not r["metric"].startswith("tok_s")),
                         ("rows with every setting stated", lambda r: not r["assumed"])):
        chosen = [abs(r["error"]) for r in results if keep(r)]
        print(f"{label}: {len(chosen)}, median |error| {statistics.median(chosen):.1%}")
    for model in sorted({r["model"] for r in results}):
        own = [r["error"] for r in results if r["model"] == model]
        print(f"{model:<13} {len(own):>3} rows: median |error| {statistics.median(abs(x) for x in own):.1%}, "
              f"median signed {statistics.median(own):+.1%}")
    if args.knee:
        print("MLPerf Server runs against the modeled system's knee (diagnostic, not rows):")
        print("\n".join(serve_mlperf.margin(design)))
    print("MLPerf Server runs against their KV cache (diagnostic, not rows):")
    print("\n".join(serve_mlperf.in_flight(design)))
    held, band_rows, band_from = "held out: skipped (--no-holdout); ", results, "in sample"
    if not args.no_holdout:
        figures, lines, band_rows = p_choice(design, results)
        band_from = "held out by model"
        print("\n".join(lines))
        held = (f"held out by model median |error| {figures['model'][0]:.1%} (MoE throughput "
                f"{figures['model'][1]:.1%}), by source {figures['source'][0]:.1%}; ")
    bands = {q: ratio_band(band_rows, q) for q in QUANTITIES}
    for quantity, (low, high, n) in bands.items():
        print(f"measured / predicted {quantity} ({band_from}, {n} rows): 10th percentile {low:.2f}, "
              f"90th {high:.2f} (the serve plans' 80 % {quantity} band)")
    if args.residuals:
        write_residuals(args.residuals, band_rows)
    p90 = sorted(errors)[int(0.9 * (len(errors) - 1))]
    mlperf = [abs(r["error"]) for r in results if r["source"].startswith("MLPerf")]
    print(f"serve accuracy: {len(results)} published measurements from {len({r['source'] for r in results})} sources, "
          f"{held}in sample median {statistics.median(errors):.1%}, p90 {p90:.1%} (MLPerf {len(mlperf)} rows: "
          f"{statistics.median(mlperf):.1%}; throughput {statistics.median(a for a in errors_of(results, True)):.1%}, "
          f"latency {statistics.median(errors_of(results, False)):.1%}); wall {time.perf_counter() - wall:.0f} s, "
          f"CPU {time.process_time() - cpu:.0f} s")


if __name__ == "__main__":
    main()
