"""`gclc diff A B -o diff.svg`: the two designs side by side as one picture (issue 27): each
one's topology as `gclc render` draws it, under a panel of what changed (params, parts,
bill of materials, plan, power and cost, as `gclc diff` writes it, with the relative
change). One SVG document: the two drawings are nested with their ids prefixed, so
neither's styles or links reach into the other."""

from __future__ import annotations

import html
import re

from ..solver.compare import Comparison
from . import render
from .diff import _SECTIONS, _ratio, _show

GAP, MARGIN, LINE = 24, 16, 15    # points
MAX_ROWS = 40                      # change rows in the panel; the rest are counted
_SIZE = re.compile(r'<svg[^>]*?\swidth="([\d.]+)pt"[^>]*?\sheight="([\d.]+)pt"', re.S)


def picture(c: Comparison, designs: tuple, clusters: tuple[str | None, str | None] = (None, None)) -> bytes:
    """One SVG of the two designs (checked, lowered as `gclc render` lowers them) and the changes."""
    from ..compiler.lower import lower

    drawn = []
    for side, (path, design, cluster) in enumerate(zip((c.a, c.b), designs, clusters)):
        dot = render.topology(lower(design, cluster), render.fabric_entities(design), design)
        dot.attr(label=f"{'AB'[side]}: {path}")
        drawn.append(_nested(render.render_bytes(dot, "svg").decode("utf-8"), f"{'ab'[side]}-"))
    rows = _rows(c)
    head = MARGIN + LINE * (len(rows) + 1)
    width = MARGIN * 2 + GAP + sum(w for w, _, _ in drawn)
    height = head + MARGIN + max(h for _, h, _ in drawn)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}pt" height="{height:g}pt" '
             f'viewBox="0 0 {width:g} {height:g}">', '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{MARGIN}" y="{MARGIN + LINE - 3}" font-family="Helvetica" font-size="13" '
             f'font-weight="bold">{_e(f"A: {c.a}   B: {c.b}")}</text>']
    for i, (text, colour) in enumerate(rows, 2):
        parts.append(f'<text x="{MARGIN}" y="{MARGIN + LINE * i - 3}" font-family="monospace" font-size="11" '
                     f'fill="{colour}" xml:space="preserve">{_e(text)}</text>')
    x = MARGIN
    for w, h, svg in drawn:
        parts.append(svg.replace("<svg", f'<svg x="{x:g}" y="{head:g}"', 1))
        x += w + GAP
    parts.append("</svg>")
    return "\n".join(parts).encode("utf-8")


def _rows(c: Comparison) -> list[tuple[str, str]]:
    """The panel: a line per change, grouped as `gclc diff` groups them."""
    if not c.changes:
        return [("no differences", "#424242")]
    rows: list[tuple[str, str]] = []
    for section, title in _SECTIONS.items():
        changes = [x for x in c.changes if x.section == section]
        if changes:
            rows.append((f"{title}:", "#212121"))
            width = max(len(x.key) for x in changes)
            rows += [(f"  {x.key:<{width}}  {_show(x.key, x.a)} -> {_show(x.key, x.b)}{_ratio(x.a, x.b)}", "#1565c0")
                     for x in changes]
    if len(rows) > MAX_ROWS:
        rows = rows[:MAX_ROWS - 1] + [(f"  ... and {len(rows) - MAX_ROWS + 1} more (gclc diff prints them all)", "#616161")]
    return rows


def _nested(svg: str, prefix: str) -> tuple[float, float, str]:
    """(width, height, the `<svg>` element without its prolog, every id prefixed)."""
    svg = svg[svg.index("<svg"):]
    size = _SIZE.search(svg)
    width, height = (float(size.group(1)), float(size.group(2))) if size else (600.0, 400.0)
    head = svg[:svg.index(">") + 1]   # sized in the outer picture's units (points), not pt again
    svg = re.sub(r'\s(width|height)="[^"]*"', "", head) + svg[len(head):]
    svg = svg.replace("<svg", f'<svg width="{width:g}" height="{height:g}"', 1)
    ids = set(re.findall(r'\bid="([^"]+)"', svg))

    def rename(match: re.Match) -> str:
        name = match.group(2)
        return match.group(1) + (prefix + name if name in ids else name)

    return width, height, re.sub(r'(\bid="|url\(#|href="#)([^")]+)', rename, svg)


def _e(text: str) -> str:
    return html.escape(text, quote=False)
