"""A serve job's demand as a list of requests: a trace, or Poisson arrivals at `rate` with
prompt and output lengths drawn from their distributions (a fixed seed: plans repeat)."""

from __future__ import annotations

import math
import random
from typing import Callable

import attrs

from ...compiler.design import Construct, Entity
from ...dsl.numbers import count, number
from ...compiler.serve_trace import MIN_REQUESTS, Request, load_trace
from ...dsl.records import frozen

SEED = 20250501
MAX_REQUESTS = 20_000       # keeps a plan's simulations to seconds
HORIZONS = 4                # arrivals span this many request lifetimes: one to warm up, three to measure


@frozen
class Demand:
    requests: tuple[Request, ...]
    rate: float | None          # requests per second (None: as many as the plan can serve)
    prompt: float               # mean tokens
    output: float

    @property
    def duration(self) -> float:
        return self.requests[-1].arrival - self.requests[0].arrival if self.requests else 0.0

    def described(self) -> str:
        """`40 requests/s`, or `3 requests at one instant` for a trace without a rate."""
        if self.rate:
            return f"{number(self.rate)} requests/s"
        return f"{count(len(self.requests), 'request')} at one instant"

    def at_rate(self, rate: float) -> Demand:
        """The same requests arriving `rate / self.rate` times faster (a rate sweep)."""
        scale = (self.rate or rate) / rate
        return attrs.evolve(self, requests=tuple(attrs.evolve(q, arrival=q.arrival * scale) for q in self.requests),
                            rate=rate)


def demand_of(entity: Entity, count: int | None = None) -> Demand:
    trace = entity.get("trace")
    if trace is not None:
        requests = load_trace(entity.span_of("trace"), trace)
        span = requests[-1].arrival - requests[0].arrival
        rate = (len(requests) - 1) / span if span > 0 else None
        return Demand(requests, rate, _mean(q.prompt for q in requests), _mean(q.output for q in requests))
    rng = random.Random(SEED)
    prompt, output = entity.get("prompt"), entity.get("output")
    rate = entity.get("rate")
    rate = float(rate) if rate is not None else None
    n = count or entity.get("requests") or _enough(entity, rate)
    time, requests = 0.0, []
    prompts, outputs = _drawer(prompt), _drawer(output)
    for _ in range(n):
        requests.append(Request(time, prompts(rng), outputs(rng)))
        time += rng.expovariate(rate) if rate else 0.0
    return Demand(tuple(requests), rate, mean_length(prompt), mean_length(output))


def lifetime(entity: Entity, output: float | None = None) -> float:
    """Seconds a request of `output` tokens (default: the stated mean) may live within its SLOs
    (TTFT + output x TPOT bounds, or E2E); 30 s without them."""
    slo = {i.value.target.split(".")[0]: float(i.value.value.value) for i in getattr(entity.get("slo"), "items", ())}
    if "e2e" in slo:
        return slo["e2e"]
    if "tpot" in slo:
        return slo.get("ttft", 0.0) + (output or mean_length(entity.get("output"))) * slo["tpot"]
    return 30.0


def _enough(entity: Entity, rate: float | None) -> int:
    """Requests whose arrivals span HORIZONS lifetimes, so the measured ones see a steady state."""
    if not rate:
        return MIN_REQUESTS
    return int(min(MAX_REQUESTS, max(MIN_REQUESTS, HORIZONS * lifetime(entity) * rate)))


def mean_length(spec: int | Construct) -> float:
    if not isinstance(spec, Construct):
        return float(spec)
    a = spec.args
    if spec.name == "uniform":
        return (a.get("low") + a.get("high")) / 2
    return float(a.get("mean"))


def _draw(spec: int | Construct, rng: random.Random) -> int:
    return _drawer(spec)(rng)


def _drawer(spec: int | Construct) -> Callable[[random.Random], int]:
    """`_draw` of one spec, its parameters read once (a demand draws every request's lengths)."""
    if not isinstance(spec, Construct):
        fixed = int(spec)
        return lambda rng: fixed
    a = spec.args
    if spec.name == "uniform":
        low, high = sorted((a.get("low"), a.get("high")))
        return lambda rng: rng.randint(low, high)
    mean = float(a.get("mean"))
    if spec.name == "exponential":
        rate = 1 / mean
        return lambda rng: max(1, round(rng.expovariate(rate)))
    sigma = float(a.get("sigma"))  # lognormal with the stated mean: mu = ln(mean) - sigma^2 / 2
    mu = math.log(mean) - sigma**2 / 2
    return lambda rng: max(1, round(rng.lognormvariate(mu, sigma)))


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)
