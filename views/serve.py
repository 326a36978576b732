"""A serve plan as stable JSON and as a terminal table.

The JSON keeps the serve keys (`ttft_s tpot_s requests_per_s ...`) and carries the keys
every plan shares (`status step_time_s tokens_per_s mfu memory_per_gpu_bytes power_w
energy_per_token_j parallelism placement error_band binding solver`)."""

from __future__ import annotations

from ..compiler.cost.tco import job_cost
from ..dsl.numbers import big, count, duration, exact_bytes, memory_of, number, percent, quantity
from ..model import comms
from ..model.calibration import BAND_CONFIDENCE, SERVE_LATENCY_RATIO, SERVE_THROUGHPUT_RATIO, cluster_of, own_serve
from ..model.compute import peak
from ..model.serve import ranks
from ..model.serve.engines import Engine
from ..solver.serve.daily import daily, summary
from ..solver.serve.plan import ServePlan, Side
from ..solver.serve.space import router_of

LATENCY_KEYS = ("p50", "p90", "p99", "mean")
ROUTED = {"least_requests": "to the replica with the fewest in hand", "round_robin": "in turn",
          "random": "at random", "power_of_two": "to the lighter of two drawn at random"}


def goodput(p) -> float:
    """Requests per second that meet every SLO: the demand's rate times the share of the
    measured requests that meet them. The simulated arrivals' own window (`Outcome.goodput`)
    can hold a few more requests than the rate (a Poisson draw): it had read 40.5 requests/s
    of goodput beside a demand of 40, while the throughput line states the demand's rate."""
    o = p.outcome
    if p.demand is None or not p.demand.rate or not o.ttft:
        return o.goodput
    return p.demand.rate * o.met / len(o.ttft)


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
        "layout": {role.replace("replicas", "serve"): layout(side, first, p.partition.node.gpus)
                   for role, side, first in pool_offsets(p)},
        "error_band": _band(p, b.tpot * d.replica.engine.tokens_per_step),
        "runners_up": [{"tp": e.config.tp, "ep": e.config.ep, "pp": e.config.pp, "batch": e.config.batch,
                        "tokens_per_s_per_gpu": e.tokens_per_s / e.gpus} for e in p.runners_up],
    })
    out["engine"] = engine_json(d.replica.engine, d.replica.shape.is_moe)
    out["router"] = _router(p)
    cost = serve_cost(p)
    if cost is not None:
        out["cost"] = cost
    if p.outcome is not None:
        o = p.outcome
        out["latency"] = {m: {k: o.percentile(m, {"p50": 50, "p90": 90, "p99": 99, "mean": -1}[k])
                              for k in LATENCY_KEYS} for m in ("ttft", "tpot", "e2e")}
        out.update({"goodput_rps": goodput(p), "demand_rps": p.demand.rate, "preemptions": o.preemptions})
    day = _daily(p)
    if day is not None:
        out["daily"] = summary(day) | {"stretches": [
            {"start_s": s.start_s, "length_s": s.length_s, "share": s.share, "rate_rps": s.rate,
             "replicas": list(s.replicas), "gpus": s.gpus, "power_w": s.power_w} for s in day]}
    return out


def engine_json(e: Engine, moe: bool) -> dict:
    """The engine the plan runs, by name and release, with every knob as the simulation used it
    (plain fields: a launch config is written from them); `moe_path` null for a dense model, as
    the text's engine line leaves it out; `cuda_graph_max_batch` 0 where no batch is graphed, null
    where every iteration is, counted in `cuda_graph_unit`: tokens where the engine counts tokens,
    a decode step's draft tokens included (vLLM V1), else sequences)."""
    return {"name": e.name, "releases": e.releases, "max_num_seqs": e.max_seqs, "max_num_batched_tokens": e.chunk,
            "mixed_batches": e.mixed, "scheduler_steps": e.scheduler_steps, "kv_block_tokens": e.block,
            "prefix_share": e.prefix_share, "cuda_graph_max_batch": e.graph_batch if e.eager_op_s > 0 else None,
            "cuda_graph_unit": "tokens" if e.graph_tokens else "sequences",
            "host_step_s": e.step_s, "host_per_sequence_s": e.seq_s, "host_overlapped": e.overlap,
            "host_overlapped_with_pipeline": e.overlaps(pp=2),
            "eager_op_s": e.eager_op_s, "frontend_s": e.frontend_s, "preemption": e.preemption,
            "moe_path": e.moe_path if moe else None, "dispatcher": e.dispatcher if moe else None,
            "grouped_kv_reads": e.grouped_kv,
            "speculative": {"tokens": e.draft, "acceptance": e.acceptance} if e.draft else None}


def engine_text(e: Engine, moe: bool) -> str:
    """`vllm_v1 (vLLM 0.8.0 and later): mixed batches of 8,192 tokens, ...`; a dense model's
    line leaves out the engine's MoE path, which lays out no experts of it."""
    batches = (f"mixed batches of {number(e.chunk)} tokens" if e.mixed else
               f"prompts first, in iterations of {number(e.chunk)} tokens")
    overlapped = ("host overlapped" + ("" if e.overlaps(pp=2) else " (not with pipeline stages)")) if e.overlap else "host"
    host = overlapped + f" {duration(e.step_s)} + {duration(e.seq_s)} per sequence"
    features = (f", {percent(e.prefix_share)} of each prompt from the prefix cache" if e.prefix_share else "") + \
        (f", {e.draft} draft tokens a step accepted {percent(e.acceptance)} of the time" if e.draft else "")
    return (f"{e.name} ({e.releases}): {batches}, {host}, {e.preemption} on a full cache, "
            + (f"{e.moe_path} MoE" + {"deepep": " over DeepEP", "allgather": " over an all-gather"}.get(e.dispatcher, "") + ", " if moe else "") +
            f"{number(e.block)}-token KV pages{features}")


def _router(p: ServePlan) -> str:
    """How the plan's requests pick a replica (the simulation's router)."""
    return router_of(p.entity) if p.entity is not None else "least_requests"


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


def latency_figures(p: ServePlan) -> dict[str, float]:
    """The latencies a plan states: the simulation's TTFT and TPOT percentiles, or without one
    the unloaded TTFT and the TPOT at full batch (`ttft_s`, `tpot_s`)."""
    if p.outcome is not None:
        return {f"{m}_p{q}_s": p.outcome.percentile(m, q) for m in ("ttft", "tpot") for q in (50, 90, 99)}
    return {"ttft_s": (p.prefill or p.decode).estimate.ttft, "tpot_s": p.best.tpot}


def _ratios(p: ServePlan) -> tuple[dict[str, tuple[float, float]], int | None]:
    """measured / predicted 80 % bounds per quantity (throughput, ttft, tpot), and the serving
    runs they come from: the cluster's own (`gclc calibrate` on the operator's serving
    benchmarks), else the shipped ones (None)."""
    own = own_serve(cluster_of(p.entity)) if p.entity is not None else None
    if own is not None:
        runs, low, high = own
        return {"throughput": (low, high), "ttft": (low, high), "tpot": (low, high)}, runs
    return {"throughput": SERVE_THROUGHPUT_RATIO, **SERVE_LATENCY_RATIO}, None


def _band(p: ServePlan, step: float) -> dict:
    """80 % bands per quantity: throughput (and so the step), TTFT and TPOT, from the serving
    benchmark's residuals (model/calibration.py SERVE_*_RATIO: measured / predicted) or the
    cluster's calibration on the operator's serving runs."""
    ratios, runs = _ratios(p)
    low, high = ratios["throughput"]
    out = {"confidence": BAND_CONFIDENCE, "tokens_per_s": [p.tokens_per_s * low, p.tokens_per_s * high],
           "step_time_s": [step / high, step / low]}
    if runs is not None:
        out["calibrated"] = {"serving_runs": runs, "low": low, "high": high}
    for key, value in latency_figures(p).items():
        lo, hi = ratios[key.split("_")[0]]
        out[key] = [value * lo, value * hi]
    return out


def band_text(p: ServePlan) -> str:
    """The band line: the factors measured / predicted spans in 80 % of the benchmark's rows."""
    ratios, runs = _ratios(p)
    if runs is not None:
        low, high = ratios["throughput"]
        return (f"  band       calibrated on {runs} of your serving runs: x{number(low)} to x{number(high)} of the "
                "throughput, TTFT and TPOT above (each run held out)")
    spans = [("throughput", ratios["throughput"]), ("TTFT", ratios["ttft"]), ("TPOT", ratios["tpot"])]
    return (f"  band       {percent(BAND_CONFIDENCE)}: " + ", ".join(f"{name} x{number(lo)} to x{number(hi)}" for name, (lo, hi) in spans)
            + " of the figures above (published serving runs held out by model)")


def _solver(p: ServePlan) -> dict:
    return {"status": p.status, "configurations": p.considered,
            "evaluated": p.considered, "simulated": p.simulated, "pruned": p.pruned, "proof": p.proof}


def weights_text(c) -> str:
    """The weights' formats: `fp4 weights`, with the shares a mixed checkpoint keeps at bf16."""
    wide = [f"{percent(c.wide_share)} bf16"] if c.wide_share else []
    wide += [f"{percent(c.dense_wide_share)} of the non-expert bf16"] if c.dense_wide_share else []
    return f"{c.precision} weights" + (f" ({', '.join(wide)})" if wide else "")


def _parallelism(s: Side) -> dict:
    c = s.replica.config
    return {"tp": c.tp, "ep": c.ep, "pp": c.pp, "cp": 1, "vp": 1, "batch": c.batch, "precision": c.precision,
            "kv_precision": c.kv, "wide_share": c.wide_share, "dense_wide_share": c.dense_wide_share}


def _side(s: Side) -> dict:
    e = s.estimate
    return _parallelism(s) | {"replicas": s.count, "gpus_per_replica": s.replica.gpus, "gpus": s.gpus,
                              "requests_per_s_per_replica": e.requests_per_s, "ttft_s": e.ttft, "tpot_s": e.tpot,
                              "memory_per_gpu_bytes": e.memory}


def _placement(s: Side) -> dict:
    return replica_placement(s.replica)


def replica_placement(r) -> dict:
    """The tiers each dimension of a replica spans (ranks: tp innermost, then in the engine's
    order: model/serve/ranks.py)."""
    c, tiers, order = r.config, r.partition.tiers, r.engine.rank_order
    out, stride = {"order": list(order)}, ranks.strides(c, order)
    for dim, size in (("tp", c.tp), ("ep", c.ep), ("pp", c.pp)):
        stages = comms.place(size, stride[dim], tiers)
        out[dim] = {"size": size, "stride": stride[dim], "tiers": [st.tier.name for st in stages],
                    "peers": [st.peers for st in stages]}
    return out


def pool_offsets(p: ServePlan) -> list[tuple[str, Side, int]]:
    """(role, side, first rank) of each pool: ranks go prefill pool first, then decode
    (views/serve_placement.py draws them so)."""
    out, offset = [], 0
    for role, side in (("prefill", p.prefill), ("decode" if p.prefill else "replicas", p.decode)):
        if side is not None:
            out.append((role, side, offset))
            offset += side.gpus
    return out


LAYOUT_SHOWN = 3    # replicas whose GPUs a layout line lists before eliding


def layout(s: Side, first: int, node_gpus: int) -> dict:
    """Where a pool's replicas sit: GPUs per replica, replicas per node (or nodes per replica),
    the nodes the pool spans, each replica's first and last rank (ranks fill nodes in order)."""
    g = s.replica.gpus
    ranks = [[first + i * g, first + (i + 1) * g - 1] for i in range(s.count)]
    nodes = (first + s.gpus - 1) // node_gpus - first // node_gpus + 1
    # (the fullest node's replicas: a node holds node_gpus // g, fewer where the pool has fewer)
    return {"gpus_per_replica": g, "replicas_per_node": min(s.count, node_gpus // g) if g <= node_gpus else None,
            "nodes_per_replica": -(-g // node_gpus) if g > node_gpus else None, "nodes": nodes,
            "first_node": first // node_gpus, "ranks": ranks}


def layout_text(s: Side, first: int, node_gpus: int) -> str:
    """`2 per node on 1 node (GPUs 0-3, 4-7); tp over NVLink4 (node)`."""
    where = layout(s, first, node_gpus)
    per = (f"{number(where['replicas_per_node'])} per node on {count(where['nodes'], 'node')}"
           if where["replicas_per_node"] else
           f"each across {count(where['nodes_per_replica'], 'node')}, {count(where['nodes'], 'node')} in all")
    shown = [f"{a}-{b}" if b > a else f"{a}" for a, b in where["ranks"][:LAYOUT_SHOWN]]
    if s.count > LAYOUT_SHOWN:
        a, b = where["ranks"][-1]
        shown[-1:] = [shown[-1], "...", f"{a}-{b}" if b > a else f"{a}"]
    tiers = _placement(s)
    spans = "; ".join(f"{dim} over {' + '.join(tiers[dim]['tiers'])}" for dim in ("tp", "ep", "pp")
                      if tiers[dim]["size"] > 1)
    return f"{per} (GPUs {', '.join(shown)})" + (f"; {spans}" if spans else "")


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
    lines = [head, f"  engine     {engine_text(d.replica.engine, d.replica.shape.is_moe)}",
             f"  mode       {p.mode}, {number(p.used_gpus)} of {count(p.gpus, 'GPU')}"
             + (f", requests routed {ROUTED[_router(p)]}" if _router(p) != "least_requests" else "")]
    node_gpus = p.partition.node.gpus
    for name, side, first in pool_offsets(p):
        c = side.replica.config
        lines.append(f"  {name:<10} {side.count} x (tp={c.tp} ep={c.ep} pp={c.pp} = {count(side.replica.gpus, 'GPU')}), "
                     f"batch {number(c.batch)}, {weights_text(c)}, {c.kv} KV")
        lines.append(f"  {'':<10} {layout_text(side, first, node_gpus)}")
    if p.outcome is not None:
        o = p.outcome
        for metric in ("ttft", "tpot", "e2e"):
            lines.append(f"  {metric:<10} " + ", ".join(f"{k} {duration(o.percentile(metric, v))}" for k, v in
                                                       (("P50", 50), ("P90", 90), ("P99", 99))))
        lines.append(f"  demand     {p.demand.described()}; goodput {number(goodput(p))} requests/s "
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
    lines.append(band_text(p))
    lines.append("  binds      " + "; ".join(p.binding or ("-",)))
    return "\n".join(lines)
