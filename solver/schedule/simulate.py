"""The discrete-event simulation: timers fire, their changes are committed to the API
server, the informer delivers them to the scheduler's cache, and a scheduling cycle
takes pending jobs in the policy's order through filter, score and bind (preempting
where the policy may). Work progresses between checkpoints; a failure or a preemption
loses the work since the last one and costs a restart.
"""

from __future__ import annotations

import bisect
import collections
import math

import attrs
import numpy as np

from ...compiler.trace import MAX_SECONDS
from .events import ApiServer, Change, Informer, Timeline, Timer
from .jobs import Option, SchedJob, Workload
from .policies import Candidate, Policy, victims
from .state import Allocation, ClusterState


@attrs.define
class Run:
    """One job's life in the simulation."""

    job: SchedJob
    remaining: float
    phase: str = "pending"             # pending | running | done
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
    restarts: int = 0
    segments: list = attrs.Factory(list)   # (start, end, partition, gpus, level, domains, why it ended)


@attrs.frozen
class Sample:
    time: float
    used: dict[str, int]
    capacity: dict[str, int]
    pending: int
    fragmentation: float               # share of free GPUs outside wholly free domains


@attrs.frozen
class Epoch:
    """A decision epoch for the optimum: who is present, who runs where, the capacity."""

    time: float
    jobs: tuple[SchedJob, ...]
    running: tuple[tuple[str, str, int], ...]    # job, partition, GPUs
    capacity: dict[str, tuple[int, ...]]          # working GPUs per group (a coarse level)


@attrs.frozen
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


class PendingQueue:
    """The pending jobs: by name in the order they became pending, and sorted by the policy's
    key, kept sorted as jobs come and go (a cycle over a trace's thousands of waiting jobs
    does not sort them again)."""

    def __init__(self, key) -> None:
        self.key, self.jobs, self.sorted = key, {}, []
        self.needs: collections.Counter[int] = collections.Counter()   # the fewest GPUs each job can start on

    def add(self, job: SchedJob) -> None:
        self.jobs[job.name] = job
        bisect.insort(self.sorted, (self.key(job), job.name))
        self.needs[_least(job)] += 1

    def remove(self, name: str) -> None:
        job = self.jobs.pop(name)
        del self.sorted[bisect.bisect_left(self.sorted, (self.key(job), name))]
        self.needs[_least(job)] -= 1
        if not self.needs[_least(job)]:
            del self.needs[_least(job)]

    @property
    def least(self) -> int:
        """The fewest free GPUs any pending job could start on (a job not in a gang takes one)."""
        return min(self.needs, default=0)

    def ordered(self):
        """The jobs in the policy's order, as of now (a pass that stops early reads few)."""
        jobs = self.jobs
        return (jobs[name] for _, name in self.sorted.copy() if name in jobs)

    def values(self):
        return self.jobs.values()

    def __contains__(self, name: str) -> bool:
        return name in self.jobs

    def __len__(self) -> int:
        return len(self.jobs)


def _least(job: SchedJob) -> int:
    return job.least if job.gang else 1


# The simulated horizon: submit times and durations are at most MAX_SECONDS, so a lone job ends
# within twice that without failures. A job that has not ended then (a queue of years of work,
# or one that fails faster than it checkpoints) is reported unfinished: the failure process and
# the scheduler stop here, whatever the durations, so the events a run walks are bounded.
HORIZON_S = 2 * MAX_SECONDS


class Simulation:
    def __init__(self, workload: Workload, policy: Policy, seed: int = 0, failures: bool = True,
                 epochs: int = 8, check=None, progress=None) -> None:
        self.workload, self.policy = workload, policy
        self.rng = np.random.default_rng(seed)
        self.seed, self.with_failures, self.epoch_count = seed, failures, epochs
        self.timeline, self.api = Timeline(), ApiServer()
        self.state = ClusterState.of(workload.graph)
        self.runs = {j.name: Run(j, j.work) for j in workload.jobs}
        # what decides whether a job fits: its partitions, gang and priority, and its sizes
        self.shapes = {j.name: ((tuple(o.partition for o in j.options), j.gang, j.priority),
                                tuple(o.gpus for o in j.options)) for j in workload.jobs}
        self.pending = PendingQueue(policy.key)
        self.running: dict[str, tuple[SchedJob, float]] = {}
        self.priorities: collections.Counter[int] = collections.Counter()   # of the running jobs
        self.evictions = 0
        self.informer = Informer(self.api, {"submitted": self._on_submitted, "bound": self._on_bound,
                                            "released": self._on_released, "node-down": self._on_node,
                                            "node-up": self._on_node})
        self.samples: list[Sample] = []
        self.epochs: list[Epoch] = []
        self.freed = True
        self.fresh: list[str] = []
        self.check, self.progress = check, progress
        self.done = 0
        last = max((j.submit for j in workload.jobs), default=0.0)
        self.epoch_step = last / max(1, epochs - 1) if last > 0 else math.inf
        self.next_epoch = 0.0

    # ------------------------------------------------------------ the cache (informer handlers)
    def _on_submitted(self, c: Change) -> None:
        self.pending.add(self.runs[c.subject].job)
        self.fresh.append(c.subject)

    def _on_bound(self, c: Change) -> None:
        alloc, _ = c.data
        self.state.bind(c.subject, alloc)
        self.pending.remove(c.subject)
        self.running[c.subject] = (self.runs[c.subject].job, c.time)
        self.priorities[self.runs[c.subject].job.priority] += 1

    def _on_released(self, c: Change) -> None:
        self.state.release(c.subject)
        job = self.running.pop(c.subject)[0]
        self.priorities[job.priority] -= 1
        if not self.priorities[job.priority]:
            del self.priorities[job.priority]
        self.freed = True
        if c.data != "finished":
            self.pending.add(self.runs[c.subject].job)
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
        if self.with_failures:
            for name in self.state.partitions:
                self._next_failure(0.0, name, "node-fail")
                self._next_failure(0.0, name, "switch-fail")
        now = 0.0
        while self.timeline and self.done < len(self.runs):
            if self.timeline.peek_time() > HORIZON_S:
                now = self._stop_at_horizon()
                break
            now = self.timeline.peek_time()
            while self.timeline and self.timeline.peek_time() == now:
                self._fire(self.timeline.pop())
            self.informer.sync()
            self._cycle(now)
            self._sample(now)
            if self.check is not None:
                self.check(self)
        return Outcome(self.policy.name, tuple(self.runs.values()), tuple(self.samples), tuple(self.epochs),
                       self.api.version, self.informer.delivered, now, self.seed, self.with_failures)

    def _stop_at_horizon(self) -> float:
        """Close every run still going at the horizon (its segment ends `horizon`; the work
        since its start counts, as a checkpoint taken then would keep it)."""
        for name in list(self.running):
            run = self.runs[name]
            o, alloc = run.option, self.state.allocations[name]
            rate = o.rate * run.gpus / o.gpus
            kept = min(run.remaining, max(0.0, HORIZON_S - run.start - run.delay) * rate)
            run.remaining -= kept
            run.useful += kept / rate * run.gpus
            run.held += (HORIZON_S - run.start) * run.gpus
            run.segments.append((run.start, HORIZON_S, alloc.partition, run.gpus, alloc.level, len(alloc.domains),
                                 "horizon"))
        self._sample(HORIZON_S)
        return HORIZON_S

    def _fire(self, t: Timer) -> None:
        if t.kind == "arrive":
            self.api.commit(t.time, "submitted", t.subject)
        elif t.kind == "finish":
            run = self.runs[t.subject]
            if run.phase == "running" and run.run_id == t.data:   # a run preempted or failed since: stale
                self._stop(t.time, run, "finished")
        elif t.kind == "node-fail":
            self._node_failure(t.time, t.subject)
            self._next_failure(t.time, t.subject, t.kind)
        elif t.kind == "switch-fail":
            self._switch_failure(t.time, t.subject)
            self._next_failure(t.time, t.subject, t.kind)
        elif t.kind == "node-repair":
            self.api.commit(t.time, "node-up", t.subject, t.data)

    # ------------------------------------------------------------ scheduling cycle
    def _cycle(self, now: float) -> None:
        """Passes over the queue: all pending jobs when GPUs were freed (or the policy blocks),
        else only the new arrivals; again while a pass preempts, since evicted jobs are
        pending again and the GPUs left over from an eviction may fit others."""
        full = self.freed or self.policy.blocking
        while True:
            queue = self.pending.ordered() if full else \
                self.policy.order(self.pending.jobs[n] for n in self.fresh if n in self.pending)
            self.freed, self.fresh = False, []
            self._pass(now, queue)
            self.informer.sync()
            if self.policy.blocking or not (self.freed or self.fresh):
                break
            full = self.freed
        if now >= self.next_epoch and len(self.epochs) < self.epoch_count:  # only those the optimum solves
            self._epoch(now)
            self.next_epoch = now + self.epoch_step

    def _pass(self, now: float, queue: list[SchedJob]) -> None:
        """Place the queue's jobs in order. A job like one that just failed to fit (the same
        options, gang and priority, no fewer GPUs) is not tried again until an eviction frees
        GPUs; once no partition has the GPUs the smallest pending job needs and no job left may
        preempt, the pass ends: a queue of a trace's thousands of jobs costs what fits, not
        what waits."""
        failed: dict[tuple, tuple[int, ...]] = {}
        most_free, least = self._most_free(), self.pending.least
        for job in queue:
            if job.name not in self.pending:
                continue
            if most_free < least and not self._may_preempt(job):
                break   # the order is by priority: nothing later may preempt either
            key, sizes = self.shapes[job.name]
            before = failed.get(key)
            if before is not None and all(n >= m for n, m in zip(sizes, before)):
                if self.policy.blocking:
                    break
                continue
            evicted = self.evictions
            placed = self._place(now, job)
            most_free, least = self._most_free(), self.pending.least
            if placed:
                continue
            if self.evictions != evicted:  # an eviction changed what fits: forget what failed
                failed.clear()
            failed[key] = sizes
            if self.policy.blocking:
                break

    def _most_free(self) -> int:
        return max(p.free_gpus for p in self.state.partitions.values())

    def _may_preempt(self, job: SchedJob) -> bool:
        return self.policy.preempts and bool(self.running) and job.priority > min(self.priorities)

    def _place(self, now: float, job: SchedJob) -> bool:
        candidates = self.policy.filter(job, self.state)
        if not candidates and self._may_preempt(job):
            evict = victims(job, self.state, self.running)
            if evict:
                self.evictions += 1
                for name in evict:
                    self.runs[name].preemptions += 1
                    self._stop(now, self.runs[name], "preempted")
                self.informer.sync()
                candidates = self.policy.filter(job, self.state)
        if not candidates:
            return False
        best = max(candidates, key=lambda c: self.policy.score(job, c, self.state))
        alloc = self.policy.bind(job, best, self.state)
        self._start(now, self.runs[job.name], best, alloc)
        self.informer.sync()
        return True

    # ------------------------------------------------------------ runs
    def _start(self, now: float, run: Run, c: Candidate, alloc: Allocation) -> None:
        o = c.option
        rate = o.rate * c.gpus / o.gpus
        run.phase, run.run_id, run.start, run.option, run.gpus = "running", run.run_id + 1, now, o, c.gpus
        run.delay = o.restart if run.restarts else 0.0
        run.first_start = now if run.first_start is None else run.first_start
        checkpoints = math.ceil(run.remaining / (rate * o.interval)) - 1 if math.isfinite(o.interval) else 0
        length = run.delay + run.remaining / rate + max(0, checkpoints) * o.write
        self.api.commit(now, "bound", run.job.name, (alloc, c))
        self.timeline.push(Timer(now + length, "finish", run.job.name, run.run_id))

    def _stop(self, now: float, run: Run, why: str) -> None:
        o, alloc = run.option, self.state.allocations[run.job.name]
        rate = o.rate * run.gpus / o.gpus
        if why == "finished":
            kept, run.phase, run.end = run.remaining, "done", now
            self.done += 1
        else:
            worked = now - run.start - run.delay
            periods = math.floor(worked / (o.interval + o.write)) if worked > 0 and math.isfinite(o.interval) else 0
            kept = min(run.remaining, periods * o.interval * rate) if periods else 0.0   # 0 x inf is nan
            run.phase, run.restarts = "pending", run.restarts + 1
        run.remaining -= kept
        run.useful += kept / rate * run.gpus
        run.held += (now - run.start) * run.gpus
        run.segments.append((run.start, now, alloc.partition, run.gpus, alloc.level, len(alloc.domains), why))
        self.api.commit(now, "released", run.job.name, why)
        if self.progress is not None and why == "finished":
            self.progress(self.done, len(self.runs))

    # ------------------------------------------------------------ failures
    def _next_failure(self, now: float, partition: str, kind: str) -> None:
        if self.done >= len(self.runs):
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
        hit = {n for n, a in self.state.allocations.items()
               if a.partition == partition and not a.index.keys().isdisjoint(range(lo, hi))}
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
        present = tuple(self.runs[n].job for n in list(self.pending.jobs) + list(self.running))
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
