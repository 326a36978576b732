"""How the exported Slurm cluster orders, backfills and preempts its jobs: the same settings
the `slurm` schedule policy simulates (solver/schedule/settings.py `settings_of`: the
design's `scheduler slurm { ... }` block, Slurm's defaults for the rest), as slurm.conf lines
and sacctmgr scripts.

- `slurm.conf`: sched/backfill's SchedulerParameters (bf_interval in seconds, bf_window in minutes, bf_resolution,
  bf_max_job_test, max_switch_wait in seconds), priority/multifactor's weights,
  PriorityMaxAge and PriorityDecayHalfLife (whole minutes), PriorityCalcPeriod (minutes), PreemptType
  and PreemptMode.
- `qos.sh`: a QOS per priority the cluster's jobs use, its Priority the simulation's weight
  (low 1, normal 2, high 4, critical 8, a number itself), so that multifactor's QOS factor
  (a QOS's priority over the highest) is the simulation's; with `preempt_type = qos`, each
  QOS may preempt every lower one (the simulation evicts strictly lower priorities); the
  design's QOS limits as GrpTRES=gres/gpu=N, MaxTRESPerUser=gres/gpu=N and MaxJobsPerUser=N
  (https://slurm.schedmd.com/qos.html; slurmctld enforces them with
  AccountingStorageEnforce=limits,qos, which the slurm.conf lines name).
- `accounts.sh`: an account per `tenant` under root with its `shares` as Fairshare (the
  one-level Fair Tree the simulation ranks), allowed every QOS, and each `user` the
  tenant's jobs name (per-user QOS limits count their jobs).
"""

from __future__ import annotations

import math
import shlex

from ...compiler.design import Design, Entity
from ...compiler.trace import PRIORITY_CLASSES, priority_value, workload_jobs
from ...solver.schedule.settings import SlurmSettings, settings_of
from ...solver.schedule.tenants import tenants_of
from .target import ExportError, JobPlan, header


def settings(design: Design, cluster: Entity) -> SlurmSettings:
    return settings_of(design, cluster, "slurm")


def conf_lines(s: SlurmSettings) -> list[str]:
    """slurm.conf's scheduling lines for settings `s` (slurm.conf(5))."""
    bf = s.backfill
    scheduler = (f"bf_interval={_whole(bf.interval, 1, 'bf_interval', 'seconds')},"
                 f"bf_window={_whole(bf.window, 60, 'bf_window', 'minutes')},"
                 f"bf_resolution={_whole(bf.resolution, 1, 'bf_resolution', 'seconds')},"
                 f"bf_max_job_test={bf.max_job_test},"
                 f"max_switch_wait={_whole(s.max_switch_wait, 1, 'max_switch_wait', 'seconds')}")
    w = s.weights
    preempt = s.preempt_type != "none"
    return ["# scheduling as the plan's `slurm` policy simulates it (the design's `scheduler slurm` block, Slurm's",
            "# defaults for the rest): backfill, the multifactor priority, preemption",
            "SchedulerType=sched/backfill",
            f"SchedulerParameters={scheduler}",
            "PriorityType=priority/multifactor",
            f"PriorityWeightAge={w.age}",
            f"PriorityWeightFairshare={w.fairshare}",
            f"PriorityWeightJobSize={w.job_size}",
            f"PriorityWeightPartition={w.partition}",
            f"PriorityWeightQOS={w.qos}",
            f"PriorityMaxAge={minutes(s.max_age, 'priority_max_age')}",
            f"PriorityDecayHalfLife={minutes(s.decay_half_life, 'priority_decay_half_life')}",
            f"PriorityCalcPeriod={_whole(s.calc_period, 60, 'priority_calc_period', 'minutes')}",
            "PriorityFavorSmall=NO",
            *(["# the QOS limits of qos.sh count GPUs as the gres/gpu TRES (registered with slurmdbd when",
               "# slurmctld starts with this line: run qos.sh after that) and hold where slurmdbd enforces them:",
               "# AccountingStorageEnforce=associations,limits,qos (beside the site's AccountingStorageType)",
               "AccountingStorageTRES=gres/gpu"]
              if s.qos_limits else []),
            f"PreemptType=preempt/{s.preempt_type}",
            f"PreemptMode={s.preempt_mode.upper() if preempt else 'OFF'}",
            "# a failed node requeues its job, which restarts from its checkpoint (the goodput model)",
            "JobRequeue=1"]


def _whole(seconds: float, unit: float, name: str, what: str) -> int:
    value = seconds / unit
    if not math.isclose(value, round(value)) or round(value) < 0:
        raise ExportError(f"`scheduler slurm`'s {name} is {seconds:g} s; Slurm counts it in whole {what}: "
                          f"state a multiple of {unit:g} s")
    return int(round(value))


def minutes(seconds: float, name: str) -> str:
    """Slurm's `days-hours:minutes` for a whole number of minutes."""
    total = _whole(seconds, 60, name, "minutes")
    days, rest = divmod(total, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}"


def qos_name(label: str) -> str:
    """The QOS of a priority label: its class, or `p<N>` for a whole number."""
    return label if label in PRIORITY_CLASSES else f"p{label}"


def priorities(design: Design, cluster: Entity, job: JobPlan | None) -> dict[str, int]:
    """{QOS name: weight} of every priority the cluster's jobs use (the root file's train and
    serve jobs and workload rows on it, and the exported job), lowest first."""
    found = {}
    for entity in design.local():
        if not _on(entity, cluster):
            continue
        if entity.kind in ("train", "serve"):
            weight, label = priority_value(entity.get("priority"))
            found[qos_name(label)] = weight
        elif entity.kind == "workload":
            for row in workload_jobs(entity)[0]:
                found[qos_name(row.label)] = row.priority
    if job is not None:
        weight, label = priority_value(job.entity.get("priority"))
        found[qos_name(label)] = weight
    return dict(sorted(found.items(), key=lambda kv: (kv[1], kv[0])))


def _on(entity: Entity, cluster: Entity) -> bool:
    on = entity.get("on")
    return any(getattr(getattr(t, "cluster", t), "name", None) == cluster.name
               for t in (on if isinstance(on, tuple) else (on,)))


def qos_script(qos: dict[str, int], s: SlurmSettings, source: str) -> str:
    """sacctmgr commands creating each QOS (QOS live in slurmdbd, not slurm.conf)."""
    lines = ["#!/bin/sh", header(source, "Slurm QOS for the priorities of the cluster's jobs (run once, as a Slurm admin)"),
             "# Priority: the plan's weight of each priority; multifactor divides it by the highest QOS priority",
             *(["# the GPU limits name the gres/gpu TRES: run this after slurmctld started once with the exported",
                "# slurm.conf (its AccountingStorageTRES=gres/gpu registers it with slurmdbd)"] if s.qos_limits else []),
             "set -e",
             "# adds those missing (`normal` always exists; a QOS already there is left to the modify below)",
             f"sacctmgr -i add qos {','.join(qos)}"]
    for name, weight in qos.items():
        lower = [q for q, w in qos.items() if w < weight]
        preempt = f" Preempt={','.join(lower)}" if s.preempt_type == "qos" and lower else ""
        lines.append(f"sacctmgr -i modify qos where name={name} set Priority={weight}{preempt}{_limits(name, s)}")
    lines.append("# the accounts that submit need these QOS: accounts.sh grants them to the design's tenants,")
    lines.append(f"# or: sacctmgr -i modify account where name=ACCOUNT set QOS+={','.join(qos)}")
    return "\n".join(lines) + "\n"


def _limits(name: str, s: SlurmSettings) -> str:
    """sacctmgr's settings for the QOS limits the design states on QOS `name`."""
    q = s.qos_limits
    out = [f"GrpTRES=gres/gpu={q.grp_gpus[name]}" if name in q.grp_gpus else "",
           f"MaxTRESPerUser=gres/gpu={q.max_gpus_per_user[name]}" if name in q.max_gpus_per_user else "",
           f"MaxJobsPerUser={q.max_jobs_per_user[name]}" if name in q.max_jobs_per_user else ""]
    return "".join(f" {o}" for o in out if o)


def users(design: Design, cluster: Entity) -> dict[str, set[str]]:
    """{tenant: the users its jobs on `cluster` name}: the root file's train jobs and workload rows."""
    out: dict[str, set[str]] = {}
    for entity in design.local():
        if not _on(entity, cluster):
            continue
        if entity.kind == "train" and entity.get("user"):
            out.setdefault(getattr(entity.get("tenant"), "name", ""), set()).add(entity.get("user"))
        elif entity.kind == "workload":
            for row in workload_jobs(entity)[0]:
                if row.user:
                    out.setdefault(row.tenant, set()).add(row.user)
    return out


def accounts_script(design: Design, cluster: Entity, qos: dict[str, int], source: str) -> str | None:
    """sacctmgr commands creating an account per tenant (None without tenants)."""
    tenants = tenants_of(design, cluster)
    if not tenants:
        return None
    default = "normal" if "normal" in qos else next(iter(qos))
    lines = ["#!/bin/sh", header(source, f"Slurm accounts for the tenants of cluster {cluster.name} "
                                          "(run once after qos.sh, as a Slurm admin)"),
             "# Fairshare: the tenant's `shares`; every account sits under root, as Fair Tree ranks them in the plan",
             "set -e"]
    for tenant in tenants.values():
        lines.append(f"sacctmgr -i add account {tenant.name} Fairshare={tenant.shares} QOS={','.join(qos)} "
                     f"DefaultQOS={default} Description='gclc tenant {tenant.name}' "
                     f"Organization={tenant.cohort or tenant.name}")
    named = users(design, cluster)
    for tenant in tenants.values():
        for user in sorted(named.get(tenant.name, ())):
            lines.append(f"sacctmgr -i add user {shlex.quote(user)} Account={tenant.name}")
    lines.append("# then each other user: sacctmgr -i add user NAME Account=TENANT")
    return "\n".join(lines) + "\n"
