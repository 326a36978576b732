"""The placement view of a heterogeneous job (`on = [A.h100, A.a100]`): one rank grid per
partition, each drawn as `views/placement.py` draws a single plan, side by side in a
frame of its own, with what the split gives each partition and what crosses between them.

A data split gives each partition a share of the batch: its grid is its configuration at
that share. A pipeline split gives each a run of consecutive layers: its bands number the
model's layers, and its communication is that configuration's, scaled to its layers (the
split's fluid model). A partition the split leaves out is drawn as a note, not a grid.
"""

from __future__ import annotations

import graphviz

from ..dsl.numbers import duration, number, percent
from ..model.train.step import estimate
from ..solver.split.plan import HeteroPlan, HeteroSplit, Share
from .diagram import FONT, escape, ident
from .placement import draw_grid


def hetero_placement(result: HeteroPlan) -> graphviz.Digraph:
    """Every partition's rank grid under the chosen split (`result.best`, which must exist)."""
    split = result.best
    jobs = {p.job.partition.name: p.job for p in result.plans}
    dot = graphviz.Digraph(ident(result.name, "placement"), graph_attr={
        "rankdir": "TB", "fontname": FONT, "fontsize": "14", "labelloc": "t", "nodesep": "0.4", "ranksep": "0.3",
        "compound": "true", "label": _title(result, split)},
        node_attr={"fontname": FONT, "fontsize": "10", "shape": "plain"})
    first_layer, anchors = 0, []    # (first node, last node, frame) of each partition
    for i, share in enumerate(split.shares):
        prefix, cluster = f"p{i}_", ident("cluster", i, share.partition)
        job = jobs[share.partition]
        with dot.subgraph(name=cluster) as frame:
            frame.attr(label=_frame_label(share, split.mode, first_layer), fontsize="12", style="rounded",
                       color="#607d8b", labeljust="l")
            if share.items == 0 or share.config is None:
                frame.node(prefix + "unused", f'<<TABLE BORDER="0"><TR><TD>unused: the {split.mode} split '
                           f'gives {escape(share.partition)} no work</TD></TR></TABLE>>')
                anchors.append((prefix + "unused", prefix + "unused", cluster))
                continue
            e = estimate(job.shape, share.config, job.partition)
            if split.mode == "pipeline":
                held, part = (first_layer, share.items), share.items / job.shape.layers
            else:
                held, part = None, 1.0
            last = draw_grid(frame, job, e, prefix, held, part)
            anchors.append((prefix + ident("stage", 0), last, cluster))
        if split.mode == "pipeline":
            first_layer += share.items
    _cross_edges(dot, split, anchors)
    return dot


def _title(result: HeteroPlan, split: HeteroSplit) -> str:
    used = sum(1 for s in split.shares if s.items)
    return (f"job {result.name}: {split.mode} split over {used} of {len(split.shares)} partitions · "
            f"{sum(s.gpus for s in split.shares):,} GPUs · {number(split.tokens_per_s)} tokens/s · "
            f"step {duration(split.step_time)} (compute {duration(split.compute_time)} + cross-partition "
            f"{duration(split.exchange)})")


def _frame_label(share: Share, mode: str, first_layer: int) -> str:
    if share.items == 0 or share.config is None:
        return f"{share.partition} ({share.chip}): unused"
    c = share.config
    work = (f"{share.items:,} sequences of each step" if mode == "data"
            else f"layers {first_layer}–{first_layer + share.items - 1}")
    return (f"{share.partition}: {share.gpus:,} × {share.chip} · {work} · tp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp} "
            f"ep={c.ep} · busy {duration(share.busy)} ({percent(share.utilization)} of the compute phase)")


def _cross_edges(dot: graphviz.Digraph, split: HeteroSplit, anchors: list[tuple[str, str, str]]) -> None:
    """What crosses between partitions, drawn from frame to frame (stacked top to bottom):
    the gradient exchange after a data split, the activations at each boundary of a
    pipeline split."""
    what = "gradient all-reduce" if split.mode == "data" else "activations and their gradients"
    for (_, last, frame_a), (first, _, frame_b) in zip(anchors, anchors[1:]):
        dot.edge(last, first, label=f"{what}: {duration(split.exchange)} per step", fontname=FONT, fontsize="10",
                 color="#455a64", style="dashed", ltail=frame_a, lhead=frame_b,
                 dir="both" if split.mode == "data" else "forward")
