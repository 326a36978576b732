"""Serving benchmarks as observations: a `bench serve` (vLLM, SGLang) or genai-perf/aiperf run
replayed on the design's serve job (its model, engine and replica width) through the
continuous-batching simulation, its output throughput, median TTFT and median TPOT beside the
measured ones.

The serving physics they inform: the engine's host time per iteration (`engine { host_step }`:
scheduling and input preparation), the chip's HBM efficiency (decode reads the weights and
the cache: memory-bound) and its GEMM efficiency at the job's precision (prefill is
compute-bound).

A simulation per trial value would cost the fit hundreds of runs: each run's figures are
instead taken around an anchor as a sum of time terms, one per constant (the host's time per
iteration adds to each iteration; a kernel's time goes as one over its efficiency), each
term's share read from one extra simulation with the constant moved; the anchor is then moved
to the fitted values and the fit repeated (calibrate.py `calibrate_observations`)."""

from __future__ import annotations

import math
import random
from typing import Callable

import attrs

from ...compiler.ir import Partition
from ...compiler.measure.records import ServeRun
from ...compiler.serve_trace import Request
from ...model.serve.inference import ServeConfig, replica
from ...model.shape import ModelShape
from ..serve.sim import Pool, simulate
from ..serve.space import engine_of
from .observe import Observation
from .params import applied, engine_param, gemm_key
from ...dsl.records import define

SEED = 19
MAX_REQUESTS = 2000     # requests replayed per run (the readers' runs are larger only in long sweeps)
KV_SHARE = 0.90         # ASSUMPTION: HBM share for weights and cache (vLLM's gpu_memory_utilization default)
STEP = 1.25             # a constant moved by 25 % to read a figure's share in it
HOST_STEP_FLOOR = 2e-5  # an engine stated with no host time still takes some: the prior a fit starts from
METRICS = (("output_throughput", "tokens/s"), ("ttft", "s"), ("tpot", "s"))
# Arrival draws a run's figures are averaged over: a summary states its rate and request count,
# not its arrival times, so the prediction is the figure's mean over draws, not one draw's.
# One draw's median TTFT is jagged in the constants (ISL fixed: the median sits at the edge of the
# prompts that wait for no iteration): a 1 % move of the host time moved it 1.5 % (SGLang 0.3) and
# 3.3 % (vLLM 0.6, multi-step) step to step, more than that move's own effect, so the slopes and the
# fit followed the jitter. Eight draws: 0.3 % and 1.0 % (benchmarks/calibrate_serve.py's 70B runs).
DRAWS = 8


def engine_key(job: str) -> tuple[str, str, str]:
    return ("engine", job, "host_step")


@define(eq=False)
class Replay:
    """One serving run: its figures simulated by `simulate(values)` (throughput in tokens/s,
    median TTFT and TPOT in seconds, by metric name), exact at an anchor of the constants
    `keys` and, around it, each figure's time a sum of one term per constant."""

    keys: tuple[tuple[str, str, str], ...]
    simulate: Callable[[dict, int], dict[str, float]]     # (values, draw) -> figures
    anchor: dict = attrs.field(factory=dict)
    base: dict = attrs.field(factory=dict)          # metric -> its time at the anchor
    slopes: dict = attrs.field(factory=dict)        # (metric, key) -> share of the time in the key's term

    def figures(self, values: dict) -> dict[str, float]:
        return mean_figures(self.simulate, values)

    def settle(self, values: dict) -> None:
        """Anchor the figures at `values` (the keys this run informs): each figure's time
        (a latency, or one over a throughput) at the anchor, exact there (one simulation); the
        secant slopes are read when a prediction first leaves the anchor (`_slopes`)."""
        anchor = {k: values[k] for k in self.keys}
        if anchor == self.anchor:
            return
        self.anchor, self.base, self.slopes = anchor, _times(self.figures(anchor)), {}

    def _slopes(self) -> None:
        """Each figure's secant slope in each constant's time term (the host time itself, one
        over an efficiency) at the anchor: a simulation per constant."""
        for key in self.keys:
            moved = _times(self.figures({**self.anchor, key: self.anchor[key] * STEP}))
            ratio = _term(key, STEP)
            for metric, time in moved.items():
                base = self.base[metric]
                self.slopes[metric, key] = (time / base - 1) / (ratio - 1) if base > 0 and math.isfinite(time) else 0.0

    def predict(self, metric: str, values: dict) -> float:
        """The figure at `values`: its time at the anchor, each constant's time term moved
        (exact where the figure's time is a sum of terms each in one constant: the host's
        time per iteration added, a kernel's time over an efficiency)."""
        if not self.anchor:
            self.settle(values)
        if all(values[k] == self.anchor[k] for k in self.keys):
            time = self.base[metric]
            return 1 / time if metric == "output_throughput" else time
        if not self.slopes:
            self._slopes()
        shift = sum(self.slopes[metric, k] * (_term(k, values[k] / self.anchor[k]) - 1) for k in self.keys)
        time = self.base[metric] * max(1e-3, 1 + shift)
        return 1 / time if metric == "output_throughput" else time


def mean_figures(simulate: Callable[[dict, int], dict[str, float]], values: dict) -> dict[str, float]:
    """Each figure's mean over DRAWS arrival draws of the run."""
    draws = [simulate(values, d) for d in range(DRAWS)]
    return {m: sum(f[m] for f in draws) / len(draws) for m in draws[0]}


def _term(key: tuple[str, str, str], ratio: float) -> float:
    """How a constant's time term scales when the constant does: host time as itself, a rate's
    efficiency as its inverse."""
    return ratio if key[0] == "engine" else 1 / ratio


def _times(figures: dict[str, float]) -> dict[str, float]:
    """Each figure as a time: latencies as they are, a throughput as its inverse."""
    return {m: (1 / v if m == "output_throughput" else v) if v > 0 else math.inf for m, v in figures.items()}


def replay_on_job(run: ServeRun, shape: ModelShape, config: ServeConfig, entity, partition: Partition,
                  keys: tuple) -> Callable[[dict, int], dict[str, float]]:
    """The run's figures on the serve job `entity` with the constants `values`: its engine with
    the host time under trial, one replica, the run's requests (arrival draw `draw`) through the
    simulation."""
    def figures(values: dict, draw: int = 0) -> dict[str, float]:
        trial = applied(partition, values)
        engine = engine_of(entity, trial)
        engine = attrs.evolve(engine, step_s=values.get(keys[0], engine.step_s))
        cap = engine.max_seqs or config.batch
        batch = min(cap, run.concurrency) if run.concurrency else cap
        r = replica(shape, attrs.evolve(config, batch=batch), trial, engine)
        pool = Pool(r, 1, batch, r.kv_capacity_tokens(KV_SHARE * r.hbm))
        sent = requests(run, SEED + draw)
        return outcome_figures(simulate(sent, pool, warmup_s=0.0), sent)
    return figures


def outcome_figures(outcome, sent: tuple[Request, ...]) -> dict[str, float]:
    """What a serving benchmark reports of a simulated run of the requests `sent`: output
    tokens/s (the simulation's: tokens made while the measured requests arrive, or until the last
    finishes when all are sent at once, as `bench serve` counts it), median TTFT and TPOT. A run
    too short for any token inside its arrivals (a few requests at a high rate) is counted as
    `bench serve` does: every completed request's output over the time from the first request
    to the last completion, bounded here by the last arrival plus the longest request."""
    throughput = outcome.tokens_per_s
    if not throughput > 0:
        done = [e for e in outcome.e2e if math.isfinite(e)]
        duration = sent[-1].arrival - sent[0].arrival + max(done, default=0.0)
        made = sum(r.output for r in sent) * len(done) / len(sent)
        throughput = made / duration if duration > 0 else 0.0
    return {"output_throughput": throughput, "ttft": outcome.percentile("ttft", 50),
            "tpot": outcome.percentile("tpot", 50)}


def requests(run: ServeRun, seed: int = SEED) -> tuple[Request, ...]:
    """The run's requests: Poisson arrivals at its rate, or all at once (rate `inf`; a
    concurrency limit then caps the batch), its mean prompt and output lengths, outputs spread
    uniformly around their mean (ASSUMPTION: the summaries state means only), none shorter than
    two tokens where the mean is two or more."""
    rng, count, t, out = random.Random(seed), min(run.requests, MAX_REQUESTS), 0.0, []
    mean = max(1, round(run.output_tokens))
    for _ in range(count):
        if run.rate:
            t += rng.expovariate(run.rate)
        # from 1 (2: every output has a second token when the mean does) to its mirror about the mean
        low = 2 if mean >= 2 else 1
        out.append(Request(t, max(1, round(run.input_tokens)), rng.randint(low, 2 * mean - low)))
    return tuple(out)


def serve_config(shape: ModelShape, entity, partition: Partition, precision: str) -> tuple[ServeConfig, list[str]]:
    """The replica the benchmark ran: the job's pinned widths, else the narrowest whose weights
    fit (noted)."""
    pinned = entity.get("parallelism")
    pin = (lambda k: pinned.get(k)) if pinned is not None else (lambda k: None)
    tp, ep, pp = (pin(k) or 1 for k in ("tp", "ep", "pp"))
    notes = []
    if not pin("tp"):
        domain = partition.node.gpus
        for width in (1, 2, 4, 8, 16, 32, 64):
            if width > domain or shape.heads % width:
                continue
            tp = width
            probe = replica(shape, ServeConfig(tp, 1, precision, ep, pp), partition)
            if probe.weights < KV_SHARE * probe.hbm * 0.8:
                break
        notes.append(f"the serve job `{entity.name}` pins no tp; the benchmark is modelled on tp {tp}")
    return ServeConfig(tp, 256, precision, ep, pp), notes


def serve_observations(run: ServeRun, entity, partition: Partition) -> tuple[list[Observation], list[str], list[str]]:
    """The observations of one serving run on the serve job `entity`: (observations, why it
    cannot be used, notes)."""
    where = f"{run.span}"
    if run.input_tokens is None:
        return [], [f"{where}: the export does not state the prompt length; gclc cannot replay the run"], []
    if run.requests < 2 or not run.output_tokens or run.output_tokens < 1:
        return [], [f"{where}: fewer than two completed requests with output tokens; too little to replay "
                    "(a throughput needs a span of time)"], []
    shape = ModelShape.from_entity(entity.get("model"))
    precision = getattr(entity.get("precision"), "name", "bf16")
    config, notes = serve_config(shape, entity, partition, precision)
    chip = partition.node.accelerator.name
    keys = (engine_key(entity.name), ("chip", chip, "hbm"), ("chip", chip, gemm_key(precision)))
    replay = Replay(keys, replay_on_job(run, shape, config, entity, partition, keys))
    prior = engine_param(keys[0], engine_of(entity, partition).step_s, HOST_STEP_FLOOR)
    group = f"{run.span.path}:{run.span.line}"
    label = f"{run.tool} run, " + (f"{run.rate:g} req/s" if run.rate else "all at once") + (
        f", concurrency {run.concurrency}" if run.concurrency else "") + f", {run.requests} requests"
    measured = {"output_throughput": run.output_throughput, "ttft": _median(run, "ttft"),
                # a time per output token after the first needs outputs of two tokens or more
                "tpot": _median(run, "tpot") if round(run.output_tokens) >= 2 else None}
    return replay_observations(replay, group, label, measured, partition, run.span, (prior,)), [], notes


def replay_observations(replay: Replay, group: str, label: str, measured: dict[str, float | None],
                        partition: Partition, span, priors: tuple) -> list[Observation]:
    """One observation per figure the run measured (throughput, median TTFT, median TPOT)."""
    out = []
    for metric, unit in METRICS:
        if not measured.get(metric):
            continue
        out.append(Observation("serve", group, f"{label}: {_WORDS[metric]}", measured[metric], unit, replay.keys,
                               lambda _p: math.nan, partition, span, end_to_end=True,
                               predict_values=lambda values, m=metric: replay.predict(m, values),
                               settle=replay.settle, priors=priors))
    return out


_WORDS = {"output_throughput": "output tokens/s", "ttft": "median TTFT", "tpot": "median TPOT"}


def _median(run: ServeRun, metric: str) -> float | None:
    return run.latency(metric, "p50") or run.latency(metric, "median") or run.latency(metric, "mean")
