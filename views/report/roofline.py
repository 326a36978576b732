"""The report's Roofline section for every job kind: where the plan runs on its chip's
roofline.

- A train plan: one layer's forward operations under the plan's configuration.
- A heterogeneous plan: the same, once per partition taking part (its chip, its config).
- A serve plan: its two operating points on one GPU, a prefill chunk and a decode step at
  full batch; each is the iteration's FLOPs over its HBM bytes (intensity) and over its
  modelled time (achieved rate), so the figure shows how far decode sits from the ridge.
"""

from __future__ import annotations

import math


from ...dsl.numbers import count, number
from ...model.compute import op_time
from ...dsl.records import frozen


@frozen
class Point:
    label: str
    intensity: float      # FLOP per HBM byte
    rate: float           # FLOP/s achieved


@frozen
class Roofline:
    name: str             # scopes the SVG's ids (several rooflines share the page)
    chip: object          # compiler.ir.Accelerator
    precision: str
    points: tuple[Point, ...]
    caption: str


def op_points(ops, chip, precision: str) -> tuple[Point, ...]:
    """Operations (model/ops.Op) at the rate the model runs them on `chip`."""
    return tuple(Point(op.name, op.flops / op.bytes, op.flops / op_time(op, chip, precision))
                 for op in ops if op.flops > 0 and op.bytes > 0)


def rooflines(plan, outcome, graph) -> tuple[tuple[Roofline, ...], str]:
    """The figures for the report's plan (train `plan`, or a serve/heterogeneous `outcome`),
    and a note when there is nothing to place (no plan: the chip's roofline alone)."""
    from ...model.train.workload import layer_forward
    from ...solver.split.plan import HeteroPlan

    if plan is not None and plan.best is not None:
        e, job = plan.best, plan.job
        chip = job.partition.node.accelerator
        ops = layer_forward(job.shape, e.config, job.shape.is_moe)
        return (Roofline("roofline", chip, e.config.precision, op_points(ops, chip, e.config.precision),
                         f"{chip.name} at {e.config.precision}; points: one layer's forward operations under the plan."),), ""
    if isinstance(outcome, HeteroPlan) and outcome.best is not None:
        return hetero_rooflines(outcome), ""
    if getattr(outcome, "job_kind", "") == "rl" and outcome.best is not None:
        # the generation pool's chip first, each chip once (a set's order followed the hash seed)
        chips = dict.fromkeys(outcome.job.partition(n).node.accelerator
                              for n in (outcome.best.generation.layout.partition, outcome.best.train.partition))
        return tuple(Roofline(f"roofline-{c.name}", c, "bf16", (), f"{c.name} at bf16 (an rl plan: the RL step "
                              "section shows where its time goes).") for c in chips), ""
    if outcome is not None and not isinstance(outcome, HeteroPlan) and outcome.best is not None:
        return (serve_roofline(outcome),), ""
    chip = graph.partitions[0].node.accelerator
    return (Roofline("roofline", chip, "bf16", (), f"{chip.name} at bf16 (no plan: no operations to place on it)."),), \
        "No feasible plan: the chip's roofline alone."


def hetero_rooflines(h) -> tuple[Roofline, ...]:
    """One roofline per partition the split uses, with its layer's operations under the
    configuration the split gives that partition."""
    from ...model.train.workload import layer_forward

    jobs = {p.job.partition.name: p.job for p in h.plans}
    out = []
    for share in h.best.shares:
        if not share.items or share.config is None:
            continue
        job, c = jobs[share.partition], share.config
        chip = job.partition.node.accelerator
        ops = layer_forward(job.shape, c, job.shape.is_moe)
        out.append(Roofline(f"roofline-{share.partition}", chip, c.precision, op_points(ops, chip, c.precision),
                            f"partition {share.partition}: {chip.name} at {c.precision}; points: one layer's forward "
                            f"operations under its share of the {h.best.mode} split (tp {c.tp}, mb {c.microbatch})."))
    return tuple(out)


def serve_roofline(p) -> Roofline:
    """A serve plan's prefill and decode operating points on its chip."""
    prefill_side = p.prefill or p.decode
    prefill = serve_point(prefill_side.replica, p.prompt_tokens, p.output_tokens, "prefill")
    decode = serve_point(p.decode.replica, p.prompt_tokens, p.output_tokens, "decode")
    chip, precision = p.decode.replica.partition.node.accelerator, p.decode.replica.config.precision
    pools = "its prefill and decode pools" if p.prefill else "its replicas (prefill and decode interleaved)"
    return Roofline("roofline", chip, precision, (prefill, decode),
                    f"{chip.name} at {precision}; points: one GPU of {pools} over one iteration: a prefill chunk, "
                    f"and a decode step of the full batch (the FLOPs it does over the HBM bytes it reads, and "
                    f"over the time the model gives it).")


def serve_point(r, prompt: float, output: float, phase: str) -> Point:
    """One iteration of replica `r` on one GPU, from the model's own terms (model/serve/inference.py):
    GEMM FLOPs per token and the attention's per cached key or prompt pair; bytes are the
    weights each micro-batch streams and the cache the decoding sequences read."""
    from ...model.expert_load import experts_touched

    c, e, s = r.config, r.engine, r.shape
    if phase == "prefill":
        chunk = min(e.chunk, max(prompt, 1.0))
        sequences, decoding, kv_tokens, pairs, tokens = 1.0, 0.0, 0.0, r.kv.pairs(0, chunk), chunk
    else:
        decoding = float(c.batch)
        sequences, pairs, tokens = decoding, 0.0, decoding * (1 + e.draft)
        kv_tokens = decoding * (prompt + output / 2)     # the mean sequence is half way through its output
    micro = min(c.pp, max(1.0, sequences))
    read = r.kv.effective_total(kv_tokens, decoding) if decoding else 0.0   # windowed layers read their window
    attention, kv_bytes = r.attention_work(read, pairs)
    flops = r.gemm_flops_per_token * tokens + attention
    weights = r.dense_weights + r.expert_weights * (experts_touched(s, tokens / micro) if s.is_moe else 1.0)
    traffic = micro * weights + kv_bytes
    seconds = r.iteration(decoding, kv_tokens, tokens if phase == "prefill" else 0.0, pairs)
    words = (f"prefill: a {number(tokens)}-token chunk" if phase == "prefill"
             else f"decode: a step of {count(c.batch, 'sequence')}")
    return Point(words, flops / traffic if traffic else math.inf, flops / seconds if seconds else 0.0)
