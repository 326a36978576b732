"""Calibrating on your own serving runs, judged on the runs it did not see (for
benchmarks/calibrate_own.py).

Published serving measurements grouped by the system and engine that made them (each group
stands for an operator's deployment): SGLang v0.3.0 and vLLM v0.6.0 serving Llama 3.1 8B on
one A100 and Llama 3.1 70B on four H100 (serve_frameworks.py: github.com/sgl-project/sglang
@120affb9 benchmark/benchmark_vllm_060/README.md; median TTFT and TPOT online at 4 and 8
requests/s, output tokens/s offline). The operator's run is the one at 4 requests/s: gclc
calibrates on its median TTFT and TPOT (solver/calibrate/, the engine's host time per iteration,
the chip's HBM and GEMM efficiencies) and predicts the run at 8 requests/s and the offline run;
their 80 % band comes from the calibrating run held out.

TensorRT-LLM 1.0's offline table (serve_accuracy.py TRT10: trtllm-bench maximum throughput,
Llama 3.1 8B, 3.3 70B and 3.1 405B on H100 and H200, fp8, ten ISL/OSL pairs each) likewise, each
model and system a group: its runs in the order the table lists them, every third (the first,
fourth, seventh and tenth: 128/128, 500/2000, 2048/128, 20000/2000) calibrates the same serving
constants, the other six are predicted (the rule fixed before any held-back figure was seen).

Beside them, the uncalibrated figures: the shipped model and the shipped serving band
(model/calibration.py SERVE_*_RATIO)."""

from __future__ import annotations

import attrs

import serve_accuracy as accuracy
import serve_frameworks as frameworks
from serve_common import SEED, poisson_arrivals, queued

from gclc.compiler.lower import lower_cluster
from gclc.dsl.source import no_span
from gclc.model.calibration import SERVE_LATENCY_RATIO, SERVE_THROUGHPUT_RATIO
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.shape import ModelShape
from gclc.solver.calibrate.calibrate import calibrate_observations
from gclc.solver.calibrate.observe_serve import HOST_STEP_FLOOR, Replay, mean_figures, outcome_figures, replay_observations
from gclc.solver.calibrate.params import applied, chip_param, engine_param, gemm_key
from gclc.solver.serve.sim import Pool, simulate

YOURS_RATE = 4          # the operator's run: the lower published rate
YOURS_EVERY = 3         # TRT10: every third run of a table, in its order, is the operator's
METRIC = {"ttft_p50_s": "ttft", "tpot_p50_s": "tpot", "tok_s": "output_throughput"}
SHIPPED = {"ttft": SERVE_LATENCY_RATIO["ttft"], "tpot": SERVE_LATENCY_RATIO["tpot"],
           "output_throughput": SERVE_THROUGHPUT_RATIO}


def groups() -> dict[tuple, list]:
    """The published rows by (engine, model, cluster, tp)."""
    out: dict[tuple, list] = {}
    for row in frameworks.rows():
        out.setdefault((row.source, row.model, row.cluster, row.tp), []).append(row)
    return out


def run_figures(key: tuple, rate: float | None, prompts: int, design, keys: tuple):
    """The run's figures with the constants `values` (serve_frameworks.predict's replica, pool
    and requests, the engine's host time under trial)."""
    source, model, cluster, tp = key
    e = frameworks.ENGINES[source]
    shape = ModelShape.from_entity(design[model])
    partition = lower_cluster(design[cluster]).partitions[0]

    def figures(values: dict, draw: int = 0) -> dict[str, float]:
        trial = applied(partition, values)
        chip = trial.node.accelerator
        engine = profile(frameworks.PROFILES[source]).engine(chip.hbm_capacity, chip.name, chunk=e.chunk,
                                                             scheduler_steps=e.steps, max_seqs=e.max_batch)
        engine = attrs.evolve(engine, step_s=values[keys[0]])
        r = replica(shape, ServeConfig(tp, e.max_batch, "bf16"), trial, engine)
        pool = Pool(r, 1, e.max_batch, r.kv_capacity_tokens(e.mem_frac * r.hbm))
        if rate is None:
            sent = queued(prompts, frameworks.ISL, frameworks.OSL, seed=SEED + draw, vary=True)
        else:
            sent = poisson_arrivals(rate, prompts, frameworks.ISL, frameworks.OSL, seed=SEED + draw, vary=True)
        return outcome_figures(simulate(sent, pool), sent)
    return figures, partition


def judge_group(key: tuple, rows: list, design) -> list[dict]:
    """Calibrate on the group's run at YOURS_RATE; one row per figure of its other runs."""
    source, model, cluster, tp = key
    partition = lower_cluster(design[cluster]).partitions[0]
    chip = partition.node.accelerator
    keys = (("engine", f"{source} {cluster}", "host_step"), ("chip", chip.name, "hbm"),
            ("chip", chip.name, gemm_key("bf16")))
    engine = profile(frameworks.PROFILES[source]).engine(chip.hbm_capacity, chip.name)
    priors = (engine_param(keys[0], engine.step_s, HOST_STEP_FLOOR),)
    runs: dict = {}
    for row in rows:
        runs.setdefault((row.rate, row.prompts), []).append(row)
    yours = [rs for (rate, _), rs in runs.items() if rate == YOURS_RATE]
    observations = []
    for rs in yours:
        figures, _ = run_figures(key, YOURS_RATE, rs[0].prompts, design, keys)
        measured = {METRIC[r.metric]: r.measured for r in rs}
        observations += replay_observations(Replay(keys, figures), f"{source} {model} @{YOURS_RATE}/s",
                                            f"{source} {YOURS_RATE} req/s", measured, partition, no_span(), priors)
    result = calibrate_observations(observations)
    band = result.serve_band
    prior = {**{p.key: p.prior for p in priors}, keys[1]: chip_param(chip, "hbm").prior,
             keys[2]: chip_param(chip, keys[2][2]).prior}
    out = []
    for (rate, prompts), rs in runs.items():
        if rate == YOURS_RATE:
            continue
        figures, _ = run_figures(key, rate, prompts, design, keys)
        # both the mean over the arrival draws, as the fit's figures (observe_serve.DRAWS)
        before, after = mean_figures(figures, prior), mean_figures(figures, {**prior, **result.values})
        for r in rs:
            metric = METRIC[r.metric]
            low, high = SHIPPED[metric]
            b, a = before[metric] / r.measured, after[metric] / r.measured
            out.append({"group": f"{source} {model} {cluster} tp{tp}", "metric": r.metric, "yours": len(yours),
                        "rate": rate, "before": b - 1, "after": a - 1, "inside_before": low <= 1 / b <= high,
                        "inside_after": band.low <= 1 / a <= band.high, "half_width_after": band.half_width,
                        "moved": {"/".join(k): v for k, v in result.values.items()}})
    return out


def serving_rows(design) -> list[dict]:
    return [row for key, rows in groups().items() for row in judge_group(key, rows, design)]


def table_groups() -> dict[tuple, list]:
    """TRT10's rows by (model, cluster, tp), in the table's order."""
    out: dict[tuple, list] = {}
    for row in accuracy._rows():
        if row.source == "TRT10":
            out.setdefault((row.model, row.cluster, row.tp), []).append(row)
    return out


def table_figures(row, design, keys: tuple):
    """An offline TRT10 run's output tokens/s with the constants `values` (serve_accuracy's
    max_throughput, the engine's host time under trial). Its requests are all sent at once with fixed lengths, so every draw is the same run:
    the figure is kept per setting and simulated once."""
    shape = ModelShape.from_entity(design[row.model])
    partition = lower_cluster(design[row.cluster]).partitions[0]
    seen: dict = {}

    def figures(values: dict, draw: int = 0) -> dict[str, float]:
        setting = tuple(values[k] for k in keys)
        if setting not in seen:
            trial = applied(partition, values)
            seen[setting] = {"output_throughput": accuracy.max_throughput(row, shape, trial, step_s=values[keys[0]])}
        return seen[setting]
    return figures, partition


def judge_table(key: tuple, rows: list, design) -> list[dict]:
    """Calibrate on every YOURS_EVERY-th run of a TRT10 table; one row per other run."""
    model, cluster, tp = key
    partition = lower_cluster(design[cluster]).partitions[0]
    chip = partition.node.accelerator
    keys = (("engine", f"TRT10 {cluster}", "host_step"), ("chip", chip.name, "hbm"),
            ("chip", chip.name, gemm_key(rows[0].precision)))
    engine = profile("trtllm_pytorch").engine(chip.hbm_capacity, chip.name)
    priors = (engine_param(keys[0], engine.step_s, HOST_STEP_FLOOR),)
    yours, held = rows[::YOURS_EVERY], [r for i, r in enumerate(rows) if i % YOURS_EVERY]
    observations = []
    for row in yours:
        figures, _ = table_figures(row, design, keys)
        observations += replay_observations(Replay(keys, figures), f"TRT10 {model} {row.isl}/{row.osl}",
                                            f"TRT10 {row.isl}/{row.osl}", {"output_throughput": row.measured},
                                            partition, no_span(), priors)
    result = calibrate_observations(observations)
    band = result.serve_band
    prior = {**{p.key: p.prior for p in priors}, keys[1]: chip_param(chip, "hbm").prior,
             keys[2]: chip_param(chip, keys[2][2]).prior}
    low, high = SHIPPED["output_throughput"]
    out = []
    for row in held:
        figures, _ = table_figures(row, design, keys)
        before, after = figures(prior)["output_throughput"], figures({**prior, **result.values})["output_throughput"]
        b, a = before / row.measured, after / row.measured
        out.append({"group": f"TRT10 {model} {cluster} tp{tp}", "metric": f"tok_s {row.isl}/{row.osl}",
                    "rate": None, "yours": len(yours), "before": b - 1, "after": a - 1,
                    "inside_before": low <= 1 / b <= high, "inside_after": band.low <= 1 / a <= band.high,
                    "half_width_after": band.half_width, "moved": {"/".join(k): v for k, v in result.values.items()}})
    return out


def table_rows(design) -> list[dict]:
    return [row for key, rows in table_groups().items() for row in judge_table(key, rows, design)]
