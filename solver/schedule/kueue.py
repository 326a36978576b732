"""Kueue's admission (https://kueue.sigs.k8s.io/docs/concepts/): each tenant is a
ClusterQueue with a nominal quota of GPUs per flavor (a partition here); queues of one
cohort lend each other what they leave unused, within their borrowing and lending limits.
A workload is admitted when its queue has the quota (its own, or borrowed from the
cohort) and topology-aware scheduling finds it a place; then it runs.

- Order inside a queue: priority (its WorkloadPriorityClass), then creation time.
  `strict_fifo`: the head blocks its queue; `best_effort_fifo` (the default): a head that
  cannot be admitted steps aside for the next.
- Order across queues, each cycle: with fair sharing, the queue of the lowest dominant
  resource share first; otherwise workloads that fit without borrowing first, then
  priority, then creation time (Kueue's scheduler sorts its heads so).
- Preemption (the ClusterQueue's `preemption`): `within_cluster_queue` evicts lower
  priorities (or newer equal ones) of the same queue; `reclaim_within_cohort` evicts
  workloads of queues borrowing from the cohort when the preemptor stays within its own
  quota; `borrow_within_cohort` evicts lower priorities of other queues while borrowing.
  Candidates from borrowing queues first, then lower priority, then most recently
  admitted; a dry run with them gone must admit the preemptor (quota and placement), and
  those not needed are spared.
- An rl job generating on one partition and training on another is one workload of two pod
  sets, each on its flavor: admitted when both quotas and both placements hold, charged on
  both, and evictable by a preemptor needing either flavor (which frees both).
- Topology-aware scheduling: `preferred` places in the lowest tier that holds the job and
  falls back to spreading; `required` admits only into one group of the smallest tier whose
  groups can hold it.
- `wait_for_pods_ready`: admission is blocked while an admitted workload's pods start
  (`blockAdmission`); a workload whose start takes longer than the timeout is evicted and
  deactivated (ASSUMPTION: `requeuingStrategy.backoffLimitCount = 0`).
With no tenants in the design, one ClusterQueue holds the whole cluster.
"""

from __future__ import annotations


from .records import SchedJob
from .policies import Candidate, fits, required_level, take
from .settings import KueueSettings
from .tenants import Tenant
from ...dsl.records import frozen

DEFAULT_QUEUE = ""


@frozen
class Kueue:
    name: str = "kueue"
    preempts: bool = False
    blocking: bool = False
    settings: KueueSettings = KueueSettings()

    def key(self, job):
        return (-job.priority, job.submit, job.name)

    def order(self, pending):
        return sorted(pending, key=self.key)

    def filter(self, job, state):
        found = fits(job, state)
        if self.settings.topology != "required":
            return found
        return [c for c in found if c.level <= required_level(c, state)]

    def score(self, job, c, state):
        return (-job.options.index(c.option), -c.level, -c.leftover)

    def bind(self, job, c, state):
        return take(job, c, state)

    # ------------------------------------------------------------ the admission cycle
    def group(self, job):
        """Workloads that get the same flavor (the pending queue keeps each group sorted)."""
        return (job.tenant, job.gang, job.options)

    def cycle(self, sim, now: float) -> None:
        queues, spent, evictions = _queues(sim), set(), sim.evictions
        while not self._blocked(sim, now):
            if sim.evictions != evictions:     # evicted workloads gave quota and GPUs back
                spent, evictions = set(), sim.evictions
            heads = self._heads(sim, queues, spent)
            admitted = False
            for job, option, borrows in sorted(heads, key=lambda h: self._rank(sim, queues, h)):
                found = [c for c in self.filter(job, sim.state) if c.option == option]
                rule = "admit, borrowing" if borrows else "admit"
                if not found:
                    found, rule = self._preempt(sim, now, queues, job, option), "preempt"
                if found:
                    sim.start(now, job, max(found, key=lambda c: self.score(job, c, sim.state)), rule)
                    self._pods_starting(sim, now, job, option)
                    admitted = True
                    break
            if not admitted:
                return

    def _heads(self, sim, queues: dict[str, Tenant], spent: set) -> list[tuple[SchedJob, object, bool]]:
        """Per queue, the workload it offers this cycle with the flavor its quota admits it
        on: the first in order (strict) or the first that quota admits (best effort).

        Workloads of one group (queue, gang, options: `group`) get the same answer, so each
        group is asked once, through its first workload, groups in the order of their first
        workloads: the first group with a flavor holds the queue's head. `spent` holds the
        groups that found none earlier in this cycle: quota and free GPUs only shrink until
        an eviction (the caller then clears it), so they find none again. A queue whose least
        workload needs more than its quota admits on any flavor, and that may not preempt,
        offers none."""
        used, strict, tenants = usage(sim), self.settings.queueing == "strict_fifo", bool(sim.workload.tenants)
        firsts: dict[str, list] = {}
        for group, entries in sim.pending.groups.items():
            firsts.setdefault(group[0] if tenants else DEFAULT_QUEUE, []).append((entries[0], group))
        heads = []
        for queue, groups in firsts.items():
            if not self._may_offer(sim, queues, used, queue):
                continue
            for entry, group in sorted(groups):
                if group not in spent:
                    job = sim.pending.jobs[entry[1]]
                    flavor = self._flavor(sim, queues, used, job)
                    if flavor is not None:
                        heads.append((job, *flavor))
                        break
                    spent.add(group)
                if strict:
                    break
        return heads

    def _may_offer(self, sim, queues, used, queue: str) -> bool:
        """Whether `queue` may offer a workload: it may preempt, or its quota (own and
        borrowable) on some flavor holds the least its pending workloads need."""
        if self._may_preempt(queues, queue):
            return True
        least = sim.pending.least_of(queue) if sim.workload.tenants else (sim.pending.least if sim.pending else None)
        if least is None:
            return False
        for flavor in sim.state.partitions:
            room = quota_room(queues, used, queue, flavor)
            if least <= room.own + room.borrowable:
                return True
        return False

    def _flavor(self, sim, queues, used, job: SchedJob):
        """(option, borrows) of the option `job` is offered on: the first whose quota admits it
        and that places now; else the first whose quota admits it (preemption may make room);
        else, where the queue may preempt, its first. None if none. Options are flavors and,
        for an elastic job, its sizes largest first (partial admission)."""
        fitting = []
        for option in job.options:
            rooms = [(quota_room(queues, used, queue_of(sim, job), name), need) for name, need in option.needs(job.gang)]
            if all(need <= room.own + room.borrowable for room, need in rooms):
                fitting.append((option, any(need > room.own for room, need in rooms)))
        placed = [f for f in fitting if any(c.option == f[0] for c in self.filter(job, sim.state))]
        if placed or fitting:
            return (placed or fitting)[0]
        if job.options and self._may_preempt(queues, queue_of(sim, job)):
            first = job.options[0]
            return first, any(need > quota_room(queues, used, queue_of(sim, job), name).own
                              for name, need in first.needs(job.gang))
        return None

    def _may_preempt(self, queues, queue: str) -> bool:
        s = self.settings
        return s.within_cluster_queue != "never" or (
            bool(queues[queue].cohort) and (s.reclaim_within_cohort != "never" or s.borrow_within_cohort != "never"))

    def _rank(self, sim, queues, head) -> tuple:
        job, option, borrows = head
        if self.settings.fair_sharing:
            return (share(queues, usage(sim), queue_of(sim, job)), -job.priority, job.submit, job.name)
        return (borrows, -job.priority, job.submit, job.name)

    # ------------------------------------------------------------ preemption
    def _preempt(self, sim, now: float, queues, job: SchedJob, option) -> list[Candidate]:
        if not self._may_preempt(queues, queue_of(sim, job)):
            return []                  # no policy of its queue lets it evict anyone
        candidates = self._candidates(sim, queues, job, option)
        gone: list[str] = []
        for name in candidates:
            gone.append(name)
            if self._admits(sim, queues, job, option, gone):
                break
        else:
            return []
        for name in list(reversed(gone)):
            if self._admits(sim, queues, job, option, [n for n in gone if n != name]):
                gone.remove(name)
        sim.evict(now, gone)
        return [c for c in self.filter(job, sim.state) if c.option == option]

    def _candidates(self, sim, queues, job: SchedJob, option) -> list[str]:
        """Workloads holding GPUs on a flavor the option needs (an rl gang's two pools: either),
        in Kueue's order of eviction."""
        s, used, queue = self.settings, usage(sim), queue_of(sim, job)
        mine, needs = queues[queue], option.needs(job.gang)
        within_own = all(used.get((queue, name), 0) + need <= mine.quota.get(name, 0) for name, need in needs)
        flavors = {name for name, _ in needs}
        out = []
        for name, (other, started) in sim.running.items():
            shared = [p.partition for p in sim.state.allocations[name].parts() if p.partition in flavors]
            if not shared:
                continue
            theirs = queue_of(sim, other)
            if theirs == queue:
                ok = (s.within_cluster_queue == "lower_priority" and other.priority < job.priority) or (
                    s.within_cluster_queue == "lower_or_newer_equal_priority"
                    and (other.priority < job.priority or (other.priority == job.priority and other.submit > job.submit)))
            elif mine.cohort and queues[theirs].cohort == mine.cohort:
                borrowing = any(used.get((theirs, f), 0) > queues[theirs].quota.get(f, 0) for f in shared)
                ok = borrowing and (
                    (within_own and (s.reclaim_within_cohort == "any"
                                     or (s.reclaim_within_cohort == "lower_priority" and other.priority < job.priority)))
                    or (s.borrow_within_cohort == "lower_priority" and other.priority < job.priority))
            else:
                ok = False
            if ok:
                out.append((theirs == queue, other.priority, -started, name))
        return [name for *_, name in sorted(out)]

    def _admits(self, sim, queues, job: SchedJob, option, gone: list[str]) -> bool:
        """Whether `job` is admitted on `option` with the workloads `gone` evicted: quota and placement."""
        used = usage(sim, without=gone)
        for name, need in option.needs(job.gang):
            room = quota_room(queues, used, queue_of(sim, job), name)
            if need > room.own + room.borrowable:
                return False
        held = [(n, sim.state.release(n)) for n in gone]
        try:
            return any(c.option == option for c in self.filter(job, sim.state))
        finally:
            for name, alloc in held:
                sim.state.bind(name, alloc)

    # ------------------------------------------------------------ waitForPodsReady
    def _pods_starting(self, sim, now: float, job: SchedJob, option) -> None:
        timeout = self.settings.wait_for_pods_ready
        if timeout is None:
            return
        ready = now + option.restart
        starting = sim.memory.setdefault("starting", {})
        if option.restart > timeout:        # never ready in time: evicted at the timeout, deactivated
            sim.deactivate_at(now + timeout, job.name)
            starting[job.name] = now + timeout
        else:
            starting[job.name] = ready
        sim.wake_at(starting[job.name])

    def _blocked(self, sim, now: float) -> bool:
        starting = sim.memory.get("starting", {})
        for name in [n for n, t in starting.items() if t <= now]:
            del starting[name]
        return bool(starting)


@frozen
class Room:
    own: int          # GPUs of the queue's own quota it does not use
    borrowable: int   # GPUs it may still borrow from its cohort


def _queues(sim) -> dict[str, Tenant]:
    tenants = sim.workload.tenants
    if tenants:
        return tenants
    whole = {p.name: p.gpus for p in sim.workload.graph.partitions}
    return {DEFAULT_QUEUE: Tenant(DEFAULT_QUEUE, quota=whole)}


def queue_of(sim, job: SchedJob) -> str:
    """The ClusterQueue `job` is admitted by: its tenant's, or the cluster's one queue where
    the design declares no tenants (a trace's tenant column then only names accounts)."""
    return job.tenant if sim.workload.tenants else DEFAULT_QUEUE


def usage(sim, without: list[str] = ()) -> dict[tuple[str, str], int]:
    """GPUs each (queue, flavor) has admitted, less the workloads `without`: a running sum
    kept from the runs started and stopped since the last call (no pass over the admitted)."""
    used = sim.memory.setdefault("admitted", {})
    for kind, name, _, partition, gpus, *_ in sim.run_changes:
        key = (queue_of(sim, sim.runs[name].job), partition)
        used[key] = used.get(key, 0) + (gpus if kind == "start" else -gpus)
    sim.run_changes.clear()
    out = dict(used)
    for name in without:
        for part in sim.state.allocations[name].parts():      # an rl gang's two pools
            key = (queue_of(sim, sim.runs[name].job), part.partition)
            out[key] -= part.gpus
    return {key: gpus for key, gpus in out.items() if gpus}


def quota_room(queues: dict[str, Tenant], used, tenant: str, flavor: str) -> Room:
    """What `tenant`'s queue may still admit on `flavor`: its unused nominal quota, and what
    its cohort lends (the others' unused quota within their lending limits, less what other
    queues already borrow), within its own borrowing limit."""
    q = queues[tenant]
    mine = used.get((tenant, flavor), 0)
    own = max(0, q.quota.get(flavor, 0) - mine)
    if not q.cohort:
        return Room(own, 0)
    lent, taken = 0, 0
    for other in queues.values():
        if other.name == tenant or other.cohort != q.cohort:
            continue
        nominal, theirs = other.quota.get(flavor, 0), used.get((other.name, flavor), 0)
        limit = other.lending_limit.get(flavor)
        lent += min(nominal if limit is None else limit, max(0, nominal - theirs))
        taken += max(0, theirs - nominal)
    borrowed = max(0, mine - q.quota.get(flavor, 0))
    available = max(0, lent - taken)
    limit = q.borrowing_limit.get(flavor)
    if limit is not None:
        available = min(available, max(0, limit - borrowed))
    return Room(own, available)


def share(queues: dict[str, Tenant], used, tenant: str) -> float:
    """Kueue's dominant resource share of a queue: the most it uses above its quota on any
    flavor, over what its cohort could lend there, divided by its fair-sharing weight."""
    q = queues[tenant]
    worst = 0.0
    for flavor in {f for (_, f) in used} | set(q.quota):
        above = max(0, used.get((tenant, flavor), 0) - q.quota.get(flavor, 0))
        pool = sum(o.quota.get(flavor, 0) for o in queues.values() if o.cohort == q.cohort and o.cohort)
        if above and pool:
            worst = max(worst, above / pool)
    return worst / q.shares
