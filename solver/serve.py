"""Planning a `serve` job: aggregated or disaggregated, the replica parallelism (tp inside
the scale-up domain, ep and pp across nodes), the batch limit and the pool sizes.

Without a demand the plan serves the most output tokens per second with every GPU it may
use, within the SLOs (unloaded TTFT, TPOT at full batch), memory and power.

With a demand (`rate` or `trace`) the plan is the one with the fewest GPUs (then the least
power) whose simulated percentiles meet the SLOs. The analytic model first gives each
candidate a lower bound on the replicas it needs (its full-batch capacity is an upper
bound on what the simulation achieves: the simulation adds queueing and length
variability, and an iteration's cost is convex in its contents); candidates are then
simulated in the order of that bound, each growing its pools until the percentiles hold,
and the search stops when no bound can beat the best plan found (branch and bound).
"""

from __future__ import annotations

import math
import time

import attrs

from ..compiler.design import Entity
from ..compiler.ir import ClusterGraph, Partition
from ..dsl.numbers import number, quantity
from ..model.inference import Replica, ServeEstimate, estimate, kv_transfer_time, replica
from ..model.job import placement, serve_entity  # noqa: F401  (serve_entity: re-exported, where callers find it)
from ..model.power import job_power
from ..model.shape import ModelShape
from .serve_bound import tpot_replicas
from .serve_demand import Demand, demand_of, lifetime
from .serve_explain import infeasible_reasons
from .serve_sim import Outcome, Pool, simulate
from .serve_space import Limits, configs, engine_of, limits_of, mode_of

MAX_SIMULATIONS = 60        # finalists simulated before the search reports its gap
GROWTH = 1.25               # a pool that misses its SLO grows by this factor (at least one replica)


@attrs.frozen
class Side:
    """One pool: its replica, the analytic estimate and how many replicas run."""

    replica: Replica
    estimate: ServeEstimate
    count: int

    @property
    def gpus(self) -> int:
        return self.count * self.replica.gpus


@attrs.frozen
class ServePlan:
    job_kind = "serve"   # not a field: what the views dispatch on (solver/jobs.py `Outcome`)
    name: str
    graph: ClusterGraph
    partition: Partition
    gpus: int                           # GPUs the job may use
    mode: str                           # aggregated or disaggregated
    decode: Side | None                 # the serving pool (decode, or everything when aggregated)
    prefill: Side | None
    outcome: Outcome | None             # simulated percentiles at the demand
    demand: Demand | None
    prompt_tokens: float                # mean tokens per request
    output_tokens: float
    limits: Limits
    runners_up: tuple[ServeEstimate, ...]
    considered: int
    simulated: int
    pruned: int
    binding: tuple[str, ...]
    power_w: float | None
    seconds: float
    proof: str
    entity: object = None               # the serve job (for its cluster's cost of ownership)

    @property
    def best(self) -> ServeEstimate | None:
        return self.decode.estimate if self.decode else None

    @property
    def replicas(self) -> int:
        return self.decode.count if self.decode else 0

    @property
    def used_gpus(self) -> int:
        return (self.decode.gpus if self.decode else 0) + (self.prefill.gpus if self.prefill else 0)

    @property
    def tokens_per_s(self) -> float:
        if self.decode is None:
            return 0.0
        if self.outcome is not None and self.demand is not None and self.demand.rate:
            return self.demand.rate * self.output_tokens  # the SLOs hold in simulation: the demand is served
        if self.prefill is not None:
            return min(self.decode.count * self.decode.estimate.requests_per_s,
                       self.prefill.count * self.prefill.estimate.requests_per_s) * self.demand_output
        return self.decode.estimate.tokens_per_s * self.decode.count

    @property
    def demand_output(self) -> float:
        return self.output_tokens

    @property
    def decode_prompt(self) -> float:
        return self.prompt_tokens

    @property
    def energy_per_token(self) -> float | None:
        return self.power_w / self.tokens_per_s if self.decode and self.power_w and self.tokens_per_s else None


def plan_serve(entity: Entity, top: int = 3, requests: int | None = None) -> ServePlan:
    started = time.perf_counter()
    graph, partition = placement(entity)
    shape = ModelShape.from_entity(entity.get("model"))
    limits = limits_of(entity, graph, partition)
    has_demand = entity.get("rate") is not None or entity.get("trace") is not None
    demand = demand_of(entity, requests) if has_demand else demand_of(attrs.evolve(entity), 1)
    engine = engine_of(entity)
    precision = getattr(entity.get("precision"), "name", "bf16")
    replicas = [replica(shape, cfg, partition, engine) for cfg in configs(shape, partition, limits.gpus, precision, entity)]
    search = _Search(graph, partition, limits, demand if has_demand else None, mode_of(entity), replicas, demand,
                     lifetime(entity, demand.output), energy=entity.get("minimize") is not None)
    result = search.run()
    if result.decode is None and search.broken:
        result = attrs.evolve(result, binding=infeasible_reasons(entity, search.broken, search.nearest, search.total)
                              + tuple(r for r in result.binding if r.startswith("demand:")))
    return ServePlan(entity.name, graph, partition, limits.gpus, result.mode, result.decode, result.prefill,
                     result.outcome, demand if has_demand else None, demand.prompt, demand.output, limits,
                     tuple(search.runners_up(result, top)), len(replicas), search.simulated, search.pruned,
                     result.binding, result.power, time.perf_counter() - started, result.proof, entity)


@attrs.frozen
class _Result:
    mode: str
    decode: Side | None
    prefill: Side | None
    outcome: Outcome | None
    power: float | None
    binding: tuple[str, ...]
    proof: str


class _Search:
    def __init__(self, graph, partition, limits: Limits, demand: Demand | None, mode: str,
                 replicas: list[Replica], lengths: Demand, warmup_s: float = 0.0, energy: bool = False):
        self.graph, self.partition, self.limits, self.demand, self.mode = graph, partition, limits, demand, mode
        self.warmup_s, self.energy = warmup_s, energy
        self.prompt, self.output = lengths.prompt, lengths.output
        self.simulated, self.pruned = 0, 0
        self.broken: dict[str, set[int]] = {}   # limit -> the replicas (ids) that break it
        self.nearest: dict[str, float] = {}      # limit -> the best any replica reaches (to say how far)
        self.both = self.admissible(replicas, "both")
        self.prefills = self.admissible(replicas, "prefill") if mode != "aggregated" else []
        self.decodes = self.admissible(replicas, "decode") if mode != "aggregated" else []
        self.total = len(replicas)
        self.replicas = replicas

    # ------------------------------------------------------------ analytic screening
    def admissible(self, replicas: list[Replica], role: str) -> list[tuple[Replica, ServeEstimate]]:
        out = []
        for r in replicas:
            if role == "prefill" and r.config.batch != 1:
                continue  # a prefill replica's batch is its chunk budget, not a decode batch
            e = estimate(r, self.prompt, self.output, role)
            broken = self.violations(r, e, role)
            for name in broken:
                self.broken.setdefault(name, set()).add(id(r))
            if not broken:
                out.append((r, e))
        return out

    def violations(self, r: Replica, e: ServeEstimate, role: str) -> tuple[str, ...]:
        lim = self.limits
        unloaded_tpot = r.iteration(1, self.prompt + self.output / 2) / r.engine.tokens_per_step
        tpot = unloaded_tpot if self.demand is not None else e.tpot  # under demand the batch fills as needed
        values = (("memory", True, e.memory, lim.memory_bytes(e.hbm)),
                  ("ttft", role != "decode", e.ttft, lim.latency("ttft")),
                  ("tpot", role != "prefill", tpot, lim.latency("tpot")),
                  ("e2e", role == "both", e.ttft + self.output * unloaded_tpot, lim.latency("e2e")),
                  ("gpus", True, r.gpus, lim.gpus))
        for name, applies, value, _ in values:
            if applies:
                self.nearest[name] = min(self.nearest.get(name, math.inf), value)
        return tuple(name for name, applies, value, bound in values if applies and value > bound)

    def power(self, sides: list[Side], utilization: float = 1.0) -> float:
        gpus = sum(s.gpus for s in sides)
        if gpus == 0:
            return 0.0
        busy = sum(s.estimate.busy * s.gpus for s in sides) / max(gpus, 1) * min(1.0, utilization)
        return job_power(self.graph, self.partition, gpus, busy).total

    # ------------------------------------------------------------ the search
    def run(self) -> _Result:
        if self.demand is None:
            return self.saturated()
        return self.under_demand()

    def saturated(self) -> _Result:
        """No demand: the most output tokens per second on the GPUs and power allowed."""
        best: _Result | None = None
        for r, e in self.both:
            count = self.fit_power(lambda n: [Side(r, e, n)], self.limits.gpus // r.gpus)
            found = _Result("aggregated", Side(r, e, count), None, None, self.power([Side(r, e, count)]), (),
                            "exhaustive") if count else None
            if not count and self.limits.gpus >= r.gpus:  # one replica already draws more than allowed
                self.broke_power(id(r), self.power([Side(r, e, 1)]))
            if found and (best is None or self.better(found, best)):
                best = found
        if self.mode != "aggregated":
            best = self.saturated_split(best)
        if best is None:
            return self.infeasible()
        return attrs.evolve(best, binding=self.binding_saturated(best))

    def saturated_split(self, best: _Result | None) -> _Result | None:
        pre = _best_per_gpu(self.prefills)
        dec = _best_per_gpu(self.decodes)
        if pre is None or dec is None:
            return best
        (rp, ep), (rd, ed) = pre, dec
        for n_p in range(1, self.limits.gpus // rp.gpus + 1):
            n_d = (self.limits.gpus - n_p * rp.gpus) // rd.gpus
            if n_d < 1:
                break
            n_d = self.fit_power(lambda n: [Side(rp, ep, n_p), Side(rd, ed, n)], n_d)
            if n_d:
                sides = [Side(rp, ep, n_p), Side(rd, ed, n_d)]
                found = _Result("disaggregated", sides[1], sides[0], None, self.power(sides), (), "exhaustive")
                best = found if best is None or self.better(found, best) else best
        return best

    def better(self, a: _Result, b: _Result) -> bool:
        """Without a demand: more tokens per second, or (minimize = energy) more tokens per joule."""
        if self.energy:
            return _rate(a) / a.power > _rate(b) / b.power
        return _rate(a) > _rate(b)

    def fit_power(self, sides_of, count: int) -> int:
        """The most replicas, up to `count`, within the power limit (power is affine in them)."""
        if count <= 0 or self.power(sides_of(count)) <= self.limits.power:
            return max(count, 0)
        base, step = self.power(sides_of(0)), self.power(sides_of(1)) - self.power(sides_of(0))
        fits = math.floor((self.limits.power - base) / step) if step > 0 else count
        while fits > 0 and self.power(sides_of(fits)) > self.limits.power:  # rounding at the edge
            fits -= 1
        return max(0, min(count, fits))

    def under_demand(self) -> _Result:
        """A demand: the fewest GPUs whose simulated percentiles meet the SLOs."""
        rate = self.demand.rate or 0.0
        candidates = [(math.ceil(rate / e.requests_per_s) * r.gpus, [(r, e, math.ceil(rate / e.requests_per_s))])
                      for r, e in self.both]
        if self.mode != "aggregated":
            candidates += self.split_candidates(rate)
        if self.mode == "disaggregated":
            candidates = [c for c in candidates if len(c[1]) == 2]
        candidates.sort(key=lambda c: (c[0], sum(r.gpus for r, _, _ in c[1])))
        if self.energy:  # least power first: order and prune by the power of the bound
            candidates = [(self.power([Side(r, e, n) for r, e, n in sides], self.utilization_of(sides)), sides)
                          for _, sides in candidates]
            candidates.sort(key=lambda c: c[0])
        best: _Result | None = None
        best_key = (math.inf, math.inf)
        for bound, sides in candidates:
            if bound >= best_key[0] or sum(n * r.gpus for r, _, n in sides) > self.limits.gpus:
                self.pruned += 1
                continue
            if self.simulated >= MAX_SIMULATIONS:
                break
            sides = self.tpot_floor(sides)
            if not self.energy and sum(n * r.gpus for r, _, n in sides) >= best_key[0]:
                self.pruned += 1
                continue
            found = self.confirm(sides, math.inf if self.energy else best_key[0])
            if found is not None:
                gpus = found.decode.gpus + (found.prefill.gpus if found.prefill else 0)
                key = (found.power, gpus) if self.energy else (gpus, found.power)
                if key < best_key:
                    best, best_key = found, key
        best_gpus = best_key[0]
        if best is None:
            return self.infeasible()
        exhausted = self.simulated >= MAX_SIMULATIONS and any(b < best_gpus for b, _ in candidates)
        return attrs.evolve(best, proof="budget: finalists left unsimulated" if exhausted else "bound")

    def split_candidates(self, rate: float) -> list:
        """Prefill and decode pools sized by their analytic bounds; the best few of each side."""
        pres = sorted(self.prefills, key=lambda p: math.ceil(rate / p[1].requests_per_s) * p[0].gpus)[:4]
        decs = sorted(self.decodes, key=lambda d: math.ceil(rate / d[1].requests_per_s) * d[0].gpus)[:8]
        out = []
        for rp, ep in pres:
            for rd, ed in decs:
                n_p, n_d = math.ceil(rate / ep.requests_per_s), math.ceil(rate / ed.requests_per_s)
                out.append((n_p * rp.gpus + n_d * rd.gpus, [(rp, ep, n_p), (rd, ed, n_d)]))
        return out

    def tpot_floor(self, sides: list) -> list:
        """The serving pool grown to the fewest replicas whose loaded mean TPOT meets a TPOT
        bound on the median or a higher percentile (solver/serve_bound.py): fewer break it
        in any simulation, so they need not be simulated."""
        bound = min((v for k, v in self.limits.slo.items() if k.split(".")[0] == "tpot"
                     and k.partition(".")[2] not in ("", "mean") and float(k.partition(".")[2][1:]) >= 50),
                    default=math.inf)
        r, e, n = sides[-1]
        most = max(n, (self.limits.gpus - sum(c * x.gpus for x, _, c in sides[:-1])) // r.gpus)
        grown = tpot_replicas(r, self.demand.rate or 0.0, n, most, bound, self.prompt, self.output)
        return [*sides[:-1], (r, e, grown)]

    def confirm(self, sides: list, ceiling: float) -> _Result | None:
        """Simulate, growing the pool that misses its SLO, until the percentiles hold."""
        counts = [n for _, _, n in sides]
        binding = (f"capacity: fewer {'decode ' if len(sides) == 2 else ''}replicas cannot carry the demand "
                   "(analytic bound)",) if counts[-1] > 1 else (
            f"size: one replica of {sides[-1][0].gpus} GPUs carries the demand; no smaller layout fits or meets the SLOs",)
        while self.simulated < MAX_SIMULATIONS:
            gpus = sum(n * r.gpus for (r, _, _), n in zip(sides, counts))
            if gpus > self.limits.gpus or gpus > ceiling:
                return None
            built = [Side(r, e, n) for (r, e, _), n in zip(sides, counts)]
            power = self.power(built, utilization=self.utilization(built))
            if power > self.limits.power:  # more replicas only draw more: no need to simulate
                self.broke_power(id(sides[-1][0]), power)
                return None
            outcome = self.simulate(built)
            self.simulated += 1
            missed = _missed(outcome, self.limits.slo)
            if not missed:
                decode, prefill = (built[1], built[0]) if len(built) == 2 else (built[0], None)
                return _Result("disaggregated" if prefill else "aggregated", decode, prefill, outcome, power, binding, "")
            grow = 0 if len(built) == 2 and any(m.startswith("ttft") for m in missed) else len(built) - 1
            binding = tuple(f"{m}: {counts[grow]} {('prefill ' if grow == 0 and len(built) == 2 else '')}"
                            f"{'replica breaks' if counts[grow] == 1 else 'replicas break'} it in simulation"
                            for m in missed)
            counts[grow] = max(counts[grow] + 1, math.ceil(counts[grow] * GROWTH))
        return None

    def utilization_of(self, sides: list) -> float:
        return self.utilization([Side(r, e, n) for r, e, n in sides])

    def utilization(self, sides: list[Side]) -> float:
        capacity = min(s.count * s.estimate.requests_per_s for s in sides)
        return (self.demand.rate or capacity) / capacity if capacity else 1.0

    def simulate(self, sides: list[Side]) -> Outcome:
        hbm = self.limits.memory_bytes(sides[-1].replica.hbm)
        decode = _pool(sides[-1], hbm)
        if len(sides) == 1:
            return simulate(self.demand.requests, decode, slo=self.limits.slo, warmup_s=self.warmup_s)
        pre, dec = sides[0].replica, sides[1].replica
        return simulate(self.demand.requests, decode, _pool(sides[0], hbm),
                        lambda prompt: kv_transfer_time(pre, dec, prompt), self.limits.slo, self.warmup_s)

    # ------------------------------------------------------------ reasons
    def broke_power(self, key: int, watts: float) -> None:
        self.broken.setdefault("power", set()).add(key)
        self.nearest["power"] = min(self.nearest.get("power", math.inf), watts)

    def infeasible(self) -> _Result:
        reasons = tuple(f"{name}: broken by {len(ids)} of {self.total} configurations"
                        for name, ids in sorted(self.broken.items()))
        if not reasons and self.demand is not None:
            reasons = (f"demand: no configuration meets the SLO percentiles at {number(self.demand.rate)} requests/s "
                       f"on {self.limits.gpus} GPUs",)
        return _Result(self.mode, None, None, None, None, reasons or ("no configuration fits",), "")

    def binding_saturated(self, best: _Result) -> tuple[str, ...]:
        d = best.decode
        batch = d.replica.config.batch
        bigger = [e for r, e in self.both if r.config.batch > batch and
                  attrs.evolve(r.config, batch=batch) == d.replica.config]
        out = []
        if d.count * d.replica.gpus + (best.prefill.gpus if best.prefill else 0) + d.replica.gpus <= self.limits.gpus:
            out.append(f"power: {quantity(self.limits.power, 'W')} stops another replica")
        if best.mode == "aggregated" and not bigger:
            out.append(self.batch_binding(d.replica.config))
        return tuple(out) or ("gpus: every GPU serves",)

    def batch_binding(self, chosen) -> str:
        """Why the batch is no larger: the limits the next larger batch of the same replica
        breaks, or the end of the batches searched."""
        larger = sorted((r for r in self.replicas if r.config.batch > chosen.batch
                         and attrs.evolve(r.config, batch=chosen.batch) == chosen), key=lambda r: r.config.batch)
        if not larger:
            return f"batch: {number(chosen.batch)} sequences per replica, the largest searched"
        broken = sorted(name for name, ids in self.broken.items() if id(larger[0]) in ids)
        words = " and ".join(broken) if broken else "the SLOs in simulation"
        return f"batch: {number(larger[0].config.batch)} sequences per replica would break {words}"

    def runners_up(self, result: _Result, top: int) -> list[ServeEstimate]:
        if result.decode is None:
            return []
        chosen = result.decode.replica.config
        ranked = sorted((e for _, e in self.both if e.config != chosen),
                        key=lambda e: -e.tokens_per_s / e.gpus)
        return ranked[:top]


def _pool(side: Side, hbm_limit: float) -> Pool:
    r = side.replica
    return Pool(r, side.count, r.config.batch, r.kv_capacity_tokens(hbm_limit))


def _rate(result: _Result) -> float:
    d = result.decode
    if result.prefill is None:
        return d.estimate.tokens_per_s * d.count
    p = result.prefill
    out = d.estimate.tokens_per_s / max(d.estimate.requests_per_s, 1e-30)
    return min(d.count * d.estimate.requests_per_s, p.count * p.estimate.requests_per_s) * out


def _best_per_gpu(pairs):
    return max(pairs, key=lambda p: p[1].requests_per_s / p[0].gpus, default=None)


def _missed(outcome: Outcome, slo: dict[str, float]) -> list[str]:
    """The SLO bounds the simulated percentiles break (bare names bound the mean)."""
    missed = []
    for key, bound in slo.items():
        metric, _, which = key.partition(".")
        p = -1 if which in ("", "mean") else float(which[1:])
        if outcome.percentile(metric, p) > bound:
            missed.append(key)
    return missed
