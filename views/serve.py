"""A serve plan as stable JSON and as a terminal table.

The JSON keeps the serve keys (`ttft_s tpot_s requests_per_s ...`) and carries the keys
every plan shares (`status step_time_s tokens_per_s mfu memory_per_gpu_bytes power_w
energy_per_token_j parallelism placement error_band binding solver`)."""

from __future__ import annotations

from ..compiler.cost.tco import job_cost
from ..dsl.numbers import big, count, duration, exact_bytes, memory_of, number, quantity
from ..model import comms
from ..model.calibration import BAND_CONFIDENCE, SERVE_THROUGHPUT_RATIO
from ..model.compute import peak
from ..solver.serve.daily import daily, summary
from ..solver.serve.plan import ServePlan, Side

LATENCY_KEYS = ("p50", "p90", "p99", "mean")


def serve_json(p: ServePlan) -> dict:
    out = {"format": "gclc-serve-plan", "version": 2, "job": p.name, "cluster": p.graph.name,
           "partition": p.partition.name, "status": p.status,
           "configurations": p.considered, "binding": list(p.binding), "solver": _solver(p)}
    if p.best is None:
        return out
    b, d = p.best, p.decode
    gpus = p.used_gpus
    out.update({
        "mode": p.mode,
        "parallelism": _parallelism(d) | {"replicas": d.count, "dp": d.count},
        "pools": {"decode" if p.prefill else "serve": _side(d)} | ({"prefill": _side(p.prefill)} if p.prefill else {}),
        "gpus": gpus, "idle_gpus": p.gpus - gpus,
        "ttft_s": p.outcome.percentile("ttft", -1) if p.outcome else (p.prefill or d).estimate.ttft,
        "tpot_s": p.outcome.percentile("tpot", -1) if p.outcome else b.tpot,
        "step_time_s": b.tpot * d.replica.engine.tokens_per_step,
        "tokens_per_s": p.tokens_per_s, "tokens_per_s_per_gpu": p.tokens_per_s / gpus,
        "requests_per_s": p.tokens_per_s / p.demand_output,
        "mfu": _mfu(p), "memory_per_gpu_bytes": b.memory, "hbm_bytes": b.hbm,
        "hbm_datasheet_bytes": exact_bytes(p.partition.node.accelerator.hbm_datasheet),
        "power_w": p.power_w, "energy_per_token_j": p.energy_per_token,
        "tokens_per_joule": 1 / p.energy_per_token if p.energy_per_token else None,
        "placement": _placement(d) | ({"prefill": _placement(p.prefill)} if p.prefill else {}),
        "error_band": _band(p.tokens_per_s, b.tpot * d.replica.engine.tokens_per_step),
        "runners_up": [{"tp": e.config.tp, "ep": e.config.ep, "pp": e.config.pp, "batch": e.config.batch,
                        "tokens_per_s_per_gpu": e.tokens_per_s / e.gpus} for e in p.runners_up],
    })
    cost = serve_cost(p)
    if cost is not None:
        out["cost"] = cost
    if p.outcome is not None:
        o = p.outcome
        out["latency"] = {m: {k: o.percentile(m, {"p50": 50, "p90": 90, "p99": 99, "mean": -1}[k])
                              for k in LATENCY_KEYS} for m in ("ttft", "tpot", "e2e")}
        out.update({"goodput_rps": o.goodput, "demand_rps": p.demand.rate, "preemptions": o.preemptions})
    day = _daily(p)
    if day is not None:
        out["daily"] = summary(day) | {"stretches": [
            {"start_s": s.start_s, "length_s": s.length_s, "share": s.share, "rate_rps": s.rate,
             "replicas": list(s.replicas), "gpus": s.gpus, "power_w": s.power_w} for s in day]}
    return out


def _daily(p: ServePlan):
    """The plan over its job's `daily_load` (None without one, or without a rate)."""
    shares = getattr(p.entity, "get", lambda _: None)("daily_load")
    if not shares or p.demand is None or not p.demand.rate or p.decode is None:
        return None
    return daily(p, tuple(float(s) for s in shares))


def serve_cost(p: ServePlan) -> dict | None:
    """Capex, TCO and USD per output token of the GPUs the plan uses: their share of the
    cluster's cost of ownership (compiler/cost/tco.py) over the tokens they serve; None without
    the cluster's `economics`."""
    if p.entity is None or p.best is None or p.tokens_per_s <= 0:
        return None
    whole = job_cost(p.entity, p.graph, p.tokens_per_s)
    if whole is None:
        return None
    share = p.used_gpus / p.graph.gpus
    return {"capex_usd": whole["capex_usd"] * share, "tco_usd": whole["tco_usd"] * share,
            "cost_per_token_usd": whole["cost_per_token_usd"] * share, "gpu_share": share,
            "complete": whole["complete"]}


def _band(tokens_per_s: float, step: float) -> dict:
    """80 % bands from the serving benchmark's residuals (measured / predicted throughput)."""
    low, high = SERVE_THROUGHPUT_RATIO
    return {"confidence": BAND_CONFIDENCE, "tokens_per_s": [tokens_per_s * low, tokens_per_s * high],
            "step_time_s": [step / high, step / low]}


def _solver(p: ServePlan) -> dict:
    return {"status": p.status, "configurations": p.considered,
            "evaluated": p.considered, "simulated": p.simulated, "pruned": p.pruned, "proof": p.proof}


def _parallelism(s: Side) -> dict:
    c = s.replica.config
    return {"tp": c.tp, "ep": c.ep, "pp": c.pp, "cp": 1, "vp": 1, "batch": c.batch, "precision": c.precision,
            "kv_precision": c.kv}


def _side(s: Side) -> dict:
    e = s.estimate
    return _parallelism(s) | {"replicas": s.count, "gpus_per_replica": s.replica.gpus, "gpus": s.gpus,
                              "requests_per_s_per_replica": e.requests_per_s, "ttft_s": e.ttft, "tpot_s": e.tpot,
                              "memory_per_gpu_bytes": e.memory}


def _placement(s: Side) -> dict:
    """The tiers each dimension of a replica spans (ranks: tp innermost, then ep, then pp)."""
    c, tiers = s.replica.config, s.replica.partition.tiers
    out = {"order": ["tp", "ep", "pp"]}
    for dim, size, stride in (("tp", c.tp, 1), ("ep", c.ep, c.tp), ("pp", c.pp, c.tp * c.ep)):
        stages = comms.place(size, stride, tiers)
        out[dim] = {"size": size, "stride": stride, "tiers": [st.tier.name for st in stages],
                    "peers": [st.peers for st in stages]}
    return out


def _mfu(p: ServePlan) -> float:
    """Model FLOPs served (2 x active params per prompt and output token) over the peak of the GPUs used."""
    shape, chip = p.decode.replica.shape, p.partition.node.accelerator
    per_request = 2 * shape.active_params * (p.decode_prompt + p.demand_output)
    requests = p.tokens_per_s / p.demand_output
    return requests * per_request / (p.used_gpus * peak(chip, p.best.config.precision))


def serve_text(p: ServePlan) -> str:
    head = (f"plan {p.name} (serve) on {p.graph.name}: {count(p.considered, 'configuration')}, "
            f"{number(p.simulated)} simulated")
    if p.best is None:
        verdict = "undecided" if p.undecided else "infeasible"
        return head + f"\n  {verdict}:" + "".join(f"\n    {reason}" for reason in p.binding)
    d = p.decode
    lines = [head, f"  mode       {p.mode}, {number(p.used_gpus)} of {count(p.gpus, 'GPU')}"]
    for name, side in (("prefill", p.prefill), ("decode" if p.prefill else "replicas", d)):
        if side is None:
            continue
        c = side.replica.config
        lines.append(f"  {name:<10} {side.count} x (tp={c.tp} ep={c.ep} pp={c.pp} = {count(side.replica.gpus, 'GPU')}), "
                     f"batch {number(c.batch)}, {c.precision} weights, {c.kv} KV")
    if p.outcome is not None:
        o = p.outcome
        for metric in ("ttft", "tpot", "e2e"):
            lines.append(f"  {metric:<10} " + ", ".join(f"{k} {duration(o.percentile(metric, v))}" for k, v in
                                                       (("P50", 50), ("P90", 90), ("P99", 99))))
        lines.append(f"  demand     {p.demand.described()}; goodput {number(o.goodput)} requests/s "
                     "within the SLOs")
    else:
        lines.append(f"  latency    TTFT {duration((p.prefill or d).estimate.ttft)} (unloaded), "
                     f"TPOT {duration(p.best.tpot)} at full batch")
    lines += [
        f"  throughput {big(p.tokens_per_s)} output tokens/s ({number(p.tokens_per_s / p.used_gpus)} per GPU)",
        f"  memory     {memory_of(p.best.memory, p.partition.node.accelerator.hbm_datasheet, p.best.hbm)} per GPU",
        f"  power      {quantity(p.power_w, 'W')}, {quantity(p.energy_per_token, 'J')} per output token",
    ]
    day = _daily(p)
    if day is not None:
        s = summary(day)
        lines.append(f"  daily      {number(s['least_gpus'])} to {count(s['peak_gpus'], 'GPU')} over {len(day)} stretches "
                     f"of the day ({number(s['gpu_hours'])} GPU-h, {quantity(s['energy_j'] / 3600, 'Wh')} a day)")
    cost = serve_cost(p)
    if cost is not None:
        lower = "" if cost["complete"] else " (capex lacks some prices: a lower bound)"
        lines.append(f"  cost       {number(cost['cost_per_token_usd'] * 1e6)} USD per million output tokens "
                     f"(TCO {quantity(cost['tco_usd'], 'USD')} of the GPUs used){lower}")
    lines.append("  binds      " + "; ".join(p.binding or ("-",)))
    return "\n".join(lines)
