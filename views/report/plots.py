"""The report's plots: matplotlib figures drawn on an Agg canvas (the global backend is left
alone, so notebooks keep theirs) and saved as SVG text ready to inline in HTML.

Output is deterministic: a fixed `svg.hashsalt` per plot, no date in the metadata, text
kept as text (`svg.fonttype = none`), and every element id prefixed by the plot's name so
several SVGs can share one HTML page.
"""

from __future__ import annotations

import io
import re

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ...dsl.numbers import big, duration, number, percent, quantity
from ...model.compute import BEST_SHAPE, gemm_rate, hbm_rate, peak
from ..limits import MEMORY_WORDS, WORDS

COLORS = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#c62828", "#00838f", "#5d4037", "#9e9d24", "#ad1457")
_RC = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 9, "axes.spines.top": False,
       "axes.spines.right": False}


def _figure(width: float = 7.0, height: float = 2.8) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_svg(fig: Figure, name: str) -> str:
    """The figure as an `<svg>` element (no XML prolog), ids scoped by `name`."""
    buffer = io.StringIO()
    with rc_context({**_RC, "svg.hashsalt": f"gclc-{name}"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": "gclc"})
    return scope_ids(buffer.getvalue(), name)


def scope_ids(svg: str, prefix: str) -> str:
    """Drop everything before `<svg`, prefix every id and every reference to one."""
    svg = svg[svg.index("<svg"):]
    ids = set(re.findall(r'\bid="([^"]+)"', svg))

    def rename(match: re.Match) -> str:
        name = match.group(2)
        return match.group(1) + (f"{prefix}-{name}" if name in ids else name)

    return re.sub(r'(\bid="|url\(#|href="#)([^")]+)', rename, svg)


def _readable_axes(ax, y_words: bool = False) -> None:
    """Tick labels as the one formatter writes numbers (`1.5`, `30,000`, `1 M` when `y_words`)."""
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: big(v) if y_words else number(v)))


def step_breakdown(rows: tuple[tuple[str, float], ...], step: float) -> str:
    """Horizontal bars: seconds per step by component (zero components left out)."""
    rows = tuple((k, v) for k, v in rows if v > 0)
    with rc_context(_RC):
        fig = _figure(7.0, 0.45 * len(rows) + 0.9)
        ax = fig.add_subplot()
        names = [WORDS.get(k, k) for k, _ in rows][::-1]
        values = [v for _, v in rows][::-1]
        bars = ax.barh(names, values, color=[COLORS[i % len(COLORS)] for i in range(len(rows))][::-1])
        ax.bar_label(bars, labels=[f"{duration(v)} ({percent(v / step)})" for v in values], padding=3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
        ax.set_xlabel("seconds per step")
        ax.set_xlim(0, max(values) * 1.35)
        return to_svg(fig, "step")


def memory(rows: tuple[tuple[str, float], ...], hbm: float, hbm_text: str | None = None) -> str:
    """One stacked bar of bytes per GPU by category against the chip's HBM capacity (`hbm`,
    what it fits in), the line labelled as the data sheet states it (`hbm_text`)."""
    rows = tuple((k, v) for k, v in rows if v > 0)
    with rc_context(_RC):
        fig = _figure(7.0, 2.2)
        ax = fig.add_subplot()
        left = 0.0
        for i, (name, value) in enumerate(rows):
            ax.barh(["per GPU"], [value / 1e9], left=left / 1e9, color=COLORS[i % len(COLORS)],
                    label=f"{MEMORY_WORDS.get(name, name)} {quantity(value, 'B')}")
            left += value
        ax.axvline(hbm / 1e9, color="#c62828", linestyle="--", linewidth=1.5, label=f"HBM {hbm_text or quantity(hbm, 'B')}")
        ax.set_xlim(0, max(left, hbm) / 1e9 * 1.05)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
        ax.set_xlabel("GB per GPU")
        fig.legend(loc="outside lower center", ncols=4, frameon=False)
        return to_svg(fig, "memory")


def roofline(chip, precision: str, points: tuple = (), name: str = "roofline") -> str:
    """Attainable FLOP/s against arithmetic intensity: the dense peak, the model's GEMM
    ceiling (its rate at the best shape) and the HBM slopes, with the plan's points
    (views/report_roofline.Point: a label, FLOP per byte, FLOP/s achieved)."""
    top, sustained = peak(chip, precision), gemm_rate(chip, precision, *BEST_SHAPE)
    xs = [10 ** (i / 8) for i in range(-8, 33)]
    with rc_context(_RC):
        fig = _figure(9.5, 3.8)
        ax = fig.add_subplot()
        ax.loglog(xs, [min(top, chip.hbm_bandwidth * x) for x in xs], color="#424242",
                  label=f"{chip.name}: dense {precision} peak, HBM peak")
        ax.loglog(xs, [min(sustained, hbm_rate(chip) * x) for x in xs], color="#1565c0", linestyle="--",
                  label="best-shape GEMM rate, HBM streaming rate")
        ridge = top / chip.hbm_bandwidth
        ax.axvline(ridge, color="#9e9e9e", linewidth=0.8, linestyle=":")
        ax.annotate(f"ridge {number(ridge)} FLOP/B", (ridge, top / 3000), rotation=90, color="#616161", va="bottom",
                    xytext=(3, 0), textcoords="offset points")
        for i, point in enumerate(points):
            ax.plot([point.intensity], [point.rate], "os^Dv<>p"[i % 8], color=COLORS[(i + 2) % len(COLORS)],
                    label=f"{point.label}: {number(point.intensity)} FLOP/B, {percent(point.rate / top)} of peak")
        ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
        ax.set_ylabel("attainable rate")
        # decades as the one formatter writes them (`1,000`, `100 TFLOPS`), not `10^3`
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: quantity(v, "FLOPS")))
        ax.set_ylim(top / 1e4, top * 2)
        fig.legend(loc="outside right center", frameon=False, fontsize=8)
        return to_svg(fig, name)


def throughput_curve(points: tuple[tuple[float, float], ...], chosen: tuple[float, float] | None,
                     budget: float | None, infeasible: tuple[float, ...] = ()) -> str:
    """Tokens per second against the facility power budget (watts); `infeasible`: budgets
    nothing runs within, marked on the axis (never drawn as a 0 tokens/s point of the curve)."""
    with rc_context(_RC):
        fig = _figure(7.0, 3.0)
        ax = fig.add_subplot()
        ax.plot([p / 1e6 for p, _ in points], [t for _, t in points], "o-", color="#1565c0",
                label="the plan's layout under the budget")
        if infeasible:
            ax.plot([b / 1e6 for b in infeasible], [0.0] * len(infeasible), "x", color="#c62828", markersize=9,
                    clip_on=False, label="infeasible: nothing runs within the budget")
        if chosen is not None:
            ax.plot([chosen[0] / 1e6], [chosen[1]], "*", markersize=12, color="#ef6c00", label="the plan above")
        if budget:
            ax.axvline(budget / 1e6, color="#c62828", linestyle="--", linewidth=1, label="design budget")
        _readable_axes(ax, y_words=True)
        ax.set_xlabel("facility power budget (MW)")
        ax.set_ylabel("tokens/s")
        ax.legend(frameon=False)
        return to_svg(fig, "power-curve")
