"""The report's RL section: one step of an rl plan, pool by pool, as a Gantt chart (what each
pool does when: generate, score, train, sync, offload, idle; model/rl/step.py's timeline),
with the phases' table and why the pools go where they go."""

from __future__ import annotations

import html

from ...dsl.numbers import duration, number, percent
from .plots import COLORS, _figure, _readable_axes, to_svg

PHASE_COLORS = {"generate": COLORS[0], "score": COLORS[3], "train": COLORS[1], "sync": COLORS[2],
                "offload": COLORS[5], "idle": "#e0e0e0"}
POOL_WORDS = {"generate": "generation pool", "train": "training pool", "colocated": "colocated pool"}


def timeline_svg(data: dict) -> str:
    """The step's timeline from the plan's JSON (`rl.timeline`), one row per pool."""
    rows = data["rl"]["timeline"]
    pools = list(dict.fromkeys(r["pool"] for r in rows))
    fig = _figure(7.5, 0.9 + 0.6 * len(pools))
    ax = fig.add_subplot()
    seen = set()
    for y, pool in enumerate(reversed(pools)):
        for r in (r for r in rows if r["pool"] == pool):
            label = r["phase"] if r["phase"] not in seen else None
            seen.add(r["phase"])
            ax.barh(y, r["end_s"] - r["start_s"], left=r["start_s"], height=0.6, color=PHASE_COLORS[r["phase"]],
                    edgecolor="white", label=label)
    _readable_axes(ax)
    ax.set_yticks(range(len(pools)), [f"{POOL_WORDS[p]}\n{_where(data, p)}" for p in reversed(pools)])
    ax.set_xlabel("seconds into the step")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(pools) > 1 else -0.6), ncol=6, frameon=False)
    return to_svg(fig, "rl-timeline")


def _where(data: dict, pool: str) -> str:
    place = data["placement"]
    side = place["train"] if pool in ("train", "colocated") else place["generate"]
    return f"{side['gpus']} GPUs of {side['partition']}"


def rl_section(data: dict) -> str:
    """The section's HTML: the timeline, the phases and the alternatives."""
    rl = data["rl"]
    mode = ("colocated (the pools take turns)" if rl["placement"] == "colocated" else
            f"disaggregated, {'asynchronous (staleness ' + str(rl['staleness']) + ')' if rl['staleness'] else 'synchronous'}")
    phases = "".join(f"<tr><td>{html.escape(k)}</td><td class=\"num\">{duration(v)}</td>"
                     f"<td class=\"num\">{percent(v / data['step_time_s'])}</td></tr>"
                     for k, v in rl["phases_s"].items() if v)
    why = "".join(f"<li>{html.escape(w)}</li>" for w in rl["why"])
    return ("<section>\n<h2>RL step</h2>\n"
            f"<p>{number(rl['samples_per_step'])} samples a step, {mode}; one step takes "
            f"{duration(data['step_time_s'])} ({number(rl['samples_per_s'])} samples/s).</p>\n"
            f"<figure>\n{timeline_svg(data)}\n<figcaption>One step, pool by pool: what each pool does when "
            "(the generation phase waits for its slowest sample unless the pools overlap).</figcaption>\n</figure>\n"
            "<table>\n<tr><th>phase</th><th>time</th><th>of the step</th></tr>\n" + phases + "</table>\n"
            + (f"<p>Why the pools go where they go:</p>\n<ul>{why}</ul>\n" if why else "") + "</section>")
