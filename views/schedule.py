"""A simulated schedule as stable JSON (`views/schedule.schema.json`) and as text.

The JSON is built once; the text is read off it, so the two never disagree.
"""

from __future__ import annotations

import collections
import math
import statistics

from ..dsl.numbers import count, duration, number, percent, quantity
from ..solver.schedule.records import Workload
from ..solver.schedule.milp import Optimum
from ..solver.schedule.simulate import Outcome, Run

SCHEDULE_FORMAT_VERSION = 1
MAX_POINTS = 2_000   # timeline samples kept in the JSON


def schedule_json(workload: Workload, outcome: Outcome, optimum: list[Optimum]) -> dict:
    graph = workload.graph
    tiers = {p.name: workload_tiers(workload, p.name) for p in graph.partitions}
    jobs = [_job(run, tiers) for run in outcome.runs]
    return {
        "format": "gclc-schedule", "version": SCHEDULE_FORMAT_VERSION,
        "cluster": graph.name, "policy": outcome.policy, "seed": outcome.seed, "failures": outcome.failures,
        "partitions": [{"name": p.name, "gpus": p.gpus, "chip": p.node.accelerator.name,
                        "domain_gpus": p.nodes_per_unit * p.node.gpus, "domains": p.units,
                        "tiers": list(tiers[p.name])} for p in graph.partitions],
        "jobs": jobs,
        "cluster_metrics": _cluster(workload, outcome, jobs),
        "optimum": _optimum(optimum),
        "events": {"changes": outcome.changes, "delivered": outcome.delivered},
        "degradations": [{"part": e.part, "share": e.share, "where": e.where, "partition": e.partition,
                          "start_s": e.start, "end_s": e.end, "jobs": list(slowed)}
                         for e, slowed in outcome.degradations],
        "timeline": _timeline(outcome),
    }


def workload_tiers(workload: Workload, partition: str) -> tuple[str, ...]:
    from ..solver.schedule.state import PartitionState

    return PartitionState.of(workload.graph.partition(partition)).tier_names


def _job(run: Run, tiers: dict[str, tuple[str, ...]]) -> dict:
    j = run.job
    last = run.segments[-1] if run.segments else None
    model = [o.share for o in j.options if o.partition == (last[2] if last else None) and o.gpus == run.gpus]
    return {
        "name": j.name, "service": j.service or None, "priority": j.priority, "priority_label": j.label,
        "submit_s": j.submit,
        "start_s": run.first_start, "end_s": run.end,
        "wait_s": _waited(run),
        "first_wait_s": (run.first_start - j.submit) if run.first_start is not None else None,
        "state": run.phase, "gang": j.gang, "work": j.work, "unit": j.unit,
        "partition": last[2] if last else run.option.partition if run.phase == "running" else None,
        "gpus": last[3] if last else run.gpus if run.phase == "running" else 0,
        "level": last[4] if last else None,
        "tier": tiers[last[2]][last[4]] if last else None,
        "domains": last[5] if last else 0,
        "companion": _companion(run),
        # useful time is part of the held time; the two sums round apart by an ulp
        "goodput_share": min(run.useful / run.held, 1.0) if run.held else None,
        "goodput_share_model": model[0] if model else None,
        # wall time over the run's own time, degraded parts aside: what neighbours on shared
        # uplinks cost it (contention.py); and what the degraded parts cost it (degraded.py)
        "network_slowdown": _slowdowns(run)[0],
        "degradation_slowdown": _slowdowns(run)[1],
        "pfc_paused_by": sorted(run.paused_by),
        "preemptions": run.preemptions, "failures": run.failures, "timeouts": run.timeouts,
        "restarts": run.restarts,
        "time_limit_s": j.time_limit if math.isfinite(j.time_limit) else None,
        "gpu_hours_held": run.held / 3600, "gpu_hours_useful": run.useful / 3600,
        "segments": [{"start_s": a, "end_s": b, "partition": p, "gpus": g, "level": lv, "domains": n, "ended": why,
                      "rule": rule, "domain_gpus": _domains(held), "companion": _companion_held(held)}
                     for a, b, p, g, lv, n, why, rule, held in run.segments],
    }


def _slowdowns(run: Run) -> tuple[float | None, float | None]:
    """(neighbours', degraded parts') slowdown of the run's time, None where it never ran."""
    if run.own_seconds <= 0:
        return None, None
    wall = sum(b - a for a, b, *_ in run.segments)
    if not run.ever_degraded:
        return max(1.0, wall / run.own_seconds), 1.0
    return max(1.0, run.undegraded / run.own_seconds), max(1.0, wall / run.undegraded)


def _companion(run: Run) -> dict | None:
    """The generation pool an rl gang across two partitions held beside the job's GPUs (its last run)."""
    if run.option is None or run.option.companion is None:
        return None
    partition, gpus = run.option.companion
    return {"partition": partition, "gpus": gpus}


def _domains(held) -> list[list[int]]:
    return [[d, c] for d, c in zip(held.domains, held.counts)]


def _companion_held(held) -> dict | None:
    """Where a run of an rl gang across two partitions held its generation pool."""
    other = held.companion
    if other is None:
        return None
    return {"partition": other.partition, "gpus": other.gpus, "domain_gpus": _domains(other)}


def _waited(run: Run) -> float | None:
    """Time pending in all: from submission to the end, less the time it held GPUs."""
    if run.end is None:
        return None
    return run.end - run.job.submit - sum(b - a for a, b, *_ in run.segments)


def _cluster(workload: Workload, outcome: Outcome, jobs: list[dict]) -> dict:
    samples = outcome.samples
    held = sum(j["gpu_hours_held"] for j in jobs) * 3600
    useful = sum(j["gpu_hours_useful"] for j in jobs) * 3600
    busy = capacity = frag = energy = 0.0
    power = {p.name: (p.node.accelerator.tdp, p.node.accelerator.idle) for p in workload.graph.partitions}
    for a, b in zip(samples, samples[1:]):
        dt = b.time - a.time
        busy += sum(a.used.values()) * dt
        capacity += sum(a.capacity.values()) * dt
        frag += a.fragmentation * dt
        energy += sum(a.used[n] * power[n][0] + (a.capacity[n] - a.used[n]) * power[n][1] for n in power) * dt
    span = samples[-1].time - samples[0].time if len(samples) > 1 else 0.0
    waits: dict[str, list[float]] = {}
    for j in jobs:
        if j["wait_s"] is not None and not j["service"]:
            waits.setdefault(j["priority_label"], []).append(j["wait_s"])
    order = sorted(waits, key=lambda k: -next(j["priority"] for j in jobs if j["priority_label"] == k))
    return {
        "makespan_s": outcome.end, "utilization": busy / capacity if capacity else 0.0,
        "fragmentation": frag / span if span else 0.0,
        "gpu_energy_j": energy * workload.graph.pue,
        "gpu_hours_held": held / 3600, "gpu_hours_useful": useful / 3600,
        "goodput_share": min(useful / held, 1.0) if held else None,
        "jobs_done": sum(j["state"] == "done" for j in jobs if not j["service"]),
        "jobs": sum(not j["service"] for j in jobs),
        "preemptions": sum(j["preemptions"] for j in jobs), "failures": sum(j["failures"] for j in jobs),
        "timeouts": sum(j["timeouts"] for j in jobs),
        "services": _services(jobs, outcome.end),
        "starts_by_rule": dict(sorted(collections.Counter(s["rule"] for j in jobs for s in j["segments"]).items())),
        "queueing_by_priority": {k: {"jobs": len(waits[k]), "mean_wait_s": statistics.fmean(waits[k]),
                                     "max_wait_s": max(waits[k])} for k in order},
    }


def _services(jobs: list[dict], end: float) -> dict:
    """Per serve job: its stretches due in the simulated span (the last one only up to its
    end), those that started the moment they were due and were never cut short, and the
    GPU-hours it was due against those it held."""
    out: dict[str, dict] = {}
    for j in jobs:
        if not j["service"]:
            continue
        s = out.setdefault(j["service"], {"stretches": 0, "on_time": 0, "gpu_hours_due": 0.0, "gpu_hours_held": 0.0,
                                          "peak_gpus": 0})
        s["stretches"] += 1
        s["on_time"] += j["start_s"] == j["submit_s"] and j["preemptions"] == 0 and j["failures"] == 0
        length = j["time_limit_s"]
        s["gpu_hours_due"] += j["work"] / 3600 * max(0.0, min(length, end - j["submit_s"])) / length
        s["gpu_hours_held"] += j["gpu_hours_useful"] + (j["gpus"] * (end - j["start_s"]) / 3600
                                                        if j["state"] == "running" else 0.0)   # still serving
        s["peak_gpus"] = max(s["peak_gpus"], j["gpus"])
    for s in out.values():
        s["attainment"] = s["gpu_hours_held"] / s["gpu_hours_due"] if s["gpu_hours_due"] else None
    return out


def _optimum(optimum: list[Optimum]) -> dict:
    epochs = [{"time_s": o.time, "milp_value": o.value, "heuristic_value": o.heuristic, "gap": o.gap,
               "status": o.status} for o in optimum]
    gaps = [o.gap for o in optimum if o.gap is not None]
    return {"objective": "sum of priority x throughput / the job's best throughput",
            "epochs": epochs, "mean_gap": statistics.fmean(gaps) if gaps else None,
            "max_gap": max(gaps) if gaps else None}


def _timeline(outcome: Outcome) -> dict:
    samples = outcome.samples
    step = max(1, len(samples) // MAX_POINTS)
    kept = samples[::step]
    if samples and kept[-1] is not samples[-1]:
        kept = kept + (samples[-1],)
    names = list(kept[0].used) if kept else []
    return {"time_s": [s.time for s in kept], "used": {n: [s.used[n] for s in kept] for n in names},
            "capacity": {n: [s.capacity[n] for s in kept] for n in names},
            "pending": [s.pending for s in kept], "fragmentation": [s.fragmentation for s in kept]}


# ----------------------------------------------------------------- text

def _h(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return duration(seconds)


def _pct(x: float | None) -> str:
    return "-" if x is None else percent(x)


def schedule_text(data: dict, limit: int = 40) -> str:
    c = data["cluster_metrics"]
    gpus = sum(p["gpus"] for p in data["partitions"])
    lines = [f"schedule on {data['cluster']} ({gpus:,} GPUs: "
             + ", ".join(f"{p['name']} {p['gpus']:,} {p['chip']}" for p in data["partitions"])
             + f"), policy {data['policy']}, failures {'on (seed ' + str(data['seed']) + ')' if data['failures'] else 'off'}"]
    jobs = [j for j in data["jobs"] if not j["service"]]
    lines += _job_lines(c, jobs, limit)
    lines += _cluster_lines(c)
    lines += _network_lines(jobs)
    lines += _degraded_lines(data, jobs)
    lines += _closing_lines(data, jobs)
    return "\n".join(lines)


def _job_lines(c: dict, jobs: list[dict], limit: int) -> list[str]:
    """The table: a line per service, then per job (the first `limit`)."""
    lines = [f"  {'job':<22} {'prio':>8} {'waited':>9} {'start':>9} {'end':>9} {'GPUs':>6} {'where (last run)':<34} "
             f"{'goodput':>8} {'pre':>3} {'fail':>4}"]
    for name, s in c["services"].items():
        lines.append(f"  {name[:22]:<22} serving: {s['on_time']:,} of {count(s['stretches'], 'stretch', 'stretches')} on time, "
                     f"{_pct(s['attainment'])} of {number(s['gpu_hours_due'])} GPU-h due held, at most "
                     f"{count(s['peak_gpus'], 'GPU')}")
    for j in jobs[:limit]:
        where = f"{j['partition']}: {j['domains']} dom., {j['tier']}" if j["partition"] else "never ran"
        if j["companion"]:   # an rl gang across two partitions: its generation pool too
            where = f"{j['partition']} + {j['companion']['gpus']} {j['companion']['partition']}: {j['domains']} dom."
        lines.append(f"  {j['name'][:22]:<22} {j['priority_label'][:8]:>8} {_h(j['wait_s']):>9} {_h(j['start_s']):>9} "
                     f"{_h(j['end_s']):>9} {j['gpus']:>6} {where[:34]:<34} {_pct(j['goodput_share']):>8} "
                     f"{j['preemptions']:>3} {j['failures']:>4}")
    if len(jobs) > limit:
        lines.append(f"  ... and {len(jobs) - limit:,} more jobs (--json lists them all)")
    return lines


def _cluster_lines(c: dict) -> list[str]:
    """The cluster's totals and which rules started the runs."""
    starts = ", ".join(f"{n:,} {rule}" for rule, n in c["starts_by_rule"].items())
    return [f"  cluster    makespan {_h(c['makespan_s'])}, utilization {_pct(c['utilization'])}, fragmentation "
            f"{_pct(c['fragmentation'])}, goodput {_pct(c['goodput_share'])} of {number(c['gpu_hours_held'])} GPU-h held, "
            f"{c['jobs_done']}/{c['jobs']} jobs done, {count(c['preemptions'], 'preemption')}, "
            f"{count(c['failures'], 'failure')}",
            f"  decisions  runs started by rule: {starts or 'none'}; time limits reached: {c['timeouts']:,}"]


def _network_lines(jobs: list[dict]) -> list[str]:
    """Jobs their neighbours slowed on shared uplinks, and those PFC pauses held."""
    lines = []
    slowed = sorted((j for j in jobs if (j["network_slowdown"] or 1.0) > 1.0005), key=lambda j: -j["network_slowdown"])
    if slowed:
        lines.append("  network    slowed by neighbours on shared uplinks: "
                     + ", ".join(f"{j['name']} +{percent(j['network_slowdown'] - 1)}" for j in slowed[:6])
                     + (f" and {len(slowed) - 6:,} more" if len(slowed) > 6 else ""))
    paused = [j for j in jobs if j.get("pfc_paused_by")]
    if paused:
        lines.append("  network    held by PFC pauses behind a neighbour's expert all-to-all: "
                     + ", ".join(f"{j['name']} (behind {', '.join(j['pfc_paused_by'][:3])})" for j in paused[:6])
                     + (f" and {len(paused) - 6:,} more" if len(paused) > 6 else ""))
    return lines


def _closing_lines(data: dict, jobs: list[dict]) -> list[str]:
    """Unfinished jobs, energy, waits by priority, the MILP optimum's gap and the events."""
    c, lines = data["cluster_metrics"], []
    unfinished = sum(j["state"] in ("pending", "running") for j in jobs)
    if unfinished:
        lines.append(f"  unfinished {count(unfinished, 'job')} had not ended when the simulation stopped at "
                     f"{_h(c['makespan_s'])} (the horizon: submit times and durations are at most 10 years)")
    lines.append(f"  energy     {quantity(c['gpu_energy_j'] / 3600, 'Wh')} (GPUs at TDP when held, idle power otherwise, x PUE)")
    lines.append("  waiting    " + "; ".join(f"{k}: mean {_h(v['mean_wait_s'])}, max {_h(v['max_wait_s'])} ({count(v['jobs'], 'job')})"
                                          for k, v in c["queueing_by_priority"].items()))
    o = data["optimum"]
    if o["epochs"]:
        solved = [e for e in o["epochs"] if e["milp_value"] is not None]
        lines.append(f"  optimum    MILP at {count(len(o['epochs']), 'epoch')} ({len(solved)} solved): mean gap {_pct(o['mean_gap'])}, "
                     f"max {_pct(o['max_gap'])} of priority-weighted throughput")
    lines.append(f"  events     {data['events']['changes']:,} changes, each delivered once by List-Watch "
                 f"({data['events']['delivered']:,} delivered)")
    return lines


def _degraded_lines(data: dict, jobs: list[dict]) -> list[str]:
    """One line per degradation event (what, when, whom it slowed) and the jobs' slowdowns."""
    lines = []
    for e in data.get("degradations", ()):
        where = f" {e['where']}" if e["where"] is not None else ""
        state = "down" if e["share"] == 0 else f"at {percent(e['share'])}"
        whom = ", ".join(e["jobs"]) if e["jobs"] else "no running job"
        lines.append(f"  degraded   {e['part']}{where} of {e['partition']} {state} from {_h(e['start_s'])} to "
                     f"{_h(e['end_s'])}: slowed {whom}")
    slowed = sorted((j for j in jobs if (j.get("degradation_slowdown") or 1.0) > 1.0005),
                    key=lambda j: -j["degradation_slowdown"])
    if slowed:
        lines.append("  degraded   runs stretched by the degraded parts: "
                     + ", ".join(f"{j['name']} +{percent(j['degradation_slowdown'] - 1)}" for j in slowed[:6])
                     + (f" and {len(slowed) - 6:,} more" if len(slowed) > 6 else ""))
    return lines


def progress_line(done: int, total: int) -> str:
    """A long simulation's progress: a 40-character bar and the jobs simulated so far."""
    filled = 40 * done // total
    return f"  simulating [{'#' * filled}{'.' * (40 - filled)}] {done:,}/{total:,} jobs"
