"""A discrete-event simulation of continuous batching, as the named engine schedules it
(model/serve/engines.py).

Requests arrive (a trace or Poisson arrivals) and join the replica the pool's router picks
(default: the one with the fewest requests in hand; ROUTERS). Each replica runs iterations back to back: every admitted sequence that
has its prompt decodes one step (speculative decoding: the declared expected tokens per
step), and prompt chunks fill the rest of the iteration's token budget (chunked prefill,
first come first served; with multi-step scheduling only every `scheduler_steps`-th
iteration, the others decode only). An engine that does not mix (`mixed = False`: vLLM's V0
scheduler, SGLang) runs waiting prompts first, in iterations of their own, while the decodes
wait. A request is admitted while the replica has fewer than `max_batch` sequences and KV
pages for its prompt (an engine that reserves admits it only when its whole length fits, and
never preempts); when decoding outgrows the cache the newest sequence is preempted and
recomputed later (vLLM's default) or swapped to host memory and back over the host link. The
iteration's time comes from the replica's cost model (`model/serve/inference.py`), the
engine's host time included; the engine's front end adds to every TTFT and end-to-end time. The cache is counted exactly in
layer-mean tokens (model/serve/kv.py): a sequence is admitted for its prompt's pages and then
grows a token a step in every layer until it reaches the window; from there its windowed
layers stay full and flat while its global layers keep growing.

Disaggregated: prefill replicas only run prompts; each finished prompt's cache moves to
a decode replica (`transfer` seconds), which then decodes it. The first token is the
prefill's, so TTFT ends there and the transfer delays the second token.

Latencies are measured on the requests after a warm-up (solver/serve/outcome.py). A planner
that only needs to know whether a run breaks its SLOs may stop it as soon as one is broken
for certain (`stop`): TTFT and end-to-end percentiles already while requests wait past
their bound, TPOT ones while requests still decode past theirs (solver/serve/outcome.py `Misses`).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
import random
from typing import Callable

import attrs

from ...model.comms import host_rate
from ...model.serve.inference import Replica
from ...compiler.schema import SERVE_ROUTERS as ROUTERS
from ...compiler.serve_trace import Request
from .outcome import Misses, Outcome, first_measured, measure
from ...dsl.records import define, frozen

__all__ = ["Outcome", "Pool", "ROUTERS", "begin", "simulate"]

ROUTER_SEED = 0     # the random routers draw from a fixed seed: a plan is the same run to run


@frozen
class Pool:
    replica: Replica
    count: int
    max_batch: int
    kv_tokens: float            # KV cache capacity of one replica, layer-mean tokens (model/serve/kv.py)
    router: str = "least_requests"   # how arrivals pick a replica (ROUTERS)


@frozen
class Backlog:
    """One busy replica's unserved requests (`_Simulation.backlog`)."""

    end: float                  # when its iteration in flight ends
    longest: int                # decode iterations the one that needs most still needs
    slots: int                  # decode iterations they still need, summed over them
    area: float                 # layer-mean cached tokens they hold over those iterations, at least


@define(eq=False)
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
    full: bool = False          # decoding past the window: its windowed layers no longer grow
    version: int = 0            # bumps when it leaves decoding, so stale heap entries are skipped
    reserved: float = 0.0       # KV tokens held for its whole length (engines that reserve)
    swapped: float = 0.0        # KV tokens it left in host memory when preempted (swap)


@define(eq=False)
class _Server:
    """A replica. Decoding sequences are tracked in aggregate (their count, and sums of
    their prompts and start steps), so an iteration costs O(1) plus its admissions and
    finishes rather than O(batch).

    With sliding-window layers, a sequence of prompt P with m tokens out holds
    effective(P + m) - effective(P) layer-mean tokens beside its prompt: m below the window w,
    g m + (1 - g) max(0, w - P) past it (g: the share of global layers). Those past the
    window are summed apart (`full_*`); each moves there at the step it reaches the window
    (the `filling` heap)."""

    pool: Pool
    role: str                   # both, prefill or decode
    waiting: collections.deque = attrs.Factory(collections.deque)
    prefilling: list = attrs.Factory(list)
    order: dict = attrs.Factory(dict)       # admitted sequences in admission order (preemption takes the newest)
    finishing: list = attrs.Factory(list)   # heap of (finish step, tick, version, seq)
    steps: float = 0.0
    count: int = 0              # decoding sequences
    sum_prompt: float = 0.0
    sum_prompt_read: float = 0.0  # layer-mean tokens of their prompts (KVLayout.effective): what decoding reads of them
    sum_base: float = 0.0
    fixed: float = 0.0          # KV tokens held by admitted sequences beside their outputs
    filling: list = attrs.Factory(list)     # heap of (step it reaches the window, tick, version, seq)
    full_count: int = 0         # decoding sequences past the window
    full_sum_base: float = 0.0
    full_offset: float = 0.0    # their sum of (1 - g) max(0, w - P)
    window: float = 0.0         # the model's window (0: none)
    frozen: float = 0.0         # 1 - g: the share of layers that stop growing at the window
    busy: bool = False
    round: int = 0              # decode steps since prompts last could join (multi-step scheduling)
    reserved: float = 0.0       # KV tokens reserved for admitted sequences' whole lengths
    copying: float = 0.0        # seconds of KV swapped to or from host memory the next iteration waits for

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.prefilling) + self.count

    def __attrs_post_init__(self) -> None:
        shape = self.pool.replica.kv.shape
        self.window = shape.window or 0
        self.frozen = shape.local_layers / shape.layers if self.window else 0.0

    @property
    def used(self) -> float:
        """Layer-mean KV tokens held now (call `reach` first when the steps moved)."""
        return self.fixed + self.grown

    @property
    def grown(self) -> float:
        """Layer-mean KV tokens the decoding sequences' outputs add to their prompts:
        effective(P + m) - effective(P) summed sequence by sequence."""
        outputs = self.count * (1 + self.steps) - self.sum_base
        if not self.full_count:
            return outputs
        full = self.full_count * (1 + self.steps) - self.full_sum_base
        return outputs - self.frozen * full + self.full_offset

    def growth(self, step: float) -> float:
        """Layer-mean tokens the decoding sequences add in the next `step` tokens each: a
        sequence reaching the window within it adds g for each token past the window."""
        add = step * (self.count - self.frozen * self.full_count)
        if self.filling and self.filling[0][0] < self.steps + step:
            end = self.steps + step
            add -= self.frozen * sum(end - at for at, _, version, seq in self.filling
                                     if at < end and version == seq.version)
        return add

    def reach(self) -> None:
        """Sequences whose output has reached the window by now count as past it."""
        while self.filling and self.filling[0][0] <= self.steps:
            _, _, version, seq = heapq.heappop(self.filling)
            if version == seq.version:
                self.fill_window(seq)

    def fill_window(self, seq: _Seq) -> None:
        seq.full = True
        self.full_count += 1
        self.full_sum_base += seq.base
        self.full_offset += self.frozen * max(0.0, self.window - seq.request.prompt)

    @property
    def cached(self) -> float:
        """Tokens the decoding sequences read: their prompts and outputs so far."""
        return self.sum_prompt + self.count * (1 + self.steps) - self.sum_base

    @property
    def read(self) -> float:
        """Layer-mean tokens the decoding sequences read in a step, sequence by sequence: a
        windowed layer reads min(length, window) of each, a global layer all (exact, where the
        mean length would give an upper bound). Without windows: `cached`, as it is."""
        if not self.window:
            return self.cached
        return self.sum_prompt_read + self.grown


def simulate(requests: tuple[Request, ...], serve: Pool, prefill: Pool | None = None,
             transfer: Callable[[int], float] | None = None, slo: dict[str, float] | None = None,
             warmup_s: float | None = None, stop: Callable[[tuple[str, ...]], bool] | None = None) -> Outcome:
    """Run the requests through the pools; `serve` decodes (and prefills when no `prefill` pool).
    Requests arriving in the first `warmup_s` seconds (default: the first tenth) are not measured.
    `stop` is asked, each time another SLO bound becomes certainly broken, whether to end the
    run there (given those bounds, in the order of `slo`; the outcome's `stopped` names them)."""
    return _Simulation(requests, serve, prefill, transfer or (lambda _: 0.0), slo or {}, warmup_s, stop).run()


def begin(requests: tuple[Request, ...], serve: Pool, warmup_s: float | None = None) -> "_Simulation":
    """`simulate` as a run to advance in steps (`advance`, `least_e2e`, `backlog`), for a search that may
    stop it once it is certainly worse than an answer; `run` ends it with the same outcome."""
    return _Simulation(requests, serve, None, lambda _: 0.0, {}, warmup_s, None)


class _Simulation:
    def __init__(self, requests, serve: Pool, prefill: Pool | None, transfer, slo: dict[str, float],
                 warmup_s: float | None = None, stop=None):
        self.requests, self.transfer, self.slo = requests, transfer, slo
        self.decoders = [_Server(serve, "decode" if prefill else "both") for _ in range(serve.count)]
        self.prefillers = [_Server(prefill, "prefill") for _ in range(prefill.count)] if prefill else []
        self.events: list = []
        self.tick = 0
        self.results: dict[int, tuple[float, float, float]] = {}
        self.finish = 0.0
        self.preemptions = 0
        self.peak_batch = 0
        self.peak_kv = 0.0
        self.first = first_measured(requests, warmup_s) if requests else 0
        # arrivals come in time order (ties by index) and before any other event at the same
        # time, as if all were queued first; only the servers' events need the heap
        self.arrivals = sorted(range(len(requests)), key=lambda i: (requests[i].arrival, i))
        self.misses = Misses(slo, len(requests) - self.first, [(requests[i].arrival, i) for i in self.arrivals
                                                               if i >= self.first]) if stop else None
        self.stop, self.stopped = stop, ()
        self.upcoming = 0       # the next arrival to come (an index into `arrivals`)
        # Quiet decode steps run inside `start` (`decode_on`): up to the next arrival where nothing
        # else can reach a replica, else (a prefill pool hands sequences over, or the run may stop)
        # up to the next event of any replica too
        self.independent = stop is None and not self.prefillers
        self.turn = collections.Counter()           # round robin: the next replica of each pool
        self.loads: list | None = None              # [replicas, heap, loads, last chosen] (`least_loaded`)
        self.draws = random.Random(ROUTER_SEED)
        self.fresh: list = []                       # `backlog`'s terms of each request before it decodes

    def push(self, time: float, kind: str, payload) -> None:
        self.tick += 1
        heapq.heappush(self.events, (time, self.tick, kind, payload))

    def run(self) -> Outcome:
        self.advance(math.inf)
        return self.outcome()

    def next_time(self) -> float:
        """When the next event happens (inf: none is left): every request not yet served ends
        at an event, none before this."""
        arrival = self.requests[self.arrivals[self.upcoming]].arrival if self.upcoming < len(self.arrivals) \
            else math.inf
        return min(arrival, self.events[0][0]) if self.events else arrival

    def least_e2e(self) -> float:
        """A lower bound of the largest measured end-to-end time the run will report: the largest
        so far, and, while a measured request is unserved, the next event's time less the latest
        arrival (it ends at an event, none earlier: `next_time`; rounding is monotone, so the
        difference is no larger than its own)."""
        first, results = self.first, self.results
        if first == 0:      # (every request measured: no index to test)
            least, served = max((v[2] for v in results.values()), default=-math.inf), len(results)
        else:
            least = max((v[2] for i, v in results.items() if i >= first), default=-math.inf)
            served = sum(1 for i in results if i >= first)
        if served < len(self.requests) - first:
            latest = max(q.arrival for q in self.requests)
            least = max(least, self.next_time() - latest)
        return least

    def backlog(self, fresh: list | None = None) -> list[Backlog] | None:
        """What each busy replica's unserved requests still need once its iteration in flight
        ends (for a lower bound of the run's end: solver/rl/generation.py `GenerationRun.least`);
        None unless every request has arrived and is measured, with one pool (then every unserved
        request is in the hands of a busy replica, and nothing more of its runs before its
        iteration in flight ends: an idle replica has none, `start`). Each sequence's decode
        iterations still to run count from the most output it can have after that iteration (a
        step more than now) and end as `complete` finishes it; in each it holds its prompt's
        cache and at least its output so far in every global layer (`KVLayout.least_total`); a
        prompt not yet through prefill makes its first token there (`complete`). `fresh`: a list
        where the caller keeps each request's terms while it waits with at most its first token
        made (filled here when empty), for the runs of layouts of one KV layout and step."""
        if self.first or self.prefillers or self.upcoming < len(self.arrivals):
            return None
        ends = {id(payload[0]): time for time, _, kind, payload in self.events if kind == "done"}
        kv = self.decoders[0].pool.replica.kv
        step, share = self.decoders[0].pool.replica.engine.tokens_per_step, kv.least_total(1.0)

        def terms(made: float, left: float, held: float) -> tuple[int, float]:
            n = max(0, math.ceil(left / step - 1e-6))
            return n, n * held + share * (n * made + step * n * (n - 1) / 2)

        fresh = self.fresh if fresh is None else fresh
        if not fresh:               # a waiting sequence with at most its first token made, by request
            fresh.extend(terms(1.0, q.output - 1.0, kv.tokens_held(q.prompt, 0)) for q in self.requests)
        out = []
        for server in self.decoders:
            if not server.busy:
                continue
            steps, longest, slots, area = server.steps, 0, 0, 0.0
            for seq in itertools.chain(server.order, server.waiting):
                q = seq.request
                if seq.state == "decode":
                    n, needs = terms(1 + steps - seq.base, seq.base + q.output - 1 - (steps + step), seq.fixed)
                elif seq.made <= 1:
                    n, needs = fresh[seq.index]
                else:
                    n, needs = terms(seq.made, q.output - seq.made, kv.tokens_held(q.prompt, 0))
                if n:
                    longest, slots, area = max(longest, n), slots + n, area + needs
            out.append(Backlog(ends[id(server)], longest, slots, area))
        return out

    def advance(self, until: float) -> bool:
        """Run the events due by `until` (those after it wait: a later call resumes the run
        exactly where it paused, so a run advanced in steps ends as one run to the end); whether
        the run has ended."""
        arrivals = self.arrivals
        while (self.events or self.upcoming < len(arrivals)) and not self.stopped:
            upcoming = self.upcoming
            if upcoming < len(arrivals) and (not self.events or
                                             self.requests[arrivals[upcoming]].arrival <= self.events[0][0]):
                if self.requests[arrivals[upcoming]].arrival > until:
                    return False
                now, kind, payload = self.requests[arrivals[upcoming]].arrival, "arrive", arrivals[upcoming]
                self.upcoming = upcoming + 1
            else:
                if self.events[0][0] > until:
                    return False
                now, _, kind, payload = heapq.heappop(self.events)
            if self.misses is not None and now >= self.misses.due and self.misses.overdue(now):
                self.check_stop()
                if self.stopped:
                    break
            if kind == "arrive":
                request = self.requests[payload]
                engine = (self.prefillers or self.decoders)[0].pool.replica.engine
                seq = _Seq(request, payload, *engine.split(request.prompt))
                self.enqueue(self.prefillers or self.decoders, seq, now)
            elif kind == "handoff":
                self.loads = None
                self.enqueue(self.decoders, payload, now)
            else:
                self.loads = None       # (a replica's event may move any load: `least_loaded` reads them afresh)
                server, parts, decoding = payload
                self.complete(server, parts, decoding, now)
        return True

    def enqueue(self, servers: list[_Server], seq: _Seq, now: float) -> None:
        server = self.route(servers)
        server.waiting.append(seq)
        if not server.busy:
            self.start(server, now)
        kept = self.loads
        if kept is not None and kept[0] is servers:     # (only this replica's load moved: `least_loaded`)
            i, loads = kept[3], kept[2]
            load = len(server.waiting) + len(server.prefilling) + server.count
            if load != loads[i]:
                loads[i] = load
                if kept[1] is not None:
                    heapq.heappush(kept[1], (load, i))

    def route(self, servers: list[_Server]) -> _Server:
        """The replica the pool's router sends the next request to (ties: the first)."""
        router = servers[0].pool.router
        if router == "round_robin":
            role = servers[0].role
            self.turn[role] += 1
            return servers[(self.turn[role] - 1) % len(servers)]
        if router == "random":
            return servers[self.draws.randrange(len(servers))]
        if router == "power_of_two" and len(servers) > 2:
            first, second = self.draws.sample(range(len(servers)), 2)
            return servers[first] if servers[first].load <= servers[second].load else servers[second]
        return self.least_loaded(servers)

    def least_loaded(self, servers: list[_Server]) -> _Server:
        """The replica with the fewest requests in hand (`_Server.load`; ties: the first). Between
        two events of the replicas only arrivals move the loads, each its own replica's
        (`enqueue` reads it again), so a run of arrivals keeps them, and from its second on a heap
        of (load, index) (entries whose load has moved since are skipped): the requests of an RL
        step, thousands asked at once, each find their replica in log time, the same one."""
        kept = self.loads
        if kept is None or kept[0] is not servers:
            loads = [len(s.waiting) + len(s.prefilling) + s.count for s in servers]
            i = loads.index(min(loads))
            self.loads = [servers, None, loads, i]
            return servers[i]
        heap, loads = kept[1], kept[2]
        if heap is None:
            heap = kept[1] = [(load, i) for i, load in enumerate(loads)]
            heapq.heapify(heap)
        while heap[0][0] != loads[heap[0][1]]:
            heapq.heappop(heap)
        kept[3] = i = heap[0][1]
        return servers[i]

    # ------------------------------------------------------------ one iteration
    def start(self, server: _Server, now: float) -> None:
        r = server.pool.replica
        e = r.engine
        server.reach()
        self.grow(server)
        decoding = server.count
        if decoding and server.round < e.scheduler_steps and server.role != "prefill":
            parts, server.round = [], server.round + 1      # inside a multi-step round: decode only
        elif not e.mixed and server.role == "both":
            # prompts first: an iteration of waiting prompts alone, the decodes paused
            parts, server.round = self.fill(server, e.chunk), 1
            decoding = 0 if parts else server.count
        else:
            parts, server.round = self.fill(server, e.chunk - decoding * (1 + e.draft)), 1
        if not decoding and not parts:
            if server.count:    # an idle decode replica admitted prefilled sequences: they decode now
                return self.start(server, now)
            server.busy = False
            return
        prefill = sum(n for _, n in parts) if parts else 0
        pairs = sum(r.kv.pairs(s.done, n) for s, n in parts) if parts else 0
        time = r.iteration(decoding, server.read if decoding else 0.0, prefill, pairs, len(parts), layer_mean=True)
        time, server.copying = time + server.copying, 0.0
        server.busy = True
        if decoding and not parts:
            now, time = self.decode_on(server, now, time, decoding)
        self.push(now + time, "done", (server, parts, decoding))

    def decode_on(self, server: _Server, now: float, time: float, decoding: int) -> tuple[float, float]:
        """Run the quiet decode steps that follow an iteration of `decoding` sequences and nothing
        else, without an event each: (the start, the length) of the first that is not quiet. A
        step is quiet when, at its start, no request has arrived since (`end` before the next
        arrival), none finishes, none is preempted and none can join (nothing part-way through its
        prompt, and the batch full or the first waiting not fitting); with a prefill pool or in a run
        that may stop, before any other event and any check of its bounds. `complete` and `start` would do just this for it,
        the same arithmetic in the same order, so every time and count is the same to the last
        bit; other replicas' events at the same instants touch only maxima and counts."""
        if server.window or server.role == "prefill" or server.count != decoding:
            return now, time        # (a swapped sequence back in its cache decodes from the next step)
        arrival = self.quiet_until()
        if now + time >= arrival or server.finishing and server.finishing[0][0] <= server.steps + \
                server.pool.replica.engine.tokens_per_step + 1e-9:
            return now, time        # (the loop's first tests, before it sets out what the others read)
        head, budget = self.join_terms(server, decoding)
        # Each step: whether it is quiet (none finishes, is preempted or can join, as `complete`,
        # `grow` and `fill` would test it); if so, take it: its steps, scheduler round and the
        # cache's peak. On local copies of what the tests read: while steps run inline only the
        # steps, the round and the peak move, and without windows a step's growth is the same at
        # every step (no sequence reaches a window)
        pool, engine = server.pool, server.pool.replica.engine
        step, grows = engine.tokens_per_step, engine.preemption != "reserve"
        kv, many, rounds = pool.kv_tokens, len(server.order) > 1, engine.scheduler_steps
        growth, copying = server.growth(step), server.copying
        fixed, count, sum_base, sum_prompt = server.fixed, server.count, server.sum_base, server.sum_prompt
        finish = server.finishing[0][0] if server.finishing else math.inf
        blocked, joinable, take, room = bool(server.prefilling), False, 0.0, 0.0
        if head is not None and len(server.order) < pool.max_batch:
            # whether `fill` would take the first waiting sequence (`head`): its take of the cache
            # against the room `fill` reads, and the tests that no step moves
            seq, (held, made, reserve, grows_next) = head
            joinable = not (seq.todo > 0 and budget <= 0) and not server.reserved + reserve > kv
            take, room = (held, made, grows_next), kv - growth
        steps, turn, peak = server.steps, server.round, self.peak_kv
        seconds = None      # the step's time by the cache it reads (`Replica.decode_steps`), once one is quiet
        # (`not >=`: the step test as the loop had it, even for a NaN time)
        while not now + time >= arrival:
            after = steps + step
            if finish <= after + 1e-9:
                break       # one finishes: `complete` takes it
            used = fixed + (count * (1 + after) - sum_base)         # `_Server.used` at the step's end
            if grows and used + growth > kv and many:
                break       # a preemption: `start` runs it
            decode_only = turn < rounds
            if not decode_only and (blocked or joinable and not used + take[0] + take[1] + take[2] > room):
                break       # a prompt may join: `start` fills
            if grows:
                peak = max(peak, used + growth)
            turn = turn + 1 if decode_only else 1
            steps = after
            if seconds is None:
                seconds = pool.replica.decode_steps(decoding)
            now, time = now + time, seconds(sum_prompt + count * (1 + steps) - sum_base) + copying   # (`read`)
        server.steps, server.round, self.peak_kv = steps, turn, peak
        return now, time

    def join_terms(self, server: _Server, decoding: int) -> tuple[tuple | None, float]:
        """The first waiting sequence stays first while no request arrives and none joins: what
        `admit` weighs of it, once; and the prompt budget `fill` would have beside the decodes."""
        engine = server.pool.replica.engine
        step = engine.tokens_per_step
        head = (server.waiting[0], self.needs(server, server.waiting[0], step)) if server.waiting else None
        budget = engine.chunk if not engine.mixed and server.role == "both" else \
            engine.chunk - decoding * (1 + engine.draft)
        return head, budget

    def quiet_until(self) -> float:
        """The instant before which decode steps may run inline: the next arrival; and, with a
        prefill pool or in a run that may stop, the next event of any replica and the next check of
        its bounds (a prefill replica's handoff reaches a decoder at its own event, a run that may
        stop checks its bounds at every event from `due` on, and another replica's event may move
        `due`), so that none falls between them."""
        arrival = self.requests[self.arrivals[self.upcoming]].arrival if self.upcoming < len(self.arrivals) \
            else math.inf
        if self.independent:
            return arrival
        return min(arrival, self.events[0][0] if self.events else math.inf,
                   self.misses.due if self.misses is not None else math.inf)

    def grow(self, server: _Server) -> None:
        """Room for this step's tokens; preempt the newest sequences while they do not fit:
        their cache is dropped and recomputed later, or (swap) copied to host memory and back."""
        engine = server.pool.replica.engine
        if server.role == "prefill" or engine.preemption == "reserve":
            return      # an engine that reserves each sequence's whole length never runs out
        step = engine.tokens_per_step
        need = server.used + server.growth(step)     # (again after each preemption: the peak reads the last)
        while need > server.pool.kv_tokens and len(server.order) > 1:
            victim, _ = server.order.popitem()
            self.preemptions += 1
            made = 1 + server.steps - victim.base if victim.state == "decode" else victim.made
            if victim.state == "prefill":
                server.prefilling.remove(victim)
            self.release(server, victim)
            victim.made = made
            if engine.preemption == "swap" and victim.todo <= 0:
                victim.swapped = server.pool.replica.kv.tokens_held(victim.request.prompt, made)
                server.copying += self.copy_time(server, victim.swapped)
            else:
                _, share = engine.split(victim.request.prompt)
                victim.done = share
                victim.todo = victim.request.prompt - share + max(0.0, made - 1)
            server.waiting.appendleft(victim)
            need = server.used + server.growth(step)
        if server.count:
            self.peak_kv = max(self.peak_kv, need)

    @staticmethod
    def copy_time(server: _Server, tokens: float) -> float:
        """Seconds to copy `tokens` cached tokens between HBM and host memory: every GPU of the
        replica moves its share at once over its host link."""
        r = server.pool.replica
        return tokens * r.kv.per_token_per_gpu() / r.config.ep / host_rate(r.partition)

    def release(self, server: _Server, seq: _Seq) -> None:
        """`seq` leaves the replica's cache."""
        server.fixed -= seq.fixed
        seq.fixed = 0.0
        server.reserved -= seq.reserved
        seq.reserved = 0.0
        if seq.state == "decode":
            server.count -= 1
            server.sum_prompt -= seq.request.prompt
            server.sum_prompt_read -= server.pool.replica.kv.effective(seq.request.prompt) if server.window else 0.0
            server.sum_base -= seq.base
            seq.version += 1
            if seq.full:
                seq.full = False
                server.full_count -= 1
                server.full_sum_base -= seq.base
                server.full_offset -= server.frozen * max(0.0, server.window - seq.request.prompt)
        seq.state = "waiting"

    def fill(self, server: _Server, budget: float) -> list[tuple[_Seq, float]]:
        """Prompt chunks: sequences part-way through their prompt first, then admissions
        (a sequence whose cache arrived from a prefill replica joins the decoders at once)."""
        parts, pool = [], server.pool
        # the running sequences' next tokens are placed first (vLLM V1 allocates the running
        # requests' slots before it admits any; V0 keeps a watermark): a prompt admitted into the
        # room they need would be preempted at once, and re-admitted, and preempted again
        step = pool.replica.engine.tokens_per_step
        # (asked only where a prompt waits: most iterations of a busy replica admit nobody)
        room = (pool.kv_tokens - (server.growth(step) if server.count else 0.0)) if server.waiting else 0.0
        budget = self.continue_prompts(server, budget, parts)
        while server.waiting and (len(server.order) < pool.max_batch or server.role == "prefill"):
            seq = server.waiting[0]
            if seq.todo > 0 and budget <= 0:
                break
            if server.role != "prefill" and not self.admit(server, seq, room, step):
                if not server.order:  # it can never fit: served never
                    server.waiting.popleft()
                    self.result(seq.index, (math.inf, math.inf, math.inf))
                    continue
                break
            server.waiting.popleft()
            budget = self.take_prompt(server, seq, budget, parts)
        return parts

    @staticmethod
    def continue_prompts(server: _Server, budget: float, parts: list) -> float:
        """Chunks of the prompts part-way through, oldest first, into `parts`; the budget left."""
        for seq in server.prefilling:
            if budget <= 0:
                break
            n = min(seq.todo, budget)
            parts.append((seq, n))
            budget -= n
        return budget

    def admit(self, server: _Server, seq: _Seq, room: float, step: float) -> bool:
        """Take `seq` into the replica's cache if its prompt, what it already made and its next
        step fit beside the running sequences (and, reserving, its whole length); False if not."""
        pool = server.pool
        held, made, reserve, grows = self.needs(server, seq, step)
        if server.used + held + made + grows > room or server.reserved + reserve > pool.kv_tokens:
            return False
        seq.fixed, seq.reserved = held, reserve
        server.fixed += held
        server.reserved += reserve
        server.order[seq] = None
        self.peak_batch = max(self.peak_batch, len(server.order))
        return True

    @staticmethod
    def needs(server: _Server, seq: _Seq, step: float) -> tuple[float, float, float, float]:
        """What `admit` weighs for `seq`: the cache its prompt and what it made take, what it
        reserves, and its next step's tokens (fixed while it waits)."""
        kv = server.pool.replica.kv
        held = kv.tokens_held(seq.request.prompt, 0)  # windowed layers: at most the window
        made = seq.made if not server.window else \
            kv.effective(seq.request.prompt + seq.made) - kv.effective(seq.request.prompt)
        reserve = kv.tokens_held(seq.request.prompt, seq.request.output) \
            if server.pool.replica.engine.preemption == "reserve" else 0.0
        grows = step if seq.todo <= 0 or seq.made else 0.0    # it decodes in the next iteration too
        return held, made, reserve, grows

    def take_prompt(self, server: _Server, seq: _Seq, budget: float, parts: list) -> float:
        """An admitted `seq` leaves the queue: its cache back from host memory if it was swapped,
        then it decodes at once (its prompt done) or prefills its first chunk; the budget left."""
        if seq.swapped:     # its cache comes back from host memory before it decodes on
            server.copying += self.copy_time(server, seq.swapped)
            seq.swapped = 0.0
        if seq.todo <= 0:
            self.begin_decoding(server, seq)
            return budget
        seq.state = "prefill"
        server.prefilling.append(seq)
        n = min(seq.todo, budget)
        parts.append((seq, n))
        return budget - n

    def begin_decoding(self, server: _Server, seq: _Seq) -> None:
        """`seq` decodes from the next iteration with `seq.made` tokens out."""
        seq.todo, seq.state = 0.0, "decode"
        seq.base = server.steps + 1 - seq.made
        server.count += 1
        server.sum_prompt += seq.request.prompt
        server.sum_prompt_read += server.pool.replica.kv.effective(seq.request.prompt) if server.window else 0.0
        server.sum_base += seq.base
        self.tick += 1
        heapq.heappush(server.finishing, (seq.base + seq.request.output - 1, self.tick, seq.version, seq))
        if server.window:
            reaches = seq.base + server.window - seq.request.prompt - 1   # the step its length is the window
            if reaches <= server.steps:
                server.fill_window(seq)
            else:
                heapq.heappush(server.filling, (reaches, self.tick, seq.version, seq))

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
                # the first token reaches the client after the engine's front end (HTTP, streaming)
                frontend = server.pool.replica.engine.frontend_s
                seq.first, seq.made = now + frontend, 1.0
                if self.misses is not None and seq.index >= self.first:
                    self.misses.decoding(seq.first, frontend, seq.request.output, seq.index)
                    if self.misses.first_token(seq.first - seq.request.arrival, seq.index):
                        self.check_stop()
            if server.role == "prefill":
                seq.todo, seq.state = 0.0, "waiting"
                self.push(now + self.transfer(seq.request.prompt), "handoff", seq)
            elif seq.made >= seq.request.output:
                del server.order[seq]
                self.release(server, seq)
                self.record(server, seq, now)
            else:
                self.begin_decoding(server, seq)
        while server.finishing and server.finishing[0][0] <= server.steps + 1e-9:
            _, _, version, seq = heapq.heappop(server.finishing)
            if version != seq.version:
                continue  # preempted since
            del server.order[seq]
            self.release(server, seq)
            self.record(server, seq, now)
        self.start(server, now)

    def record(self, server: _Server, seq: _Seq, now: float) -> None:
        r = seq.request
        end = max(now + server.pool.replica.engine.frontend_s, seq.first)  # the last token crosses it too
        tpot = (end - seq.first) / (r.output - 1) if r.output > 1 else 0.0
        self.result(seq.index, (seq.first - r.arrival, tpot, end - r.arrival))
        self.finish = max(self.finish, now)

    def result(self, index: int, values: tuple[float, float, float]) -> None:
        self.results[index] = values
        if self.misses is not None and index >= self.first and self.misses.record(values, index):
            self.check_stop()

    def check_stop(self) -> None:
        """Another bound has become certainly broken: ask whether to end the run."""
        if self.stop(tuple(self.misses.missed)):
            self.stopped = tuple(self.misses.missed)

    # ------------------------------------------------------------ measurement
    def outcome(self) -> Outcome:
        return measure(self.requests, self.results, self.first, self.slo, self.finish, preemptions=self.preemptions,
                       peak_batch=self.peak_batch, peak_kv_tokens=self.peak_kv, stopped=self.stopped)
