"""`gclc report`: one self-contained HTML file about a design and its plan.

Inline CSS, inline SVG (matplotlib plots and graphviz diagrams), no script and nothing
fetched at view time. Sections: the design summary (every derived number with its
formula), the plan and its metrics, the step-time and memory breakdowns, the chip's
roofline, throughput against the power budget, the runner-up plans and the three
diagrams. A design without a plannable train job gets the summary and the diagrams.
"""

from __future__ import annotations

import html


from .. import render
from ...compiler.design import Design
from ...compiler.ir import ClusterGraph
from ...compiler.metrics import explain
from ...dsl.numbers import big, binary_bytes, duration, hbm, memory, memory_of, number, percent, quantity, span
from ..plan_json import parallelism
from ..limits import MEMORY_WORDS, WORDS
from ..plan_text import config_words, runner_difference
from .headline import CSS as HEADLINE_CSS, headline_html, outcome_headline_html
from ...dsl.records import frozen

CSS = """
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #212121; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 2px solid #e0e0e0; margin-top: 2em; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 1em 0; }
.card { background: #f5f7fa; border-radius: 8px; padding: 0.6em 1em; min-width: 9em; }
.card b { display: block; font-size: 1.3em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
td, th { border-bottom: 1px solid #eeeeee; padding: 0.25em 0.8em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.formula { color: #616161; font-family: "DejaVu Sans Mono", monospace; font-size: 0.85em; }
.note { color: #6d4c41; background: #fff8e1; padding: 0.4em 0.8em; border-radius: 4px; }
figure { margin: 1em 0; overflow-x: auto; } figure svg { max-width: none; height: auto; }  /* natural size: text legible at 100 % zoom; wide diagrams scroll */
figcaption { color: #616161; font-size: 0.9em; }
"""


@frozen
class Context:
    design: Design
    graph: ClusterGraph
    plan: object | None          # solver.train.plan.Plan
    note: str                    # why there is no plan, when there is none
    source: str
    other: str = ""              # the text of a serve or heterogeneous plan (no train plan)
    outcome: object | None = None  # that serve or heterogeneous plan (solver.serve.plan / solver.split.plan)


def plan_error_band(plan) -> dict[str, tuple[float, float]]:
    """HOOK (error band): the uncertainty of the plan's predictions.

    `solver.train.plan.Plan` may later carry `error_band`: a mapping from a `plan --json` metric
    key (`step_time_s`, `tokens_per_s`, `mfu`, ...) to a (low, high) pair in that metric's
    units. Until it does, this returns {} and the report says so in one line.
    """
    band = getattr(plan, "error_band", None)
    return dict(band) if band else {}


def report_html(design: Design, job: str | None = None, objective: str | None = None, source: str = "") -> str:
    """The report as HTML text. `job` names the train job (a missing name raises `JobError`)."""
    context = _context(design, job, objective, source)
    planned = context.plan is not None and context.plan.best is not None
    body = [_header(context)] + ([headline_html(context.plan)] if planned and not context.other else [])
    body += [_outcome_headline(context.outcome)] if context.outcome is not None else []
    body += [_design_section(context.graph), _cost_section(context)]
    if context.other:
        body.append(_section("Plan", f"<pre>{_e(context.other)}</pre>"))
        body += _rl_section(context.outcome)
        body += _serve_load_section(context.outcome)
    elif context.plan is not None and context.plan.best is not None:
        body += _plan_sections(context)
    else:
        body.append(_section("Plan", _infeasible(context.plan) if context.plan is not None else _note(context.note)))
    body.append(_roofline_section(context))
    body += [_schedule_section(design)] if _shared(design) else []
    body.append(_diagrams(context))
    title = f"gclc report: {context.graph.name}"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_e(title)}</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>{CSS}{HEADLINE_CSS}</style>\n</head>\n"
            "<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


def plan_html(plan) -> str:
    """A plan as an HTML fragment (for Jupyter): the text summary and the placement diagram."""
    from ..plan_text import plan_text
    from .plots import scope_ids

    svg = render.plan_svg(plan)
    figure = _figure(scope_ids(svg, "placement"), "placement") if svg else ""
    return f"<div><pre>{_e(plan_text(plan))}</pre>{figure}</div>"


def _context(design: Design, job_name: str | None, objective: str | None, source: str) -> Context:
    from ...solver.train.plan import plan as make_plan
    from ...compiler.lower import lower
    from ...model.job import JobError, job_from_entity, select_job

    try:
        kind, entity = select_job(design, job_name)
        job = job_from_entity(entity) if kind == "train" else None
    except JobError as error:
        if job_name is not None:
            raise
        return Context(design, lower(design), None, str(error), source)
    if job is None:     # a job across partitions or a serve job: planned whole
        from ...solver.jobs import plan_design
        from ..plan_text import outcome_text

        outcome = plan_design(design, job_name, objective)
        return Context(design, lower(design), None, "", source, outcome_text(outcome), outcome)
    if objective is None:
        from ...solver.jobs import job_objective
        objective = job_objective(job.entity)
    return Context(design, job.graph, make_plan(job, objective), "", source)


# ----------------------------------------------------------------- HTML pieces


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _section(title: str, *parts: str) -> str:
    return f"<section>\n<h2>{_e(title)}</h2>\n" + "\n".join(parts) + "\n</section>"


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def _table(head: tuple[str, ...], rows, numeric: tuple[int, ...] = (1,), formula: int | None = None) -> str:
    def cell(i: int, value: object) -> str:
        css = ' class="num"' if i in numeric else (' class="formula"' if i == formula else "")
        return f"<td{css}>{_e(value)}</td>"
    lines = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    lines += ["<tr>" + "".join(cell(i, v) for i, v in enumerate(row)) + "</tr>" for row in rows]
    return "\n".join(lines + ["</table>"])


def _figure(svg: str, caption: str) -> str:
    return f"<figure>\n{svg}\n<figcaption>{_e(caption)}</figcaption>\n</figure>"


def _cards(pairs) -> str:
    return '<div class="cards">' + "".join(f'<div class="card">{_e(k)}<b>{_e(v)}</b></div>' for k, v in pairs) + "</div>"


def _header(c: Context) -> str:
    rows = {m.key: m for m in explain(c.graph)}
    peaks = [m for k, m in rows.items() if k.startswith("peak.")]
    peak = next((m for m in peaks if m.key == "peak.bf16"), peaks[0] if peaks else None)
    pairs = [("accelerators", f"{c.graph.gpus:,}"), ("HBM", (rows.get("hbm.nominal") or rows["hbm.capacity"]).text),
             ("facility power", rows["power.facility"].text)]
    if peak is not None:
        pairs.insert(1, (peak.label, peak.text))
    if c.graph.power_budget:
        pairs.append(("power budget", render.fmt(c.graph.power_budget, "W")))
    where = f" from <code>{_e(c.source)}</code>" if c.source else ""
    return f"<h1>{_e(c.graph.name)}</h1>\n<p>gclc report{where}.</p>\n" + _cards(pairs)


def _design_section(graph: ClusterGraph) -> str:
    rows = [(m.label, m.text, m.formula) for m in explain(graph)]
    return _section("Design", "<p>Every derived number of the cluster, with the formula it comes from "
                              "(as <code>gclc explain</code>).</p>",
                    _table(("quantity", "value", "formula"), rows, formula=2))


def _cost_section(c: Context) -> str:
    """The bill of materials and, with an `economics` block, the cost of ownership."""
    from ...compiler.lower import pick_cluster
    from ...compiler.cost.tco import cost_metrics

    rows = [(m.label, m.text, m.formula) for m in cost_metrics(pick_cluster(c.design, c.graph.name), c.graph)]
    return _section("Bill of materials and cost", "<p>Counts from the topology, prices from the parts' "
                                                  "<code>price</code> fields, the cost of ownership from the "
                                                  "cluster's <code>economics</code> block.</p>",
                    _table(("item", "value", "formula"), rows, formula=2))


# ----------------------------------------------------------------- plan


def _plan_sections(c: Context) -> list[str]:
    from . import plots as report_plots

    p, e = c.plan, c.plan.best
    chip = p.job.partition.node.accelerator
    return [
        _section("Plan", _plan_intro(p), _table(("dimension", "value"), _settings(e)), _metrics_table(p)),
        _section("Step time", _figure(report_plots.step_breakdown(e.breakdown.rows(), e.step_time),
                                      f"The parts of one {duration(e.step_time)} step on the critical path."),
                 _table(("component", "time", "share"),
                        [(WORDS.get(k, k), duration(v), percent(v / e.step_time)) for k, v in e.breakdown.rows() if v],
                        (1, 2))),
        _timeline_section(p),
        _section("Memory per GPU", _figure(report_plots.memory(e.memory.rows(), e.hbm, hbm(chip.hbm_datasheet, e.hbm)),
                                           f"{memory_of(e.memory.total, chip.hbm_datasheet, e.hbm)} HBM."),
                 _table(("category", "bytes"), [(MEMORY_WORDS.get(k, k), memory(v, binary_bytes(chip.hbm_datasheet)))
                                                for k, v in e.memory.rows()])),
        _power_curve_section(p),
        _section("Runners-up", _runners(p)),
    ]


def _timeline_section(p) -> str:
    from . import timeline

    c = p.best.config
    shown = "every stage" if c.pp <= timeline.MAX_ROWS else "the first and last four stages"
    # the plan's own schedule (its JSON's `schedule`): an interleaved plan's bubble is (p - 1) / v
    # passes, drawn in 1F1B's warm-up and drain (views/report/timeline.py)
    schedule = ("the GPipe schedule" if c.gpipe else
                f"the interleaved schedule ({c.virtual_stages} virtual stages, drawn as 1F1B's warm-up and drain)"
                if c.virtual_stages > 1 else "the 1F1B schedule")
    caption = (f"One {duration(p.best.step_time)} step per pipeline stage ({shown} of {c.pp}), from the step "
               f"model: each micro-batch pass's compute and exposed communication, the bubble where a stage "
               f"waits in {schedule}, then gradient synchronization and the optimizer; hatched, the "
               f"synchronization the last backward pass hides.")
    return _section("Step timeline", _figure(timeline.figure(p), caption))


def _plan_intro(p) -> str:
    job = p.job
    return (f"<p>Job <b>{_e(job.name)}</b> on <b>{_e(job.graph.name)}</b>"
            + (f" partition <b>{_e(job.partition.name)}</b>" if len(job.graph.partitions) > 1 else "")
            + f": objective {_e(p.objective)}, {_e(p.status)} over {p.considered:,} configurations. "
            f"Binds: {_e('; '.join(p.binding))}.</p>")


def _metrics_table(p) -> str:
    e, job = p.best, p.job
    rows = [("step_time_s", "step time", duration(e.step_time)),
            ("tokens_per_s", "throughput", f"{big(e.tokens_per_s)} tokens/s"),
            ("tokens_per_s_per_gpu", "per GPU", f"{number(e.tokens_per_s_per_gpu)} tokens/s"),
            ("mfu", "MFU", percent(e.mfu)), ("hfu", "HFU", percent(e.hfu)),
            ("memory_per_gpu_bytes", "memory per GPU", quantity(e.memory.total, "B")),
            ("power_w", "power", quantity(p.power.total, "W")),
            ("energy_per_token_j", "energy per token", quantity(p.energy_per_token, "J"))]
    if job.tokens:
        rows.append(("time_to_train_s", "time to train",
                     f"{duration(job.tokens / e.tokens_per_s)} for {big(job.tokens)} tokens"))
    band = plan_error_band(p)
    if not band:
        return _table(("metric", "value"), [r[1:] for r in rows]) + _note(
            "No error band for this plan.")
    return _table(("metric", "value", "range"),  # 80 % bands from the calibration residuals
                  [(label, value, _band(key, *band[key]) if key in band else "")
                   for key, label, value in rows], (1, 2))


def _infeasible(p) -> str:
    smallest = p.smallest
    if smallest is None:
        return _note(f"No valid configuration of {p.job.name} on {p.job.gpus:,} GPUs.")
    left = getattr(getattr(p, "infeasibility", None), "left_out", "")
    return _note(f"Infeasible: {p.job.name} needs at least {render.fmt(smallest.memory.total, 'B')} per GPU "
                 f"with the best configuration for memory; the chip has "
                 f"{hbm(p.job.partition.node.accelerator.hbm_datasheet, smallest.hbm)}."
                 + (f" {left[0].upper()}{left[1:]}." if left else ""))


def _runners(p) -> str:
    if not p.runners_up:
        return _note("No other configuration fits.")
    rows = []
    for rank, r in enumerate((p.best, *p.runners_up), 1):
        par = parallelism(r)
        differs = "the plan" if rank == 1 else runner_difference(p.best, r).strip()[len("(differs: "):-1] or "—"
        rows.append((f"#{rank}", *(par[k] for k in ("tp", "pp", "dp", "cp", "ep", "vp", "microbatch")),
                     par["recompute"], f"ZeRO-{par['zero']}", ",".join(r.config.order), duration(r.step_time),
                     percent(r.mfu), quantity(r.memory.total, "B"), differs))
    head = ("rank", "tp", "pp", "dp", "cp", "ep", "vp", "mb", "recompute", "ZeRO", "rank order", "step", "MFU",
            "memory", "differs from the plan in")
    return _table(head, rows, numeric=tuple(range(1, 8)) + (11, 12, 13))


def _settings(e) -> list[tuple[str, str]]:
    """The parallel layout as a table: the degrees, then the rest in words."""
    par = parallelism(e)
    rows = [(k, number(par[k])) for k in ("tp", "pp", "dp", "cp", "ep", "vp")]
    return rows + [("GPUs", number(e.config.gpus)), ("micro-batches per step", number(par["microbatches"])),
                   ("settings", config_words(e)), ("rank order", ", ".join(e.config.order) + " (innermost first)")]


def _band(key: str, low: float, high: float) -> str:
    """An 80 % band in its metric's unit: `33.1–41.9 s`, `78,222–100,210 tokens/s`, `35–45%`."""
    unit = {"step_time_s": "s", "mfu": "%", "hfu": "%", "power_w": "W", "memory_per_gpu_bytes": "B",
            "energy_per_token_j": "J"}.get(key, "tokens/s" if key.startswith("tokens_per_s") else "")
    return span(low, high, unit)


def _power_curve_section(p) -> str:
    """Throughput against the power budget: the plan's layout at each budget, its best whole
    replica count and clock step within it (solver/power/section.py `layout_curve`)."""
    from ...solver.power.section import layout_curve
    from . import plots as report_plots

    graph = p.job.graph
    top = max(graph.power_budget or 0.0, p.power.total)
    budgets = [top * (0.2 + 0.1 * i) for i in range(11)]
    curve = layout_curve(p.job, p.best, budgets, p.objective)
    points = tuple((c.budget, c.tokens_per_s) for c in curve if c.feasible)
    infeasible = tuple(c.budget for c in curve if not c.feasible)
    svg = report_plots.throughput_curve(points, (p.power.total, p.best.tokens_per_s), graph.power_budget, infeasible)
    return _section("Throughput against power budget", _figure(
        svg, "Tokens/s of the plan's layout under each facility budget: its best whole replica count and "
             "clock step (a power cap per GPU) within the budget, from the step model's estimates as the search "
             "makes them; the star is the plan above. Budgets the layout cannot run within are marked "
             "infeasible at the axis, not drawn as measurements."))


def _roofline_section(c: Context) -> str:
    """Where the plan runs on its chip: one figure per chip it uses (views/report/roofline.py)."""
    from . import plots as report_plots
    from .roofline import rooflines

    planned = c.plan if c.plan is not None and c.plan.best is not None else None
    figures, note = rooflines(planned, c.outcome, c.graph)
    return _section("Roofline", *([_note(note)] if note else []),
                    *(_figure(report_plots.roofline(f.chip, f.precision, f.points, f.name), f.caption)
                      for f in figures))


# ----------------------------------------------------------------- schedule


def _shared(design: Design) -> bool:
    """A design that describes a shared cluster: a workload, or jobs with a priority or an arrival."""
    return any(e.kind == "workload" or (e.kind == "train" and ("priority" in e.record or "submit" in e.record))
               for e in design.local())


def _schedule_section(design: Design) -> str:
    """`gclc schedule` under the priority policy: the summary and the utilization/Gantt plot."""
    from ...solver.schedule.jobs import ScheduleError, build
    from ...solver.schedule.milp import solve
    from ...solver.schedule.catalog import POLICIES
    from ...solver.schedule.simulate import simulate
    from .plots import scope_ids
    from ..schedule import schedule_json, schedule_text
    from ..schedule_plot import schedule_figure

    try:
        workload = build(design)
    except ScheduleError as error:
        return _section("Schedule", _note("Omitted: " + "; ".join(d.summary for d in error.diagnostics) + "."))
    outcome = simulate(workload, POLICIES["priority"], seed=0, epochs=3)
    data = schedule_json(workload, outcome, [solve(e) for e in outcome.epochs])
    svg = scope_ids(schedule_figure(data, "svg").decode("utf-8"), "schedule")
    return _section("Schedule", "<p>Every job of the design on the shared cluster, simulated under the priority "
                    "policy with failures (seed 0); `gclc schedule` compares the policies.</p>",
                    f"<pre>{_e(schedule_text(data))}</pre>",
                    _figure(svg, "GPUs in use and jobs waiting over time; one row per job, hatched where a run "
                                 "ended in a preemption or a failure."))


# ----------------------------------------------------------------- diagrams


def _outcome_headline(outcome) -> str:
    """A heterogeneous or serve plan's headline; nothing when it has no plan (the Plan section says why)."""
    from ...solver.split.plan import HeteroPlan
    from ..plan_json import outcome_json

    if getattr(outcome, "best", None) is None:
        return ""
    from ..power_view import draws

    tokens = outcome.plans[0].job.tokens if isinstance(outcome, HeteroPlan) and outcome.plans else None
    drawn = draws(outcome)
    # the GPUs' own draw, as a train plan's headline and the power view give it (GPU-weighted over
    # partitions and pools), not the facility power over the GPUs (hosts and cooling included)
    per_gpu = (sum(d.gpus * d.watts for d in drawn[1]) / sum(d.gpus for d in drawn[1])
               if drawn is not None and any(d.gpus for d in drawn[1]) else None)
    return outcome_headline_html(outcome_json(outcome), tokens, per_gpu)


def _rl_section(outcome) -> list[str]:
    """An rl plan's step, pool by pool (views/report/rl_timeline.py)."""
    if getattr(outcome, "job_kind", "") != "rl" or outcome.best is None:
        return []
    from ..plan_json import outcome_json
    from .rl_timeline import rl_section

    return [rl_section(outcome_json(outcome))]


def _serve_load_section(outcome) -> list[str]:
    """A serve plan with a demand: its latency CDF and latency against offered load."""
    from .serve_load import figures

    drawn = figures(outcome)
    return [_section("Serving under load", *(_figure(svg, caption) for svg, caption in drawn))] if drawn else []


def _diagrams(c: Context) -> str:
    from .diagrams import diagrams

    planned = c.plan if c.plan is not None and c.plan.best is not None else None
    try:
        figures = diagrams(c.design, c.graph, planned, c.outcome)
    except render.DotMissing as error:
        return _section("Diagrams", _note(f"Omitted: {error}."))
    return _section("Diagrams", *(_figure(svg, caption) for svg, caption in figures))
