"""What every serve search shares: the analytic screening of replica configurations against
memory, the SLOs, the GPU and power limits (and the record of which limit broke which, to
say why nothing fits), the power a set of pools draws, and the runners-up."""

from __future__ import annotations

import math

import attrs

from ...model.serve.inference import Replica, ServeEstimate, estimate
from ...model.power import power_at, power_of, serving_activity, streaming_activity
from .demand import Demand
from .explain import broken_by
from .floor import Floors
from .sim import Outcome
from .space import Limits
from ...dsl.records import frozen


@frozen
class Side:
    """One pool: its replica, the analytic estimate and how many replicas run."""

    replica: Replica
    estimate: ServeEstimate
    count: int

    @property
    def gpus(self) -> int:
        return self.count * self.replica.gpus


@frozen
class SearchResult:
    mode: str
    decode: Side | None
    prefill: Side | None
    outcome: Outcome | None
    power: float | None
    binding: tuple[str, ...]
    proof: str


def pools_power(graph, partition, sides: list[Side], rate: float | None = None, gpus: int | None = None) -> float:
    """Watts of the pools serving `rate` requests per second (None: each at its full-batch
    capacity, as MLPerf's Offline runs), each GPU of a pool drawing `pool_share` of its range;
    the GPUs beside the pools idle. The power never falls as the rate grows, nor as a pool
    grows (what the demand search prunes by), and never exceeds the pools' at capacity
    (laws: tests/solver/serve/test_serve_power.py). `gpus`: the GPUs drawing idle power beside
    them, when more than the pools' own (exact sizes)."""
    gpus = max(gpus or 0, sum(s.gpus for s in sides))
    if gpus == 0:
        return 0.0
    drawn = sum(pool_share(s, rate, partition.node.accelerator) * s.gpus for s in sides)
    return power_of(graph, partition, gpus, power_at(partition, drawn / gpus)).total


def pool_share(side: Side, rate: float | None, chip=None) -> float:
    """The share of its idle-to-full range one GPU of the pool draws serving `rate` requests
    per second (None: at capacity). `used`, the rate over the pool's capacity, is the share of
    the full batch's computing the rate brings (the FLOPs are the same whatever the batch). A
    batching server steps whenever it holds a request, streaming the weights at any batch
    (model/power.py `streaming_activity` of the `chip`), so its GPUs stream for the rest of the time it holds
    one: at least `used` of the time (a replica that holds any completes requests no faster than
    its capacity), and at least 1 - exp(-n) of it, n being the requests in flight (Little's law,
    each step no shorter than a lone sequence's: `lone_flight` x `used`), none for exp(-n) of
    the time (Poisson arrivals, an M/G/inf ESTIMATE). A pipeline's stages are all charged while
    the replica holds a request (an upper bound: fewer micro-batches than stages leave some
    idle). Near saturation a server then draws nearly its Offline power,
    as measured (benchmarks/data/power_serving.csv, MLPerf Inference v5.1, Lenovo 8 x B200:
    Llama 2 70B Server at 96 % of the Offline rate drew 10,442 W at the wall, Offline 10,401 W;
    Llama 3.1 405B Server at 76 % of it 9,566 W, Offline 9,892 W), where charging the share of
    capacity in use alone charged a 4 % lower rate 4 % less of the GPUs' range. A prefill pool
    runs its chunks for `used` of the time and idles between them."""
    e = side.estimate
    used = min(1.0, rate / (side.count * e.requests_per_s)) if rate else 1.0
    if e.role == "prefill":
        return used * serving_activity(e.busy, chip)
    computing = used * e.busy
    held = max(used, -math.expm1(-e.lone_flight * used))
    return computing + streaming_activity(chip) * (held - computing)


class Screen:
    """The candidates' analytic screening and what the searches built on it share."""

    def __init__(self, graph, partition, limits: Limits, demand: Demand | None, mode: str,
                 replicas: list[Replica], lengths: Demand, warmup_s: float = 0.0, energy: bool = False,
                 router: str = "least_requests"):
        self.graph, self.partition, self.limits, self.demand, self.mode = graph, partition, limits, demand, mode
        self.warmup_s, self.energy, self.router = warmup_s, energy, router
        self.prompt, self.output = lengths.prompt, lengths.output
        self.simulated, self.pruned = 0, 0
        self.broken: dict[str, set[int]] = {}   # limit -> the replicas (ids) that break it
        self.misses: dict[tuple[str, int], dict[str, float]] = {}  # (role, replica id) -> the limits it breaks,
        # each with the value it reaches (what says which limits keep every configuration out)
        self.floors = Floors(demand.requests, warmup_s, limits.slo) if demand is not None else None
        self.floored: dict[tuple, dict[str, float]] = {}    # (layout but its batch, role) -> the floors it breaks
        self.both = self.admissible(replicas, "both")
        self.prefills = self.admissible(replicas, "prefill") if mode != "aggregated" else []
        self.decodes = self.admissible(replicas, "decode") if mode != "aggregated" else []
        self.total = len(replicas)
        self.replicas = replicas

    def admissible(self, replicas: list[Replica], role: str) -> list[tuple[Replica, ServeEstimate]]:
        out = []
        for r in replicas:
            if role == "prefill" and r.config.batch != 1:
                continue  # a prefill replica's batch is its chunk budget, not a decode batch
            e = estimate(r, self.prompt, self.output, role)
            missed = self.violations(r, e, role)
            for name in missed:
                self.broken.setdefault(name, set()).add(id(r))
            self.misses[role, id(r)] = missed
            if not missed:
                out.append((r, e))
        return out

    def violations(self, r: Replica, e: ServeEstimate, role: str) -> dict[str, float]:
        """The limits the replica breaks in `role`, each with the value it reaches. Without a
        demand the latency SLOs bound the replica's own figures (unloaded TTFT, TPOT at full
        batch); with one, the simulated percentiles, which a discard must prove broken: their
        request-by-request floors (solver/serve/floor.py) already break them."""
        lim = self.limits
        values = [("memory", True, e.memory, lim.memory_bytes(e.hbm)), ("gpus", True, r.gpus, lim.gpus)]
        if self.floors is None:
            unloaded_tpot = r.iteration(1, self.prompt + self.output / 2) / r.engine.tokens_per_step
            values += [("ttft", role != "decode", e.ttft, lim.latency("ttft")),
                       ("tpot", role != "prefill", e.tpot, lim.latency("tpot")),
                       ("e2e", role == "both", e.ttft + self.output * unloaded_tpot, lim.latency("e2e"))]
        missed = {name: value for name, applies, value, bound in values if applies and value > bound}
        if self.floors is not None:
            for key, floor in self.floors_broken(r, role).items():
                missed.setdefault(key.split(".")[0], floor)    # the first broken SLO of each metric
        return missed

    def floors_broken(self, r: Replica, role: str) -> dict[str, float]:
        """The SLOs the floors break (solver/serve/floor.py), worked out once for the layouts
        that differ only in their batch limit: a floor is one request's own latency, at the
        least any iteration holding it takes, whatever else the batch holds."""
        key = (attrs.evolve(r.config, batch=0), role)
        if key not in self.floored:
            self.floored[key] = self.floors.broken(r, role)
        return self.floored[key]

    def power(self, sides: list[Side], rate: float | None = None, gpus: int | None = None) -> float:
        return pools_power(self.graph, self.partition, sides, rate, gpus)

    def broke_power(self, key: int, watts: float, role: str = "both") -> None:
        self.broken.setdefault("power", set()).add(key)
        missed = self.misses.setdefault((role, key), {})
        missed["power"] = min(missed.get("power", math.inf), watts)

    def infeasible(self) -> SearchResult:
        reasons = tuple(f"{name}: broken by {broken_by(len(ids), self.total)}"
                        for name, ids in sorted(self.broken.items()))
        admitted = any(not m for (role, _), m in self.misses.items() if role == "both")  # then failed in simulation
        if self.demand is not None and (not reasons or admitted):
            reasons = (f"demand: no configuration {self.meets()} at {self.demand.described()} "
                       f"on {self.limits.gpus} GPUs",)
        return SearchResult(self.mode, None, None, None, None, reasons or ("no configuration fits",), "")

    def meets(self) -> str:
        """What a configuration failed to do in simulation: with no SLO, a run fails only by
        falling behind its arrivals (the queue grows), so a message naming SLO percentiles
        would send the user looking for bounds the job never stated."""
        return "meets the SLO percentiles" if self.limits.slo else "keeps up with the arrivals"

    def runners_up(self, result: SearchResult, top: int) -> list[ServeEstimate]:
        if result.decode is None:
            return []
        chosen = result.decode.replica.config
        ranked = sorted((e for _, e in self.both if e.config != chosen),
                        key=lambda e: -e.tokens_per_s / e.gpus)
        return ranked[:top]
