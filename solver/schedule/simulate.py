"""The discrete-event simulation: timers fire, their changes are committed to the API
server, the informer delivers them to the scheduler's cache, and a scheduling cycle
takes pending jobs in the policy's order through filter, score and bind (preempting
where the policy may). Work progresses between checkpoints; a failure or a preemption
loses the work since the last one and costs a restart.
"""

from __future__ import annotations

import collections
import math

import attrs
import numpy as np

from .events import ApiServer, Change, Informer, Timeline, Timer
from .records import Option, SchedJob, Workload
from .policies import Candidate, Policy, victims
from .preemptible import Preemptible
from .horizon import HORIZON_S, stop_at_horizon
from .queue import PendingQueue, may_preempt, place_in_order, shape
from .state import Allocation, ClusterState
from .contention import Contention, bank, hashing_of, repace, time_end
from .degraded import Degradations, Event
from ...dsl.records import define, frozen


FINAL = ("done", "timeout", "cancelled")   # finished; ended by its time limit; cancelled by a preemption


@define
class Run:
    """One job's life in the simulation."""

    job: SchedJob
    remaining: float
    phase: str = "pending"             # pending | running, or one of FINAL
    run_id: int = 0
    start: float = 0.0                 # of the current run
    delay: float = 0.0                 # restart delay of the current run
    option: Option | None = None
    gpus: int = 0
    first_start: float | None = None
    end: float | None = None
    useful: float = 0.0                # GPU-seconds whose work was kept
    held: float = 0.0                  # GPU-seconds allocated
    preemptions: int = 0
    failures: int = 0
    timeouts: int = 0                  # runs ended by the time limit
    restarts: int = 0
    rule: str = ""                     # the rule that started the current run
    segments: list = attrs.Factory(list)   # (start, end, partition, gpus, level, domains, why it ended, rule,
                                           #  the Allocation: its domains and the GPUs held in each)
    # neighbours on shared uplinks stretch a run (contention.py): `pace` wall seconds per
    # second of the run's own (uncontended) time since `paced_at`, `banked` of its own time
    # before then; `length` its own time to the end, `due` the wall time it ends (None: at its limit)
    pace: float = 1.0
    paced_at: float = 0.0
    banked: float = 0.0
    length: float = 0.0
    due: float | None = None
    limit_timer: bool = False
    own_seconds: float = 0.0           # of its own time, over its ended runs (wall / own: the slowdown)
    # the pace is the neighbours' slowdown (`contended`) times the degraded parts' (`degraded`,
    # degraded.py); `undegraded` sums the wall time the run would have taken without the latter
    contended: float = 1.0
    degraded: float = 1.0
    undegraded: float = 0.0
    ever_degraded: bool = False
    paused_by: set = attrs.Factory(set)   # neighbours whose all-to-all's PFC pauses held it (contention.py)

    def own_time(self, now: float) -> float:
        """Seconds of the current run's own time by `now` (wall time where nothing slows it)."""
        return self.banked + (now - self.paced_at) / self.pace


@frozen
class Sample:
    time: float
    used: dict[str, int]
    capacity: dict[str, int]
    pending: int
    fragmentation: float               # share of free GPUs outside wholly free domains


@frozen
class Epoch:
    """A decision epoch for the optimum: who is present, who runs where, the capacity."""

    time: float
    jobs: tuple[SchedJob, ...]
    running: tuple[tuple[str, str, int], ...]    # job, partition, GPUs
    capacity: dict[str, tuple[int, ...]]          # working GPUs per group (a coarse level)


@frozen
class Outcome:
    policy: str
    runs: tuple[Run, ...]
    samples: tuple[Sample, ...]
    epochs: tuple[Epoch, ...]
    changes: int
    delivered: int
    end: float
    seed: int
    failures: bool
    degradations: tuple = ()           # (Event, the jobs it slowed) each (degraded.py)


class Simulation:
    def __init__(self, workload: Workload, policy: Policy, seed: int = 0, failures: bool = True,
                 epochs: int = 8, check=None, progress=None, degradations: tuple[Event, ...] = ()) -> None:
        self.workload, self.policy = workload, policy
        self.rng = np.random.default_rng(seed)
        self.seed, self.with_failures, self.epoch_count = seed, failures, epochs
        self.timeline, self.api = Timeline(), ApiServer()
        self._init_cluster(workload, degradations)
        self._init_queues(workload, policy)
        self._init_records()
        self.check, self.progress = check, progress
        self._init_ending(workload, epochs)

    def _init_cluster(self, workload: Workload, degradations: tuple[Event, ...]) -> None:
        """The cluster's state, and the shared uplinks' contention and degraded parts, if any."""
        self.state = ClusterState.of(workload.graph)
        self.contention = Contention(workload.curves, {p.name: p for p in workload.graph.partitions},
                                     self.state.partitions, {p.name: hashing_of(workload.cluster, p.name)
                                                             for p in workload.graph.partitions}) \
            if workload.curves else None
        self.degradations = Degradations(degradations, workload.graph, self.state.partitions, workload.curves) \
            if degradations else None

    def _init_queues(self, workload: Workload, policy: Policy) -> None:
        """The runs, the pending queue in the policy's order, the running jobs, and the informer
        that keeps them in step with the API server."""
        self.runs = {j.name: Run(j, j.work) for j in workload.jobs}
        self.pending = PendingQueue(getattr(policy, "key", None), getattr(policy, "group", None))   # kept sorted
        self.running: dict[str, tuple[SchedJob, float]] = {}
        self.priorities: collections.Counter[int] = collections.Counter()   # of the running jobs
        # the running jobs in eviction order (policies.victims): built at the first preemption
        # attempt and kept from then on (a policy that never preempts never pays for it)
        self._preemptible: Preemptible | None = None
        self.shapes = {j.name: shape(j) for j in workload.jobs}
        self.evictions = 0
        self.informer = Informer(self.api, {"submitted": self._on_submitted, "bound": self._on_bound,
                                            "released": self._on_released, "node-down": self._on_node,
                                            "node-up": self._on_node})

    def _init_records(self) -> None:
        """What the run records as it goes, and what a policy keeps between its cycles."""
        self.samples: list[Sample] = []
        self.epochs: list[Epoch] = []
        self.freed = True
        self.fresh: list[str] = []
        self.arrived: list[str] = []
        self.reservations: tuple = ()      # what a planning policy (Slurm's backfill) holds for later
        self.memory: dict = {}             # a policy's own state over the run (Slurm's fair-share usage)
        # runs started and stopped, in order, since a policy with a cycle of its own read them
        # (Slurm's fair share and backfill keep running sums, so an event costs what it touches):
        # ("start", name, tenant, partition, GPUs, start, time limit) and
        # ("stop", name, tenant, partition, GPUs, start, end)
        self.run_changes: list[tuple[str, str, str, str, int, float, float]] = []

    def _init_ending(self, workload: Workload, epochs: int) -> None:
        """The runs whose ends end the simulation, the jobs that can grow, and the epochs' spacing."""
        self.done = 0
        # the runs whose ends end the simulation: every job but the stretches of a service,
        # which serve for as long as anything else runs (all of them where nothing else is)
        self.owed = {n for n, r in self.runs.items() if not r.job.service} or set(self.runs)
        # jobs with more than one size on a partition: the only ones that can grow (an rl gang
        # across partitions does not: its sizes are placements, each planned whole)
        self.elastic = {n for n, r in self.runs.items() if r.job.gang and not r.job.service
                        and not any(o.companion for o in r.job.options)
                        and len({(o.partition, o.gpus) for o in r.job.options}) > len(r.job.partitions)}
        self.left = len(self.owed)
        last = max((j.submit for j in workload.jobs), default=0.0)
        self.epoch_step = last / max(1, epochs - 1) if last > 0 else math.inf
        self.next_epoch = 0.0

    # ------------------------------------------------------------ the cache (informer handlers)
    def _on_submitted(self, c: Change) -> None:
        self.pending[c.subject] = self.runs[c.subject].job
        self.fresh.append(c.subject)

    def _on_bound(self, c: Change) -> None:
        alloc, _ = c.data
        self.state.bind(c.subject, alloc)
        del self.pending[c.subject]
        self.running[c.subject] = (self.runs[c.subject].job, c.time)
        self.priorities[self.runs[c.subject].job.priority] += 1
        if self._preemptible is not None:
            self._preemptible.add(c.subject, self.runs[c.subject].job.priority, c.time, alloc)

    def _on_released(self, c: Change) -> None:
        self.state.release(c.subject)
        if self._preemptible is not None:
            self._preemptible.remove(c.subject)
        job = self.running.pop(c.subject)[0]
        self.priorities[job.priority] -= 1
        if not self.priorities[job.priority]:
            del self.priorities[job.priority]
        self.freed = True
        if c.data != "finished":
            self.pending[c.subject] = self.runs[c.subject].job
            self.fresh.append(c.subject)

    def _on_node(self, c: Change) -> None:
        partition, domain, gpus = c.data
        sign = -1 if c.kind == "node-down" else 1
        self.state.partitions[partition].resize(domain, sign * gpus)
        self.freed = self.freed or sign > 0

    # ------------------------------------------------------------ the loop
    def run(self) -> Outcome:
        for job in self.workload.jobs:
            self.timeline.push(Timer(job.submit, "arrive", job.name))
        for index, event in enumerate(self.degradations.events if self.degradations else ()):
            self.timeline.push(Timer(event.start, "degrade", str(index), True))
            self.timeline.push(Timer(event.end, "degrade", str(index), False))
        if self.with_failures:
            for name in self.state.partitions:
                self._next_failure(0.0, name, "node-fail")
                self._next_failure(0.0, name, "switch-fail")
        now = 0.0
        while self.timeline and self.left > 0:
            if self.timeline.peek_time() > HORIZON_S:
                now = stop_at_horizon(self)
                break
            now = self.timeline.peek_time()
            while self.timeline and self.timeline.peek_time() == now:
                self._fire(self.timeline.pop())
            self.informer.sync()
            self._cycle(now)
            self._sample(now)
            if self.check is not None:
                self.check(self)
        # stretches of a service due after everything else ended were never simulated
        runs = tuple(r for r in self.runs.values() if r.job.name in self.owed or r.job.submit <= now)
        return Outcome(self.policy.name, runs, tuple(self.samples), tuple(self.epochs),
                       self.api.version, self.informer.delivered, now, self.seed, self.with_failures,
                       self.degradations.report() if self.degradations else ())

    def _note_pauses(self) -> None:
        """Each running job remembers the neighbours whose PFC pauses hold it now."""
        for name, who in (self.contention.pausers.items() if self.contention is not None else ()):
            self.runs[name].paused_by.update(who)

    def _fire(self, t: Timer) -> None:
        if t.kind == "arrive":
            self.api.commit(t.time, "submitted", t.subject)
        elif t.kind in ("finish", "timeout"):
            run = self.runs[t.subject]
            if run.phase == "running" and run.run_id == t.data and (t.kind == "timeout" or t.time == run.due):
                # else a run preempted or failed since, or re-paced by its neighbours: stale
                if t.kind == "timeout":
                    run.timeouts += 1
                self._stop(t.time, run, "finished" if t.kind == "finish" else "timeout")
        elif t.kind == "node-fail":
            self._node_failure(t.time, t.subject)
            self._next_failure(t.time, t.subject, t.kind)
        elif t.kind == "switch-fail":
            self._switch_failure(t.time, t.subject)
            self._next_failure(t.time, t.subject, t.kind)
        elif t.kind == "node-repair":
            self.api.commit(t.time, "node-up", t.subject, t.data)
        elif t.kind == "degrade":              # a part slows or goes down, or comes back
            self._degrade(t.time, int(t.subject), t.data)
        elif t.kind == "wake":                 # a policy asked to look again (pods ready)
            self.freed = True
        elif t.kind == "deactivate":
            run = self.runs[t.subject]
            if run.phase == "running" and run.run_id == t.data:
                self.evict(t.time, [t.subject], "cancel")

    # ------------------------------------------------------------ scheduling cycle
    def _cycle(self, now: float) -> None:
        """Passes over the queue: all pending jobs when GPUs were freed (or the policy blocks),
        else only the new arrivals; again while a pass preempts, since evicted jobs are
        pending again and the GPUs left over from an eviction may fit others. A policy with
        a `cycle` of its own (Slurm's main loop and backfill) runs that instead."""
        own = getattr(self.policy, "cycle", None)
        if own is not None:
            if self.freed or self.fresh:
                self.arrived = self.fresh          # pending since the policy's last cycle
                self.freed, self.fresh = False, []
                own(self, now)
                self.informer.sync()
            self._epoch_due(now)
            return
        full = self.freed or self.policy.blocking
        self.run_changes.clear()           # read only by policies with a cycle of their own
        while True:
            queue = self.pending.ordered(self.policy) if full else \
                self.policy.order(self.pending[n] for n in self.fresh if n in self.pending)
            self.freed, self.fresh = False, []
            place_in_order(self, now, queue)
            self.informer.sync()
            if self.policy.blocking or not (self.freed or self.fresh):
                break
            full = self.freed
        if getattr(self.policy, "grows", False) and not self.pending:
            self._grow(now)
        self._epoch_due(now)

    def _grow(self, now: float) -> None:
        """Elastic jobs (a GPU range) running below their largest size restart larger when
        nothing waits and GPUs are idle, if that ends them sooner than staying, counting the
        restart and the work since their last checkpoint (TorchElastic-style: a resize is a
        restart from the checkpoint at the new size)."""
        for name in [n for n in self.elastic if n in self.running]:
            job, run, alloc = self.runs[name].job, self.runs[name], self.state.allocations[name]
            room = self.state.partitions[alloc.partition].free_gpus + run.gpus
            bigger = [o for o in job.options if o.partition == alloc.partition and run.gpus < o.gpus <= room]
            if not bigger:
                continue
            o, now_rate = max(bigger, key=lambda o: o.gpus), run.option.rate * run.gpus / run.option.gpus
            worked = max(0.0, run.own_time(now) - run.delay)
            periods = math.floor(worked / (run.option.interval + run.option.write)) if math.isfinite(
                run.option.interval) else 0
            kept = min(run.remaining, periods * run.option.interval * now_rate)
            stay = (run.remaining - min(run.remaining, worked * now_rate)) / now_rate
            grown = o.restart + (run.remaining - kept) / o.rate
            if grown < stay:
                self._stop(now, run, "resized")
                self.informer.sync()
                self._place(now, job)

    def _epoch_due(self, now: float) -> None:
        if now >= self.next_epoch and len(self.epochs) < self.epoch_count:  # only those the optimum solves
            self._epoch(now)
            self.next_epoch = now + self.epoch_step

    def _place(self, now: float, job: SchedJob) -> bool:
        candidates = self.policy.filter(job, self.state)
        evicted = False
        if not candidates and may_preempt(self, job):
            evict = victims(job, self.state, self.running, self.policy, self.preemptible)
            if evict:
                evicted = True
                self.evict(now, evict)
                candidates = self.policy.filter(job, self.state)
        if not candidates:
            return False
        best = max(candidates, key=lambda c: self.policy.score(job, c, self.state))
        self.start(now, job, best, "preempted lower priorities" if evicted else self.policy.name)
        return True

    @property
    def preemptible(self) -> Preemptible:
        if self._preemptible is None:
            self._preemptible = Preemptible.of(self.state, self.running)
        return self._preemptible

    def wake_at(self, time: float) -> None:
        """Run a scheduling cycle at `time` even if nothing else happens then."""
        self.timeline.push(Timer(time, "wake", ""))

    def deactivate_at(self, time: float, name: str) -> None:
        """End `name`'s current run at `time` for good (Kueue deactivating a workload)."""
        self.timeline.push(Timer(time, "deactivate", name, self.runs[name].run_id))

    def evict(self, now: float, names: list[str], mode: str = "requeue") -> None:
        """Preempt the running jobs `names`: requeued from their checkpoint, or (`cancel`) ended."""
        self.evictions += 1
        for name in names:
            self.runs[name].preemptions += 1
            self._stop(now, self.runs[name], "preempted" if mode == "requeue" else "cancelled")
        self.informer.sync()

    def start(self, now: float, job: SchedJob, candidate: Candidate, rule: str) -> None:
        """Bind `job` as `candidate` says and start its run; `rule` names why (the log)."""
        alloc = self.policy.bind(job, candidate, self.state)
        self._start(now, self.runs[job.name], candidate, alloc)
        self.runs[job.name].rule = rule
        self.informer.sync()

    # ------------------------------------------------------------ runs
    def _start(self, now: float, run: Run, c: Candidate, alloc: Allocation) -> None:
        o = c.option
        rate = o.rate * c.gpus / o.gpus
        run.phase, run.run_id, run.start, run.option, run.gpus = "running", run.run_id + 1, now, o, c.gpus
        run.delay = o.restart if run.restarts else 0.0
        run.first_start = now if run.first_start is None else run.first_start
        checkpoints = math.ceil(run.remaining / (rate * o.interval)) - 1 if math.isfinite(o.interval) else 0
        run.length = run.delay + run.remaining / rate + max(0, checkpoints) * o.write
        run.pace, run.paced_at, run.banked, run.limit_timer = 1.0, now, 0.0, False
        self.api.commit(now, "bound", run.job.name, (alloc, c))
        for part in alloc.parts():      # an rl gang's companion pool is charged as its own GPUs are
            self.run_changes.append(("start", run.job.name, run.job.tenant, part.partition, part.gpus, now,
                                     run.job.time_limit))
        paced = self.contention.started(run.job.name, alloc, o.gpus) if self.contention is not None else {}
        self._note_pauses()
        run.contended = paced.pop(run.job.name, 1.0)
        run.degraded = self.degradations.factor(run.job.name, alloc, o.gpus) if self.degradations else 1.0
        run.ever_degraded |= run.degraded > 1.0
        run.pace = run.contended * run.degraded
        time_end(self, now, run)       # its finish, or its time limit (Slurm's --time) where it ends later
        repace(self, now, paced)

    def _stop(self, now: float, run: Run, why: str) -> None:
        o, alloc = run.option, self.state.allocations[run.job.name]
        rate = o.rate * run.gpus / o.gpus
        if why == "finished":
            kept, run.phase, run.end = run.remaining, "done", now
            self._ended(run)
        elif why == "cancelled":                 # preempted with PreemptMode=CANCEL: the job ends
            kept, run.phase, run.end = 0.0, "cancelled", now
            self._ended(run)
        else:
            worked = run.own_time(now) - run.delay
            periods = math.floor(worked / (o.interval + o.write)) if worked > 0 and math.isfinite(o.interval) else 0
            kept = min(run.remaining, periods * o.interval * rate) if periods else 0.0   # 0 x inf is nan
            if why == "timeout" and not (run.job.unit == "tokens" and kept > 0):
                # a trace row, or a run that kept nothing in its limit, ends there: requeued it
                # would time out again (a train job that checkpointed is requeued, like
                # `sbatch --requeue` chaining a long run through its time limits)
                why, run.phase, run.end = "time limit", "timeout", now
                self._ended(run)
            else:
                run.phase, run.restarts = "pending", run.restarts + 1
        run.remaining -= kept
        width = run.gpus + alloc.held_gpus - alloc.gpus     # an rl gang's companion pool holds GPUs too
        run.useful += kept / rate * width
        run.held += (now - run.start) * width
        bank(run, now)
        run.own_seconds += run.own_time(now)
        run.segments.append((run.start, now, alloc.partition, run.gpus, alloc.level, len(alloc.domains), why,
                             run.rule, alloc))
        for part in alloc.parts():
            self.run_changes.append(("stop", run.job.name, run.job.tenant, part.partition, part.gpus, run.start, now))
        self.api.commit(now, "released", run.job.name, "finished" if run.phase in FINAL else why)
        if self.contention is not None:
            repace(self, now, self.contention.stopped(run.job.name))
            self._note_pauses()
        if self.progress is not None and why == "finished":
            self.progress(self.done, len(self.runs))

    def _degrade(self, now: float, index: int, begins: bool) -> None:
        """Event `index` begins or ends: the running jobs it touches go on at their new pace."""
        d = self.degradations
        (d.active.add if begins else d.active.discard)(index)
        paced = {}
        for name in self.running:
            run = self.runs[name]
            if d.touches(d.events[index], self.state.allocations[name]):
                paced[name] = d.factor(name, self.state.allocations[name], run.option.gpus)
                run.ever_degraded |= paced[name] > 1.0
        repace(self, now, paced, "degraded")

    # ------------------------------------------------------------ failures
    def _ended(self, run: Run) -> None:
        self.done += 1
        self.left -= run.job.name in self.owed

    def _next_failure(self, now: float, partition: str, kind: str) -> None:
        if self.left <= 0:
            return
        rel, part = self.workload.reliability[partition], self.state.partitions[partition]
        if kind == "node-fail":
            nodes = part.working_gpus // part.node_gpus
            rate = nodes * (part.node_gpus / rel.gpu_mtbf + 1 / rel.node_mtbf)
        else:
            rate = rel.switches_per_gpu * part.working_gpus / rel.switch_mtbf
        if rate > 0:
            self.timeline.push(Timer(now + self.rng.exponential(1 / rate), kind, partition))

    def _node_failure(self, now: float, partition: str) -> None:
        """A node fails in a domain picked by working GPUs; the GPU slot it takes is free
        or some job's (counts, not identities: the job holding that slot is hit, and more
        of the domain's jobs while fewer than a node's GPUs are free)."""
        part = self.state.partitions[partition]
        d = part.domain_of_working(int(self.rng.integers(part.working_gpus)))
        size = part.node_gpus
        if part.capacity[d] < size:
            return
        slot = int(self.rng.integers(part.capacity[d]))
        if slot >= part.free[d] or part.free[d] < size:
            held = self.state.holders(partition, d)
            holders, offset = list(held), int(part.free[d])
            hit = next((n for n in holders if slot < (offset := offset + held[n])), holders[0])
            for name in [hit] + [h for h in holders if h != hit]:
                if name != hit and part.free[d] >= size:
                    break
                self.runs[name].failures += 1
                self._stop(now, self.runs[name], "failed")
                self.informer.sync()
        self.api.commit(now, "node-down", partition, (partition, d, size))
        self.informer.sync()
        self.timeline.push(Timer(now + self.workload.reliability[partition].node_mttr, "node-repair", partition,
                                 (partition, d, size)))

    def _switch_failure(self, now: float, partition: str) -> None:
        """A leaf switch fails: jobs with GPUs under it crash; traffic reroutes around it
        (ASSUMPTION: no capacity is lost while it is replaced)."""
        part = self.state.partitions[partition]
        level = 1 if len(part.group_domains) > 1 else 0
        per = part.group_domains[level]
        group = int(self.rng.integers(math.ceil(part.domains / per)))
        lo, hi = group * per, (group + 1) * per
        hit = self.state.holders_within(partition, lo, hi)
        for name in sorted(hit):
            self.runs[name].failures += 1
            self._stop(now, self.runs[name], "failed")
        self.informer.sync()

    # ------------------------------------------------------------ records
    def _sample(self, now: float) -> None:
        cap = {n: p.working_gpus for n, p in self.state.partitions.items()}
        used = {n: p.working_gpus - p.free_gpus for n, p in self.state.partitions.items()}
        free = sum(p.free_gpus for p in self.state.partitions.values())
        whole = sum(p.whole_free_gpus for p in self.state.partitions.values())
        frag = 1 - whole / free if free else 0.0
        self.samples.append(Sample(now, used, cap, len(self.pending), frag))

    def _epoch(self, now: float) -> None:
        present = tuple(self.runs[n].job for n in list(self.pending) + list(self.running))
        if not present:
            return
        running = tuple((n, a.partition, a.gpus) for n, a in self.state.allocations.items())
        capacity = {}
        for name, part in self.state.partitions.items():
            level = next(i for i, per in enumerate(part.group_domains) if part.domains / per <= 32)
            per = part.group_domains[level]
            capacity[name] = tuple(int(x) for x in np.add.reduceat(part.capacity, np.arange(0, part.domains, per)))
        self.epochs.append(Epoch(now, present, running, capacity))


def simulate(workload: Workload, policy: Policy, **options) -> Outcome:
    return Simulation(workload, policy, **options).run()
