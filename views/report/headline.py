"""The report's headline: what an architect asks first, before any table — how long the
job trains, how fast, how well it uses the chips, what it draws and burns, what it costs
(when the design prices its parts), and what limits the design, in words."""

from __future__ import annotations

import html
import re

from ...compiler.cost.tco import job_cost
from ...dsl.numbers import big, duration, number, percent, quantity
from ..limits import limits_sentence

CSS = """
.headline { border: 2px solid #1565c0; border-radius: 10px; padding: 0.8em 1.2em; margin: 1em 0 1.5em; }
.headline h2 { border: none; margin: 0 0 0.4em; font-size: 1.25em; }
.headline .figures { display: flex; flex-wrap: wrap; gap: 0.6em 2.2em; }
.headline .figure { min-width: 8em; } .headline .figure span { color: #616161; font-size: 0.9em; }
.headline .figure b { display: block; font-size: 1.6em; color: #0d47a1; }
.headline .limits { margin: 0.8em 0 0; font-size: 1.05em; }
"""


def headline_html(plan) -> str:
    """The headline block of a planned train job (`plan.best` is set)."""
    e, job = plan.best, plan.job
    figures = []
    if job.tokens:
        figures.append(("time to train", duration(job.tokens / e.tokens_per_s), f"{big(job.tokens)} tokens"))
    figures += [("throughput", f"{big(e.tokens_per_s)} tokens/s", f"step {duration(e.step_time)}"),
                ("MFU", percent(e.mfu), f"{e.config.gpus:,} GPUs"),
                ("power", quantity(plan.power.total, "W"), f"{quantity(plan.power.per_gpu, 'W')} per GPU"
                 + (f" at {percent(plan.clock)} clock" if e.config.power_cap is not None else ""))]
    if job.tokens:
        energy = plan.power.total * job.tokens / e.tokens_per_s
        figures.append(("energy to train", quantity(energy / 3600, "Wh"), f"{quantity(plan.energy_per_token, 'J')} per token"))
    else:
        figures.append(("energy", f"{quantity(plan.energy_per_token, 'J')} per token", "at the facility"))
    cost = job_cost(job.entity, job.graph, e.tokens_per_s, job.tokens, plan.power.total)
    figures += _cost_figure(cost)
    return _block(job.name, figures, limits_sentence(plan))


def _cost_figure(cost: dict | None, tokens: str = "tokens") -> list[tuple[str, str, str]]:
    """The money figure (compiler/cost/tco.py): to train the job's tokens, else per million `tokens`;
    "(at least)" when a part has no price; nothing without the cluster's `economics`."""
    if cost is None:
        return []
    bound = "" if cost["complete"] else " (at least)"
    of = f"TCO {quantity(cost['tco_usd'], 'USD')}" + (f" ({percent(cost['gpu_share'])} of the cluster)"
                                                      if "gpu_share" in cost else "")
    if "cost_to_train_usd" in cost:
        return [("cost to train", quantity(cost["cost_to_train_usd"], "USD") + bound, of)]
    return [(f"cost per million {tokens}", f"{number(cost['cost_per_token_usd'] * 1e6)} USD" + bound, of)]


def outcome_headline_html(data: dict, tokens: float | None = None, per_gpu: float | None = None) -> str:
    """The headline of a heterogeneous or serve plan, from its `plan --json` contract
    (`views/plan_json.py`): the same figures where they apply, a serve plan's latencies,
    and what binds it. `tokens`: a training job's work, for its time and energy to train;
    `per_gpu`: the watts each of its GPUs draws (views/power_view.py `draws`), the figure a
    train plan's headline gives per GPU (without it: the facility power per GPU, said so)."""
    rate, gpus = data["tokens_per_s"], data["gpus"]
    figures = []
    if tokens and rate:
        figures.append(("time to train", duration(tokens / rate), f"{big(tokens)} tokens"))
    figures.append(("throughput", f"{big(rate)} tokens/s", f"{number(data['requests_per_s'])} requests/s"
                    if "requests_per_s" in data else f"step {duration(data['step_time_s'])}"))
    if "latency" in data:
        ttft, tpot = data["latency"]["ttft"], data["latency"]["tpot"]
        figures += [("time to first token (p90)", duration(ttft["p90"]), f"median {duration(ttft['p50'])}"),
                    ("time per output token (p90)", duration(tpot["p90"]), f"median {duration(tpot['p50'])}")]
    if "engine" in data:    # a serve plan runs on a named engine and release
        figures.append(("engine", data["engine"]["name"], data["engine"]["releases"]))
    figures += [("MFU", percent(data["mfu"]), f"{number(gpus)} GPUs"),
                ("power", quantity(data["power_w"], "W"),
                 f"{quantity(per_gpu, 'W')} per GPU" if per_gpu is not None else
                 f"{quantity(data['power_w'] / gpus, 'W')} per GPU at the facility")]
    if tokens and rate:
        figures.append(("energy to train", quantity(data["power_w"] * tokens / rate / 3600, "Wh"),
                        f"{quantity(data['energy_per_token_j'], 'J')} per token"))
    else:
        figures.append(("energy", f"{quantity(data['energy_per_token_j'], 'J')} per token", "at the facility"))
    figures += _cost_figure(data.get("cost"), "output tokens" if "latency" in data or "pools" in data else "tokens")
    binding = "; ".join(_SLO.sub(lambda m: f"the {m[2]} {_SLO_WORDS[m[1]]}", line) for line in data.get("binding") or ())
    binding = re.sub(r"^gpus:", "GPUs:", binding)
    limits = f"{binding[0].upper()}{binding[1:]}." if binding else "No limit binds: the plan meets every one."
    return _block(data["job"], figures, limits)


_SLO = re.compile(r"\b(ttft|tpot|e2e)\.(p\d+|mean)\b")
_SLO_WORDS = {"ttft": "time to first token", "tpot": "time per output token", "e2e": "end-to-end latency"}


def _block(name: str, figures: list[tuple[str, str, str]], limits: str) -> str:
    cells = "".join(f'<div class="figure" data-figure="{_e(figure)}"><span>{_e(figure)}</span><b>{_e(value)}</b>'
                    f'<span>{_e(detail)}</span></div>' for figure, value, detail in figures)
    return (f'<section class="headline" id="headline">\n<h2>{_e(name)}: the answer</h2>\n'
            f'<div class="figures">{cells}</div>\n'
            f'<p class="limits"><b>What limits it:</b> {_e(limits)}</p>\n</section>')


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
