"""A schedule as a picture: GPUs in use per partition, then the queue and fragmentation
over time, above a Gantt chart of the allocations (one row per job, coloured by priority, hatched where a
run ended in a preemption or a failure). SVG or PNG; drawn on an Agg canvas (the global
backend is left alone) and deterministic like the report's plots (fixed hash salt, no date).
"""

from __future__ import annotations

import io

from ..dsl.numbers import number, percent

MAX_ROWS = 60   # Gantt rows drawn; the longest-running jobs when there are more


def schedule_figure(data: dict, fmt: str = "svg") -> bytes:
    from matplotlib import colormaps, rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    jobs = [j for j in data["jobs"] if j["segments"]]
    if len(jobs) > MAX_ROWS:
        jobs = sorted(jobs, key=lambda j: -sum(s["end_s"] - s["start_s"] for s in j["segments"]))[:MAX_ROWS]
        jobs.sort(key=lambda j: (j["submit_s"], j["name"]))
    fig = Figure(figsize=(11, 4.5 + 0.22 * max(4, len(jobs))), layout="constrained")
    FigureCanvasAgg(fig)
    top, middle, gantt = fig.subplots(3, 1, sharex=True,
                                      gridspec_kw={"height_ratios": [1.4, 0.8, max(1.0, len(jobs) / 8)]})
    _usage(top, data)
    _queue(middle, data)
    _gantt(gantt, jobs, colormaps["viridis"])
    gantt.set_xlabel("hours")
    for ax in (top, middle, gantt, *middle.get_shared_x_axes().get_siblings(middle)):
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    for ax in (top, middle):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    fig.suptitle(f"{data['cluster']}: policy {data['policy']}, utilization "
                 f"{percent(data['cluster_metrics']['utilization'])}", fontsize=11)
    out = io.BytesIO()
    with rc_context({"svg.hashsalt": "gclc-schedule", "svg.fonttype": "none"}):
        fig.savefig(out, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else {})
    return out.getvalue()


def _usage(ax, data: dict) -> None:
    t = [x / 3600 for x in data["timeline"]["time_s"]]
    for name, used in data["timeline"]["used"].items():
        ax.step(t, used, where="post", label=f"{name} GPUs in use")
        ax.step(t, data["timeline"]["capacity"][name], where="post", linestyle=":", linewidth=0.8,
                label=f"{name} working GPUs")
    ax.set_ylabel("GPUs")
    ax.legend(loc="upper left", fontsize=7, ncol=2)


def _queue(ax, data: dict) -> None:
    t = [x / 3600 for x in data["timeline"]["time_s"]]
    ax.step(t, data["timeline"]["pending"], where="post", color="grey", label="jobs waiting")
    ax.set_ylabel("jobs waiting")
    ax.set_ylim(bottom=0, top=max(1, *data["timeline"]["pending"]) * 1.1)
    share = ax.twinx()
    share.step(t, data["timeline"]["fragmentation"], where="post", color="tab:red", linewidth=0.8,
               label="fragmentation")
    share.set_ylabel("free GPUs in partly used domains", fontsize=7)
    share.set_ylim(0, 1.05)
    share.yaxis.set_major_formatter(lambda v, _: percent(v))
    ax.legend(handles=ax.get_lines() + share.get_lines(), loc="upper left", fontsize=7, ncol=2)


def _gantt(ax, jobs: list[dict], colours) -> None:
    levels = sorted({j["priority"] for j in jobs})
    for row, job in enumerate(jobs):
        shade = colours(0.15 + 0.75 * levels.index(job["priority"]) / max(1, len(levels) - 1))
        for s in job["segments"]:
            ax.barh(row, (s["end_s"] - s["start_s"]) / 3600, left=s["start_s"] / 3600, color=shade,
                    hatch="//" if s["ended"] in ("preempted", "failed") else None, edgecolor="black", linewidth=0.3)
            ax.text(s["start_s"] / 3600, row, f" {s['gpus']} {s['partition']}", va="center", fontsize=6)
    ax.set_yticks(range(len(jobs)), [f"{j['name']} ({j['priority_label']})" for j in jobs], fontsize=7)
    ax.invert_yaxis()
