"""One training step as a timeline, per pipeline stage, from the step model (issue 27):
compute, each communicator's exposed time, the pipeline bubble, the data-parallel sync
and the optimizer, and the gradient synchronization the backward pass hides (overlap).

The step model times the last stage (the slowest: it carries the output layer) and adds
the bubble, (p - 1) / v passes of a stage, that every stage waits in 1F1B. How each stage
spends its wait follows the schedule: stage s idles s forward slots before its first
micro-batch and s backward slots after its last, and the rest of the bubble between its
warm-up and its steady state (Narayanan et al. 2021, Sec 2.2). Each row sums to the step.
"""

from __future__ import annotations


from ...model.train.dp_sync import unhidden
from ...model.ranks import rank_partition
from ..limits import WORDS
from ...dsl.records import frozen

FORWARD_SHARE = 1 / 3   # a forward pass is a third of forward + backward (backward is twice forward)
MAX_ROWS = 8            # stages drawn: every stage up to 8, else the first 4 and the last 4
# The parts of a micro-batch's pass, in the order drawn, then what closes the step.
WORK = ("compute", "recompute", "tp", "cp", "ep", "pp", "host", "data", "offload")
CLOSE = ("dp", "optimizer", "checkpoint", "step_overhead")


@frozen
class Segment:
    kind: str       # a breakdown field, "bubble" or "overlap"
    start: float    # seconds from the step's start
    length: float


@frozen
class Row:
    stage: int
    segments: tuple[Segment, ...]

    @property
    def end(self) -> float:
        return max((s.start + s.length for s in self.segments if s.kind != "overlap"), default=0.0)


def step_rows(plan) -> tuple[Row, ...]:
    """The stages drawn, each as its segments over one step of `plan.best`."""
    e = plan.best
    c, b = e.config, e.breakdown
    work = [(k, getattr(b, k)) for k in WORK if getattr(b, k) > 0]
    total_work = sum(v for _, v in work)
    warm = total_work / max(1, c.microbatches)   # the first micro-batch's pass: the warm-up
    hidden = hidden_sync(plan)
    stages = list(range(c.pp)) if c.pp <= MAX_ROWS else [*range(4), *range(c.pp - 4, c.pp)]
    rows = []
    for s in stages:
        waited = s / (c.pp - 1) if c.pp > 1 else 0.0
        lead, trail = b.bubble * waited * FORWARD_SHARE, b.bubble * waited * (1 - FORWARD_SHARE)
        middle = b.bubble - lead - trail
        t, out = 0.0, []
        t = _put(out, "bubble", t, lead)
        t = _spread(out, work, t, warm / total_work if total_work else 0.0)
        t = _put(out, "bubble", t, middle)
        t = _spread(out, work, t, 1 - (warm / total_work if total_work else 0.0))
        t = _put(out, "bubble", t, trail)
        if hidden > 0:   # the reduction the last backward pass hides, under its end
            out.append(Segment("overlap", max(0.0, t - trail - hidden), hidden))
        for k in CLOSE:
            t = _put(out, k, t, getattr(b, k))
        rows.append(Row(s, tuple(out)))
    return tuple(rows)


def _put(out: list[Segment], kind: str, t: float, length: float) -> float:
    if length > 0:
        out.append(Segment(kind, t, length))
    return t + length


def _spread(out: list[Segment], work, t: float, share: float) -> float:
    for kind, seconds in work:
        t = _put(out, kind, t, seconds * share)
    return t


def hidden_sync(plan) -> float:
    """Gradient synchronization the backward pass hides: what it takes alone less what the
    step exposes (model/train/dp_sync.py)."""
    e, job = plan.best, plan.job
    alone = unhidden(job.shape, e.config, rank_partition(job.partition, e.config.gpus))
    return max(0.0, alone - e.breakdown.dp)


def label(kind: str) -> str:
    if kind == "bubble":
        return "pipeline bubble (idle)"
    if kind == "overlap":
        return "gradient sync hidden under backward"
    return WORDS.get(kind, kind)


# One colour per kind, the step-time chart's where they meet; idle grey, overlap hatched.
_COLOURS = {"compute": "#1565c0", "recompute": "#64b5f6", "tp": "#2e7d32", "cp": "#00838f", "ep": "#6a1b9a",
            "pp": "#ef6c00", "host": "#5d4037", "data": "#9e9d24", "offload": "#ad1457", "dp": "#c62828",
            "optimizer": "#455a64", "checkpoint": "#8d6e63", "step_overhead": "#3e2723", "bubble": "#e0e0e0", "overlap": "#c62828"}


def figure(plan) -> str:
    """The timeline as an SVG element: one bar per stage drawn, segments in time order."""
    from matplotlib import rc_context
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    from ...dsl.numbers import duration
    from .plots import _RC, _figure, to_svg

    rows = step_rows(plan)
    step = plan.best.step_time
    scale, unit = (1e3, "ms") if step < 10 else (1.0, "s")
    with rc_context(_RC):
        fig = _figure(7.0, 0.42 * len(rows) + 1.6)
        ax = fig.add_subplot()
        seen: dict[str, None] = {}
        for y, row in enumerate(reversed(rows)):
            for seg in row.segments:
                seen.setdefault(seg.kind)
                overlap = seg.kind == "overlap"
                ax.barh(y - (0.3 if overlap else 0), seg.length * scale, left=seg.start * scale,
                        height=0.18 if overlap else 0.62, color="none" if overlap else _COLOURS[seg.kind],
                        edgecolor=_COLOURS[seg.kind] if overlap else "white", hatch="////" if overlap else None,
                        linewidth=0.6)
        ax.set_yticks(range(len(rows)), [f"stage {r.stage}" for r in reversed(rows)])
        ax.set_xlim(0, step * scale)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel(f"{unit} into one {duration(step)} step")
        handles = [Patch(facecolor="none" if k == "overlap" else _COLOURS[k], edgecolor=_COLOURS[k],
                         hatch="////" if k == "overlap" else None, label=label(k)) for k in seen]
        fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize=8)
        return to_svg(fig, "timeline")
