"""What the published-serving benchmarks share (serve_mlperf.py, serve_frameworks.py):
Poisson arrivals at a stated rate, an online run simulated once for all its latency rows,
and the rows of the results table that benchmarks/serve_accuracy.py prints."""

from __future__ import annotations

import random

from gclc.compiler.serve_trace import Request
from gclc.solver.serve.sim import Outcome, Pool, simulate

SEED = 19


def output_length(rng: random.Random, osl: float, vary: bool) -> int:
    """One request's output tokens: `osl` itself, or (`vary`: a data set's answers, whose
    lengths differ) drawn uniformly from 1 to 2 osl - 1, whose mean is osl. ASSUMPTION: the
    shape of the spread (the logs state the mean only). It matters: requests of one length
    start and finish in waves, filling and freeing the KV cache all at once, which no served
    data set does, and in-flight sequences are longer than the mean (length-biased)."""
    mean = max(1, round(osl))
    return rng.randint(1, 2 * mean - 1) if vary else mean


def poisson_arrivals(rate: float, count: int, isl: float, osl: float, seed: int = SEED,
                     vary: bool = False) -> tuple[Request, ...]:
    """`count` requests of `isl` prompt and `osl` output tokens (`vary`: output_length), their
    gaps exponential at `rate` per second (a Poisson process, as LoadGen's Server scenario and
    the frameworks' `--request-rate` benchmarks issue them), reproducible from `seed`."""
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(count):
        t += rng.expovariate(rate)
        out.append(Request(t, isl, output_length(rng, osl, vary)))
    return tuple(out)


def queued(count: int, isl: float, osl: float, seed: int = SEED, vary: bool = False) -> tuple[Request, ...]:
    """`count` requests all queued at time zero (offline runs)."""
    rng = random.Random(seed)
    return tuple(Request(0.0, isl, output_length(rng, osl, vary)) for _ in range(count))


_RUNS: dict = {}


def forget() -> None:
    """Drop the kept simulations (after the model's constants change)."""
    _RUNS.clear()


def online(key, requests, pool: Pool, warmup_s: float | None = None) -> Outcome:
    """The simulation of one online run, kept under `key` (whatever names the run and the
    model settings it depends on) so that its TTFT and TPOT rows share one simulation."""
    if key not in _RUNS:
        _RUNS[key] = simulate(requests(), pool, warmup_s=warmup_s)
    return _RUNS[key]


def kept(key, compute):
    """`compute()`, kept under `key` until `forget` (a result several rows share)."""
    if key not in _RUNS:
        _RUNS[key] = compute()
    return _RUNS[key]


def latency(outcome: Outcome, metric: str) -> float:
    """The row's percentile: metric `ttft_p50_s` reads TTFT at P50, `tpot_p99_s` TPOT at P99."""
    kind, p, _ = metric.split("_")
    return outcome.percentile(kind, float(p[1:]))


def result(*, source: str, model: str, cluster: str, precision: str, tp: int, batch, isl: float, osl: float,
           metric: str, measured: float, predicted: float, scenario: str, log: str, assumed: str) -> dict:
    """One row of the results table (serve_accuracy.py prints and summarizes them)."""
    return {"source": source, "model": model, "cluster": cluster, "precision": precision, "tp": tp,
            "batch": batch, "isl": isl, "osl": osl, "metric": metric, "measured": measured,
            "predicted": predicted, "error": predicted / measured - 1, "scenario": scenario, "log": log,
            "assumed": assumed}
