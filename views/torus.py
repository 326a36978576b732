"""A torus drawn as one (issue 27: it was a hexagon, a switch it does not have): a corner
of its grid of chips with the neighbour links of its first two axes, each row going on
(dashed) to the rest of its ring and the wraparound; the label names every axis's ring, so
a 16 x 16 x 24 slice reads as one."""

from __future__ import annotations

from ..compiler.ir import Tier
from .diagram import SCALE_UP, label

SHOWN = 4          # chips drawn along an axis of a grid
RING_SHOWN = 6     # chips drawn on a one-axis ring
_CHIP = {"shape": "circle", "label": "", "width": "0.22", "height": "0.22", "fixedsize": "true",
         "style": "filled", "fillcolor": "#a5d6a7", "color": "#2e7d32"}


def is_torus(tiers: list[Tier]) -> bool:
    """Whether these tiers are the axes of a torus (each a ring of chips) rather than switches."""
    return bool(tiers) and all(t.ring for t in tiers)


def shape_text(tiers: list[Tier]) -> str:
    """`4 × 4 × 4 torus, wraparound` (or `mesh, open ends` when the axes do not close)."""
    dims = " × ".join(f"{t.ring:,}" for t in tiers)
    return f"{dims} torus, wraparound" if all(t.wraparound for t in tiers) else f"{dims} mesh, open ends"


def draw(dot, element: str, tiers: list[Tier], head: str, link: str, colour: dict | None = None) -> str:
    """Draw the torus whose axes are `tiers` inside `dot` as a subgraph named after
    `element`; return the chip the edges into it meet. `link` is the per-link rate text."""
    style = colour or SCALE_UP
    dims = [t.ring for t in tiers]
    cols = min(dims[0], SHOWN if len(dims) > 1 else RING_SHOWN)
    rows = min(dims[1], SHOWN) if len(dims) > 1 else 1
    more = [f"{t.name}: ring of {t.ring:,} chips, {t.group_gpus:,} GPUs reached" for t in tiers]
    links = {"color": style["color"], "penwidth": "1.5", "arrowhead": "none"}
    closing = {**links, "style": "dashed", "fontsize": "9", "fontcolor": style["color"]}
    # each row goes on past its last chip (dashed, to a point); the other axes' rings are in the
    # label: links drawn above the grid would cross it, and those below the cables coming in
    across = _continues(tiers[0], cols)
    with dot.subgraph(name=f"cluster_{element}") as c:
        c.attr(label=label(head, shape_text(tiers), f"{link} per link", *more), style="rounded,filled",
               fillcolor="#f1f8e9", color=style["color"], labelloc="b")   # above the grid (rankdir BT):
        # the cables into the torus come from below
        for i in range(rows):
            with c.subgraph() as row:  # one rank per row; the row's ring continues past its last chip
                row.attr(rank="same")
                for j in range(cols):
                    row.node(_chip(element, i, j), **_CHIP)
                if across:
                    row.node(_stub(element, 0, i), **_STUB)
            for j in range(cols - 1):
                c.edge(_chip(element, i, j), _chip(element, i, j + 1), **links)
            if across:
                c.edge(_chip(element, i, cols - 1), _stub(element, 0, i),
                       label=_ring_text(tiers[0], cols) if i == rows - 1 else "", **closing)
        for i in range(rows - 1):
            for j in range(cols):
                c.edge(_chip(element, i, j), _chip(element, i + 1, j), **links)
    return _chip(element, 0, 0)


_STUB = {"shape": "point", "width": "0.06", "color": "#616161"}


def _continues(tier: Tier, drawn: int) -> bool:
    """Whether the axis goes on past the chips drawn: more chips, or a wraparound link."""
    return tier.ring > drawn or (tier.wraparound and tier.ring > 2)


def _ring_text(tier: Tier, drawn: int) -> str:
    """What the dashed link stands for: the chips not drawn and the way back to the first."""
    rest = f"+{tier.ring - drawn:,} chips, " if tier.ring > drawn else ""
    return f"{rest}wraps to the first" if tier.wraparound else f"{rest}open end"


def _chip(element: str, i: int, j: int) -> str:
    return f"{element}_chip_{i}_{j}"


def _stub(element: str, axis: int, k: int) -> str:
    return f"{element}_wrap_{axis}_{k}"
