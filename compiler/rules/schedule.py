"""Checks of what configures a shared cluster's scheduler: a `tenant`'s quota and limits
name partitions of its cluster, and a `scheduler` block is named for a policy and holds
only that policy's settings (a Kueue setting in `scheduler slurm` would be ignored)."""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ..design import Entity

# The settings each policy reads (compiler/schema.py SCHEDULER; what they mean:
# solver/schedule/settings.py). `on` and nothing else is shared.
POLICY_SETTINGS = {
    "slurm": ("bf_interval", "bf_window", "bf_resolution", "bf_max_job_test", "max_switch_wait", "priority_max_age",
              "priority_decay_half_life", "priority_calc_period", "preempt_type", "preempt_mode",
              "priority_weight", "qos_grp_gpus", "qos_max_gpus_per_user", "qos_max_jobs_per_user"),
    "kueue": ("queueing", "within_cluster_queue", "reclaim_within_cohort", "borrow_within_cohort", "fair_sharing",
              "wait_for_pods_ready", "topology"),
    "kube": ("scoring",),
    "fifo": (),
    "priority": (),
}


def partition_names(cluster: Entity) -> tuple[str, ...]:
    """The partitions a cluster's GPUs are in (one named for the cluster when it has `units`)."""
    parts = cluster.get("partition")
    return tuple(item.name for item in parts.items) if parts is not None else (cluster.name,)


def tenant_rules(tenant: Entity) -> Iterator[Diagnostic]:
    target = tenant.get("on")
    cluster = getattr(target, "cluster", target)
    if not isinstance(cluster, Entity) or cluster.kind != "cluster":
        return
    known = partition_names(cluster)
    for block in ("quota", "borrowing_limit", "lending_limit"):
        record = tenant.get(block)
        for item in getattr(record, "items", ()):
            if item.name not in known:
                yield codes.TENANT.make(item.span, what=f"`{item.name}` is no partition of `{cluster.name}`",
                                        notes=[codes.suggest(item.name, known) or f"its partitions: {', '.join(known)}"])


def scheduler_rules(scheduler: Entity) -> Iterator[Diagnostic]:
    name = scheduler.name
    if name not in POLICY_SETTINGS:
        yield codes.SCHEDULER_SETTING.make(scheduler.span, what=f"`scheduler {name}` names no scheduling policy",
                                           notes=[codes.suggest(name, tuple(POLICY_SETTINGS))
                                                  or f"help: one of {', '.join(POLICY_SETTINGS)}"])
        return
    own = set(POLICY_SETTINGS[name]) | {"on"}
    for field in scheduler.record.names():
        if field not in own:
            owner = next((p for p, keys in POLICY_SETTINGS.items() if field in keys), None)
            yield codes.SCHEDULER_SETTING.make(
                scheduler.span_of(field), what=f"`{field}` is a setting of `scheduler {owner}`, not of `{name}`",
                notes=[f"help: move it into `scheduler {owner} {{ ... }}`; `{name}` reads "
                       + (", ".join(f"`{k}`" for k in POLICY_SETTINGS[name]) or "no settings")])
