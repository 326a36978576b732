"""The planned training step as a Chrome/Perfetto trace (the Trace Event Format's JSON
object form, https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
one answer with the plan, built from the step model's own breakdown (model/train/step.py
`Breakdown`, what `gclc plan` prints as the step's terms).

Tracks (threads of one process, the step):
- `stage k` for every pipeline stage: each micro-batch's forward and backward (compute,
  recompute and the exposed TP/CP/EP/PP communication, the per-micro-batch terms), with the
  pipeline bubble placed where 1F1B puts it (stage k waits k/(p-1) of the fill before its
  first forward and k/(p-1) of the drain after its last backward, and the rest of its
  bubble after its first forward, waiting for the first backward to come back), so that
  every stage spans the same pipeline time: the terms' sum over m micro-batches plus the
  bubble;
- `TP`, `CP`, `EP`, `PP`: the exposed communication of each micro-batch on the last stage
  (the critical path: the stage that also carries the output layer), with the group's size,
  stride, tiers and peers (solver/train/plan.py `placement`) and the message bytes;
- `bubble`: the last stage's fill and drain; `DP`: the exposed gradient synchronization
  after the pipeline; `optimizer`: the optimizer step; `host`: waiting for the hosts, input,
  checkpoint saves and offload copies, where the plan has any;
- `overlap`: the data-parallel communication the plan hides under the last backward
  passes (the DP collectives' seconds less the exposed ones).

The slices of each term add up to the plan's seconds for it, and the step ends at the
plan's step time. ASSUMPTION: a micro-batch's backward takes two thirds of its pass (twice
the forward's GEMMs); only where slices sit within a micro-batch depends on it.
"""

from __future__ import annotations

import json

from ...model.train import dp_sync
from ...model.train.layer_cost import activation_message
from ...model.train.memory import dense_params_per_gpu, expert_params_per_gpu
from ...model.train.optimizer import grad_bytes
from ...model.ranks import rank_partition
from .target import ExportError, JobPlan, traced_microbatches

FORWARD_SHARE = 1 / 3
PER_MICROBATCH = ("compute", "recompute", "tp", "cp", "ep", "pp", "offload")
COMMUNICATORS = ("tp", "cp", "ep", "pp")
US = 1e6   # the format's timestamps are microseconds


def export(plan: JobPlan, source: str) -> dict[str, str]:
    if plan.estimate is None or len(plan.shares) != 1:
        raise ExportError("a trace draws one parallel layout's step; the heterogeneous split runs several "
                          "(export each partition's job on its own)")
    traced_microbatches(plan.estimate.config, "a trace")
    return {"trace.json": json.dumps(trace(plan, source), indent=1) + "\n"}


def trace(plan: JobPlan, source: str) -> dict:
    e, cfg = plan.estimate, plan.estimate.config
    b = dict(e.breakdown.rows())
    stages, m = cfg.pp, cfg.microbatches
    tracks = [f"stage {k}" for k in range(stages)] + ["TP", "CP", "EP", "PP", "bubble", "DP", "optimizer", "host",
                                                      "overlap"]
    tid = {name: i + 1 for i, name in enumerate(tracks)}
    events = [_meta("process_name", 0, {"name": f"{plan.name}: one training step as planned"})]
    for name in tracks:
        events += [_meta("thread_name", tid[name], {"name": name}), _meta("thread_sort_index", tid[name],
                                                                          {"sort_index": tid[name]})]
    work = sum(b[t] for t in PER_MICROBATCH)
    bubble = b["bubble"]
    per = work / m
    args = _communicator_args(plan)
    for k in range(stages):
        share = k / (stages - 1) if stages > 1 else 0.0
        fill, drain = bubble * share * FORWARD_SHARE, bubble * share * (1 - FORWARD_SHARE)
        middle = bubble - fill - drain
        t = fill
        for j in range(m):
            events.append(_slice("forward", tid[f"stage {k}"], t, per * FORWARD_SHARE, {"microbatch": j}))
            if j == 0 and middle > 0:   # 1F1B's wait for the first backward to come back
                events.append(_slice("bubble", tid[f"stage {k}"], t + per * FORWARD_SHARE, middle, {}))
                t += middle
            events.append(_slice("backward", tid[f"stage {k}"], t + per * FORWARD_SHARE, per * (1 - FORWARD_SHARE),
                                 {"microbatch": j}))
            if k == stages - 1:
                events += _communication(tid, t, per, j, b, m, args)
            t += per
        if k == stages - 1 and fill > 0:
            events += [_slice("fill", tid["bubble"], 0.0, fill, {"stages": stages, "virtual_stages": cfg.vp}),
                       _slice("drain", tid["bubble"], t, drain, {"stages": stages, "virtual_stages": cfg.vp})]
    end = work + bubble
    events += _after_pipeline(plan, tid, end, b, args)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "gclc export --to trace", "design": source, "job": plan.name,
                          "step_time_s": e.step_time, "step_breakdown_s": b, "partition": plan.shares[0].partition,
                          "parallelism": {d: getattr(cfg, d) for d in ("tp", "cp", "ep", "pp", "dp", "vp")}
                          | {"microbatches": m, "zero": cfg.zero}}}


def _communication(tid: dict, start: float, per: float, j: int, b: dict, m: int, args: dict) -> list[dict]:
    """The last stage's exposed TP/CP/EP/PP seconds of micro-batch `j`, at the end of its
    forward (a third) and of its backward (two thirds)."""
    out = []
    for half, share, end in (("forward", FORWARD_SHARE, start + per * FORWARD_SHARE), ("backward", 1 - FORWARD_SHARE,
                                                                                      start + per)):
        t = end
        for dim in reversed(COMMUNICATORS):
            seconds = b[dim] / m * share
            if seconds > 0:
                t -= seconds
                out.append(_slice(f"{dim.upper()} {half}", tid[dim.upper()], t, seconds, args[dim] | {"microbatch": j}))
    return out


def _after_pipeline(plan: JobPlan, tid: dict, t: float, b: dict, args: dict) -> list[dict]:
    out = []
    hidden = _hidden_dp(plan)
    if hidden > 0:
        out.append(_slice("DP hidden under the last backward", tid["overlap"], max(0.0, t - hidden), min(hidden, t),
                          args["dp"] | {"hidden_s": hidden}))
    for name, track in (("dp", "DP"), ("optimizer", "optimizer"), ("host", "host"), ("data", "host"),
                        ("checkpoint", "host"), ("step_overhead", "host")):
        seconds = b.get(name, 0.0)
        if seconds > 0:
            out.append(_slice(name, tid[track], t, seconds, args["dp"] if name == "dp" else {}))
            t += seconds
    return out


def _hidden_dp(plan: JobPlan) -> float:
    """Seconds of data-parallel collectives the plan overlaps with compute: their total less the exposed."""
    e, cfg = plan.estimate, plan.estimate.config
    partition = rank_partition(plan.ir_partition, cfg.gpus)
    gathers, reduces, all_reduces, fsdp, across = dp_sync.traffic(plan.shape, cfg, partition)
    if cfg.zero >= 3:
        total = fsdp * cfg.microbatches + across
    elif cfg.zero >= 1:
        total = reduces + across + gathers
    else:
        total = all_reduces
    if e.paused is not None:   # under PFC the step priced every collective at the incast's pace
        total *= e.paused.factor
    return max(0.0, total - e.breakdown.dp)


def _communicator_args(plan: JobPlan) -> dict[str, dict]:
    """Each dimension's group (size, stride, tiers, peers) and the bytes one collective moves."""
    cfg = plan.estimate.config
    out = {p.dim: {"group": p.size, "stride": p.stride, "tiers": list(p.tiers), "peers": list(p.peers)}
           for p in plan.placement}
    message = activation_message(plan.shape, cfg)
    out["tp"]["bytes"] = message * (cfg.tp if cfg.sp else 1)
    out["pp"]["bytes"] = message / (1 if cfg.sp else cfg.tp)
    out["dp"]["bytes"] = (dense_params_per_gpu(plan.shape, cfg) + expert_params_per_gpu(plan.shape, cfg)) * grad_bytes(cfg)
    return out


def _meta(name: str, tid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": 1, "tid": tid, "args": args}


def _slice(name: str, tid: int, start: float, seconds: float, args: dict) -> dict:
    """A complete event from `start` for `seconds`, its ends on whole microseconds: a slice
    ends exactly where the next begins (float ends would overlap by an ulp, and a viewer
    nests overlapping slices)."""
    begin, end = round(start * US), round((start + seconds) * US)
    return {"ph": "X", "name": name, "cat": "step", "pid": 1, "tid": tid, "ts": begin, "dur": end - begin,
            "args": args}
