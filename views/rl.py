"""An rl plan as stable JSON and as terminal text: which pool runs where on how many GPUs and
in what layout, the step's phases and each pool's timeline, and why (the alternatives the
planner weighed). The JSON carries the keys every plan shares (views/plan_json.py CONTRACT)
and the RL detail under `rl`."""

from __future__ import annotations

from ..dsl.numbers import big, count, duration, memory_of, number, percent, quantity
from ..model.rl import phases as ph
from ..model.rl.step import COLOCATED, overlap_terms
from ..solver.rl.plan import RLPlan
from ..solver.rl.pools import Candidate

PHASE_WORDS = {"generate": "generate", "stream": "generate (steady rate)", "score": "score", "train": "train",
               "sync": "weight sync", "offload": "host copies"}


def rl_json(p: RLPlan, parallelism) -> dict:
    """The contract's keys and the `rl` detail (null metrics when infeasible); `parallelism` is
    views/plan_json.py's, so the training pool's layout has a train plan's keys."""
    solver = {"status": p.status, "points": p.result.points, "simulated": p.result.simulated,
              "pruned": p.result.pruned, "proof": p.proof}
    out = {"kind": "rl", "job": p.name, "status": p.status, "step_time_s": None, "tokens_per_s": None, "mfu": None,
           "memory_per_gpu_bytes": None, "power_w": None, "energy_per_token_j": None, "gpus": None,
           "parallelism": None, "placement": None, "error_band": None,
           "binding": list(p.result.reasons) if p.best is None else _binding(p), "solver": solver}
    if p.best is None:
        return out
    b = p.best
    tokens = p.samples * p.seq
    out.update({"step_time_s": b.step.step_time, "tokens_per_s": p.tokens_per_s, "mfu": b.train.policy.mfu,
                "memory_per_gpu_bytes": max(b.generation.memory, _train_memory(b)), "power_w": b.power,
                "energy_per_token_j": b.energy / tokens, "gpus": b.gpus,
                "parallelism": {"generate": _gen_parallelism(b), "train": _train_parallelism(b, parallelism)},
                "placement": {"mode": b.placement, "generate": {"partition": b.generation.layout.partition,
                                                                "gpus": b.generation.layout.gpus},
                              "train": {"partition": b.train.partition, "gpus": b.train.gpus}}})
    out["rl"] = rl_detail(p, parallelism)
    return out


def _train_memory(b: Candidate) -> float:
    return b.train.policy.memory.total + b.train.resident


def _gen_parallelism(b: Candidate) -> dict:
    c, layout = b.generation.layout.config, b.generation.layout
    return {"tp": c.tp, "pp": c.pp, "ep": c.ep, "replicas": layout.replicas, "max_batch": c.batch,
            "precision": c.precision}


def _train_parallelism(b: Candidate, parallelism) -> dict:
    return parallelism(b.train.policy) | {"precision": b.train.policy.config.precision,
                                          "stack": b.train.policy.config.stack}


def rl_detail(p: RLPlan, parallelism) -> dict:
    b, job = p.best, p.job
    s = b.step
    nbytes = ph.sync_bytes(job.policy, b.generation.layout.config.precision, b.train.policy.config)
    return {
        "algorithm": job.algorithm, "samples_per_step": p.samples, "prompts": job.prompts,
        "samples_per_prompt": job.samples, "samples_per_s": p.samples_per_s, "mean_sample_tokens": p.seq,
        "mean_response_tokens": p.response, "longest_response_tokens": p.longest,
        "placement": b.placement, "staleness": b.staleness, "staleness_bound": job.staleness,
        "rl_stack": job.stack.name,
        "calibration": {k: getattr(job.stack.calibration, k) for k in ("engine_host_s", "training", "sync",
                                                                       "host_copies")},
        "objective": job.objective, "time_to_steps_s": p.time_to_steps, "steps": job.steps,
        "energy_per_step_j": b.energy, "cost_per_step_usd": b.cost,
        "phases_s": {k: getattr(s.phases, k) for k in ("generate", "stream", "score", "train", "sync", "offload")},
        "pools": {"generate": _gen_pool(b), "train": _train_pool(b, parallelism)},
        "sync": {"bytes": nbytes, "seconds": s.phases.sync, "link": _link_name(p)},
        "timeline": [{"pool": t.pool, "phase": t.phase, "start_s": t.start, "end_s": t.end} for t in s.timeline],
        "why": list(p.why),
        "alternatives": [{"what": a.what, "step_time_s": a.candidate.step.step_time if a.candidate else None}
                         for a in p.alternatives],
        "runners_up": [_brief(c) for c in p.runners_up],
    }


def _gen_pool(b: Candidate) -> dict:
    g = b.generation
    return {"partition": g.layout.partition, "gpus": g.layout.gpus, **_gen_parallelism(b),
            "memory_per_gpu_bytes": g.memory, "kv_tokens_per_replica": g.kv_tokens, "peak_batch": g.peak_batch,
            "preemptions": g.preemptions, "busy": b.step.busy("colocated" if b.placement == COLOCATED else "generate")}


def _train_pool(b: Candidate, parallelism) -> dict:
    t = b.train
    return {"partition": t.partition, "gpus": t.gpus, "parallelism": _train_parallelism(b, parallelism),
            "memory_per_gpu_bytes": _train_memory(b), "other_models_bytes_per_gpu": t.resident,
            "optimizer_step_s": t.policy.step_time, "mfu": t.policy.mfu,
            "busy": b.step.busy("colocated" if b.placement == COLOCATED else "train")}


def _brief(c: Candidate) -> dict:
    g = c.generation.layout
    return {"placement": c.placement, "staleness": c.staleness, "step_time_s": c.step.step_time,
            "generate": {"partition": g.partition, "gpus": g.gpus, "tp": g.config.tp, "pp": g.config.pp,
                         "max_batch": g.config.batch},
            "train": {"partition": c.train.partition, "gpus": c.train.gpus, "tp": c.train.policy.config.tp,
                      "pp": c.train.policy.config.pp, "dp": c.train.policy.config.dp}}


def _link_name(p: RLPlan) -> str:
    b, job = p.best, p.job
    if b.placement == COLOCATED:
        return "in place (the pools share GPUs)"
    g, t = b.generation.layout, b.train
    return ph.link_between(job.partition(g.partition), job.partition(t.partition), g.gpus, t.gpus).name


def _binding(p: RLPlan) -> list[str]:
    """What sets the step: the longer side of an overlapped step, else its largest phase."""
    s = p.best.step
    ph_ = s.phases
    if s.overlapped:
        terms = overlap_terms(ph_, s.staleness)
        side = max(terms, key=terms.get)
        words = {"stream": f"generation ({duration(ph_.stream)} a step at the engine's steady rate)",
                 "trainer": f"training ({duration(terms['trainer'])} of host copies, scoring and training a step)",
                 "latency": f"the batch's latency ({duration(ph_.generate)} to its slowest sample; the next batch "
                            f"starts as it ends" + ("" if s.staleness == 1 else f", {s.staleness} batches in flight")
                            + ")"}
        return [f"{words[side]}: the pools overlap, the slower sets the step"]
    parts = {k: getattr(ph_, k) for k in ("generate", "score", "train", "sync", "offload")}
    largest = max(parts, key=parts.get)
    line = f"{PHASE_WORDS[largest]}: {percent(parts[largest] / s.step_time)} of the step"
    if largest == "generate":
        line += f" (the slowest sample, {count(p.longest, 'token')}, holds the synchronous step)"
    return [line]


def rl_text(p: RLPlan, timings: bool = False) -> str:
    job = p.job
    head = (f"plan {p.name} on {job.graph.name} (rl, {job.algorithm.upper()}: {count(p.samples, 'sample')} a step = "
            f"{number(job.prompts)} prompts x {number(job.samples)})")
    lines = [head, f"  objective  {job.objective} ({p.proof}"
             + (f", {duration(p.result.seconds)})" if timings else ")")]
    if p.best is None:
        lines += [f"  infeasible {reason}" for reason in p.result.reasons] or ["  infeasible no pair of pools fits"]
        return "\n".join(lines)
    b = p.best
    g, t = b.generation.layout, b.train
    c = t.policy.config
    mode = ("colocated: the pools take turns on the same GPUs" if b.placement == COLOCATED else
            f"disaggregated, asynchronous (staleness {b.staleness}): generation overlaps training" if b.staleness else
            "disaggregated, synchronous: each pool waits for the other")
    lines += [
        f"  generate   on {g.partition}: {count(g.gpus, 'GPU')}, {g.replicas} replica{'s' if g.replicas > 1 else ''} "
        f"of tp={g.config.tp} pp={g.config.pp} ep={g.config.ep} (max_batch {g.config.batch}, {g.config.precision})",
        f"  train      on {t.partition}: {count(t.gpus, 'GPU')}, tp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp} ep={c.ep} "
        f"mb={c.microbatch} recompute={c.recompute} zero={c.zero} ({c.stack}, {c.precision})",
        f"  mode       {mode}",
        f"  step       {duration(b.step.step_time)}    {number(p.samples_per_s)} samples/s    "
        f"{big(p.tokens_per_s)} tokens/s trained",
        "  phases     " + _phases(p),
        f"  memory     generation {_memory_of(b.generation.memory, job, g.partition)} "
        f"per GPU; training {_memory_of(_train_memory(b), job, t.partition)}"
        + (f" ({quantity(t.resident, 'B')} of it the other models' weights)" if t.resident else ""),
        f"  power      {quantity(b.power, 'W')}, {quantity(b.energy, 'J')} a step"
        + (f", {quantity(b.cost, 'USD')} a step" if b.cost is not None else ""),
    ]
    if p.time_to_steps is not None:
        lines.append(f"  time       {duration(p.time_to_steps)} for {number(job.steps)} steps")
    lines.append(f"  binding    {_binding(p)[0]}")
    lines += [("  why        " if i == 0 else "             ") + w for i, w in enumerate(p.why)]
    for i, r in enumerate(p.runners_up):
        lines.append(("  runners-up " if i == 0 else "             ") + _runner(r))
    return "\n".join(lines)


def _memory_of(used: float, job, partition: str) -> str:
    """`24.8 GB of 96 GB`: the pool's part's HBM as its data sheet states it, as every plan prints it."""
    chip = job.partition(partition).node.accelerator
    return memory_of(used, chip.hbm_datasheet, chip.hbm_capacity)


def _phases(p: RLPlan) -> str:
    s, job = p.best.step.phases, p.job
    parts = [f"generate {duration(s.generate)} (the slowest sample's {count(p.longest, 'token')})"]
    if p.best.step.overlapped:
        parts.append(f"{duration(s.stream)} at the engine's steady rate")
    parts += [f"score {duration(s.score)}", f"train {duration(s.train)} ({job.epochs} x {job.minibatches} "
                                                                      f"optimizer steps)"]
    nbytes = ph.sync_bytes(job.policy, p.best.generation.layout.config.precision, p.best.train.policy.config)
    parts.append(f"sync {duration(s.sync)} ({quantity(nbytes, 'B')} over {_link_name(p)})"
                 if p.best.placement != COLOCATED else f"reshard {duration(s.sync)}")
    if s.offload:
        parts.append(f"host copies {duration(s.offload)}")
    return ", ".join(parts)


def _runner(c: Candidate) -> str:
    g, t = c.generation.layout, c.train.policy.config
    return (f"{c.placement}{' async' if c.staleness else ''}: generate {g.gpus} on {g.partition} "
            f"(tp={g.config.tp} x {g.replicas}), train {c.train.gpus} on {c.train.partition} (tp={t.tp} pp={t.pp} "
            f"dp={t.dp}): step {duration(c.step.step_time)}")


def draws(p: RLPlan) -> tuple[tuple[str, int, float], ...]:
    """(partition, GPUs, watts each) of each pool at its busy share (views/power_view.py)."""
    from ..model.power import gpu_power

    b = p.best
    if b.placement == COLOCATED:
        pools = ((b.train.partition, b.train.gpus, b.step.busy("colocated")),)
    else:
        pools = ((b.generation.layout.partition, b.generation.layout.gpus, b.step.busy("generate")),
                 (b.train.partition, b.train.gpus, b.step.busy("train")))
    merged: dict[str, tuple[int, float]] = {}     # two pools on one partition: one draw, GPU-weighted
    for name, gpus, busy in pools:
        n, watts = merged.get(name, (0, 0.0))
        merged[name] = (n + gpus, watts + gpus * gpu_power(p.job.partition(name), busy))
    return tuple((name, n, watts / n) for name, (n, watts) in merged.items())
