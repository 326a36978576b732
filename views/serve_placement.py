"""The placement view of a serve plan: its pools, their replicas and how each replica's GPUs
sit in the machine.

An aggregated plan has one pool; a disaggregated plan a prefill pool and a decode pool.
Ranks are numbered prefill pool first, then decode, replica after replica; inside a replica
tensor parallelism is innermost, then the attention groups that share the experts (ep) and
the pipeline stages in the order the engine lays them out (model/serve/ranks.py, the layout
`model/serve/inference.py` costs). Each replica is drawn as
its pipeline stages, each stage as the scale-up domains it occupies, each GPU a cell filled
by tensor-parallel group and outlined by attention group. Beside each pool, the tiers its
groups cross; for a disaggregated plan, the tier the KV cache crosses from prefill to decode.

Large pools stay legible: the first replicas and the last are drawn, the rest counted.
"""

from __future__ import annotations

import graphviz

from ..dsl.numbers import count, duration, number
from ..model import comms
from ..model.serve import ranks
from ..model.serve.inference import Replica, kv_transfer_time
from .diagram import FONT, PALETTE, PASTEL, escape, ident
from .placement import domain_size

MAX_REPLICAS = 3    # replicas drawn per pool before eliding
MAX_STAGES = 3      # pipeline stages drawn per replica before eliding
MAX_DOMAINS = 4     # domains drawn per stage before eliding
WIDE = 16           # domains wider than this wrap their GPUs in rows of 8


def serve_placement(plan) -> graphviz.Digraph:
    """The serve plan's pools and replicas as the machine holds them."""
    dot = graphviz.Digraph(ident(plan.name, "serve_placement"), graph_attr={
        "rankdir": "TB", "fontname": FONT, "fontsize": "14", "labelloc": "t", "nodesep": "0.25",
        "ranksep": "0.3", "label": _title(plan)}, node_attr={"fontname": FONT, "fontsize": "10", "shape": "plain"})
    size = domain_size(plan.partition)
    offset, previous = 0, None
    for role, side in pools(plan):
        name = ident("pool", role)
        with dot.subgraph(name=f"cluster_{name}") as box:
            box.attr(label=f"{role} pool · {side.count:,} × {count(side.replica.gpus, 'GPU')}", style="rounded",
                     color="#90a4ae", fontname=FONT, fontsize="12")
            box.node(name, _pool(side.replica, side.count, offset, size))
            box.node(ident(name, "tiers"), _tiers(side.replica))
            box.edge(name, ident(name, "tiers"), style="invis")
        if previous is not None:
            dot.edge(ident(previous, "tiers"), name, label=_handoff(plan), fontname=FONT, fontsize="10",
                     color="#6a1b9a", fontcolor="#6a1b9a")
        offset += side.gpus
        previous = name
    return dot


def pools(plan) -> list[tuple[str, object]]:
    """(role, side) of each pool, prefill first; an aggregated plan's one pool serves both."""
    if plan.prefill is not None:
        return [("prefill", plan.prefill), ("decode", plan.decode)]
    return [("serving", plan.decode)] if plan.decode is not None else []


def _title(plan) -> str:
    parts = " + ".join(f"{side.count:,} × ({_layout(side.replica)})" for _, side in pools(plan))
    return (f"serve {plan.name}: {plan.mode} · {parts} · {plan.used_gpus:,} of {plan.gpus:,} GPUs")


def _layout(r: Replica) -> str:
    c = r.config
    return f"tp={c.tp} ep={c.ep} pp={c.pp} = {count(c.gpus, 'GPU')}, batch {number(c.batch)}"


# ----------------------------------------------------------------- replicas


def _pool(r: Replica, count: int, offset: int, size: int) -> str:
    cells = []
    for k in _shown(count, MAX_REPLICAS):
        if k is None:
            cells.append(f'<TD BORDER="0">… {count - MAX_REPLICAS + 1:,} more<BR/>replicas,<BR/>laid out alike</TD>')
        else:
            cells.append(f'<TD BORDER="0" VALIGN="TOP">{_replica(r, k, offset + k * r.gpus, size)}</TD>')
    return f'<<TABLE BORDER="0" CELLSPACING="6"><TR>{"".join(cells)}</TR></TABLE>>'


def _replica(r: Replica, index: int, first: int, size: int) -> str:
    c = r.config
    layers = r.shape.layers / c.pp
    span = f"ranks {first:,}–{first + r.gpus - 1:,}" if r.gpus > 1 else f"rank {first:,}"
    rows = [f'<TR><TD BGCOLOR="#eceff1"><B>replica {index:,}</B> · {span}</TD></TR>']
    for s in _shown(c.pp, MAX_STAGES):
        if s is None:
            rows.append(f'<TR><TD><FONT POINT-SIZE="9">⋮ {count(c.pp - MAX_STAGES + 1, "more stage")}</FONT></TD></TR>')
            continue
        members = [first + g for g in ranks.stage_ranks(c, r.engine.rank_order, s)]
        head = (f"stage {s} · layers {round(s * layers)}–{round((s + 1) * layers) - 1}" if c.pp > 1
                else f"{r.shape.layers} layers")
        domains = sorted({g // size for g in members})
        shown = []
        for d in _shown(len(domains), MAX_DOMAINS):
            if d is None:
                shown.append(f'<TD BORDER="0">… {len(domains) - MAX_DOMAINS + 1:,} more domains</TD>')
            else:
                shown.append(f'<TD BORDER="0">{_domain(r, domains[d], size, first, set(members))}</TD>')
        rows.append(f'<TR><TD><FONT POINT-SIZE="9">{head}</FONT></TD></TR>')
        rows.append(f'<TR><TD><TABLE BORDER="0" CELLSPACING="2"><TR>{"".join(shown)}</TR></TABLE></TD></TR>')
    return (f'<TABLE BORDER="1" STYLE="ROUNDED" CELLBORDER="0" CELLSPACING="2" COLOR="#455a64">'
            f'{"".join(rows)}</TABLE>')


def _domain(r: Replica, domain: int, size: int, start: int, members: set) -> str:
    """One scale-up domain: the stage's GPUs in it (`members`; the replica's first rank
    `start`), filled by tensor group, outlined by attention group; other GPUs of the domain are
    left out (other stages or replicas)."""
    c, ep_stride = r.config, ranks.strides(r.config, r.engine.rank_order)["ep"]
    held = [g for g in range(domain * size, (domain + 1) * size) if g in members]
    width = 8 if len(held) > WIDE else max(1, len(held))
    groups: dict[int, list[int]] = {}
    for g in held:
        groups.setdefault((g - start) // ep_stride % c.ep, []).append(g)
    body = []
    for group, members in groups.items():
        lines = [members[i:i + width] for i in range(0, len(members), width)]
        cells = "".join("<TR>" + "".join(_gpu(c, g, start, group) for g in line) + "</TR>" for line in lines)
        frame = 'BORDER="2" COLOR="#212121" STYLE="ROUNDED"' if c.ep > 1 else 'BORDER="0"'
        body.append(f'<TD><TABLE {frame} CELLSPACING="2" CELLBORDER="0" CELLPADDING="0">{cells}</TABLE></TD>')
    return (f'<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0" COLOR="#455a64" BGCOLOR="white">'
            f'<TR><TD COLSPAN="{len(body)}"><FONT POINT-SIZE="9">domain {domain:,}</FONT></TD></TR>'
            f'<TR>{"".join(body)}</TR></TABLE>')


def _gpu(c, rank: int, start: int, group: int) -> str:
    fill, frame = PASTEL[group % len(PASTEL)], PALETTE[group % len(PALETTE)]
    place = f"tp {(rank - start) % c.tp}" if c.tp > 1 else (f"group {group}" if c.ep > 1 else "")
    small = c.tp * c.ep <= WIDE and place
    label = f'{rank:,}<BR/><FONT POINT-SIZE="8">{place}</FONT>' if small else f"{rank:,}"
    return (f'<TD BORDER="1" COLOR="{frame}" BGCOLOR="{fill}" WIDTH="34" HEIGHT="26">'
            f'<FONT POINT-SIZE="9">{label}</FONT></TD>')


def _shown(n: int, limit: int) -> list[int | None]:
    """Indices to draw, with None where the middle is elided."""
    if n <= limit:
        return list(range(n))
    return list(range(limit - 1)) + [None, n - 1]


# ----------------------------------------------------------------- tiers


def group_tiers(r: Replica) -> list[tuple[str, str, str]]:
    """(group, what it carries, tiers crossed innermost first) for each group of a replica."""
    c, out = r.config, []
    if c.tp > 1:
        out.append((f"tp = {c.tp} (tensor)", "2 all-reduces per layer", _names(t.tier for t in r.tp_stages)))
    if c.ep > 1 or (r.shape.is_moe and c.tp > 1):
        route, stages = r.exchange_route() if r.shape.is_moe else ("", r.ep_stages)
        if not r.shape.is_moe:
            what = "attention groups"
        elif route == "sharded":
            what = "experts TP-sharded: summed by the tensor all-reduce, no exchange"
        elif route == "one_group":
            what = "one attention group holds every token: experts summed by the tensor all-reduce, no exchange"
        elif route == "allgather":
            what = "tokens all-gathered, outputs reduce-scattered per MoE layer"
        else:
            what = "expert all-to-all (dispatch, combine) per MoE layer" + (
                ", once per rank and node (DeepEP)" if r.engine.dispatcher == "deepep" else "")
        out.append((f"ep = {c.ep} (attention groups × experts)", what, _names(t.tier for t in stages)))
    if c.pp > 1:
        out.append((f"pp = {c.pp} (pipeline)", "activations stage to stage; every token passes all stages",
                    _hops(r.pp_hops)))
    return out


def _hops(tiers) -> str:
    """`NVLink4 (node) × 2 · NDR leaf × 1`: the tiers the stage-to-stage hops cross."""
    counts: dict[str, int] = {}
    for tier in tiers:
        counts[tier.name] = counts.get(tier.name, 0) + 1
    return " · ".join(f"{escape(name)} × {n}" for name, n in counts.items()) + " (hops)"


def _names(tiers) -> str:
    names = [escape(t.name) for t in tiers]
    return " → ".join(names) if names else "one GPU"


def _tiers(r: Replica) -> str:
    rows = ['<TR><TD ALIGN="LEFT"><B>group</B></TD><TD ALIGN="LEFT"><B>carries</B></TD>'
            '<TD ALIGN="LEFT"><B>tiers crossed (innermost first)</B></TD></TR>']
    for group, what, crossed in group_tiers(r) or [("one GPU per replica", "nothing", "none")]:
        rows.append(f'<TR><TD ALIGN="LEFT">{group}</TD><TD ALIGN="LEFT">{what}</TD><TD ALIGN="LEFT">{crossed}</TD></TR>')
    key = ("cells: GPUs by rank · fill: tensor-parallel group" + (" · outlined: attention group" if r.config.ep > 1
                                                                  else ""))
    rows.append(f'<TR><TD COLSPAN="3" ALIGN="LEFT"><FONT POINT-SIZE="9">{key}</FONT></TD></TR>')
    return f'<<TABLE BORDER="1" STYLE="ROUNDED" CELLBORDER="0" CELLPADDING="3" COLOR="#90a4ae">{"".join(rows)}</TABLE>>'


def kv_tier(plan):
    """The tier a prefilled prompt's KV cache crosses to its decode replica (None: aggregated)."""
    if plan.prefill is None:
        return None
    p, d = plan.prefill.replica, plan.decode.replica
    return comms.outermost(2, max(p.gpus, d.gpus), p.partition.tiers)


def _handoff(plan) -> str:
    tier = kv_tier(plan)
    seconds = kv_transfer_time(plan.prefill.replica, plan.decode.replica, plan.prompt_tokens)
    where = tier.name if tier is not None else "the same GPUs"
    return f"KV cache over {where}\n{duration(seconds)} per {number(plan.prompt_tokens)}-token prompt"
