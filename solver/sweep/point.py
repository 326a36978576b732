"""One design point: check the design with its overrides, lower it, cost it, plan its job.

The result is one flat row (`COLUMNS`, fixed types) so that rows stream into a table.
A point that does not check or cannot be planned is kept: `status` says which, `reason`
says why (the first error with its location, or the plan's binding constraint).
"""

from __future__ import annotations

import math

from ...compiler.driver import check_file
from ...compiler.lower import lower, pick_cluster
from ...compiler.metrics import facility_power
from ...dsl.diagnostics import Diagnostic
from ...model.job import JobError, train_job

# name -> type ("int", "float", "str", "bool"); the swept values come first, as text, in
# columns named `set_<param>` (a param may well be called `nodes` or `tp`).
COLUMNS: dict[str, str] = {
    # gpus: what the plan runs on (tp x pp x dp x cp); cluster_gpus: what the design holds
    "point": "int", "status": "str", "reason": "str", "job": "str", "gpus": "int", "cluster_gpus": "int", "nodes": "int",
    "tp": "int", "pp": "int", "dp": "int", "cp": "int", "ep": "int", "vp": "int", "microbatch": "int",
    "recompute": "str", "zero": "int",
    # the operating point (train jobs): its clock (a ratio of the chip's own) and the power cap
    # per GPU that holds it there (empty: full clock); the GPUs it runs are `gpus`
    "clock": "float", "power_cap_w": "float",
    "step_time_s": "float", "tokens_per_s": "float", "mfu": "float", "memory_per_gpu_bytes": "float",
    # goodput (train jobs): the share of wall time that trains under failures, checkpoints
    # and restarts (solver/schedule/goodput.py), and the tokens/s that share leaves
    "goodput_share": "float", "goodput_tokens_per_s": "float",
    "job_power_w": "float", "facility_power_w": "float", "time_to_train_s": "float", "energy_to_train_j": "float",
    "racks": "int", "switches": "int", "transceivers": "int", "capex_usd": "float", "tco_usd": "float",
    "tco_complete": "bool", "cost_per_token_usd": "float", "cost_to_train_usd": "float",
}
STATUSES = ("ok", "infeasible", "invalid")


def column(param: str) -> str:
    """The table column of a swept param."""
    return f"set_{param}"


def empty_row(index: int, settings: dict[str, str]) -> dict:
    return {column(k): v for k, v in settings.items()} | {name: None for name in COLUMNS} | {"point": index}


def evaluate(path: str, index: int, settings: dict[str, str], job: str | None = None,
             objective: str = "throughput") -> dict:
    """The row of the point `settings` of the design at `path`."""
    row = empty_row(index, settings)
    result = check_file(path, dict(settings), again=True)  # the sweep checked the whole design once
    if result.design is None:
        return row | {"status": "invalid", "reason": _first_error(result.diagnostics)}
    design = result.design
    try:
        cluster = pick_cluster(design)
    except LookupError as error:
        return row | {"status": "invalid", "reason": str(error)}
    graph = lower(design)
    power = facility_power(graph)
    row |= {"gpus": graph.gpus, "cluster_gpus": graph.gpus, "nodes": sum(p.nodes for p in graph.partitions),
            "facility_power_w": power} | _costs(cluster, graph, power)
    try:
        return _train(design, job, objective, row)
    except JobError as error:
        return row | {"status": "invalid", "reason": str(error)}


def _first_error(diagnostics: tuple[Diagnostic, ...]) -> str:
    for d in diagnostics:
        if d.is_error:
            return f"{d.subject}: {d.summary}" if d.subject is not None else d.summary
    return "the design does not check"


def _costs(cluster, graph, power: float) -> dict:
    from ...compiler.cost.tco import tco

    t = tco(cluster, graph, power=power)
    if t is None:
        return {}
    bom = t.bom
    return {"racks": bom.racks, "switches": bom.count("switches"), "transceivers": bom.count("transceivers"),
            "capex_usd": t.capex, "tco_usd": t.total, "tco_complete": t.complete, "_tco": t}


def _train(design, job: str | None, objective: str, row: dict) -> dict:
    from ..train.plan import plan
    from ..serve.plan import plan_serve, serve_entity

    served = serve_entity(design, job)
    if served is not None:
        return _serve(plan_serve(served, 0), row)
    chosen = plan(train_job(design, job), objective, 0)
    t = row.pop("_tco", None)
    row["job"] = chosen.job.name
    if chosen.best is None:
        reason = chosen.infeasibility.message if chosen.infeasibility is not None else "no admissible configuration"
        return row | {"status": "infeasible", "reason": reason}
    e, c = chosen.best, chosen.best.config
    row |= {"status": "ok", "reason": "", "gpus": c.gpus, "tp": c.tp, "pp": c.pp, "dp": c.dp, "cp": c.cp, "ep": c.ep,
            "vp": c.vp, "microbatch": c.microbatch, "recompute": c.recompute, "zero": c.zero,
            "clock": chosen.clock, "power_cap_w": c.power_cap, "step_time_s": e.step_time,
            "tokens_per_s": e.tokens_per_s, "mfu": e.mfu, "memory_per_gpu_bytes": e.memory.total,
            "job_power_w": chosen.power.total if chosen.power is not None else None}
    if chosen.goodput is not None:
        row |= {"goodput_share": chosen.goodput.efficiency,
                "goodput_tokens_per_s": e.tokens_per_s * chosen.goodput.efficiency}
    tokens = chosen.job.tokens
    if tokens:
        row["time_to_train_s"] = tokens / e.tokens_per_s
        if chosen.energy_per_token is not None:
            row["energy_to_train_j"] = tokens * chosen.energy_per_token
    if t is not None:   # the job's cost per token at its own power (compiler/cost/tco.py `cost_rates`), as its plan says
        from ..train.limits import cost_rates

        per_second, per_joule = cost_rates(chosen.job)
        row["cost_per_token_usd"] = (per_second + per_joule * chosen.power.total) / e.tokens_per_s
        if tokens:
            row["cost_to_train_usd"] = row["cost_per_token_usd"] * tokens
    return row


def _serve(chosen, row: dict) -> dict:
    t = row.pop("_tco", None)
    row["job"] = chosen.name
    if chosen.best is None:
        return row | {"status": "infeasible", "reason": "; ".join(chosen.binding) or "no configuration meets the SLOs"}
    c = chosen.best.config
    share = chosen.used_gpus / chosen.graph.gpus   # a serve plan uses (and is charged for) only its pools' GPUs
    row |= {"status": "ok", "reason": "", "gpus": chosen.used_gpus, "tp": c.tp, "pp": c.pp, "ep": c.ep,
            "dp": chosen.replicas, "tokens_per_s": chosen.tokens_per_s, "memory_per_gpu_bytes": chosen.best.memory,
            "job_power_w": chosen.power_w}
    if t is not None and chosen.tokens_per_s > 0:
        row["cost_per_token_usd"] = t.per_token(chosen.tokens_per_s) * share   # as views/serve.py serve_cost
    return row


def clean(row: dict) -> dict:
    """Drop private keys and make NaN-free values (None where undefined)."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items() if not k.startswith("_")}


def evaluate_chunk(path: str, chunk: list[tuple[int, dict[str, str]]], job: str | None = None,
                   objective: str = "throughput") -> list[dict]:
    """A batch of points, so that a distributed scheduler sees few, larger tasks."""
    return [clean(evaluate(path, index, settings, job, objective)) for index, settings in chunk]
