"""Plans as terminal text, for every job kind."""

from __future__ import annotations

from fractions import Fraction

from ..compiler.tco import job_cost
from ..dsl.units import BYTES, POWER, Quantity, format_quantity
from ..model.calibration import half_width
from ..model.step import Estimate
from ..solver.hetero import HeteroPlan
from ..solver.jobs import Outcome, TrainOutcome
from ..solver.power import PowerInputs, PowerResult
from ..solver.serve import ServePlan
from .serve import serve_text
from .plan_json import parallelism


def outcome_text(outcome: Outcome, timings: bool = False) -> str:
    """The text of any job's plan (the search's wall-clock time only with `timings`)."""
    if isinstance(outcome, HeteroPlan):
        return hetero_text(outcome)
    if isinstance(outcome, ServePlan):
        return serve_text(outcome)
    budgeted = outcome.power
    if outcome.plan.best is None and outcome.feasible:
        text = power_bound_text(outcome, timings)     # the plan is the power plan's operating point
    else:
        text = plan_text(outcome.plan, timings)
        if budgeted is not None and budgeted.result.feasible and (
                budgeted.result.whole_tokens_per_s > outcome.plan.best.tokens_per_s * (1 + 1e-9)):
            text += (f"\n  note       the power plan below runs {budgeted.result.whole_tokens_per_s:,.0f} tokens/s "
                     f"within the same bound by lowering the clock rather than the layout")
    if budgeted is not None:
        text += "\n" + power_text(budgeted.result, budgeted.inputs) + "\n  curve            " + ", ".join(
            f"{b / 1e6:,.4g} MW: {t:,.0f}" for b, t in budgeted.curve) + " tokens/s"
    return text


def power_bound_text(outcome: TrainOutcome, timings: bool = False) -> str:
    """A plan that only the power plan makes feasible: what runs first (GPUs, clock, the
    layout it scales), then what the bound removed (every configuration at full clock)."""
    chosen, budgeted = outcome.plan, outcome.power
    job, result, layout = chosen.job, budgeted.result, budgeted.layout
    head = f"plan {job.name} on {job.graph.name}" + (f".{job.partition.name}" if len(job.graph.partitions) > 1 else "")
    step = job.batch * job.seq / result.whole_tokens_per_s
    lines = [head,
             f"  objective  {chosen.objective} (optimal under the power bound: fewer GPUs and a lower clock)",
             f"  planned    {result.whole_gpus:,} of {job.gpus:,} GPUs at {result.clock:.1%} clock "
             f"(power cap {result.power_cap:,.0f} W per GPU): {result.whole_tokens_per_s:,.0f} tokens/s, "
             f"step {step:.3f} s, facility {_w(result.facility_power * result.whole_gpus / result.gpus)}"]
    if layout is not None:
        c = layout.config
        replica = c.tp * c.pp * c.cp
        lines.append(f"  layout     tp={c.tp} pp={c.pp} cp={c.cp} ep={c.ep} vp={c.vp} mb={c.microbatch} "
                     f"recompute={c.recompute} zero={c.zero} per replica ({replica} GPU{'s' if replica > 1 else ''}), "
                     f"{result.whole_gpus // replica:,} replicas of the {c.dp:,} it plans at full clock")
    evaluated, pruned = getattr(chosen, "evaluated", chosen.considered), getattr(chosen, "pruned", 0)
    counts = (f"{chosen.considered:,} configurations: {evaluated:,} evaluated, {pruned:,} pruned"
              + (f", {chosen.seconds:.2f} s" if timings else ""))
    reason = getattr(chosen, "infeasibility", None)
    removed = reason.message if reason is not None else "no configuration meets the job's limits"
    lines.append(f"  removed    at full clock on every GPU ({counts}): {removed}")
    return "\n".join(lines)


def infeasible_message(outcome: Outcome) -> str:
    """One line for stderr saying why a plan is infeasible."""
    if isinstance(outcome, HeteroPlan):
        reasons = "; ".join(f"{s.mode} split: {s.message}" for s in (outcome.data, outcome.pipeline) if s.message)
        return (f"gclc: infeasible: `{outcome.name}` fits neither split across its partitions"
                + (f" ({reasons})" if reasons else ""))
    if isinstance(outcome, ServePlan):
        return (f"gclc: infeasible: no configuration of `{outcome.name}` meets its limits"
                + (f" ({'; '.join(outcome.binding)})" if outcome.binding else ""))
    chosen = outcome.plan if isinstance(outcome, TrainOutcome) else outcome
    reason = getattr(chosen, "infeasibility", None)
    if reason is not None:
        return f"gclc: infeasible: {reason.message}"
    job = chosen.job
    return f"gclc: infeasible: no admissible configuration of `{job.name}` on {job.gpus} GPUs"


def _b(value: float) -> str:
    return format_quantity(Quantity(Fraction(repr(value)), BYTES))


def _w(value: float) -> str:
    return format_quantity(Quantity(Fraction(repr(value)), POWER))


def _config(e: Estimate) -> str:
    p = parallelism(e)
    return (f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']} ep={p['ep']} vp={p['vp']} "
            f"mb={p['microbatch']} recompute={p['recompute']} zero={p['zero']}"
            + (" schedule=gpipe" if p["schedule"] == "gpipe" else ""))


def _placement_text(plan) -> str:
    parts = []
    for p in getattr(plan, "placement", ()):
        if p.size > 1:
            parts.append(f"{p.dim}={p.size} on {' + '.join(p.tiers) or 'one GPU'}")
    return "; ".join(parts) or "one GPU"


def goodput_text(good, tokens_per_s: float) -> str:
    return (f"  goodput    {tokens_per_s * good.efficiency:,.0f} tokens/s ({good.efficiency:.1%} of the time trains): "
            f"job MTBF {good.mtbf / 3600:.3g} h, checkpoint {good.write:.3g} s every {good.interval / 60:.3g} min "
            f"(Young/Daly), restart {good.restart / 60:.3g} min")


def plan_text(plan, timings: bool = False) -> str:
    job = plan.job
    head = f"plan {job.name} on {job.graph.name}" + (f".{job.partition.name}" if len(job.graph.partitions) > 1 else "")
    evaluated, pruned = getattr(plan, "evaluated", plan.considered), getattr(plan, "pruned", 0)
    lines = [head, f"  objective  {plan.objective} ({plan.status}, {plan.considered:,} configurations: "
                   f"{evaluated:,} evaluated, {pruned:,} pruned" + (f", {plan.seconds:.2f} s)" if timings else ")")]
    e = plan.best
    if e is None:
        reason = getattr(plan, "infeasibility", None)
        if reason is not None:
            lines.append(f"  infeasible {reason.message}")
        return "\n".join(lines)
    lines += [
        f"  parallel   {_config(e)}  ({e.config.gpus} GPUs)",
        f"  placement  {_placement_text(plan)}  (order {', '.join(e.config.order)})",
        f"  step       {e.step_time:.3f} s    {e.tokens_per_s:,.0f} tokens/s    {e.tokens_per_s_per_gpu:,.0f} tokens/s/GPU"
        f"    (80 % band {plan.error_band['tokens_per_s'][0]:,.0f}-{plan.error_band['tokens_per_s'][1]:,.0f} tokens/s)",
        f"  MFU        {e.mfu:.1%}   HFU {e.hfu:.1%}   ({e.model_flops_per_gpu / 1e12:.0f} model TFLOP/s per GPU)",
        f"  memory     {_b(e.memory.total)} of {_b(e.hbm)} per GPU: "
        + ", ".join(f"{k} {_b(v)}" for k, v in e.memory.rows() if v),
        "  breakdown  " + ", ".join(f"{k} {v:.3f} s" for k, v in e.breakdown.rows() if v),
        f"  power      {_w(plan.power.total)} ({_w(plan.power.per_gpu)} per GPU), "
        f"{plan.energy_per_token:.3g} J/token",
        "  binds      " + "; ".join(plan.binding),
    ]
    why = getattr(plan, "band_reasons", ())
    if why:
        lines.append(f"  band wide  ±{half_width(why):.0%}, not ±{half_width(()):.0%}: "
                     + "; ".join(f"{r.text} (x{r.factor:.2f})" for r in why))
    if getattr(plan, "goodput", None) is not None:
        lines.append(goodput_text(plan.goodput, e.tokens_per_s))
    if job.tokens:
        days = job.tokens / e.tokens_per_s / 86400
        lines.append(f"  training   {job.tokens:.3g} tokens in {days:.1f} days")
    cost = job_cost(job.entity, job.graph, e.tokens_per_s, job.tokens)
    if cost is not None:
        whole = "" if cost["complete"] else " (capex lacks some prices: a lower bound)"
        to_train = f", {cost['cost_to_train_usd'] / 1e6:,.2f} M USD to train" if "cost_to_train_usd" in cost else ""
        lines.append(f"  cost       TCO {cost['tco_usd'] / 1e6:,.2f} M USD (capex {cost['capex_usd'] / 1e6:,.2f} M), "
                     f"{cost['cost_per_token_usd'] * 1e6:,.3f} USD per million tokens{to_train}{whole}")
    for i, r in enumerate(plan.runners_up, 2):
        lines.append(f"  #{i}         {_config(r)} [{','.join(r.config.order)}]: {r.step_time:.3f} s, MFU {r.mfu:.1%}")
    if getattr(plan, "proof", ""):
        lines.append(f"  proof      {plan.proof}")
    for w in getattr(plan, "warnings", ()):
        lines.append(f"  warning    {w.message} [{w.kind}]")
    return "\n".join(lines)


def power_text(result: PowerResult, inputs: PowerInputs | None = None) -> str:
    """A few lines for `gclc plan`."""
    head = f"power budget {result.budget / 1e6:,.4g} MW ({result.objective})"
    if result.status != "optimal":
        return f"{head}: {result.status}: {result.message}"
    lines = [f"{head}: {result.message}",
             f"  GPUs running     {result.gpus:,.1f} ({result.whole_gpus:,} in whole replicas, "
             f"{result.whole_tokens_per_s:,.0f} tokens/s)",
             f"  clock            {result.clock:.1%} of full, power cap {result.power_cap:,.0f} W per GPU",
             f"  throughput       {result.tokens_per_s:,.0f} tokens/s",
             f"  facility power   {result.facility_power / 1e6:,.4g} MW"]
    if result.energy_per_token is not None:
        lines.append(f"  energy           {result.energy_per_token:,.4g} J per token")
    if result.marginal_tokens_per_s_per_mw is not None:
        lines.append(f"  marginal power   {result.marginal_tokens_per_s_per_mw:,.0f} tokens/s per extra MW")
    if result.time_to_train is not None:
        lines.append(f"  time to train    {result.time_to_train / 86400:,.1f} days")
    if inputs is not None:
        a1, a2, a3, a4 = inputs.shares
        check = f", {inputs.fit_error:+.1%} vs the estimate at fewer replicas" if inputs.fit_error is not None else ""
        lines.append(f"  model            step shares: per micro-batch {a1:.2f} clocked + {a2:.2f} other, "
                     f"fixed {a3:.2f} clocked + {a4:.2f} other{check}")
    return "\n".join(lines)


def hetero_text(result: HeteroPlan) -> str:
    lines = [f"job {result.name}: {len(result.plans)} partitions, {result.status}"]
    for s in (result.data, result.pipeline):
        mark = "*" if result.best is s else " "
        if s.status != "optimal":
            lines.append(f"{mark} {s.mode} split: {s.status}: {s.message}")
            continue
        lines.append(f"{mark} {s.mode} split: {s.tokens_per_s:,.0f} tokens/s, step {s.step_time:.3f} s "
                     f"(compute {s.compute_time:.3f} s + cross-partition {s.exchange:.3f} s), "
                     f"{s.power / 1e6:,.3g} MW facility")
        unit = "sequences" if s.mode == "data" else "layers"
        for x in s.shares:
            if x.items == 0:
                lines.append(f"    {x.partition:<12} unused")
                continue
            c = x.config
            layout = f"tp {c.tp} pp {c.pp} dp {c.dp} cp {c.cp} mb {c.microbatch}" if c else ""
            lines.append(f"    {x.partition:<12} {x.items:>6} {unit}  busy {x.busy:.3f} s  "
                         f"utilization {x.utilization:.0%}  {x.gpus} x {x.chip}  {layout}"
                         + ("" if x.fits else "  (does not fit)"))
        if s.message:
            lines.append(f"    note: {s.message}")
    for p in result.plans:
        alone = f"{p.best.tokens_per_s:,.0f} tokens/s" if p.best else p.status
        lines.append(f"  alone on {p.job.partition.name}: {alone}")
    return "\n".join(lines)
