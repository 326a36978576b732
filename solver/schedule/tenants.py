"""The tenants of a shared cluster, read from its `tenant` declarations, and the check
that each job is charged to one of them where the cluster has any (a Kueue workload needs
a queue; a Slurm job an account)."""

from __future__ import annotations

import attrs

from ...compiler.design import Design, Entity
from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...dsl.records import frozen


@frozen
class Tenant:
    """A tenant of the cluster: its fair-share weight and, per partition, the GPUs it is
    guaranteed (quota) and may borrow beyond it or lend out of it (None: no limit)."""

    name: str
    shares: int = 1
    cohort: str | None = None
    quota: dict[str, int] = attrs.Factory(dict)
    borrowing_limit: dict[str, int | None] = attrs.Factory(dict)
    lending_limit: dict[str, int | None] = attrs.Factory(dict)


def tenants_of(design: Design, cluster: Entity) -> dict[str, Tenant]:
    out = {}
    for t in design.of_kind("tenant"):
        if getattr(t.get("on"), "cluster", t.get("on")).name != cluster.name:
            continue
        out[t.name] = Tenant(t.name, t.get("shares") or 1, t.get("cohort"), _per_partition(t, "quota"),
                             _per_partition(t, "borrowing_limit"), _per_partition(t, "lending_limit"))
    return out


def _per_partition(tenant: Entity, block: str) -> dict[str, int]:
    record = tenant.get(block)
    return {item.name: item.value for item in getattr(record, "items", ())}


def unknown_tenants(jobs: list, tenants: dict[str, Tenant], cluster: Entity) -> list[Diagnostic]:
    """A job naming a tenant the cluster lacks, or (where it has tenants) naming none."""
    if not tenants:
        return []
    out = []
    for job in jobs:
        if job.tenant not in tenants:
            what = (f"`{job.name}` names no tenant, and `{cluster.name}` is shared by tenants" if not job.tenant else
                    f"`{job.name}` is charged to `{job.tenant}`, which is no tenant of `{cluster.name}`")
            hint = codes.suggest(job.tenant, tuple(tenants)) if job.tenant else None
            out.append(codes.TENANT.make(job.span, what=what, notes=[
                hint or f"help: name one of its tenants ({', '.join(tenants)}), such as `tenant = {next(iter(tenants))}`"]))
    return out
