"""Slurm's `priority/multifactor` plugin (https://slurm.schedmd.com/priority_multifactor.html):

    priority = PriorityWeightAge       x age factor        (time pending / PriorityMaxAge, at most 1)
             + PriorityWeightFairshare x fair-share factor (Fair Tree, below)
             + PriorityWeightJobSize   x job size factor   (GPUs asked / the cluster's; PriorityFavorSmall=NO)
             + PriorityWeightPartition x partition factor  (every partition's PriorityJobFactor is 1 here: 1)
             + PriorityWeightQOS       x QOS factor        (the QOS's priority / the highest QOS priority)

A design's priority classes are the QOSes (low 1, normal 2, high 4, critical 8; a number
is its own). The fair-share factor is Fair Tree's (https://slurm.schedmd.com/fair_tree.html,
the default algorithm since 19.05) on a one-level tree of accounts, one per tenant: each
account's level fair share is S / U (its normalized shares over its normalized usage, usage
decayed with PriorityDecayHalfLife), accounts are ranked by it, and the factor is the rank
over the account count (1.0 for the least served; ties share the higher rank)."""

from __future__ import annotations

import math

from .records import SchedJob
from .settings import SlurmSettings


class FairShare:
    """Decayed GPU-seconds per tenant: each run's usage accrues while it runs and decays
    with the half-life after (the integral of 2^(-(t - s) / half-life) over its seconds)."""

    def __init__(self, half_life: float, shares: dict[str, int]) -> None:
        self.half_life, self.shares = half_life, dict(shares)
        self.banked: dict[str, tuple[float, float]] = {}      # tenant -> (usage, at time)
        # runs going on, per tenant: GPUs and sum(GPUs x e^(k (start - ref))), so that their usage
        # at `now` is (G - e^(-k (now - ref)) E) / k without a pass over them
        self.k = math.log(2) / half_life
        self.ref = 0.0
        self.going: dict[str, list[float]] = {}

    def started(self, tenant: str, gpus: int, start: float) -> None:
        self._rebase(start)
        g = self.going.setdefault(tenant, [0.0, 0.0])
        g[0] += gpus
        g[1] += gpus * math.exp(self.k * (start - self.ref))

    def stopped(self, tenant: str, gpus: int, start: float, end: float) -> None:
        """A run that `started` ends: its GPU-seconds move from the running sums to the bank."""
        g = self.going[tenant]
        g[0] -= gpus
        g[1] -= gpus * math.exp(self.k * (start - self.ref))
        if g[0] <= 0:                     # none left: clear the rounding the sums carried
            del self.going[tenant]
        self.add(tenant, gpus, start, end)

    def _rebase(self, now: float) -> None:
        """Keep e^(k (start - ref)) near 1: move `ref` to `now` once it is 20 half-lives behind."""
        if self.k * (now - self.ref) > 20 * math.log(2):
            scale = math.exp(-self.k * (now - self.ref))
            for g in self.going.values():
                g[1] *= scale
            self.ref = now

    def _decayed(self, start: float, end: float, now: float) -> float:
        k = math.log(2) / self.half_life
        return (math.exp(-k * (now - end)) - math.exp(-k * (now - start))) / k

    def add(self, tenant: str, gpus: int, start: float, end: float) -> None:
        """Bank a finished stretch of `gpus` GPUs held over [start, end)."""
        value, at = self.banked.get(tenant, (0.0, end))
        self.banked[tenant] = (value * 2 ** (-(end - at) / self.half_life) + gpus * self._decayed(start, end, end), end)

    def usage(self, now: float) -> dict[str, float]:
        """Each tenant's decayed usage at `now`: banked, plus the runs `started` and not yet
        `stopped`."""
        out = {t: v * 2 ** (-(now - at) / self.half_life) for t, (v, at) in self.banked.items()}
        self._rebase(now)
        fade = math.exp(-self.k * (now - self.ref))
        for tenant, (gpus, weighted) in self.going.items():
            out[tenant] = out.get(tenant, 0.0) + max(0.0, gpus - fade * weighted) / self.k
        return out

    def factors(self, usage: dict[str, float]) -> dict[str, float]:
        """Fair Tree's factor of every tenant with shares or usage."""
        tenants = sorted(set(self.shares) | set(usage))
        total_shares = sum(self.shares.get(t, 1) for t in tenants)
        total_usage = sum(usage.values())
        level = {}
        for t in tenants:
            s = self.shares.get(t, 1) / total_shares
            u = usage.get(t, 0.0) / total_usage if total_usage > 0 else 0.0
            level[t] = math.inf if u == 0 else s / u
        ranked = sorted(tenants, key=lambda t: -level[t])
        out, rank = {}, len(tenants)
        for i, t in enumerate(ranked):
            if i and level[t] < level[ranked[i - 1]]:
                rank = len(tenants) - i
            out[t] = rank / len(tenants)
        return out


def priorities(jobs: list[SchedJob], now: float, fair: dict[str, float], cluster_gpus: int, top_qos: int,
               settings: SlurmSettings) -> dict[str, float]:
    """Each pending job's multifactor priority at `now` (`top_qos`: the highest QOS priority)."""
    w = settings.weights
    out = {}
    for j in jobs:
        age = min(1.0, max(0.0, now - j.submit) / settings.max_age)
        size = min(1.0, max(o.gpus for o in j.options) / cluster_gpus)
        out[j.name] = (w.age * age + w.fairshare * fair.get(j.tenant, 1.0) + w.job_size * size + w.partition * 1.0
                       + w.qos * j.priority / top_qos)
    return out
