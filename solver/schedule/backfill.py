"""Slurm's backfill plan (the `sched/backfill` plugin): when can each pending job start,
given what the running jobs hold until their time limits and what the jobs before it in
priority order have reserved?

The plugin keeps, per partition, the free resources over time as a step function (its
`node_space` map), rounded to `bf_resolution`, and walks the pending jobs in priority
order (at most `bf_max_job_test`): a job that fits now without touching any reservation
starts now (it is "backfilled"); otherwise it reserves what it needs from the earliest
time it fits, for its whole time limit, so that no job tested after it can delay it.
Jobs whose earliest start lies beyond `bf_window` get no reservation. The plugin runs
its pass every `bf_interval` seconds, not at every event: between passes only the main
loop starts jobs. (https://slurm.schedmd.com/sched_config.html,
https://slurm.schedmd.com/slurm.conf.html SchedulerParameters: bf_interval, bf_window,
bf_resolution, bf_max_job_test.)

Resources are GPU counts per partition: the lowest-switch placement of `topology/tree`
is chosen when the job starts, and a job that cannot find one group takes GPUs across
groups (as Slurm does without `--switches`), so a count that fits always places.
"""

from __future__ import annotations

import bisect
import itertools
import math

from ...dsl.records import frozen


@frozen
class BackfillParams:
    """SchedulerParameters of sched/backfill, Slurm's defaults (slurm.conf(5))."""

    window: float = 86_400.0        # bf_window: 1440 minutes
    resolution: float = 60.0        # bf_resolution: 60 seconds
    max_job_test: int = 500         # bf_max_job_test
    interval: float = 30.0          # bf_interval: seconds between backfill passes


class Releases:
    """When the running jobs of one partition release their GPUs (each at its time limit on
    backfill's grid), kept as jobs start and stop: a backfill pass reads it in one sweep
    instead of a pass over every running job."""

    def __init__(self) -> None:
        self.times: list[float] = []          # sorted, distinct
        self.gpus: dict[float, int] = {}      # time -> GPUs released then
        self.of: dict[str, tuple[float, int]] = {}
        self.total = 0                        # GPUs released at some time, in all

    def add(self, name: str, time: float, gpus: int) -> None:
        if math.isinf(time):                   # no time limit: never released in backfill's plan
            return
        self.of[name] = (time, gpus)
        if time not in self.gpus:
            bisect.insort(self.times, time)
            self.gpus[time] = 0
        self.gpus[time] += gpus
        self.total += gpus

    def remove(self, name: str) -> None:
        if name not in self.of:
            return
        time, gpus = self.of.pop(name)
        self.gpus[time] -= gpus
        self.total -= gpus
        if not self.gpus[time]:
            del self.gpus[time]
            del self.times[bisect.bisect_left(self.times, time)]

    def profile(self, now: float, free: int) -> "Profile":
        """Free GPUs from `now` on: `free` now, plus every release (one due already counts now)."""
        cut = bisect.bisect_right(self.times, now)
        p = Profile(now, free + sum(self.gpus[t] for t in self.times[:cut]))
        later = self.times[cut:]
        p.times.extend(later)
        p.free.extend(itertools.accumulate((self.gpus[t] for t in later), initial=p.free[0]))
        del p.free[0]     # accumulate repeats its initial value, which free[0] already holds
        return p


class Profile:
    """Free GPUs of one partition over time: a step function, free[i] from times[i] on.
    Changes are holds of `gpus` over [start, end); end may be infinite (no time limit)."""

    def __init__(self, now: float, free: int) -> None:
        self.times: list[float] = [now]
        self.free: list[int] = [free]
        # (GPUs, length, not after) -> the earliest start last found: holds only lower the
        # free counts, so no earlier start can fit later and a search resumes there
        self._found: dict[tuple[int, float, float], float | None] = {}

    @classmethod
    def releasing(cls, now: float, free: int, releases: list[tuple[float, int]]) -> "Profile":
        """`free` GPUs now, and each (time, GPUs) of `releases` back from its time on (running
        jobs' time limits; infinite ones never): one sort, not a pass per release."""
        p = cls(now, free)
        for t, gpus in sorted(r for r in releases if not math.isinf(r[0])):
            if t <= p.times[-1]:
                p.free[-1] += gpus
            else:
                p.times.append(t)
                p.free.append(p.free[-1] + gpus)
        return p

    def _cut(self, t: float) -> int:
        """The index of the step that starts at `t` (split there if needed)."""
        i = bisect.bisect_right(self.times, t) - 1
        if self.times[i] != t:
            self.times.insert(i + 1, t)
            self.free.insert(i + 1, self.free[i])
            i += 1
        return i

    def hold(self, start: float, end: float, gpus: int) -> None:
        lo = self._cut(max(start, self.times[0]))
        hi = len(self.times) if math.isinf(end) else self._cut(end)
        for i in range(lo, hi):
            self.free[i] -= gpus

    def release_at(self, end: float, gpus: int) -> None:
        """GPUs held now come back at `end` (a running job's time limit)."""
        if math.isinf(end):
            return
        self._found.clear()           # more free GPUs: an earlier start may fit now
        for i in range(self._cut(end), len(self.times)):
            self.free[i] += gpus

    def least(self, start: float, end: float) -> int:
        """The fewest free GPUs over [start, end)."""
        i = bisect.bisect_right(self.times, start) - 1
        lowest = self.free[i]
        i += 1
        while i < len(self.times) and self.times[i] < end:
            lowest = min(lowest, self.free[i])
            i += 1
        return lowest

    def earliest(self, gpus: int, length: float, not_after: float) -> float | None:
        """The first time from which `gpus` stay free for `length` seconds, no later than
        `not_after`; None if there is none. Candidates are the step boundaries: a hold
        only ever starts or ends on one. One sweep: a step short of `gpus` rules out every
        start up to it whose `length` reaches it, so the next candidate is the step after.
        A search asked before (same GPUs, length and bound) resumes where it ended: the
        first fitting start is a step boundary, and holds since only removed starts."""
        key = (gpus, length, not_after)
        if key in self._found:
            last = self._found[key]
            if last is None:
                return None
            found = self._sweep(gpus, length, not_after, bisect.bisect_left(self.times, last))
        else:
            found = self._sweep(gpus, length, not_after, 0)
        self._found[key] = found
        return found

    def _sweep(self, gpus: int, length: float, not_after: float, i: int) -> float | None:
        times, free = self.times, self.free
        n = len(times)
        while i < n:
            start = times[i]
            if start > not_after:
                return None
            end, j = start + length, i
            while j < n and (j == i or times[j] < end):
                if free[j] < gpus:
                    break
                j += 1
            else:
                return start
            i = j + 1
        return None


def earliest_together(profiles: list["Profile"], needs: list[int], length: float, not_after: float) -> float | None:
    """The first time from which every profile keeps its need free for `length` seconds (an rl
    gang's two pools start together), no later than `not_after`; None if there is none. Each
    profile's own earliest start bounds it below; candidates are the steps of any of them."""
    firsts = [p.earliest(n, length, not_after) for p, n in zip(profiles, needs)]
    if any(t is None for t in firsts):
        return None
    begin = max(firsts)
    for t in sorted({t for p in profiles for t in p.times if begin <= t <= not_after} | {begin}):
        if all(p.least(t, t + length) >= n for p, n in zip(profiles, needs)):
            return t
    return None


class Refused:
    """The (GPUs, length) a backfill pass found no start for on one partition: the pass only
    ever holds more, so a job needing at least as many for at least as long finds none either."""

    def __init__(self) -> None:
        self.found: list[tuple[int, float]] = []      # none dominates another

    def covers(self, gpus: int, length: float) -> bool:
        for g, t in self.found:
            if g <= gpus and t <= length:
                return True
        return False

    def add(self, gpus: int, length: float) -> None:
        self.found = [(g, t) for g, t in self.found if not (gpus <= g and length <= t)] + [(gpus, length)]


def rounded_up(seconds: float, resolution: float) -> float:
    """A time limit on backfill's grid (it rounds holds outward to bf_resolution)."""
    if math.isinf(seconds) or resolution <= 0:
        return seconds
    return math.ceil(seconds / resolution - 1e-9) * resolution
