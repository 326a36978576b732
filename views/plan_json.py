"""Plans as stable JSON: the documented `gclc plan --json` keys for every job kind."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

from ..compiler.cost.tco import job_cost
from ..dsl.numbers import duration, exact_bytes
from ..model.train import optimizer
from ..model.calibration import BAND_CONFIDENCE, UNSTATED
from ..model.config import TrainConfig
from ..model.train.recompute import modules as recompute_modules
from ..model.train.step import Estimate
from ..solver.jobs import Outcome, TrainOutcome
from ..solver.power.section import PowerSection, clock_ratio
from ..solver.train.limits import power_of

if TYPE_CHECKING:  # the heterogeneous split's and serving's modules load only for a plan of their kind
    from ..solver.split.plan import HeteroPlan, HeteroSplit
    from ..solver.serve.plan import ServePlan

PLAN_FORMAT_VERSION = 2
# Every plan, whatever its job kind, carries these keys (null where a metric does not
# apply or the plan is infeasible); views/plan.schema.json is the contract.
CONTRACT = ("status", "step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "power_w",
            "energy_per_token_j", "gpus", "parallelism", "placement", "error_band", "binding", "solver")


def outcome_json(outcome: Outcome, timings: bool = False) -> dict:
    """The JSON of any job's plan: the common contract first, each kind's detail after.
    Wall-clock timings only with `timings` (the default output is byte-for-byte repeatable)."""
    if outcome.job_kind == "hetero":
        data = _hetero_contract(outcome) | hetero_json(outcome)
    elif outcome.job_kind == "rl":
        from .rl import rl_json

        data = rl_json(outcome, parallelism)
    elif isinstance(outcome, TrainOutcome):
        data = _train_json(outcome)
    else:  # a ServePlan
        from .serve import serve_json

        data = _serve_contract(outcome) | serve_json(outcome)
    data["format"], data["version"] = "gclc-plan", PLAN_FORMAT_VERSION
    data["solver"] = data.get("solver") or {"status": data["status"]}
    if timings:
        data["solver"]["seconds"] = getattr(outcome.plan if isinstance(outcome, TrainOutcome) else outcome,
                                            "seconds", None)
    missing = [key for key in CONTRACT if key not in data]
    assert not missing, f"plan JSON lacks {missing}"
    head = {"format": data.pop("format"), "version": data.pop("version"), "kind": data.pop("kind")}
    return head | {key: data.pop(key) for key in CONTRACT} | data


def _train_json(outcome: TrainOutcome) -> dict:
    data = {"kind": "train"} | plan_json(outcome.plan)
    if outcome.plan.best is not None:
        data["clock"] = clock_ratio(outcome.plan.job, outcome.plan.best)
    if outcome.power is not None:
        data["power_budget"] = power_json(outcome.plan, outcome.power)
    if outcome.plan.best is None:
        data |= {key: None for key in CONTRACT if key not in data}
    return data


def _serve_contract(p: ServePlan) -> dict:
    """The contract's keys of a serve plan: nulls where infeasible; views/serve.py fills the rest."""
    return {"kind": "serve", "status": p.status,
            **{key: None for key in CONTRACT if key not in ("status", "binding", "solver")},
            "placement": {}, "solver": {"status": p.status, "configurations": p.considered}}


def _hetero_contract(h: HeteroPlan) -> dict:
    best = h.best
    if best is None:
        return {"kind": "hetero", "cluster": None, **{key: None for key in CONTRACT},
                "status": "infeasible", "binding": [s.message for s in (h.data, h.pipeline) if s.message],
                "solver": {"status": "infeasible", "method": "milp"}}
    used = [x for x in best.shares if x.items]
    by_name = {p.job.partition.name: p for p in h.plans}
    flops = sum(by_name[x.partition].job.shape.model_flops_per_token(by_name[x.partition].job.seq)
                for x in used[:1]) * best.tokens_per_s
    peak = sum(x.gpus * by_name[x.partition].job.partition.node.accelerator.peak_of(by_name[x.partition].job.precision)
               for x in used)
    bands = [by_name[x.partition].error_band.get("tokens_per_s") for x in used if by_name[x.partition].best]
    low = min((lo / by_name[x.partition].best.tokens_per_s for x, (lo, _) in zip(used, bands)), default=1.0)
    high = max((hi / by_name[x.partition].best.tokens_per_s for x, (_, hi) in zip(used, bands)), default=1.0)
    slowest = max(used, key=lambda x: x.busy)
    binding = [f"compute on {slowest.partition} (the slowest partition, busy {duration(slowest.busy)})"]
    if best.exchange > 0:
        binding.append(f"cross-partition exchange {duration(best.exchange)}")
    return {"kind": "hetero", "cluster": h.plans[0].job.graph.name if h.plans else None,
            "status": "optimal", "step_time_s": best.step_time, "tokens_per_s": best.tokens_per_s,
            "mfu": flops / peak if peak else None,
            "memory_per_gpu_bytes": max((by_name[x.partition].best.memory.total for x in used
                                         if by_name[x.partition].best), default=None),
            "power_w": best.power, "energy_per_token_j": best.power / best.tokens_per_s if best.tokens_per_s else None,
            "gpus": sum(x.gpus for x in used),
            "parallelism": {"mode": best.mode, "partitions": {x.partition: config_json(x.config) if x.config else None
                                                              for x in used}},
            "placement": {x.partition: placement_json(by_name[x.partition]) for x in used},
            "error_band": {"confidence": BAND_CONFIDENCE,
                           "tokens_per_s": [best.tokens_per_s * low, best.tokens_per_s * high],
                           "reason": "the widest band of the partitions taking part"},
            "binding": binding, "solver": {"status": "optimal", "method": "milp"}} | _cost(hetero_cost(h))


def hetero_cost(h: HeteroPlan) -> dict | None:
    """A heterogeneous job's cost as a train job's (compiler/cost/tco.py): its cluster's cost of
    ownership over the tokens the split trains; None without `economics`, or when its
    partitions belong to several clusters (no one cluster's TCO is the job's)."""
    if h.best is None or not h.plans:
        return None
    clusters = {id(getattr(p.job.entity.get("on"), "cluster", None)) for p in h.plans}
    if len(clusters) != 1:
        return None
    job = h.plans[0].job
    return job_cost(job.entity, job.graph, h.best.tokens_per_s, job.tokens)


def _cost(cost: dict | None) -> dict:
    return {} if cost is None else {"cost": cost}


def parallelism(e: Estimate) -> dict:
    c = e.config
    return {"tp": c.tp, "pp": c.pp, "dp": c.dp, "ep": c.ep, "cp": c.cp, "vp": c.vp, "microbatch": c.microbatch,
            "microbatches": c.microbatches, "recompute": c.recompute, "zero": c.zero, "sp": c.sp,
            # hybrid sharding's group (dp x cp: plain ZeRO), the recompute's selection, the offloaded share
            "shard": c.shards, "recompute_modules": list(recompute_modules(c)) if c.recompute == "selective" else [],
            "recompute_every": c.recompute_every, "offload": c.offload,
            "schedule": "gpipe" if c.gpipe else "interleaved" if c.virtual_stages > 1 else "one_f_one_b",
            # the operating point's power cap per GPU (W) the run sets; null: the chip as it is (full clock)
            "power_cap_w": c.power_cap}


def config_json(c: TrainConfig) -> dict:
    """A configuration's fields; `main_grads` only where bf16, `precision_aware_optimizer`, `mx_fp8` and
    `non_tn_fp8` only where true, `second_moment` only where stated (they came after the format's version 2: plans that do not state them keep their keys)."""
    later = {"main_grads": ("fp32",), "precision_aware_optimizer": (False, None), "mx_fp8": (False,), "non_tn_fp8": (False,),
             "second_moment": (None,)}
    return attrs.asdict(c, filter=lambda field, value: field.name not in later or value not in later[field.name])


def optimizer_json(c: TrainConfig) -> dict | None:
    """The optimizer's precisions (model/train/optimizer.py) where a job narrows any from fp32; None
    for mixed-precision Adam's fp32 (plans that state none keep their keys)."""
    if not (optimizer.precision_aware(c) or optimizer.narrower(c)):
        return None
    apart = {"second_moment": optimizer.second_moment(c)} if optimizer.second_moment(c) != c.optimizer_state else {}
    return {"optimizer_state": c.optimizer_state, **apart, "master_weights": c.master_weights, "main_grads": c.main_grads,
            "master_remainders": optimizer.stores_remainders(c), "state_bytes_per_param": optimizer.state_bytes(c),
            "grad_bytes_per_param": optimizer.grad_bytes(c)}


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
        "host_memory_per_gpu_bytes": e.memory.offloaded,
        "hbm_bytes": exact_bytes(e.hbm),
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
    return {"status": plan.status, "configurations": plan.considered,
            "evaluated": getattr(plan, "evaluated", plan.considered), "pruned": getattr(plan, "pruned", 0),
            "pruned_by": dict(getattr(plan, "pruned_by", ())), "proof": getattr(plan, "proof", "")}


def dp_collectives(plan) -> list[dict]:
    """The best configuration's data-parallel collectives, each with the algorithm NCCL runs
    (model/train/dp_sync.py `calls`): where the switches reduce (NVLS, SHARP), the plan says so."""
    from ..model.train.dp_sync import calls

    if plan.best is None or not hasattr(plan.job, "shape"):
        return []
    return [{"collective": c.collective, "state": c.state, "bytes": c.nbytes, "seconds": c.seconds,
             "algorithm": c.algorithm, "protocol": c.protocol, "in_network": c.in_network}
            for c in calls(plan.job.shape, plan.best.config, plan.job.partition)]


def pfc_pause(plan) -> dict | None:
    """What PFC's pauses behind the expert all-to-all add to the best configuration's step
    (model/train/incast.py), where a `congestion = pfc` fabric carries both; None elsewhere."""
    held = getattr(plan.best, "paused", None) if plan.best is not None else None
    if held is None:
        return None
    return {"fabric": held.fabric, "senders": held.senders, "duty": held.duty, "slowdown": held.slowdown,
            "seconds": held.seconds}


def plan_json(plan) -> dict:
    job = plan.job
    out = {
        "job": job.name, "cluster": job.graph.name, "partition": job.partition.name,
        "objective": plan.objective, "status": plan.status,
        "solver": solver_json(plan),
        "warnings": [{"kind": w.kind, "message": w.message} for w in getattr(plan, "warnings", ())],
    }
    if plan.best is None:
        out["infeasible"] = _infeasible_json(plan)
        out["binding"] = list(plan.binding)
        return out
    out.update(estimate_json(plan.best))
    # the part's HBM as its data sheet states it (80e9 for an "80 GB" H100); `hbm_bytes` is what it fits in
    out["hbm_datasheet_bytes"] = exact_bytes(job.partition.node.accelerator.hbm_datasheet)
    state = optimizer_json(plan.best.config)
    if state is not None:
        out["optimizer"] = state
    out.update({
        "power_w": plan.power.total,
        "power_breakdown_w": {"accelerators": plan.power.accelerators, "rest": plan.power.rest,
                              "cooling": plan.power.cooling},
        "energy_per_token_j": plan.energy_per_token,
        "error_band": _error_band_json(plan),
        "placement": placement_json(plan),
        "dp_collectives": dp_collectives(plan),
        "pfc_pause": pfc_pause(plan),
        "binding": list(plan.binding),
        "runners_up": [estimate_json(r) for r in plan.runners_up],
    })
    out.update(_totals_json(plan))
    return out


def _infeasible_json(plan) -> dict:
    """What an infeasible plan needs against what it has, and the reason when it is known."""
    smallest, reason = plan.smallest, getattr(plan, "infeasibility", None)
    out = {"constraint": reason.constraint if reason else "memory",
           "needs_bytes": smallest.memory.total if smallest else None,
           "hbm_bytes": smallest.hbm if smallest else None}
    if reason is not None:
        out.update({"needs": reason.needs, "limit": reason.limit, "unit": reason.unit,
                    "message": reason.message, "location": reason.location})
    return out


def _error_band_json(plan) -> dict:
    """The band around the step time, each reason with its share (calibrated: the design's own)."""
    own = getattr(plan, "own", None)
    return {"confidence": BAND_CONFIDENCE, **{k: list(v) for k, v in plan.error_band.items()},
            "reasons": [{"reason": r.key, "text": r.text, "factor": r.factor,
                         "half_width": own.half_width((r,)) if own is not None else r.half_width,
                         **({"spread": r.spread, "slower": r.side(False), "faster": r.side(True)}
                            if r.key == UNSTATED else {})}
                        for r in plan.band_reasons], **_calibrated(own)}


def _totals_json(plan) -> dict:
    """Goodput, and the whole run's time, energy and cost where the job states its tokens / prices."""
    job, out = plan.job, {}
    good = getattr(plan, "goodput", None)
    if good is not None:
        out["goodput"] = goodput_json(good, plan.best.tokens_per_s)
    if job.tokens:
        out["time_to_train_s"] = job.tokens / plan.best.tokens_per_s
        out["energy_to_train_j"] = job.tokens * plan.energy_per_token
    cost = job_cost(job.entity, job.graph, plan.best.tokens_per_s, job.tokens, plan.power.total)
    if cost is not None:
        out["cost"] = cost
    return out

def goodput_json(good, tokens_per_s: float) -> dict:
    """Goodput beside throughput: what trains under failures, checkpoints and restarts."""
    finite = lambda x: x if math.isfinite(x) else None  # noqa: E731 -- no failures: no interval, no MTBF
    return {"tokens_per_s": tokens_per_s * good.efficiency, "share": good.efficiency,
            "checkpoint_interval_s": finite(good.interval), "checkpoint_write_s": good.write,
            "restart_s": good.restart, "job_mtbf_s": finite(good.mtbf)}


def power_json(plan, section: PowerSection) -> dict:
    """Stable keys of a power-limited plan's power section (`gclc plan --json`): the operating
    point is the plan's own (its GPUs, clock, cap, throughput and power), then what binds, the
    plan without the limit, the continuous relaxation and the layout's curve."""
    e, job = plan.best, plan.job
    relaxed = section.relaxed
    out = {"limit_w": section.limit, "source": section.source, "objective": section.objective,
           "gpus": e.config.gpus, "clock": clock_ratio(job, e), "power_cap_w": e.config.power_cap,
           "per_gpu_w": plan.power.per_gpu, "tokens_per_s": e.tokens_per_s, "facility_power_w": plan.power.total,
           "energy_per_token_j": plan.energy_per_token, "binds": list(section.binds),
           "without_limit": None if section.unlimited is None else {
               "gpus": section.unlimited.config.gpus, "tokens_per_s": section.unlimited.tokens_per_s,
               "facility_power_w": power_of(job, section.unlimited)},
           "relaxed": None, "marginal_tokens_per_s_per_mw": None,
           "curve": [{"budget_w": p.budget, "feasible": p.feasible, "tokens_per_s": p.tokens_per_s,
                      "gpus": p.gpus if p.feasible else None, "clock": p.clock if p.feasible else None,
                      "facility_power_w": p.power if p.feasible else None} for p in section.curve]}
    if relaxed is not None and relaxed.feasible:
        out["relaxed"] = {"gpus": relaxed.relaxed_gpus, "clock": relaxed.relaxed_clock,
                          "tokens_per_s": relaxed.relaxed_tokens_per_s,
                          "gap": section.gap(e.tokens_per_s, plan.energy_per_token),
                          "shares": list(section.inputs.shares), "fit_error": section.inputs.fit_error}
        out["marginal_tokens_per_s_per_mw"] = relaxed.marginal_tokens_per_s_per_mw
    return out


def hetero_json(result: HeteroPlan) -> dict:
    def one(s: HeteroSplit) -> dict:
        return {"mode": s.mode, "status": s.status, "step_time_s": s.step_time, "compute_s": s.compute_time,
                "exchange_s": s.exchange, "tokens_per_s": s.tokens_per_s, "facility_power_w": s.power,
                "message": s.message,
                "partitions": [{"partition": x.partition, "chip": x.chip, "gpus": x.gpus,
                                ("sequences" if s.mode == "data" else "layers"): x.items, "busy_s": x.busy,
                                "utilization": x.utilization, "fits": x.fits,
                                "config": config_json(x.config) if x.config and x.items else None}
                               for x in s.shares]}
    return {"job": result.name, "status": result.status, "mode": result.best.mode if result.best else None,
            "tokens_per_s": result.tokens_per_s, "step_time_s": result.step_time,
            "data": one(result.data), "pipeline": one(result.pipeline),
            "alone": [{"partition": p.job.partition.name,
                       "tokens_per_s": p.best.tokens_per_s if p.best else None} for p in result.plans]}


def _calibrated(own) -> dict:
    """The band a cluster's `calibration` block carries (gclc calibrate), when it has one."""
    if own is None:
        return {}
    return {"calibrated": {"runs": own.runs, "low": own.low, "high": own.high, "half_width": own.half_width(),
                           **({"source": own.source} if own.source else {})}}
