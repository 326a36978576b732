"""A plan as stable JSON (the documented `--json` keys) and as a terminal table."""

from __future__ import annotations

from fractions import Fraction

from .model.calibration import BAND_CONFIDENCE
from .model.step import Estimate
from .units import BYTES, POWER, Quantity, format_quantity

PLAN_FORMAT_VERSION = 1


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
    good = getattr(plan, "goodput", None)
    if good is not None:
        out["goodput"] = goodput_json(good, plan.best.tokens_per_s)
    if job.tokens:
        out["time_to_train_s"] = job.tokens / plan.best.tokens_per_s
        out["energy_to_train_j"] = job.tokens * plan.energy_per_token
    return out


def goodput_json(good, tokens_per_s: float) -> dict:
    return {"tokens_per_s": tokens_per_s * good.efficiency, "share": good.efficiency,
            "checkpoint_interval_s": good.interval, "checkpoint_write_s": good.write, "restart_s": good.restart,
            "job_mtbf_s": good.mtbf}


def goodput_text(good, tokens_per_s: float) -> str:
    return (f"  goodput    {tokens_per_s * good.efficiency:,.0f} tokens/s ({good.efficiency:.1%} of the time trains): "
            f"job MTBF {good.mtbf / 3600:.3g} h, checkpoint {good.write:.3g} s every {good.interval / 60:.3g} min "
            f"(Young/Daly), restart {good.restart / 60:.3g} min")


def _b(value: float) -> str:
    return format_quantity(Quantity(Fraction(repr(value)), BYTES))


def _w(value: float) -> str:
    return format_quantity(Quantity(Fraction(repr(value)), POWER))


def _config(e: Estimate) -> str:
    p = parallelism(e)
    return (f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']} ep={p['ep']} vp={p['vp']} "
            f"mb={p['microbatch']} recompute={p['recompute']} zero={p['zero']}")


def _placement_text(plan) -> str:
    parts = []
    for p in getattr(plan, "placement", ()):
        if p.size > 1:
            parts.append(f"{p.dim}={p.size} on {' + '.join(p.tiers) or 'one GPU'}")
    return "; ".join(parts) or "one GPU"


def plan_text(plan) -> str:
    job = plan.job
    head = f"plan {job.name} on {job.graph.name}" + (f".{job.partition.name}" if len(job.graph.partitions) > 1 else "")
    evaluated, pruned = getattr(plan, "evaluated", plan.considered), getattr(plan, "pruned", 0)
    lines = [head, f"  objective  {plan.objective} ({plan.status}, {plan.considered:,} configurations: "
                   f"{evaluated:,} evaluated, {pruned:,} pruned, {plan.seconds:.2f} s)"]
    e = plan.best
    if e is None:
        reason = getattr(plan, "infeasibility", None)
        if reason is not None:
            lines.append(f"  infeasible {reason.message}")
        return "\n".join(lines)
    lines += [
        f"  parallel   {_config(e)}  ({e.config.gpus} GPUs)",
        f"  placement  {_placement_text(plan)}  (order {', '.join(e.config.order)})",
        f"  step       {e.step_time:.3f} s    {e.tokens_per_s:,.0f} tokens/s    {e.tokens_per_s_per_gpu:,.0f} tokens/s/GPU"
        f"    (80 % band {plan.error_band['tokens_per_s'][0]:,.0f}-{plan.error_band['tokens_per_s'][1]:,.0f} tokens/s)",
        f"  MFU        {e.mfu:.1%}   HFU {e.hfu:.1%}   ({e.model_flops_per_gpu / 1e12:.0f} model TFLOP/s per GPU)",
        f"  memory     {_b(e.memory.total)} of {_b(e.hbm)} per GPU: "
        + ", ".join(f"{k} {_b(v)}" for k, v in e.memory.rows() if v),
        "  breakdown  " + ", ".join(f"{k} {v:.3f} s" for k, v in e.breakdown.rows() if v),
        f"  power      {_w(plan.power.total)} ({_w(plan.power.per_gpu)} per GPU), "
        f"{plan.energy_per_token:.3g} J/token",
        "  binds      " + "; ".join(plan.binding),
    ]
    if getattr(plan, "goodput", None) is not None:
        lines.append(goodput_text(plan.goodput, e.tokens_per_s))
    if job.tokens:
        days = job.tokens / e.tokens_per_s / 86400
        lines.append(f"  training   {job.tokens:.3g} tokens in {days:.1f} days")
    for i, r in enumerate(plan.runners_up, 2):
        lines.append(f"  #{i}         {_config(r)} [{','.join(r.config.order)}]: {r.step_time:.3f} s, MFU {r.mfu:.1%}")
    if getattr(plan, "proof", ""):
        lines.append(f"  proof      {plan.proof}")
    return "\n".join(lines)
