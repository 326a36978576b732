"""What a serving simulation measures: the latency percentiles, goodput and served tokens of
the requests after a warm-up (a system filling up from empty would flatter the tails), and,
while it runs, which SLO bounds are already certainly broken (so that a planner that only
needs to know a candidate fails can stop it there)."""

from __future__ import annotations

import heapq
import math


from ...compiler.serve_trace import Request
from ...dsl.records import frozen

WARMUP = 0.1
METRICS = ("ttft", "tpot", "e2e")


@frozen
class Outcome:
    ttft: tuple[float, ...]     # sorted, seconds, measured requests (inf: never served)
    tpot: tuple[float, ...]
    e2e: tuple[float, ...]
    met: int                    # measured requests meeting every SLO
    window: float               # seconds over which the measured requests arrived
    output_tokens: float        # made during the window, by every request
    preemptions: int
    peak_batch: int = 0         # the most sequences one replica held admitted at once (a run whose peak stays
                                # below its `max_batch` runs the same under any larger one)
    peak_kv_tokens: float = 0.0  # the most layer-mean KV tokens one replica's cache held
    stopped: tuple[str, ...] = ()  # the SLO bounds certainly broken when the run stopped early (its
                                   # percentiles are then partial); empty: it ran to the end

    @property
    def goodput(self) -> float:
        """Requests per second that meet every SLO."""
        return self.met / self.window if self.window > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.window if self.window > 0 else 0.0

    def percentile(self, metric: str, p: float) -> float:
        """Nearest-rank percentile (`p` in 0..100); `mean` for p < 0."""
        values = getattr(self, metric)
        if not values:
            return math.inf
        if p < 0:
            return sum(values) / len(values)
        return values[nearest_rank(p, len(values))]

    def summary(self) -> dict[str, float]:
        out = {f"{m}_{name}_s": self.percentile(m, p) for m in METRICS
               for name, p in (("p50", 50), ("p90", 90), ("p99", 99), ("mean", -1))}
        return out | {"goodput_rps": self.goodput, "output_tokens_per_s": self.tokens_per_s,
                      "requests": len(self.ttft), "preemptions": self.preemptions}


def slo_percentile(key: str) -> tuple[str, float]:
    """`ttft.p99` -> (ttft, 99); a bare name or `.mean` bounds the mean (p = -1)."""
    metric, _, which = key.partition(".")
    return metric, -1.0 if which in ("", "mean") else float(which[1:])


def missed_by(outcome: Outcome, slo: dict[str, float]) -> list[str]:
    """The SLO bounds a run broke: those it stopped at (a stopped run's percentiles are partial),
    else those its simulated percentiles break (bare names bound the mean)."""
    if outcome.stopped:
        return list(outcome.stopped)
    return [key for key, bound in slo.items() if outcome.percentile(*slo_percentile(key)) > bound]


def first_measured(requests: tuple[Request, ...], warmup_s: float | None) -> int:
    """The index of the first measured request: after `warmup_s` seconds of arrivals (but
    most of a short run measured), or after the first tenth."""
    if warmup_s is not None:
        start = requests[0].arrival + warmup_s
        first = next((i for i, r in enumerate(requests) if r.arrival >= start), len(requests) - 1)
        return min(first, int(len(requests) * (1 - WARMUP)))
    return int(len(requests) * WARMUP) if len(requests) >= 20 else 0


class Misses:
    """The SLO bounds a run has already broken for certain, as measured requests finish: a
    nearest-rank percentile p of M values exceeds its bound once M - rank(p) of them do,
    whatever the others turn out to be; a mean once their sum exceeds bound x M (latencies
    are never negative).

    A TTFT or end-to-end value is certain sooner: a request's TTFT is known at its first
    token, and one still without a first token (or an answer) more than the bound after it
    arrived exceeds the bound whatever happens next (`overdue`). A queue that never drains,
    as behind long multi-step scheduling rounds, so breaks a percentile's bound as soon as
    enough requests have waited past it, not only once they finish. So does a TPOT: a request
    still decoding when its output would have had to end to keep within the bound (its first
    token plus the bound for each token after it) exceeds it (`decoding`)."""

    def __init__(self, slo: dict[str, float], measured: int, arrivals: list[tuple[float, int]] | None = None):
        self.rules = []     # (key, metric index, what the tally must exceed or reach)
        for key, bound in slo.items():
            metric, p = slo_percentile(key)
            if metric in METRICS:
                # a mean: the sum of the values past bound x M; a percentile: M - rank values over the bound
                need = (bound * measured, None) if p < 0 else (bound, measured - nearest_rank(p, measured))
                self.rules.append((key, METRICS.index(metric), *need))
        self.tally = [0.0] * len(self.rules)
        self.missed: list[str] = []     # in the order of the SLO block
        # the percentile rules of latencies since arrival, each with the requests it has counted
        # (index -> counted as a miss) and how far through `arrivals` it has looked (the measured
        # requests as (arrival, index), in time order)
        self.arrivals = arrivals or []
        self.clocked = {i: ({}, [0]) for i, (_, metric, _, need) in enumerate(self.rules)
                        if need is not None and measured}
        # the TPOT percentile rules' decoding requests: a heap of (when the output must have
        # ended, index, first token, front end, output tokens) each
        self.deadlines = {i: [] for i in self.clocked if METRICS[self.rules[i][1]] == "tpot"}
        self.due = -math.inf    # no request is overdue before this time (now - arrival > bound implies now >= due)

    def record(self, values: tuple[float, float, float], index: int) -> bool:
        """Count one measured request's (ttft, tpot, e2e); True when a bound becomes broken."""
        return self._count(values, index, range(len(self.rules)))

    def first_token(self, ttft: float, index: int) -> bool:
        """Count a measured request's TTFT at its first token; True when a bound becomes broken."""
        return self._count((ttft, math.nan, math.nan), index,
                           [i for i in self.clocked if METRICS[self.rules[i][1]] == "ttft"])

    def decoding(self, first: float, frontend: float, output: int, index: int) -> None:
        """A measured request has its first token at `first` (the front end's `frontend`
        seconds included, as every token's): its TPOT exceeds each TPOT bound if it is still
        decoding when its output would have had to end within it."""
        if output <= 1:
            return
        for i, heap in self.deadlines.items():
            end = first - frontend + self.rules[i][2] * (output - 1)
            heapq.heappush(heap, (end, index, first, frontend, output))
            self.due = min(self.due, end)

    def overdue(self, now: float) -> bool:
        """Count as broken the bounds of the requests still without a first token (TTFT) or an
        answer (end-to-end) more than the bound after they arrived, and of those still
        decoding past their TPOT's bound: their values will be at least what they would be
        were they to finish now. True when a bound becomes broken. Nothing is due before `due`."""
        broke, self.due = False, math.inf
        for i, (counted, at) in self.clocked.items():
            key, _, bound, need = self.rules[i]
            if key in self.missed:
                continue
            due = self._tpot_due(i, counted, now) if i in self.deadlines else self._waits_due(i, counted, at, now)
            if self.tally[i] >= need:
                self.missed.append(key)
                broke = True
            else:
                self.due = min(self.due, due)
        return broke

    def _waits_due(self, i: int, counted: dict, at: list, now: float) -> float:
        """Count the requests without a first token (an answer) more than the bound after they
        arrived; the time the next one will be."""
        arrivals, bound = self.arrivals, self.rules[i][2]
        while at[0] < len(arrivals) and now - arrivals[at[0]][0] > bound:
            index = arrivals[at[0]][1]
            at[0] += 1
            if index not in counted:     # no first token (answer) yet: it will come after now
                counted[index] = True
                self.tally[i] += 1
        return arrivals[at[0]][0] + bound if at[0] < len(arrivals) else math.inf

    def _tpot_due(self, i: int, counted: dict, now: float) -> float:
        """Count the requests still decoding whose TPOT, were they to finish now, would exceed
        the bound (worked out as the simulator records it, so that its rounding agrees: a
        later finish only adds); the time the next one will be."""
        heap, bound = self.deadlines[i], self.rules[i][2]
        while heap and heap[0][0] <= now:
            _, index, first, frontend, output = heap[0]
            if not (max(now + frontend, first) - first) / (output - 1) > bound:
                break   # rounding: not yet certain
            heapq.heappop(heap)
            if index not in counted:     # still decoding (finished: counted already)
                counted[index] = True
                self.tally[i] += 1
        return heap[0][0] if heap else math.inf

    def _count(self, values, index: int, rules) -> bool:
        broke = False
        for i in rules:
            key, metric, bound, need = self.rules[i]
            if key in self.missed:
                continue
            value = values[metric]
            if i in self.clocked:
                counted = self.clocked[i][0]
                # counted already (at its first token, or overdue) as a miss, or as met: then only
                # a sequence its decode replica can never hold, recorded as never served (inf)
                # after its first token, turns into a miss
                if counted.get(index) or (index in counted and not value > bound):
                    continue
                counted[index] = value > bound
            if need is None:
                self.tally[i] += value
                broke_now = self.tally[i] > bound
            else:
                self.tally[i] += value > bound
                broke_now = self.tally[i] >= need
            if broke_now:
                self.missed.append(key)
                broke = True
        return broke


def nearest_rank(p: float, n: int) -> int:
    return max(0, math.ceil(p / 100 * n) - 1)


def measure(requests: tuple[Request, ...], results: dict[int, tuple[float, float, float]], first: int,
            slo: dict[str, float], finish: float, **counts) -> Outcome:
    """The outcome of the requests from `first` on (`results`: index -> (ttft, tpot, e2e);
    missing: never served); `counts` are the run's other figures (preemptions, peaks, stop)."""
    measured = [results.get(i, (math.inf,) * 3) for i in range(first, len(requests))]
    limits = {m: min((v for k, v in slo.items() if k.startswith(m)), default=math.inf) for m in METRICS}
    met = sum(1 for t, p, e in measured if t <= limits["ttft"] and p <= limits["tpot"] and e <= limits["e2e"])
    # the window is the measured requests' arrivals: served rates are rates of the offered load
    start = requests[first].arrival if measured else 0.0
    end = requests[-1].arrival
    if end <= start:  # everything at once (no rate): until the last finish
        end = finish
    window = max(0.0, end - start)
    tokens = sum(_made_between(requests[i], results.get(i), start, end) for i in range(len(requests)))
    return Outcome(tuple(sorted(m[0] for m in measured)), tuple(sorted(m[1] for m in measured)),
                   tuple(sorted(m[2] for m in measured)), met, window, tokens, **counts)


def _made_between(r: Request, result, start: float, end: float) -> float:
    """Output tokens a request produced in [start, end], spread evenly over its decode."""
    ttft, _, e2e = result or (math.inf,) * 3
    if not math.isfinite(e2e):
        return 0.0
    first, finish = r.arrival + ttft, r.arrival + e2e
    if finish <= first:
        return float(r.output) if start <= finish <= end else 0.0
    overlap = max(0.0, min(end, finish) - max(start, first))
    return r.output * overlap / (finish - first)
