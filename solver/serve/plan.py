"""Planning a `serve` job: aggregated or disaggregated, the replica parallelism (tp inside
the scale-up domain, ep and pp across nodes), the batch limit and the pool sizes.

Without a demand the plan serves the most output tokens per second (then draws the least
power; with `minimize = energy`, the most tokens per joule, then the most tokens per second)
on the GPUs and power it may use, within the SLOs (unloaded TTFT, TPOT at full batch) and
memory: an exact search over the layouts and their replica counts.

With a demand (`rate` or `trace`) the plan is the one with the fewest GPUs (then the least
power) whose simulated percentiles meet the SLOs, found by branch and bound over analytic
bounds with simulation to confirm the finalists.

The searches: solver/serve/saturated.py (no demand), solver/serve/demand_search.py (a
demand), on the screening both share (solver/serve/screen.py).
"""

from __future__ import annotations

import time

import attrs

from ...compiler.design import Entity
from ...compiler.ir import ClusterGraph, Partition
from ...model.serve.inference import ServeEstimate, replica, sharing_costs
from ...model.job import JobError, placement, serve_entity
from ...model.shape import ModelShape
from .demand import Demand, demand_of, lifetime
from .demand_search import UNDECIDED, DemandSearch
from .explain import infeasible_reasons
from .saturated import SaturatedSearch
from .screen import SearchResult, Side
from .sim import Outcome
from .space import Limits, configs, engine_of, limits_of, mode_of, router_of, short_of_gpus
from ...dsl.records import frozen

__all__ = ["ServePlan", "Side", "plan_serve", "serve_entity"]


@frozen
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
    def undecided(self) -> bool:
        """No plan found, but none proven impossible: the search's simulation budget ran out."""
        return self.decode is None and self.proof == UNDECIDED

    @property
    def status(self) -> str:
        return "optimal" if self.decode else "undecided" if self.undecided else "infeasible"

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


SERVE_OBJECTIVES = ("throughput", "energy")   # `maximize = throughput`, `minimize = energy`


def plan_serve(entity: Entity, top: int = 3, requests: int | None = None, exhaustive: bool = False,
               objective: str | None = None) -> ServePlan:
    """The job's plan; `exhaustive` confirms every candidate under a demand instead of
    pruning by bounds (the same choice, slower: the reference for the law that says so);
    `objective` (one of SERVE_OBJECTIVES) overrides the job's (`gclc plan --objective`)."""
    if objective is not None and objective not in SERVE_OBJECTIVES:
        raise JobError(f"`--objective {objective}` does not apply to the serve job `{entity.name}`; it is planned "
                       f"for {' or '.join(SERVE_OBJECTIVES)}")
    energy = objective == "energy" if objective is not None else entity.get("minimize") is not None
    started = time.perf_counter()
    graph, partition = placement(entity)
    shape = ModelShape.from_entity(entity.get("model"))
    limits = limits_of(entity, graph, partition)
    has_demand = entity.get("rate") is not None or entity.get("trace") is not None
    demand = demand_of(entity, requests) if has_demand else demand_of(attrs.evolve(entity), 1)
    engine = engine_of(entity, partition)
    precision = getattr(entity.get("precision"), "name", "bf16")
    replicas = sharing_costs([replica(shape, cfg, partition, engine)
                              for cfg in configs(shape, partition, limits.gpus, precision, entity, engine.max_seqs,
                                                   engine.name)])
    search = (DemandSearch if has_demand else SaturatedSearch)(
        graph, partition, limits, demand if has_demand else None, mode_of(entity), replicas, demand,
        lifetime(entity, demand.output), energy=energy, router=router_of(entity))
    if has_demand:
        search.exhaustive = exhaustive
    short = short_of_gpus(limits, entity)
    result = SearchResult(search.mode, None, None, None, None, (short,), "") if short else search.run()
    if result.decode is None and search.broken and not short:
        reasons = infeasible_reasons(entity, search.misses)
        result = attrs.evolve(result, binding=reasons + tuple(r for r in result.binding if r.startswith("demand:"))
                              or result.binding)
    return ServePlan(entity.name, graph, partition, limits.gpus, result.mode, result.decode, result.prefill,
                     result.outcome, demand if has_demand else None, demand.prompt, demand.output, limits,
                     tuple(search.runners_up(result, top)), len(replicas), search.simulated, search.pruned,
                     result.binding, result.power, time.perf_counter() - started, result.proof, entity)
