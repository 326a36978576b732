"""The report's headline: what an architect asks first, before any table — how long the
job trains, how fast, how well it uses the chips, what it draws and burns, what it costs
(when the design prices its parts), and what limits the design, in words."""

from __future__ import annotations

import html

from ..compiler.tco import job_cost
from ..dsl.numbers import big, duration, percent, quantity
from .limits import limits_sentence

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
                ("power", quantity(plan.power.total, "W"), f"{quantity(plan.power.per_gpu, 'W')} per GPU")]
    if job.tokens:
        energy = plan.power.total * job.tokens / e.tokens_per_s
        figures.append(("energy to train", quantity(energy / 3600, "Wh"), f"{quantity(plan.energy_per_token, 'J')} per token"))
    else:
        figures.append(("energy", f"{quantity(plan.energy_per_token, 'J')} per token", "at the facility"))
    cost = job_cost(job.entity, job.graph, e.tokens_per_s, job.tokens)
    if cost is not None:
        bound = "" if cost["complete"] else " (at least)"
        if "cost_to_train_usd" in cost:
            figures.append(("cost to train", quantity(cost["cost_to_train_usd"], "USD") + bound,
                            f"TCO {quantity(cost['tco_usd'], 'USD')}"))
        else:
            figures.append(("cost per million tokens", f"{cost['cost_per_token_usd'] * 1e6:,.2f} USD" + bound,
                            f"TCO {quantity(cost['tco_usd'], 'USD')}"))
    cells = "".join(f'<div class="figure" data-figure="{_e(name)}"><span>{_e(name)}</span><b>{_e(value)}</b>'
                    f'<span>{_e(detail)}</span></div>' for name, value, detail in figures)
    return (f'<section class="headline" id="headline">\n<h2>{_e(job.name)}: the answer</h2>\n'
            f'<div class="figures">{cells}</div>\n'
            f'<p class="limits"><b>What limits it:</b> {_e(limits_sentence(plan))}</p>\n</section>')


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
