"""A discrete-event simulation of continuous batching (vLLM/SGLang-style schedulers).

Requests arrive (a trace or Poisson arrivals) and join the replica with the fewest
requests in hand. Each replica runs iterations back to back: every admitted sequence that
has its prompt decodes one step (speculative decoding: the declared expected tokens per
step), and prompt chunks fill the rest of the iteration's token budget (chunked prefill,
first come first served; with multi-step scheduling only every `scheduler_steps`-th
iteration, the others decode only). A request is admitted while the replica has fewer than
`max_batch` sequences and KV pages for its prompt; when decoding outgrows the cache the
newest sequence is preempted and recomputed later (vLLM's default). The iteration's time
comes from the replica's cost model (`model/inference.py`). With sliding-window layers a
sequence is admitted for its prompt's layer-mean tokens (model/kv.py) and then grows one
token a step in every layer: an upper bound on the cache once its windows are full.

Disaggregated: prefill replicas only run prompts; each finished prompt's cache moves to
a decode replica (`transfer` seconds), which then decodes it. The first token is the
prefill's, so TTFT ends there and the transfer delays the second token.

Latencies are measured on the requests after a warm-up (the first tenth, or the first
`warmup_s` seconds of arrivals): a system filling up from empty would flatter the tails.
"""

from __future__ import annotations

import collections
import heapq
import math
from typing import Callable

import attrs

from ..model.inference import Replica
from ..compiler.serve_trace import Request

WARMUP = 0.1


@attrs.frozen
class Pool:
    replica: Replica
    count: int
    max_batch: int
    kv_tokens: float            # KV cache capacity of one replica, layer-mean tokens (model/kv.py)


@attrs.define(eq=False)
class _Seq:
    request: Request
    index: int
    todo: float                 # prompt tokens still to prefill (after a preemption: prompt and output so far)
    done: float                 # prompt tokens in the cache (a shared prefix counts as done)
    made: float = 0.0           # output tokens generated (while decoding: 1 + server steps - base)
    first: float | None = None  # time of the first token
    base: float = 0.0
    fixed: float = 0.0          # KV tokens it holds beside its output: fresh prompt (layer-mean) and half a page
    state: str = "waiting"      # waiting, prefill or decode
    version: int = 0            # bumps when it leaves decoding, so stale heap entries are skipped


@attrs.define(eq=False)
class _Server:
    """A replica. Decoding sequences are tracked in aggregate (their count, and sums of
    their prompts and start steps), so an iteration costs O(1) plus its admissions and
    finishes rather than O(batch)."""

    pool: Pool
    role: str                   # both, prefill or decode
    waiting: collections.deque = attrs.Factory(collections.deque)
    prefilling: list = attrs.Factory(list)
    order: dict = attrs.Factory(dict)       # admitted sequences in admission order (preemption takes the newest)
    finishing: list = attrs.Factory(list)   # heap of (finish step, tick, version, seq)
    steps: float = 0.0
    count: int = 0              # decoding sequences
    sum_prompt: float = 0.0
    sum_base: float = 0.0
    fixed: float = 0.0          # KV tokens held by admitted sequences beside their outputs
    busy: bool = False
    round: int = 0              # decode steps since prompts last could join (multi-step scheduling)

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.prefilling) + self.count

    @property
    def used(self) -> float:
        return self.fixed + self.count * (1 + self.steps) - self.sum_base

    @property
    def cached(self) -> float:
        """Tokens the decoding sequences read: their prompts and outputs so far."""
        return self.sum_prompt + self.count * (1 + self.steps) - self.sum_base


@attrs.frozen
class Outcome:
    ttft: tuple[float, ...]     # sorted, seconds, measured requests (inf: never served)
    tpot: tuple[float, ...]
    e2e: tuple[float, ...]
    met: int                    # measured requests meeting every SLO
    window: float               # seconds over which the measured requests arrived
    output_tokens: float        # made during the window, by every request
    preemptions: int

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
        return values[max(0, math.ceil(p / 100 * len(values)) - 1)]

    def summary(self) -> dict[str, float]:
        out = {f"{m}_{name}_s": self.percentile(m, p) for m in ("ttft", "tpot", "e2e")
               for name, p in (("p50", 50), ("p90", 90), ("p99", 99), ("mean", -1))}
        return out | {"goodput_rps": self.goodput, "output_tokens_per_s": self.tokens_per_s,
                      "requests": len(self.ttft), "preemptions": self.preemptions}


def simulate(requests: tuple[Request, ...], serve: Pool, prefill: Pool | None = None,
             transfer: Callable[[int], float] | None = None, slo: dict[str, float] | None = None,
             warmup_s: float | None = None) -> Outcome:
    """Run the requests through the pools; `serve` decodes (and prefills when no `prefill` pool).
    Requests arriving in the first `warmup_s` seconds (default: the first tenth) are not measured."""
    return _Simulation(requests, serve, prefill, transfer or (lambda _: 0.0), slo or {}, warmup_s).run()


class _Simulation:
    def __init__(self, requests, serve: Pool, prefill: Pool | None, transfer, slo: dict[str, float],
                 warmup_s: float | None = None):
        self.requests, self.transfer, self.slo, self.warmup_s = requests, transfer, slo, warmup_s
        self.decoders = [_Server(serve, "decode" if prefill else "both") for _ in range(serve.count)]
        self.prefillers = [_Server(prefill, "prefill") for _ in range(prefill.count)] if prefill else []
        self.events: list = []
        self.tick = 0
        self.results: dict[int, tuple[float, float, float]] = {}
        self.finish = 0.0
        self.preemptions = 0

    def push(self, time: float, kind: str, payload) -> None:
        self.tick += 1
        heapq.heappush(self.events, (time, self.tick, kind, payload))

    def run(self) -> Outcome:
        # arrivals come in time order (ties by index) and before any other event at the same
        # time, as if all were queued first; only the servers' events need the heap
        arrivals = sorted(range(len(self.requests)), key=lambda i: (self.requests[i].arrival, i))
        upcoming = 0
        while self.events or upcoming < len(arrivals):
            if upcoming < len(arrivals) and (not self.events or
                                             self.requests[arrivals[upcoming]].arrival <= self.events[0][0]):
                now, kind, payload = self.requests[arrivals[upcoming]].arrival, "arrive", arrivals[upcoming]
                upcoming += 1
            else:
                now, _, kind, payload = heapq.heappop(self.events)
            if kind == "arrive":
                request = self.requests[payload]
                share = self.prefillers[0].pool.replica.engine.prefix_share if self.prefillers else \
                    self.decoders[0].pool.replica.engine.prefix_share
                seq = _Seq(request, payload, request.prompt * (1 - share), request.prompt * share)
                self.enqueue(self.prefillers or self.decoders, seq, now)
            elif kind == "handoff":
                self.enqueue(self.decoders, payload, now)
            else:
                server, parts, decoding = payload
                self.complete(server, parts, decoding, now)
        return self.outcome()

    def enqueue(self, servers: list[_Server], seq: _Seq, now: float) -> None:
        server = min(servers, key=lambda s: s.load)
        server.waiting.append(seq)
        if not server.busy:
            self.start(server, now)

    # ------------------------------------------------------------ one iteration
    def start(self, server: _Server, now: float) -> None:
        r = server.pool.replica
        self.grow(server)
        decoding = server.count
        if decoding and server.round < r.engine.scheduler_steps and server.role != "prefill":
            parts, server.round = [], server.round + 1      # inside a multi-step round: decode only
        else:
            parts, server.round = self.fill(server, r.engine.chunk - decoding * (1 + r.engine.draft)), 1
        if not decoding and not parts:
            server.busy = False
            return
        prefill = sum(n for _, n in parts) if parts else 0
        pairs = sum(r.kv.pairs(s.done, n) for s, n in parts) if parts else 0
        time = r.iteration(decoding, server.cached, prefill, pairs, len(parts))
        server.busy = True
        self.push(now + time, "done", (server, parts, decoding))

    def grow(self, server: _Server) -> None:
        """Room for this step's tokens; preempt the newest sequences while they do not fit."""
        if server.role == "prefill":
            return
        step = server.pool.replica.engine.tokens_per_step
        while server.used + server.count * step > server.pool.kv_tokens and len(server.order) > 1:
            victim, _ = server.order.popitem()
            self.preemptions += 1
            made = 1 + server.steps - victim.base if victim.state == "decode" else victim.made
            if victim.state == "prefill":
                server.prefilling.remove(victim)
            self.release(server, victim)
            share = victim.request.prompt * server.pool.replica.engine.prefix_share
            victim.made, victim.done = made, share
            victim.todo = victim.request.prompt - share + max(0.0, made - 1)
            server.waiting.appendleft(victim)

    def release(self, server: _Server, seq: _Seq) -> None:
        """`seq` leaves the replica's cache."""
        server.fixed -= seq.fixed
        seq.fixed = 0.0
        if seq.state == "decode":
            server.count -= 1
            server.sum_prompt -= seq.request.prompt
            server.sum_base -= seq.base
            seq.version += 1
        seq.state = "waiting"

    def fill(self, server: _Server, budget: float) -> list[tuple[_Seq, float]]:
        """Prompt chunks: sequences part-way through their prompt first, then admissions
        (a sequence whose cache arrived from a prefill replica joins the decoders at once)."""
        parts, pool = [], server.pool
        for seq in server.prefilling:
            if budget <= 0:
                break
            n = min(seq.todo, budget)
            parts.append((seq, n))
            budget -= n
        while server.waiting and (len(server.order) < pool.max_batch or server.role == "prefill"):
            seq = server.waiting[0]
            if seq.todo > 0 and budget <= 0:
                break
            held = pool.replica.kv.tokens_held(seq.request.prompt, 0)  # windowed layers: at most the window
            if server.role != "prefill":
                if server.used + held + seq.made > pool.kv_tokens:
                    if not server.order:  # it can never fit: served never
                        server.waiting.popleft()
                        self.results[seq.index] = (math.inf, math.inf, math.inf)
                        continue
                    break
                seq.fixed = held
                server.fixed += held
                server.order[seq] = None
            server.waiting.popleft()
            if seq.todo <= 0:
                self.begin_decoding(server, seq)
                continue
            seq.state = "prefill"
            server.prefilling.append(seq)
            n = min(seq.todo, budget)
            parts.append((seq, n))
            budget -= n
        return parts

    def begin_decoding(self, server: _Server, seq: _Seq) -> None:
        """`seq` decodes from the next iteration with `seq.made` tokens out."""
        seq.todo, seq.state = 0.0, "decode"
        seq.base = server.steps + 1 - seq.made
        server.count += 1
        server.sum_prompt += seq.request.prompt
        server.sum_base += seq.base
        self.tick += 1
        heapq.heappush(server.finishing, (seq.base + seq.request.output - 1, self.tick, seq.version, seq))

    def complete(self, server: _Server, parts, decoding: int, now: float) -> None:
        if decoding:
            server.steps += server.pool.replica.engine.tokens_per_step
        for seq, n in parts:
            seq.todo -= n
            seq.done += n
            if seq.todo > 1e-9:
                continue
            server.prefilling.remove(seq)
            if seq.first is None:
                seq.first, seq.made = now, 1.0
            if server.role == "prefill":
                seq.todo, seq.state = 0.0, "waiting"
                self.push(now + self.transfer(seq.request.prompt), "handoff", seq)
            elif seq.made >= seq.request.output:
                del server.order[seq]
                self.release(server, seq)
                self.record(seq, now)
            else:
                self.begin_decoding(server, seq)
        while server.finishing and server.finishing[0][0] <= server.steps + 1e-9:
            _, _, version, seq = heapq.heappop(server.finishing)
            if version != seq.version:
                continue  # preempted since
            del server.order[seq]
            self.release(server, seq)
            self.record(seq, now)
        self.start(server, now)

    def record(self, seq: _Seq, now: float) -> None:
        r = seq.request
        ttft = seq.first - r.arrival
        tpot = (now - seq.first) / (r.output - 1) if r.output > 1 else 0.0
        self.results[seq.index] = (ttft, tpot, now - r.arrival)
        self.finish = max(self.finish, now)

    # ------------------------------------------------------------ measurement
    def outcome(self) -> Outcome:
        if self.warmup_s is not None:
            start = self.requests[0].arrival + self.warmup_s
            first = next((i for i, r in enumerate(self.requests) if r.arrival >= start), len(self.requests) - 1)
            first = min(first, int(len(self.requests) * (1 - WARMUP)))  # keep most of a short run measured
        else:
            first = int(len(self.requests) * WARMUP) if len(self.requests) >= 20 else 0
        measured = [self.results.get(i, (math.inf,) * 3) for i in range(first, len(self.requests))]
        limits = {m: min((v for k, v in self.slo.items() if k.startswith(m)), default=math.inf)
                  for m in ("ttft", "tpot", "e2e")}
        met = sum(1 for t, p, e in measured if t <= limits["ttft"] and p <= limits["tpot"] and e <= limits["e2e"])
        # the window is the measured requests' arrivals: served rates are rates of the offered load
        start = self.requests[first].arrival if measured else 0.0
        end = self.requests[-1].arrival
        if end <= start:  # everything at once (no rate): until the last finish
            end = self.finish
        window = max(0.0, end - start)
        tokens = sum(self._made_between(i, start, end) for i in range(len(self.requests)))
        return Outcome(tuple(sorted(m[0] for m in measured)), tuple(sorted(m[1] for m in measured)),
                       tuple(sorted(m[2] for m in measured)), met, window, tokens, self.preemptions)

    def _made_between(self, index: int, start: float, end: float) -> float:
        """Output tokens request `index` produced in [start, end], spread evenly over its decode."""
        ttft, _, e2e = self.results.get(index, (math.inf,) * 3)
        if not math.isfinite(e2e):
            return 0.0
        r = self.requests[index]
        first, finish = r.arrival + ttft, r.arrival + e2e
        if finish <= first:
            return float(r.output) if start <= finish <= end else 0.0
        overlap = max(0.0, min(end, finish) - max(start, first))
        return r.output * overlap / (finish - first)
