"""Charts of a sweep: the Pareto front over two objectives, and a tornado chart of the
sensitivities. Figures on an Agg canvas (the global backend is left alone), saved as SVG
and PNG; matplotlib is imported only when a chart is drawn."""

from __future__ import annotations

import io

from ...dsl.numbers import percent
from ...solver.sweep.pareto import OBJECTIVES
from ...solver.sweep.point import column

# how each column reads on an axis: (label, divisor)
_SCALES = {
    "time_to_train_s": ("time to train (days)", 86400.0), "tco_usd": ("cost of ownership (M USD)", 1e6),
    "capex_usd": ("capex (M USD)", 1e6), "cost_per_token_usd": ("USD per million tokens", 1e-6),
    "cost_to_train_usd": ("cost to train (M USD)", 1e6), "facility_power_w": ("facility power (MW)", 1e6),
    "energy_to_train_j": ("energy to train (MWh)", 3.6e9), "step_time_s": ("step time (s)", 1.0),
    "tokens_per_s": ("tokens/s (millions)", 1e6), "mfu": ("MFU", 1.0), "gpus": ("GPUs", 1.0),
    "goodput_tokens_per_s": ("goodput: tokens/s trained under failures (millions)", 1e6),
}
_RC = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 9, "axes.spines.top": False,
       "axes.spines.right": False, "svg.hashsalt": "gclc-sweep"}


def axis(objective: str) -> tuple[str, str, float]:
    column = OBJECTIVES[objective][0]
    label, scale = _SCALES.get(column, (column, 1.0))
    return column, label, scale


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig, fmt: str) -> bytes:
    from matplotlib import rc_context

    buffer = io.BytesIO()
    with rc_context(_RC):
        fig.savefig(buffer, format=fmt, metadata={"Date": None} if fmt == "svg" else {}, dpi=150)
    return buffer.getvalue()


def point_label(row: dict, labels) -> str:
    """How a front point is labelled on the chart: its swept values, `name=value` each."""
    return " ".join(f"{n}={row.get(column(n))}" for n in labels)


def pareto_figure(points: list[tuple[float, float, str]], front: list[tuple[float, float, str]],
                  objectives: tuple[str, str]):
    """`points`: every feasible point (x, y, label); `front` the Pareto-optimal ones."""
    (_, xlabel, xs), (_, ylabel, ys) = axis(objectives[0]), axis(objectives[1])
    fig = _figure(7.0, 4.2)
    ax = fig.add_subplot()
    ax.scatter([p[0] / xs for p in points], [p[1] / ys for p in points], s=10, color="#9e9e9e",
               label=f"{len(points)} feasible points")
    ordered = sorted(front)
    ax.plot([p[0] / xs for p in ordered], [p[1] / ys for p in ordered], "o-", color="#1565c0", markersize=5,
            drawstyle="steps-post", label=f"Pareto front ({len(front)})")
    for x, y, label in ordered[:12]:  # name the first dozen; more would overlap
        ax.annotate(label, (x / xs, y / ys), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return fig


def tornado_figure(bars: list[tuple[str, float, float]], metric: str, delta: float):
    """`bars`: (param, change at -delta, change at +delta, ...) as shares of the base value."""
    fig = _figure(7.0, 0.45 * len(bars) + 1.2)
    ax = fig.add_subplot()
    ordered = sorted(bars, key=lambda b: max(abs(b[1]), abs(b[2])))
    names = [b[0] for b in ordered]
    ax.barh(names, [b[1] * 100 for b in ordered], color="#ef6c00", label=f"param -{percent(delta)}")
    ax.barh(names, [b[2] * 100 for b in ordered], color="#1565c0", label=f"param +{percent(delta)}")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"change of {metric} (%)")
    ax.legend(loc="lower right", fontsize=8)
    return fig
