"""A serve plan under load, drawn from its simulation: the latency distribution (CDF) of the
planned operating point, and latency against offered load around it, where the knee shows.

The operating point is the plan's own outcome (the run the planner confirmed), never a new
estimate; the curve's other points are the same pools under the same requests arriving faster
or slower (solver/serve/knee.py `plan_run`), so the curve passes through the plan's point."""

from __future__ import annotations

from matplotlib import rc_context
from matplotlib.ticker import FuncFormatter

from ...dsl.numbers import duration, number, percent
from ...solver.serve.knee import load_curve, plan_run
from ...solver.serve.outcome import slo_percentile
from .plots import COLORS, _RC, _figure, to_svg

LOADS = (0.25, 0.5, 0.75, 0.9, 1.1, 1.25, 1.5)    # offered rates around the plan's, as shares of it
PERCENTILES = (50, 99)


def figures(plan) -> list[tuple[str, str]]:
    """(svg, caption) of the CDF and the load curve; none for a plan without a simulated demand."""
    if getattr(plan, "job_kind", "") != "serve" or plan.outcome is None or not plan.demand or not plan.demand.rate:
        return []
    rate = plan.demand.rate
    curve = sorted(load_curve(plan_run(plan), [rate * share for share in LOADS]) + [(rate, plan.outcome)],
                   key=lambda point: point[0])
    slo = plan.limits.slo
    return [(latency_cdf(plan.outcome, slo), f"TTFT and TPOT of every measured request at the planned "
             f"{number(rate)} requests/s: the share of requests at or under each latency, the SLO bounds dashed."),
            (load_latency(curve, rate, slo), "P50 and P99 TTFT and TPOT against the offered rate, the same pools and "
             f"requests arriving faster or slower; the star is the plan ({number(rate)} requests/s), the SLO bounds dashed.")]


def _bounds(slo: dict[str, float], metric: str) -> list[tuple[str, float]]:
    return [(key, bound) for key, bound in slo.items() if slo_percentile(key)[0] == metric]


def latency_cdf(outcome, slo: dict[str, float]) -> str:
    """Two panels: the empirical CDF of TTFT and of TPOT (steps over the sorted values)."""
    with rc_context(_RC):
        fig = _figure(7.0, 2.8)
        for i, metric in enumerate(("ttft", "tpot")):
            ax = fig.add_subplot(1, 2, i + 1)
            values = getattr(outcome, metric)
            shares = [(k + 1) / len(values) for k in range(len(values))]
            ax.step(values, shares, where="post", color=COLORS[i], label=f"{metric.upper()} ({len(values)} requests)",
                    gid=f"cdf-{metric}")
            ax.plot([outcome.percentile(metric, p) for p in PERCENTILES], [p / 100 for p in PERCENTILES], "o",
                    color=COLORS[i], gid=f"percentiles-{metric}")
            for key, bound in _bounds(slo, metric):
                ax.axvline(bound, color="#c62828", linestyle="--", linewidth=1, label=f"SLO {key} {duration(bound)}")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: duration(v)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: percent(v)))   # the one formatter's "20%"
            ax.set_xlabel(metric.upper())
            ax.set_ylabel("share of requests")
            ax.set_ylim(0, 1.02)
            ax.legend(frameon=False, fontsize=7, loc="lower right")
        return to_svg(fig, "serve-cdf")


def load_latency(curve: list[tuple[float, object]], planned: float, slo: dict[str, float]) -> str:
    """Two panels, TTFT and TPOT: P50 and P99 against the offered rate; the plan's point starred."""
    rates = [rate for rate, _ in curve]
    plan = next(outcome for rate, outcome in curve if rate == planned)
    with rc_context(_RC):
        fig = _figure(7.0, 3.0)
        for i, metric in enumerate(("ttft", "tpot")):
            ax = fig.add_subplot(1, 2, i + 1)
            for j, p in enumerate(PERCENTILES):
                ax.plot(rates, [o.percentile(metric, p) for _, o in curve], "o-" if p == 50 else "s--",
                        color=COLORS[i], alpha=1.0 if j else 0.6, label=f"P{p}", gid=f"curve-{metric}-p{p}")
                ax.plot([planned], [plan.percentile(metric, p)], "*", markersize=12, color="#ef6c00",
                        label="the plan" if j == 0 else None, gid=f"plan-{metric}-p{p}")
            for key, bound in _bounds(slo, metric):
                ax.axhline(bound, color="#c62828", linestyle="--", linewidth=1, label=f"SLO {key}")
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: duration(v)))
            ax.set_xlabel("offered requests/s")
            ax.set_ylabel(metric.upper())
            ax.legend(frameon=False, fontsize=7)
        return to_svg(fig, "serve-load")
