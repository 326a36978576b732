"""Plans as stable JSON: the documented `gclc plan --json` keys for every job kind."""

from __future__ import annotations

import attrs

from ..model.calibration import BAND_CONFIDENCE
from ..model.step import Estimate
from ..solver.hetero import HeteroPlan, HeteroSplit
from ..solver.jobs import Outcome, TrainOutcome
from ..solver.power import PowerResult
from ..solver.serve import ServePlan

PLAN_FORMAT_VERSION = 1


def outcome_json(outcome: Outcome) -> dict:
    """The JSON of any job's plan."""
    if isinstance(outcome, HeteroPlan):
        return hetero_json(outcome)
    if isinstance(outcome, ServePlan):
        return serve_json(outcome)
    data = plan_json(outcome.plan)
    if outcome.power is not None:
        budgeted = outcome.power
        data["power_budget"] = power_json(budgeted.result) | {
            "shares": list(budgeted.inputs.shares), "fit_error": budgeted.inputs.fit_error,
            "curve": [{"budget_w": b, "tokens_per_s": t} for b, t in budgeted.curve]}
    return data

def parallelism(e: Estimate) -> dict:
    c = e.config
    return {"tp": c.tp, "pp": c.pp, "dp": c.dp, "ep": c.ep, "cp": c.cp, "vp": c.vp, "microbatch": c.microbatch,
            "microbatches": c.microbatches, "recompute": c.recompute, "zero": c.zero, "sp": c.sp}


def estimate_json(e: Estimate) -> dict:
    return {
        "step_time_s": e.step_time,
        "tokens_per_s": e.tokens_per_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "mfu": e.mfu,
        "hfu": e.hfu,
        "model_flops_per_gpu": e.model_flops_per_gpu,
        "memory_per_gpu_bytes": e.memory.total,
        "memory_breakdown_bytes": dict(e.memory.rows()),
        "hbm_bytes": e.hbm,
        "step_breakdown_s": dict(e.breakdown.rows()),
        "parallelism": parallelism(e),
        "gpus": e.config.gpus,
    }


def placement_json(plan) -> dict:
    out: dict = {"order": list(plan.best.config.order)} if plan.best is not None else {}
    for p in getattr(plan, "placement", ()):
        out[p.dim] = {"size": p.size, "stride": p.stride, "tiers": list(p.tiers), "peers": list(p.peers)}
    return out


def solver_json(plan) -> dict:
    return {"status": plan.status, "seconds": plan.seconds, "configurations": plan.considered,
            "evaluated": getattr(plan, "evaluated", plan.considered), "pruned": getattr(plan, "pruned", 0),
            "pruned_by": dict(getattr(plan, "pruned_by", ())), "proof": getattr(plan, "proof", "")}


def plan_json(plan) -> dict:
    job = plan.job
    out = {
        "format": "gclc-plan", "version": PLAN_FORMAT_VERSION,
        "job": job.name, "cluster": job.graph.name, "partition": job.partition.name,
        "objective": plan.objective, "status": plan.status,
        "solver": solver_json(plan),
        "warnings": [{"kind": w.kind, "message": w.message} for w in getattr(plan, "warnings", ())],
    }
    if plan.best is None:
        smallest, reason = plan.smallest, getattr(plan, "infeasibility", None)
        out["infeasible"] = {"constraint": reason.constraint if reason else "memory",
                             "needs_bytes": smallest.memory.total if smallest else None,
                             "hbm_bytes": smallest.hbm if smallest else None}
        if reason is not None:
            out["infeasible"].update({"needs": reason.needs, "limit": reason.limit, "unit": reason.unit,
                                      "message": reason.message, "location": reason.location})
        out["binding"] = list(plan.binding)
        return out
    out.update(estimate_json(plan.best))
    out.update({
        "power_w": plan.power.total,
        "power_breakdown_w": {"accelerators": plan.power.accelerators, "rest": plan.power.rest,
                              "cooling": plan.power.cooling},
        "energy_per_token_j": plan.energy_per_token,
        "error_band": {"confidence": BAND_CONFIDENCE, **{k: list(v) for k, v in plan.error_band.items()}},
        "placement": placement_json(plan),
        "binding": list(plan.binding),
        "runners_up": [estimate_json(r) for r in plan.runners_up],
    })
    if job.tokens:
        out["time_to_train_s"] = job.tokens / plan.best.tokens_per_s
        out["energy_to_train_j"] = job.tokens * plan.energy_per_token
    return out


def power_json(result: PowerResult) -> dict:
    """Stable keys for `gclc plan --json`."""
    return {
        "status": result.status, "objective": result.objective, "budget_w": result.budget,
        "gpus": result.gpus, "whole_gpus": result.whole_gpus, "units": result.units, "clock": result.clock,
        "power_cap_w": result.power_cap, "tokens_per_s": result.tokens_per_s,
        "whole_tokens_per_s": result.whole_tokens_per_s, "facility_power_w": result.facility_power,
        "energy_per_token_j": result.energy_per_token, "dual": result.dual,
        "marginal_tokens_per_s_per_mw": result.marginal_tokens_per_s_per_mw, "binding": list(result.binding),
        "shortfall_w": result.shortfall, "time_to_train_s": result.time_to_train, "message": result.message,
    }


def serve_json(p: ServePlan) -> dict:
    out = {"format": "gclc-serve-plan", "version": 1, "job": p.name, "cluster": p.graph.name,
           "status": "optimal" if p.best else "infeasible", "configurations": p.considered,
           "binding": list(p.binding)}
    if p.best is None:
        return out
    b = p.best
    out.update({"parallelism": {"tp": b.config.tp, "ep": b.config.ep, "batch": b.config.batch,
                                "replicas": p.replicas},
                "gpus": p.replicas * b.gpus, "ttft_s": b.ttft, "tpot_s": b.tpot, "tokens_per_s": p.tokens_per_s,
                "tokens_per_s_per_gpu": p.tokens_per_s / (p.replicas * b.gpus),
                "requests_per_s": b.requests_per_s * p.replicas, "memory_per_gpu_bytes": b.memory,
                "hbm_bytes": b.hbm, "power_w": p.power_w, "energy_per_token_j": p.energy_per_token})
    return out


def hetero_json(result: HeteroPlan) -> dict:
    def one(s: HeteroSplit) -> dict:
        return {"mode": s.mode, "status": s.status, "step_time_s": s.step_time, "compute_s": s.compute_time,
                "exchange_s": s.exchange, "tokens_per_s": s.tokens_per_s, "facility_power_w": s.power,
                "message": s.message,
                "partitions": [{"partition": x.partition, "chip": x.chip, "gpus": x.gpus,
                                ("sequences" if s.mode == "data" else "layers"): x.items, "busy_s": x.busy,
                                "utilization": x.utilization, "fits": x.fits,
                                "config": attrs.asdict(x.config) if x.config and x.items else None}
                               for x in s.shares]}
    return {"job": result.name, "status": result.status, "mode": result.best.mode if result.best else None,
            "tokens_per_s": result.tokens_per_s, "step_time_s": result.step_time,
            "data": one(result.data), "pipeline": one(result.pipeline),
            "alone": [{"partition": p.job.partition.name,
                       "tokens_per_s": p.best.tokens_per_s if p.best else None} for p in result.plans]}
