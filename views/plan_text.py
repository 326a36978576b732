"""Plans as terminal text, for every job kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..compiler.cost.tco import job_cost
from ..dsl.numbers import big, binary_bytes, count, duration, memory, memory_of, number, percent, quantity, span
from ..model.calibration import half_width
from ..model.train.step import Estimate
from ..solver.jobs import Outcome, TrainOutcome
from ..solver.train.plan import Plan
from ..model import dvfs
from ..solver.power.section import PowerSection, clock_ratio
from ..solver.train.limits import power_of
from .limits import MEMORY_WORDS, WORDS, limits_sentence, tiers_text
from .plan_json import dp_collectives, hetero_cost, optimizer_json, parallelism, pfc_pause

if TYPE_CHECKING:  # the heterogeneous split's modules load only for its plans
    from ..solver.split.plan import HeteroPlan


def outcome_text(outcome: Outcome, timings: bool = False) -> str:
    """The text of any job's plan (the search's wall-clock time only with `timings`)."""
    if outcome.job_kind == "hetero":
        return hetero_text(outcome)
    if outcome.job_kind == "rl":
        from .rl import rl_text

        return rl_text(outcome, timings)
    if not isinstance(outcome, TrainOutcome):  # a ServePlan
        from .serve import serve_text

        return serve_text(outcome)
    text = plan_text(outcome.plan, timings)
    if outcome.power is not None and outcome.plan.best is not None:
        text += "\n" + power_text(outcome.plan, outcome.power)
    return text


def infeasible_message(outcome: Outcome) -> str:
    """One line for stderr saying why a plan is infeasible."""
    if outcome.job_kind == "hetero":
        reasons = "; ".join(f"{s.mode} split: {s.message}" for s in (outcome.data, outcome.pipeline) if s.message)
        return (f"gclc: infeasible: `{outcome.name}` fits neither split across its partitions"
                + (f" ({reasons})" if reasons else ""))
    if outcome.job_kind == "rl":
        return f"gclc: infeasible: no pair of pools runs `{outcome.name}`" + "".join(
            f"\n  {reason}" for reason in outcome.result.reasons)
    chosen = outcome.plan if isinstance(outcome, TrainOutcome) else outcome
    if not isinstance(chosen, Plan):  # a ServePlan
        head = (f"gclc: undecided: no configuration of `{outcome.name}` found that meets its limits within the "
                "search's budget" if outcome.undecided else
                f"gclc: infeasible: no configuration of `{outcome.name}` meets its limits")
        return head + "".join(f"\n  {reason}" for reason in outcome.binding)
    reason = getattr(chosen, "infeasibility", None)
    if reason is not None:
        return f"gclc: infeasible: {reason.message}"
    job = chosen.job
    return f"gclc: infeasible: no admissible configuration of `{job.name}` on {job.gpus} GPUs"


def _w(value: float) -> str:
    return quantity(value, "W")


def _config(e: Estimate) -> str:
    p = parallelism(e)
    extras = ""
    if p["recompute_modules"] and p["recompute_modules"] != ["core_attention"]:
        extras += f" ({'+'.join(p['recompute_modules'])})"
    if p["recompute_every"] > 1 and p["recompute"] != "none":
        extras += f" every {p['recompute_every']} layers"
    if p["offload"]:
        extras += f" offload={percent(p['offload'])}"
    extras += f" zero={p['zero']}"
    if p["shard"] < p["dp"] * p["cp"] and p["zero"] >= 1:
        extras += f" shard={p['shard']} (hybrid, {p['dp'] * p['cp'] // p['shard']} replicas)"
    return (f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']} ep={p['ep']} vp={p['vp']} "
            f"mb={p['microbatch']} recompute={p['recompute']}" + extras
            + (" schedule=gpipe" if p["schedule"] == "gpipe" else ""))


def optimizer_lines(e: Estimate) -> list[str]:
    """`  optimizer  moments bf16, master weights fp16, main gradients fp32 (6 B of optimizer state
    per parameter, not 12; 2 B per gradient)`: only where the job narrows a precision."""
    state = optimizer_json(e.config)
    if state is None:
        return []
    master = {"none": "no master weights (Adam updates the weights)"}.get(
        state["master_weights"], f"master weights {state['master_weights']}"
        + (" as 16-bit remainders of the bf16 weights" if state["master_remainders"] else ""))
    moments = state["optimizer_state"] + (f" (second {state['second_moment']})" if "second_moment" in state else "")
    held = state["state_bytes_per_param"]   # "not 12" only where it differs from mixed-precision Adam's 12 B
    return [f"  optimizer  moments {moments}, {master}, main gradients {state['main_grads']} "
            f"({number(held)} B of optimizer state per parameter{'' if held == 12 else ', not 12'}; "
            f"{state['grad_bytes_per_param']} B per gradient)"]


def _rate_span(low: float, high: float) -> str:
    """`78,222–100,210 tokens/s`, `39.2–86.9 M tokens/s`."""
    if high >= 1e6:
        return span(low / 1e6, high / 1e6, "M tokens/s")
    return span(low, high, "tokens/s")


def config_words(e: Estimate) -> str:
    """`micro-batch 1, 4 virtual stages per GPU, full recomputation, ZeRO-0, sequence parallel`."""
    p = parallelism(e)
    words = [f"micro-batch {p['microbatch']}"]
    if p["vp"] > 1:
        words.append(f"{p['vp']} virtual stages per GPU")
    words.append({"none": "no recomputation", "full": "full recomputation"}.get(
        p["recompute"], f"{p['recompute']} recomputation"))
    words.append(f"ZeRO-{p['zero']}")
    if p.get("sp"):
        words.append("sequence parallel")
    return ", ".join(words)


def _placement_text(plan) -> str:
    parts = [f"{p.dim}={p.size} on {tiers_text(p.tiers)}" for p in getattr(plan, "placement", ()) if p.size > 1]
    return "; ".join(parts) or "one GPU"


def _dp_calls_line(plan, binary: bool) -> list[str]:
    """Each data-parallel collective, its buffer, its time and how it runs (none for one replica)."""
    found = dp_collectives(plan)
    if not found:
        return []
    words = {"reduce_scatter": "reduce-scatter", "all_gather": "all-gather", "all_reduce": "all-reduce"}
    return ["  dp calls   " + ", ".join(
        f"{'expert ' if c['state'] == 'expert' else ''}{words[c['collective']]} {memory(c['bytes'], binary)} "
        f"{duration(c['seconds'])} ({c['algorithm']}/{c['protocol']}"
        + (", reduced in the switches)" if c["in_network"] else ")") for c in found)]


def _pfc_line(plan) -> list[str]:
    """PFC's pauses behind the expert all-to-all, where a `congestion = pfc` fabric carries it."""
    held = pfc_pause(plan)
    if held is None:
        return []
    how = (f"data-parallel collectives {number(held['slowdown'])}x slower than under ECN while it runs, "
           f"{percent(held['duty'])} of each layer pass: dp +{duration(held['seconds'])}" if held["seconds"] > 0 else
           "its flows keep their fair share (no hashed path collides), so the pauses cost nothing beyond ECN")
    return [f"  PFC pause  {held['fabric']}: the expert all-to-all's incast ({held['senders']} flows into each NIC); "
            + how]


def goodput_text(good, tokens_per_s: float) -> str:
    return (f"  goodput    {big(tokens_per_s * good.efficiency)} tokens/s ({percent(good.efficiency)} of the time "
            f"trains): job MTBF {duration(good.mtbf)}, a checkpoint takes {duration(good.write)} every "
            f"{duration(good.interval)} ({'pinned' if good.pinned else 'Young/Daly'}), a restart "
            f"{duration(good.restart)}")


def plan_text(plan, timings: bool = False) -> str:
    lines = _heading(plan, timings)
    e = plan.best
    if e is None:
        reason = getattr(plan, "infeasibility", None)
        if reason is not None:
            lines.append(f"  infeasible {reason.message}")
        return "\n".join(lines)
    return "\n".join(lines + _operating_point(plan, e) + _band(plan) + _outlook(plan, e) + _others(plan, e))


def _heading(plan, timings: bool) -> list[str]:
    """The job, its cluster (and partition), the objective and how many configurations the search saw."""
    job = plan.job
    head = f"plan {job.name} on {job.graph.name}" + (f".{job.partition.name}" if len(job.graph.partitions) > 1 else "")
    evaluated, pruned = getattr(plan, "evaluated", plan.considered), getattr(plan, "pruned", 0)
    return [head, f"  objective  {plan.objective} ({plan.status}, {count(plan.considered, 'configuration')}: "
                  f"{number(evaluated)} evaluated, {number(pruned)} pruned"
                  + (f", {duration(plan.seconds)})" if timings else ")")]


def _operating_point(plan, e) -> list[str]:
    """The best configuration: parallelism, placement, step, MFU, memory, step parts, power, limits."""
    low, high = plan.error_band["tokens_per_s"]
    chip = plan.job.partition.node.accelerator
    binary = binary_bytes(chip.hbm_datasheet)  # memory in the family of units of the part's data sheet
    return [
        f"  parallel   {_config(e)}  ({count(e.config.gpus, 'GPU')})",
        f"             {config_words(e)}",
        f"  placement  {_placement_text(plan)}  (ranks ordered {', '.join(e.config.order)}, innermost first)",
        f"  step       {duration(e.step_time)}    {big(e.tokens_per_s)} tokens/s    "
        f"{number(e.tokens_per_s_per_gpu)} tokens/s per GPU    (80 % band {_rate_span(low, high)})",
        f"  MFU        {percent(e.mfu)}   HFU {percent(e.hfu)}   ({quantity(e.model_flops_per_gpu, 'FLOPS')} "
        f"of model FLOPs per GPU)",
        f"  memory     {memory_of(e.memory.total, chip.hbm_datasheet, e.hbm)} per GPU: "
        + ", ".join(f"{MEMORY_WORDS.get(k, k)} {memory(v, binary)}" for k, v in e.memory.rows() if v)
        + (f"; {memory(e.memory.offloaded, binary)} of activations in host memory" if e.memory.offloaded else ""),
        *optimizer_lines(e),
        "  step parts " + ", ".join(f"{WORDS.get(k, k)} {duration(v)}" for k, v in e.breakdown.rows() if v),
        *_dp_calls_line(plan, binary),
        *_pfc_line(plan),
        f"  power      {_w(plan.power.total)} ({_w(plan.power.per_gpu)} per GPU"
        + (f" at {percent(plan.clock)} clock under a power cap of {_w(e.config.power_cap)}"
           if e.config.power_cap is not None else "") + f"), {quantity(plan.energy_per_token, 'J')} per token",
        f"  limits     {limits_sentence(plan)}",
    ]


def _band(plan) -> list[str]:
    """The error band's line: calibrated on the user's own runs, or widened for this plan's reasons."""
    why, own = getattr(plan, "band_reasons", ()), getattr(plan, "own", None)
    if own is not None:
        return [f"  band       calibrated on {number(own.runs)} of your runs: "
                f"±{percent(own.half_width(), 2)}" + (f" (±{percent(own.half_width(why), 2)} here: "
                + "; ".join(f"{r.text} (x{number(r.factor)})" for r in why) + ")" if why else "")]
    return [_band_line(why)] if why else []


def _outlook(plan, e) -> list[str]:
    """Goodput under failures, the time to train the job's tokens and its cost."""
    job, lines = plan.job, []
    if getattr(plan, "goodput", None) is not None:
        lines.append(goodput_text(plan.goodput, e.tokens_per_s))
    if job.tokens:
        lines.append(f"  training   {big(job.tokens)} tokens in {duration(job.tokens / e.tokens_per_s)}")
    cost = job_cost(job.entity, job.graph, e.tokens_per_s, job.tokens, plan.power.total)
    if cost is not None:
        lines.append(cost_line(cost))
    return lines


def _others(plan, e) -> list[str]:
    """The runners-up against the best, the search's proof of optimality, and its warnings."""
    lines = [f"  #{i:<9} {_config(r)}, ranks {','.join(r.config.order)}: {duration(r.step_time)}, "
             f"MFU {percent(r.mfu)}{runner_difference(e, r)}" for i, r in enumerate(plan.runners_up, 2)]
    if getattr(plan, "proof", ""):
        lines.append(f"  proof      {plan.proof}")
    return lines + [f"  warning    {w.message} [{w.kind}]" for w in getattr(plan, "warnings", ())]


def _band_line(why) -> str:
    """The band and its reasons; reasons whose held-out runs were no wider than the rest (factor
    1) are named as such, never as a 'wide' band of the usual width."""
    wide, usual = half_width(why), half_width(())
    if wide > usual:
        return (f"  band wide  ±{percent(wide, 2)}, not ±{percent(usual, 2)}: "
                + "; ".join(f"{r.text} (x{number(r.factor)})" for r in why))
    return (f"  band       ±{percent(usual, 2)}; held-out runs were no wider for: "
            + "; ".join(r.text for r in why))


def cost_line(cost: dict) -> str:
    """A train job's cost (compiler/tco.job_cost) as one plan line."""
    whole = "" if cost["complete"] else " (capex lacks some prices: a lower bound)"
    to_train = f", {quantity(cost['cost_to_train_usd'], 'USD')} to train" if "cost_to_train_usd" in cost else ""
    return (f"  cost       TCO {quantity(cost['tco_usd'], 'USD')} (capex {quantity(cost['capex_usd'], 'USD')}), "
            f"{number(cost['cost_per_token_usd'] * 1e6)} USD per million tokens{to_train}{whole}")


def runner_difference(best: Estimate, other: Estimate) -> str:
    """`  (differs: vp 8, not 4)`: the settings in which a runner-up differs from the plan."""
    a, b = parallelism(best), parallelism(other)
    changed = [f"{_SETTING.get(k, k)} {_setting(b[k], k)}, not {_setting(a[k], k)}" for k in a
               if k != "microbatches" and a[k] != b[k]]
    if best.config.order != other.config.order:
        changed.append(f"ranks {','.join(other.config.order)}, not {','.join(best.config.order)}")
    return f"  (differs: {'; '.join(changed)})" if changed else ""


_SETTING = {"microbatch": "micro-batch", "recompute": "recomputation", "zero": "ZeRO stage",
            "sp": "sequence parallel", "vp": "virtual stages", "power_cap_w": "power cap"}


def _setting(value, key: str = "") -> str:
    if key == "power_cap_w":   # the operating point's cap per GPU; none: the chip at its full clock
        return quantity(value, "W") if value is not None else "none"
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def operating_words(plan) -> str:
    """`256 of 256 GPUs at 90% clock (power cap 529 W per GPU)`: what the plan runs."""
    e, job = plan.best, plan.job
    c = e.config
    clock = clock_ratio(job, e)
    at = "full clock" if c.power_cap is None else f"{percent(clock)} clock (power cap {_w(c.power_cap)} per GPU)"
    return f"{number(c.gpus)} of {number(job.gpus)} GPUs at {at}"


def _gap_words(gap: float | None) -> str:
    """What finer clock steps and GPU counts could add, in words."""
    if gap is None:
        return ""
    if gap >= 5e-4:
        return (f" ({percent(gap)} beyond the plan, which is exact over whole replicas and "
                f"{percent(dvfs.CLOCK_STEP)} clock steps)")
    if gap > -5e-4:
        return " (the plan reaches it)"
    return f" (the GP's smooth step model is {percent(-gap)} below the plan's estimate: finer steps add nothing)"


def power_text(plan, section: PowerSection) -> str:
    """The power section of a power-limited plan: the operating point the plan above runs
    (the same numbers), what binds, the relaxation's bound and the layout's curve."""
    e, job = plan.best, plan.job
    lines = [f"power limit {_w(section.limit)} from {section.source}, {section.objective}: "
             f"{operating_words(plan)}, {big(e.tokens_per_s)} tokens/s, {_w(plan.power.total)} facility "
             f"({percent(plan.power.total / section.limit)} of the limit), "
             f"{quantity(plan.energy_per_token, 'J')} per token"]
    binds = []
    for what in section.binds:
        if what == "power" and section.unlimited is not None:
            u = section.unlimited
            binds.append(f"power (without the limit: {number(u.config.gpus)} GPUs, {big(u.tokens_per_s)} tokens/s "
                         f"at {_w(power_of(job, u))}; the limit gives up "
                         f"{percent(max(0.0, 1 - e.tokens_per_s / u.tokens_per_s))} of the throughput)")
        elif what == "batch":
            binds.append("batch (the batch splits over no more replicas of this layout)")
        elif what == "GPU count":
            binds.append(f"GPU count (all {number(job.gpus)} of the job's GPUs run)")
        else:
            binds.append(what)
    lines.append("  binds            " + ("; ".join(binds) if binds else "nothing: the limit leaves room"))
    r = section.relaxed
    if r is not None and r.feasible:
        gap = section.gap(e.tokens_per_s, plan.energy_per_token)
        lines.append(f"  bound            continuous GPU counts and clocks of this layout (the power GP, "
                     f"solver/power/program.py): {big(r.relaxed_tokens_per_s)} tokens/s at "
                     f"{number(round(r.relaxed_gpus))} GPUs and {percent(r.relaxed_clock)} clock"
                     + _gap_words(gap))
        if r.marginal_tokens_per_s_per_mw is not None:
            lines.append(f"  marginal power   {number(round(r.marginal_tokens_per_s_per_mw))} tokens/s per extra MW "
                         f"(the GP's dual)")
    lines.append("  curve            " + ", ".join(
        f"{quantity(p.budget, 'W')}: " + (f"{big(p.tokens_per_s)} ({number(p.gpus)} GPUs, {percent(p.clock)})"
                                          if p.feasible else "infeasible")
        for p in section.curve) + " tokens/s (this layout at each budget)")
    return "\n".join(lines)


def hetero_text(result: HeteroPlan) -> str:
    lines = [f"job {result.name}: {len(result.plans)} partitions, {result.status}"]
    for s in (result.data, result.pipeline):
        mark = "*" if result.best is s else " "
        if s.status != "optimal":
            lines.append(f"{mark} {s.mode} split: {s.status}: {s.message}")
            continue
        lines.append(f"{mark} {s.mode} split: {big(s.tokens_per_s)} tokens/s, step {duration(s.step_time)} "
                     f"(compute {duration(s.compute_time)} + cross-partition {duration(s.exchange)}), "
                     f"{_w(s.power)} facility")
        unit = "sequences" if s.mode == "data" else "layers"
        for x in s.shares:
            if x.items == 0:
                lines.append(f"    {x.partition:<12} unused")
                continue
            c = x.config
            layout = f"tp {c.tp} pp {c.pp} dp {c.dp} cp {c.cp} mb {c.microbatch}" if c else ""
            lines.append(f"    {x.partition:<12} {number(x.items):>6} {unit}  busy {duration(x.busy)}  "
                         f"utilization {percent(x.utilization)}  {number(x.gpus)} x {x.chip}  {layout}"
                         + ("" if x.fits else "  (does not fit)"))
        if s.message:
            lines.append(f"    note: {s.message}")
    for p in result.plans:
        alone = f"{big(p.best.tokens_per_s)} tokens/s" if p.best else p.status
        lines.append(f"  alone on {p.job.partition.name}: {alone}")
    cost = hetero_cost(result)
    if cost is not None:
        lines.append(cost_line(cost))
    return "\n".join(lines)
