"""Slurm's scheduling as `slurmctld` runs it: the main loop (`sched/builtin` order with
partition blocking) and then the backfill pass (`sched/backfill`), with the
`topology/tree` plugin's lowest-switch best fit for each job it starts.

- Main loop: pending jobs in priority order; a job that fits starts. The first job that
  cannot start blocks its partitions for every job after it in this loop, so the main
  loop never starts a lower priority ahead of a higher one on the same partition
  (https://slurm.schedmd.com/sched_config.html "Scheduling Configuration Guide").
- Backfill: pending jobs in priority order again, at most `bf_max_job_test`; each either
  starts now, if it fits without touching any reservation until its time limit ends, or
  reserves the GPUs it needs from the earliest time it fits (within `bf_window`) for its
  whole time limit (solver/schedule/backfill.py). A job with no time limit can only start
  where nothing is reserved forever after, and a running job with no limit holds its GPUs
  forever in the plan: time limits are what make backfill work.
- Order: the multifactor priority (solver/schedule/multifactor.py: age, Fair Tree fair
  share over the tenants, job size, partition, QOS), recomputed every `PriorityCalcPeriod`
  (default 5 minutes); a job pending since takes its place by its priority on arrival.
- Placement: topology/tree's lowest-switch best fit, as few leaf switches as the job needs
  (the `--switches` the export writes) until it has waited `max_switch_wait` (default 5
  minutes), then anywhere in the partition.
- QOS limits (`qos_grp_gpus`, `qos_max_gpus_per_user`, `qos_max_jobs_per_user`: GrpTRES,
  MaxTRESPerUser and MaxJobsPerUser on gres/gpu, solver/schedule/qos.py): a job a limit
  holds stays pending without blocking its partition, and backfill reserves nothing for it.
- Preemption: none by default (`PreemptType=preempt/none`); with `preempt_type = qos`, a
  job the main loop cannot start evicts running jobs of lower QOS that free a placement
  (`PreemptMode=REQUEUE`: they queue again from their checkpoint; `CANCEL`: they end).

Each start names the rule that made it: `main`, `backfill` or `preempt`; the settings
and their defaults are solver/schedule/settings.py's.
"""

from __future__ import annotations

import bisect
import itertools
import math
import types

import attrs

from .backfill import Refused, Releases, earliest_together, rounded_up
from .records import SchedJob
from .multifactor import FairShare, priorities
from .policies import Candidate, fits, required_level, take, victims
from .qos import QosUsage
from .settings import SlurmSettings
from ...dsl.records import frozen


@frozen
class Reservation:
    job: str
    partition: str
    start: float
    end: float
    gpus: int


@frozen
class Slurm:
    name: str = "slurm"
    preempts: bool = False
    blocking: bool = False
    settings: SlurmSettings = SlurmSettings()

    def order(self, pending, now: float = 0.0, fair: dict[str, float] | None = None, cluster_gpus: int = 1,
              top_qos: int = 1):
        """Highest multifactor priority first; then submitted first, then by name (Slurm's job id)."""
        jobs = list(pending)
        score = priorities(jobs, now, fair or {}, cluster_gpus, top_qos, self.settings)
        return sorted(jobs, key=lambda j: (-score[j.name], j.submit, j.name))

    def filter(self, job, state):
        return fits(job, state)

    def score(self, job, c, state):
        return (-c.level, -c.leftover, c.option.partition in job.prefer, c.gpus)

    def bind(self, job, c, state):
        return take(job, c, state)

    def cycle(self, sim, now: float) -> None:
        keys = self._queue(sim, now)
        self._main(sim, now, _in_order(sim, keys))
        if self._nothing_fits(sim):
            sim.reservations = ()
            return
        if not self._backfill_due(sim, now):
            return
        first = list(itertools.islice(_in_order(sim, keys), self.settings.backfill.max_job_test))
        sim.reservations = self._backfill(sim, now, first)

    def _backfill_due(self, sim, now: float) -> bool:
        """Whether backfill's pass runs now: bf_interval after the last one (its thread
        sleeps between passes); else the simulation is woken when it is due, once."""
        due = sim.memory.get("backfilled_at", -math.inf) + self.settings.backfill.interval
        if now >= due:
            sim.memory["backfilled_at"] = now
            return True
        if sim.memory.get("backfill_wake") != due:
            sim.memory["backfill_wake"] = due
            sim.wake_at(due)
        return False

    def _nothing_fits(self, sim) -> bool:
        """Whether no pending job could start or reserve on any partition even once every
        running job's time limit released its GPUs: the backfill pass would find nothing."""
        _, releases = self._ledgers(sim)
        room = max(part.free_gpus + releases[name].total for name, part in sim.state.partitions.items())
        return room < sim.pending.least if sim.pending else True

    def _queue(self, sim, now: float) -> list[tuple[float, float, str]]:
        """The pending jobs' (-priority, submit, name), sorted, as slurmctld holds them: every
        priority recomputed each PriorityCalcPeriod (fair share with it); a job that became
        pending since takes its place by the priority it gets now. Entries of jobs that
        started stay until the next recomputation (`_in_order` skips them)."""
        if "top_qos" not in sim.memory:
            sim.memory["top_qos"] = max(r.job.priority for r in sim.runs.values())
        memo, fair = sim.memory.get("queue"), self._fair_share(sim, now)
        if memo is None or now >= memo["at"] + self.settings.calc_period:
            jobs = list(sim.pending.values())
            score = priorities(jobs, now, fair, sim.state.total(), sim.memory["top_qos"], self.settings)
            memo = sim.memory["queue"] = {"at": now, "fair": fair,
                                          "keys": sorted((-score[j.name], j.submit, j.name) for j in jobs)}
        else:
            new = [sim.pending[n] for n in sim.arrived if n in sim.pending]
            score = priorities(new, now, memo["fair"], sim.state.total(), sim.memory["top_qos"], self.settings)
            for j in new:
                bisect.insort(memo["keys"], (-score[j.name], j.submit, j.name))
        return memo["keys"]

    def _fair_share(self, sim, now: float) -> dict[str, float]:
        """Fair Tree's factors at `now` (and the ledgers brought up to date)."""
        fair, _ = self._ledgers(sim)
        return fair.factors(fair.usage(now))

    def _ledgers(self, sim) -> tuple[FairShare, dict[str, Releases]]:
        """The fair-share usage and the partitions' releases, brought up to the runs started
        and stopped since the last cycle."""
        if "fairshare" not in sim.memory:
            shares = {name: t.shares for name, t in sim.workload.tenants.items()}
            sim.memory["fairshare"] = FairShare(self.settings.decay_half_life, shares)
            sim.memory["releases"] = {name: Releases() for name in sim.state.partitions}
            sim.memory["qos"] = QosUsage()
        fair, releases, qos = sim.memory["fairshare"], sim.memory["releases"], sim.memory["qos"]
        resolution = self.settings.backfill.resolution
        for kind, name, tenant, partition, gpus, start, last in sim.run_changes:
            if kind == "start":
                fair.started(tenant, gpus, start)
                releases[partition].add(name, rounded_up(start + last, resolution), gpus)
                qos.started(sim.runs[name].job, gpus)
            else:
                fair.stopped(tenant, gpus, start, last)
                releases[partition].remove(name)
                qos.stopped(sim.runs[name].job)
        sim.run_changes.clear()
        return fair, releases

    def placements(self, job: SchedJob, state, now: float, sim=None) -> list[Candidate]:
        """Where `job` may start now: as few leaf switches as it needs (`--switches`, as the
        export asks) until it has waited `max_switch_wait`, anywhere after (topology/tree);
        `sim` is woken when that wait ends if only the switches keep the job waiting."""
        found = self.filter(job, state)
        waited = job.submit + self.settings.max_switch_wait   # the wake time itself: `now - submit`
        if now >= waited:                                     # could round below the wait there and wake forever
            return found
        near = [c for c in found if c.level <= required_level(c, state)]
        if found and not near and sim is not None:
            sim.wake_at(waited)
        return near

    def _main(self, sim, now: float, queue) -> None:
        blocked: set[str] = set()
        everywhere = set(sim.state.partitions)
        for job in queue:
            if blocked >= everywhere:            # nothing after this can start in the main loop
                break
            if job.name not in sim.pending:      # a job this loop preempted earlier (cancelled or requeued)
                continue
            if not self._qos_allows(sim, job, job.least if job.gang else 1):
                continue                         # held by a QOS limit: pending, blocking nothing
            # an rl gang's option needs its companion's partition open too (a heterogeneous job)
            open_to = [o for o in job.options if all(n not in blocked for n, _ in o.needs())]
            found = [c for c in self.placements(job, sim.state, now, sim) if c.option in open_to]
            within = [c for c in found if self._qos_allows(sim, job, c.gpus)]
            if found and not within:
                continue
            found, rule = within, "main"
            if not found and self.settings.preempt_type == "qos" and open_to:
                found, rule = self._preempt(sim, now, job, open_to), "preempt"
            if found:
                sim.start(now, job, max(found, key=lambda c: self.score(job, c, sim.state)), rule)
            else:
                blocked.update(n for o in job.options for n, _ in o.needs())

    def _preempt(self, sim, now: float, job: SchedJob, open_to: list) -> list[Candidate]:
        """Evict the fewest running jobs of lower QOS that let `job` place on an option of
        `open_to` (a dry run first)."""
        allowed = attrs.evolve(job, options=tuple(open_to))
        # the dry run places as the start will, at `now` (`--switches` until max_switch_wait):
        # a victim evicted for a placement the start then refuses would be evicted for nothing
        at_now = types.SimpleNamespace(filter=lambda j, state: self.placements(j, state, now))
        gone = victims(allowed, sim.state, sim.running, at_now, sim.preemptible)
        if not gone:
            return []
        sim.evict(now, gone, "requeue" if self.settings.preempt_mode == "requeue" else "cancel")
        return [c for c in self.placements(job, sim.state, now) if c.option in open_to]

    def _backfill(self, sim, now: float, queue: list[SchedJob]) -> tuple[Reservation, ...]:
        """`queue`: the first bf_max_job_test pending jobs, in priority order."""
        p = self.settings.backfill
        _, releases = self._ledgers(sim)          # the main loop's starts and preemptions too
        profiles = {name: releases[name].profile(now, part.free_gpus) for name, part in sim.state.partitions.items()}
        refused = {name: Refused() for name in profiles}
        least, shortest = sim.pending.least, self._shortest(sim)     # no job left needs less
        reserved, lengths, limited = [], {}, bool(self.settings.qos_limits)
        for job in queue:
            length = lengths.get(job.time_limit)
            if length is None:
                length = lengths[job.time_limit] = rounded_up(job.time_limit, p.resolution)
            best = None
            for option in job.options:
                need = option.gpus if job.gang else 1
                if refused[option.partition].covers(need, length) or limited and not self._qos_allows(sim, job, need):
                    continue
                if option.companion is None:
                    t = profiles[option.partition].earliest(need, length, now + p.window)
                else:   # an rl gang: a heterogeneous job, every component starting at once
                    parts = option.needs()
                    t = earliest_together([profiles[n] for n, _ in parts], [g for _, g in parts], length,
                                          now + p.window)
                if t is None:
                    if option.companion is None:
                        refused[option.partition].add(need, length)
                    if all(r.covers(least, shortest) for r in refused.values()):
                        return tuple(reserved)        # nothing after this can start or reserve
                elif best is None or t < best[0]:
                    best = (t, option, need)
            if best is None:
                continue
            t, option, need = best
            profile = profiles[option.partition]
            companion = option.companion
            if t == now and (companion is None or profiles[companion[0]].least(now, now + length) >= companion[1]):
                candidate = self._placement(sim, now, job, option, profile.least(now, now + length))
                if candidate is not None:
                    sim.start(now, job, candidate, "backfill")
                    profile.hold(now, now + length, candidate.gpus)
                    if companion is not None:
                        profiles[companion[0]].hold(now, now + length, companion[1])
                    continue
            profile.hold(t, t + length, need)
            if companion is not None:
                profiles[companion[0]].hold(t, t + length, companion[1])
            reserved.append(Reservation(job.name, option.partition, t, t + length, need))
        return tuple(reserved)

    def _qos_allows(self, sim, job: SchedJob, gpus: int) -> bool:
        """Whether `job` may start on `gpus` GPUs within its QOS's limits (always, with none)."""
        limits = self.settings.qos_limits
        if not limits:
            return True
        self._ledgers(sim)                      # the runs started since, this pass's included
        return sim.memory["qos"].allows(limits, job, gpus)

    def _shortest(self, sim) -> float:
        """The shortest time limit of any job, on backfill's grid (read once)."""
        if "shortest" not in sim.memory:
            sim.memory["shortest"] = min((rounded_up(r.job.time_limit, self.settings.backfill.resolution)
                                          for r in sim.runs.values()), default=math.inf)
        return sim.memory["shortest"]

    def _placement(self, sim, now: float, job: SchedJob, option, unreserved: int) -> Candidate | None:
        """The best placement of `job` on `option` with at most the GPUs no reservation
        needs over its time limit (a job that is not a gang takes up to that many)."""
        found = [c for c in self.placements(job, sim.state, now) if c.option == option]
        if not found:
            return None
        best = max(found, key=lambda c: self.score(job, c, sim.state))
        if not job.gang and best.gpus > unreserved:
            best = attrs.evolve(best, gpus=unreserved, leftover=best.leftover + best.gpus - unreserved)
        return best if best.gpus <= unreserved or math.isinf(unreserved) else None


def _in_order(sim, keys: list[tuple[float, float, str]]):
    """The pending jobs of `keys`, in its order, each once (a requeued job may have two entries)."""
    seen = set()
    for _, _, name in keys:
        if name in sim.pending and name not in seen:
            seen.add(name)
            yield sim.pending[name]
