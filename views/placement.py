"""The placement view: the plan's rank grid, drawn as the machine holds it.

Each scale-up domain (an 8-GPU node, a 72-GPU NVL72 rack) is a block of GPU cells
numbered by rank; cells are filled by tensor-parallel group, framed in the colour of
their data-parallel replica, and expert-parallel groups are outlined. Pipeline stages
are horizontal bands. Beside the grid, each parallel dimension with the tiers its
groups cross and the exposed communication each tier carries per step.

Large plans stay legible: a band shows its first domains and its last, a long pipeline
its first stages and its last; every elision says how many it stands for.
"""

from __future__ import annotations

import math

import graphviz

from ..dsl.numbers import count, duration, percent
from ..compiler.ir import Tier
from ..model import comms
from ..model.network.placement import SCALE_UP_SCOPES
from ..model.ranks import rank_partition
from .diagram import FONT, PALETTE, PASTEL, escape, ident

DIM_ORDER = ("tp", "cp", "ep", "dp", "pp")   # Megatron: tp innermost, pp outermost
MAX_DOMAINS = 5     # domains drawn per band before eliding
MAX_BANDS = 3       # pipeline stages drawn before eliding
WIDE = 16           # domains larger than this are drawn as a grid of rows
_NAMES = {"tp": "tensor", "cp": "context", "ep": "expert", "dp": "data", "pp": "pipeline"}


def dimension_stages(cfg, tiers: tuple[Tier, ...]) -> tuple[tuple[str, int, int, tuple[comms.Stage, ...]], ...]:
    """(dimension, size, stride, stages), with the strides the cost model uses (`cfg.stride`)."""
    return tuple((dim, getattr(cfg, dim), cfg.stride(dim), comms.place(getattr(cfg, dim), cfg.stride(dim), tiers))
                 for dim in DIM_ORDER if getattr(cfg, dim) > 1)


def tier_traffic(dim: str, seconds: float, stages: tuple[comms.Stage, ...]) -> tuple[tuple[Tier, float], ...]:
    """A dimension's exposed communication seconds split over the tiers its group crosses,
    in proportion to each stage's wire time for the same message (hierarchical collectives:
    each stage carries 1/peers of the one inside it; all-to-all: the share that reaches it;
    pipeline sends: all on the innermost tier, the one the model charges them to)."""
    weights, share, inside, total = [], 1.0, 1, math.prod(s.peers for s in stages)
    for i, stage in enumerate(stages):
        n, rate = stage.peers, comms.stage_rate(stage) or 1.0
        if dim == "pp":
            weights.append(1.0 if i == 0 else 0.0)
        elif dim in ("ep", "cp"):
            weights.append((inside * n - inside) / total / rate)
        else:
            weights.append((n - 1) / n * share / rate)
        share, inside = share / n, inside * n
    whole = sum(weights) or 1.0
    return tuple((stage.tier, seconds * w / whole) for stage, w in zip(stages, weights))


def coordinate(cfg, rank: int, dim: str) -> int:
    """The index of `rank` along `dim` (expert groups take consecutive ranks)."""
    size = getattr(cfg, dim)
    if dim == "ep":
        return rank % size
    return (rank // cfg.stride(dim)) % size


def ranks_view(plan):
    """The partition as the plan's ranks see it (segmented racks: `model/ranks.py`)."""
    return partition_view(plan.job, plan.best.config)


def partition_view(job, cfg):
    """`job`'s partition as `cfg`'s ranks see it."""
    return rank_partition(job.partition, cfg.gpus)


def domain_size(partition) -> int:
    """Ranks per scale-up domain: the node's GPUs, or the NVLink rack's (its segment when
    the job is placed in segments)."""
    scale_up = [t.group_gpus for t in partition.tiers if t.scope in SCALE_UP_SCOPES]
    return max(scale_up, default=partition.node.gpus)


def placement(plan) -> graphviz.Digraph:
    dot = graphviz.Digraph(ident(plan.job.name, "placement"), graph_attr={
        "rankdir": "TB", "fontname": FONT, "fontsize": "14", "labelloc": "t", "nodesep": "0.25", "ranksep": "0.25",
        "label": _title(plan)}, node_attr={"fontname": FONT, "fontsize": "10", "shape": "plain"})
    draw_grid(dot, plan.job, plan.best)
    return dot


def draw_grid(dot, job, e, prefix: str = "", layers: tuple[int, int] | None = None, share: float = 1.0) -> str:
    """Draw `e`'s rank grid on `job`'s partition into `dot` (a graph or a cluster): its
    pipeline bands, then its tier table; node ids start with `prefix`. `layers` is (first,
    count) when the configuration runs only part of the model (a heterogeneous pipeline
    split), `share` the part of its communication that is this grid's. Returns the id of
    the last node drawn."""
    cfg = e.config
    size = min(domain_size(partition_view(job, cfg)), cfg.gpus)
    whole, held = layers is None, layers or (0, job.shape.layers)
    bands = _shown(cfg.pp, MAX_BANDS)
    previous = None
    for stage in bands:
        element = prefix + (ident("stage", stage) if stage is not None else ident("stage", "more", previous))
        dot.node(element, _band(cfg, stage, size, held, whole) if stage is not None else _elided_band(cfg, bands))
        if previous is not None:
            dot.edge(previous, element, style="invis")
        previous = element
    dot.node(prefix + "tiers", _tier_table(job, e, size, share))
    dot.edge(previous, prefix + "tiers", style="invis")
    return prefix + "tiers"


def _title(plan) -> str:
    job, e = plan.job, plan.best
    cfg = e.config
    dims = " ".join(f"{d}={getattr(cfg, d)}" for d in ("tp", "pp", "dp", "cp", "ep"))
    return (f"plan {job.name}: {dims} · {cfg.gpus:,} of {job.graph.gpus:,} GPUs · "
            f"step {duration(e.step_time)} · MFU {percent(e.mfu)}")


def _shown(n: int, limit: int) -> list[int | None]:
    """Indices to draw, with None where the middle is elided."""
    if n <= limit:
        return list(range(n))
    return list(range(limit - 1)) + [None, n - 1]


# ----------------------------------------------------------------- bands and domains


def _band(cfg, stage: int, size: int, held: tuple[int, int], whole: bool = True) -> str:
    stage = stage if cfg.pp > 1 else None
    ranks = [r for r in range(cfg.gpus) if stage is None or coordinate(cfg, r, "pp") == stage]
    domains = sorted({r // size for r in ranks})
    first, total = held
    layers = (stage_layers(first, total, cfg.pp, cfg.vp, stage)
              if stage is not None else f"{total} layers" if whole else f"layers {first}–{first + total - 1}")
    head = f"stage {stage}" if stage is not None else "all ranks"
    cells = [f'<TD VALIGN="MIDDLE" BGCOLOR="#eceff1"><B>{head}</B><BR/>{layers}<BR/>'
             f'<FONT POINT-SIZE="9">{len(ranks):,} GPUs · {count(len(domains), "domain")}</FONT></TD>']
    for d in _shown(len(domains), MAX_DOMAINS):
        if d is None:
            cells.append(f'<TD BORDER="0">… {len(domains) - MAX_DOMAINS + 1:,}<BR/>more<BR/>domains</TD>')
        else:
            cells.append(f'<TD BORDER="0">{_domain(cfg, domains[d], size, stage)}</TD>')
    return f'<<TABLE BORDER="1" STYLE="ROUNDED" CELLBORDER="0" CELLSPACING="4" COLOR="#90a4ae"><TR>{"".join(cells)}</TR></TABLE>>'


def stage_runs(first: int, total: int, pp: int, vp: int, stage: int) -> list[tuple[int, int]]:
    """The layers pipeline stage `stage` holds, as (first, last) runs: one run of total / pp
    layers, or with `vp` virtual stages per GPU (Megatron's interleaved schedule) the vp
    chunks of total / (pp x vp) layers at virtual stages stage, stage + pp, stage + 2 pp, ..."""
    chunk = total / (pp * vp)
    return [(first + round((v * pp + stage) * chunk), first + round((v * pp + stage + 1) * chunk) - 1)
            for v in range(vp)]


def stage_layers(first: int, total: int, pp: int, vp: int, stage: int) -> str:
    """`layers 8–15`, or `layers 0–1, 8–9, 16–17, … (4 chunks)` under an interleaved schedule."""
    runs = [(a, b) for a, b in stage_runs(first, total, pp, vp, stage) if b >= a]
    text = ", ".join(f"{a}–{b}" if b > a else f"{a}" for a, b in runs[:3]) + (", …" if vp > 3 else "")
    return f"layers {text}" + (f" ({vp} chunks)" if vp > 1 else "")


def _elided_band(cfg, bands: list[int | None]) -> str:
    hidden = cfg.pp - sum(b is not None for b in bands)
    return (f'<<TABLE BORDER="0"><TR><TD><FONT POINT-SIZE="11">⋮ {count(hidden, "more pipeline stage")}, '
            f'each laid out like the ones shown</FONT></TD></TR></TABLE>>')


def _domain(cfg, domain: int, size: int, stage: int | None) -> str:
    """One scale-up domain: its GPUs as cells in rows of at most 8 (or one row when small),
    expert groups outlined, ranks of other pipeline stages greyed."""
    ranks = list(range(domain * size, min(cfg.gpus, (domain + 1) * size)))
    width = 8 if size > WIDE else max(1, len(ranks))
    lines = []
    for group in _ep_groups(cfg, ranks):
        rows = [group[i:i + width] for i in range(0, len(group), width)]
        body = "".join("<TR>" + "".join(_gpu(cfg, r, size, stage) for r in row) + "</TR>" for row in rows)
        outline = 'BORDER="2" COLOR="#212121" STYLE="ROUNDED"' if cfg.ep > 1 else 'BORDER="0"'
        table = f'<TABLE {outline} CELLSPACING="2" CELLBORDER="0" CELLPADDING="0">{body}</TABLE>'
        if lines and cfg.ep > 1 and len(group) < width and _slots(lines[-1]) + len(group) <= width:
            lines[-1].append((table, len(group)))  # small expert groups share a line
        else:
            lines.append([(table, len(group))])
    body = "".join("<TR><TD>" + _line(line) + "</TD></TR>" for line in lines)
    shared = " ".join(f"{d} {coordinate(cfg, ranks[0], d)}" for d in ("cp", "dp")
                      if getattr(cfg, d) > 1 and len({coordinate(cfg, r, d) for r in ranks}) == 1)
    return (f'<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0" COLOR="#455a64" BGCOLOR="white">'
            f'<TR><TD><FONT POINT-SIZE="9">domain {domain:,} · ranks {ranks[0]:,}–{ranks[-1]:,}'
            f'{" · " + shared if shared else ""}</FONT></TD></TR>{body}</TABLE>')


def _slots(line: list[tuple[str, int]]) -> int:
    return sum(n for _, n in line)


def _line(line: list[tuple[str, int]]) -> str:
    if len(line) == 1:
        return line[0][0]
    cells = "".join(f"<TD>{table}</TD>" for table, _ in line)
    return f'<TABLE BORDER="0" CELLSPACING="2" CELLPADDING="0"><TR>{cells}</TR></TABLE>'


def _ep_groups(cfg, ranks: list[int]) -> list[list[int]]:
    """The domain's ranks by expert group (consecutive ranks); one group without EP."""
    if cfg.ep <= 1:
        return [ranks]
    groups: dict[int, list[int]] = {}
    for r in ranks:
        groups.setdefault(r // cfg.ep, []).append(r)
    return list(groups.values())


def _gpu(cfg, rank: int, size: int, stage: int | None) -> str:
    dp = coordinate(cfg, rank, "dp") if cfg.dp > 1 else 0
    text = f"{rank:,}" if size > WIDE else f"{rank:,}<BR/><FONT POINT-SIZE=\"8\">dp {dp}</FONT>"
    if stage is not None and coordinate(cfg, rank, "pp") != stage:  # another stage's GPU
        return (f'<TD BORDER="1" COLOR="#e0e0e0" BGCOLOR="#fafafa" WIDTH="34" HEIGHT="26">'
                f'<FONT POINT-SIZE="8" COLOR="#bdbdbd">{rank:,}</FONT></TD>')
    fill, frame = PASTEL[_fill_group(cfg, rank) % len(PASTEL)], PALETTE[dp % len(PALETTE)]
    return (f'<TD BORDER="2" COLOR="{frame}" BGCOLOR="{fill}" WIDTH="34" HEIGHT="26">'
            f'<FONT POINT-SIZE="9">{text}</FONT></TD>')


def fill_dimension(cfg) -> str | None:
    """The dimension whose groups the cells' fill tells apart: tensor, else context parallel."""
    return next((d for d in ("tp", "cp") if getattr(cfg, d) > 1), None)


def _repeats(cfg, filled: str | None) -> bool:
    """Whether two groups share a fill (more groups than pastel colours) or two replicas a frame."""
    groups = cfg.gpus // getattr(cfg, filled) if filled else 1
    return groups > len(PASTEL) or cfg.dp > len(PALETTE)


def _fill_group(cfg, rank: int) -> int:
    """The index of `rank`'s group along the fill dimension (its members share a colour)."""
    dim = fill_dimension(cfg)
    if dim is None:
        return 0
    first = rank - coordinate(cfg, rank, dim) * cfg.stride(dim)  # the group's lowest rank
    return first // cfg.stride(dim) // getattr(cfg, dim) * cfg.stride(dim) + first % cfg.stride(dim)


# ----------------------------------------------------------------- tiers


def _tier_table(job, e, size: int, share: float = 1.0) -> str:
    cfg = e.config
    seconds = {k: v * share for k, v in e.breakdown.rows()}
    rows = ['<TR><TD ALIGN="LEFT"><B>dimension</B></TD><TD ALIGN="LEFT"><B>groups</B></TD>'
            '<TD ALIGN="LEFT"><B>tiers crossed (innermost first) · exposed comm per step</B></TD></TR>']
    for dim, n, stride, stages in dimension_stages(cfg, partition_view(job, cfg).tiers):
        crossed = " → ".join(f"{escape(tier.name)} ({duration(spent)})"
                             for tier, spent in tier_traffic(dim, seconds.get(dim, 0.0), stages)) or "one GPU"
        groups = cfg.gpus // n
        rows.append(f'<TR><TD ALIGN="LEFT">{dim} = {n} ({_NAMES[dim]})</TD>'
                    f'<TD ALIGN="LEFT">{count(groups, "group")}, ranks {stride:,} apart</TD>'
                    f'<TD ALIGN="LEFT">{crossed}</TD></TR>')
    filled = fill_dimension(cfg)
    whole = max((t.group_gpus for t in job.partition.tiers if t.scope in SCALE_UP_SCOPES), default=size)
    segment = f" (a segment: {size} of each {whole}-GPU domain's GPUs)" if whole > size and cfg.gpus > size else ""
    key = (f"cells: GPUs by rank, {size} per scale-up domain{segment}"
           + (f" · fill: {_NAMES[filled]}-parallel group" if filled else "")
           + (" · frame: data-parallel replica" if cfg.dp > 1 else "")
           + (" · outlined: expert group" if cfg.ep > 1 else "")
           + (" · bands: pipeline stages (grey: another stage's GPU)" if cfg.pp > 1 else "")
           + (f" · colours repeat every {len(PASTEL)}" if _repeats(cfg, filled) else ""))
    swatches = "".join(f'<TD BORDER="2" COLOR="{PALETTE[k % len(PALETTE)]}" BGCOLOR="white">dp {k}</TD>'
                       for k in range(min(cfg.dp, len(PALETTE))))
    rows.append(f'<TR><TD COLSPAN="3" ALIGN="LEFT"><FONT POINT-SIZE="10">{escape(key)}</FONT></TD></TR>')
    if cfg.dp > 1:
        rows.append(f'<TR><TD COLSPAN="3" ALIGN="LEFT"><TABLE BORDER="0" CELLSPACING="3"><TR><TD>frames:</TD>'
                    f'{swatches}</TR></TABLE></TD></TR>')
    return f'<<TABLE BORDER="1" STYLE="ROUNDED" CELLBORDER="0" CELLPADDING="3" COLOR="#90a4ae">{"".join(rows)}</TABLE>>'
