"""The generation phase: a step's samples through the serving simulator (solver/serve/sim.py)
on the generation pool's replicas, all asked at once, as an RL engine gets them.

- `makespan`: from the first prompt to the last sample's last token. The long tail of
  response lengths decides it: the slowest sample holds a synchronous step, and a one-step-off
  one under NeMo-RL's collector wherever it outlasts training (model/rl/step.py).
- `stream`: what the same samples cost an engine that is fed without pause (asynchronous RL:
  the next step's prompts queue behind this step's, so no replica waits on a tail; the bound on
  an asynchronous step's generation from the engine's throughput): the
  samples over the replicas' steady rate at full batch (model/serve/inference.py `estimate`,
  the simulator's own cost model, at the batch the cache holds at the mean lengths and the
  samples of as many steps as the staleness lets be in flight), never more than the makespan.

The simulator deals requests asked at one instant to the replicas in turn (each goes to the
least loaded, and all are equally loaded), so each replica's share is known before it runs;
that gives the lower bounds the search prunes with (`bound`), which never exceed the simulated
times (tests/solver/rl/test_generation.py checks them):

- tail: a replica's longest sample needs its prompt's prefill and then one decode step per
  token, each no shorter than a step with an empty cache of the sequences certainly still
  decoding beside it. Where the replica admits its first `max_batch` samples at once and their
  whole cache fits (so none is preempted), every one of them whose response is longer than the
  longest's step plus the prefill iterations (the most any of them can have started decoding
  before it) is still there; otherwise one sequence;
- work: a replica's output tokens need decode steps of at most `max_batch` sequences, each
  no cheaper per token than the cheapest step of any batch up to that size with an empty cache
  (for the stream: the mean replica's tokens, since a fed engine evens the shares out); and no
  fewer steps than the cache its samples hold over their decodes over the cache's capacity,
  each no shorter than the cheapest step (`_cache_area`: a cache that holds few samples at once
  serializes them); nor less than its fresh prompt tokens at the cheapest prompt-only
  per-token cost (`_prefill_work`).
"""

from __future__ import annotations

import math

import attrs

from ...compiler.ir import Partition
from ...compiler.serve_trace import Request
from ...model.serve.inference import Engine, Replica, ServeConfig, estimate, first_token_time, replica
from ...model.shape import ModelShape
from ..serve.sim import Pool, begin
from ...dsl.records import frozen

BATCHES = (64, 256, 1024)    # max_batch choices the planner tries (an `engine { max_batch }` pins one)


@frozen
class GenLayout:
    """The generation pool: `replicas` replicas of one configuration on one partition."""

    partition: str
    config: ServeConfig          # tp, pp, ep, precision; `batch` is the engine's max_batch
    replicas: int

    @property
    def gpus(self) -> int:
        return self.config.gpus * self.replicas

    @property
    def shard(self) -> int:
        """GPUs one copy of the weights is split over (what each receives in a sync: 1/shard)."""
        return self.config.tp * self.config.pp


@frozen
class Generation:
    layout: GenLayout
    makespan: float              # seconds (inf: a sample never fits the cache)
    stream: float
    kv_tokens: float             # cache capacity of one replica, layer-mean tokens
    memory: float                # bytes per GPU at the peak batch the simulation held
    preemptions: int
    peak_batch: int
    iterations: tuple[float, float]   # engine iterations of the makespan and of the stream (`iterations`)

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.makespan)


def shares(requests: tuple[Request, ...], replicas: int) -> list[tuple[Request, ...]]:
    """Each replica's requests: dealt in turn, as the simulator does for requests asked at once."""
    return [requests[r::replicas] for r in range(replicas)]


def build(shape: ModelShape, partition: Partition, layout: GenLayout, engine: Engine) -> Replica:
    return replica(shape, layout.config, partition, engine)


def kv_capacity(r: Replica, limit: float) -> float:
    """Layer-mean KV tokens one replica holds within `limit` bytes per GPU."""
    return r.kv_capacity_tokens(limit)


def simulate_generation(r: Replica, layout: GenLayout, requests: tuple[Request, ...], limit: float,
                        depth: int = 1) -> Generation:
    """Simulate the step's samples on the pool; the stream rate from the same cost model, with
    up to `depth` steps' samples in flight (`steady`)."""
    return begin_generation(r, layout, requests, limit, depth).finish()


def begin_generation(r: Replica, layout: GenLayout, requests: tuple[Request, ...], limit: float,
                     depth: int = 1, kept: dict | None = None,
                     stats: tuple[float, float, int, int] | None = None) -> "Generation | GenerationRun":
    """`simulate_generation` as a run a search may advance in steps (`GenerationRun`); a layout
    that cannot hold the longest sample is answered at once. `kept`: a dict where the caller keeps
    what runs of these samples share (`shared_terms`); `stats`: `sample_stats(requests)` where it
    keeps them."""
    kv = kv_capacity(r, limit)
    shared = shared_terms(r, requests, kept)
    longest = shared[0]
    if kv < longest:
        return Generation(layout, math.inf, math.inf, kv, r.memory(1, longest, 0), 0, 0, (0.0, 0.0))
    return GenerationRun(r, layout, requests, kv, depth, shared, stats)


def shared_terms(r: Replica, requests: tuple[Request, ...], kept: dict | None = None) -> tuple[float, float, list]:
    """What runs of these samples on replicas of one KV layout and step share (`shared_key`): the
    most cache one sample holds at its end, the most one needs to be admitted with its output
    made (`GenerationRun.always_served`), and a list for the samples' terms while they wait
    (solver/serve/sim.py `backlog` fills it). `kept`: a dict where the caller keeps them by
    `shared_key`, computed once."""
    key = shared_key(r)
    if kept is not None and key in kept:
        return kept[key]
    shared = (max(r.kv.tokens_held(q.prompt, q.output) for q in requests),
              max(r.kv.tokens_held(q.prompt, 0) + q.output for q in requests), [])
    if kept is not None:
        kept[key] = shared
    return shared


def shared_key(r: Replica) -> tuple:
    """What `shared_terms` read: what `KVLayout.tokens_held` reads, and the tokens a step makes."""
    return r.kv.shape, r.kv.prefix_share, r.kv.block, r.engine.tokens_per_step


class GenerationRun:
    """The generation simulation of one layout, advanced as far as a search needs: `least`
    bounds its times from below at every pause, `finish` runs it to its end (the same run, event
    for event, as `simulate` in one go: solver/serve/sim.py `advance`)."""

    def __init__(self, r: Replica, layout: GenLayout, requests: tuple[Request, ...], kv: float, depth: int,
                 shared: tuple[float, float, list], stats: tuple[float, float, int, int] | None = None):
        self.r, self.layout, self.requests, self.kv, self.depth = r, layout, requests, kv, depth
        _, self.most, self.waiting = shared     # `shared_terms`
        self.run = begin(requests, Pool(r, layout.replicas, layout.config.batch, kv), warmup_s=0.0)
        self.steady = steady(r, layout, requests, kv, depth, stats)
        self.result: Generation | None = None
        self._served: bool | None = None
        self._floors: tuple | None = None   # the cheapest iteration, a sequence's step in one, the latest arrival

    def always_served(self) -> bool:
        """Whether no sample can be refused (served never, an infinite makespan): a sample is
        refused only by an empty replica whose cache cannot take its prompt, what it made (less
        than its output: it would have finished) and a step; a margin covers the rounding of the
        replica's running sums. Where this holds, a run left unfinished is certainly feasible."""
        if self._served is None:
            most = self.most + self.r.engine.tokens_per_step
            self._served = most + 1e-3 * self.kv + 1.0 <= self.kv
        return self._served

    def advance(self, until: float) -> Generation | None:
        """Run the simulation's events due by `until` seconds; the Generation once it has ended."""
        if self.result is None and self.run.advance(until):
            self.result = self._generation()
        return self.result

    def finish(self) -> Generation:
        return self.advance(math.inf)

    def least(self) -> tuple[float, float]:
        """Lower bounds of (makespan, stream) so far: the simulation's (`least_e2e`), each busy
        replica's work left (`_backlog`), and the stream as `_generation` takes it from the
        makespan (min is monotone)."""
        if self.result is not None:
            return self.result.makespan, self.result.stream
        makespan = max(self.run.least_e2e(), self._backlog())
        return makespan, min(makespan, self.steady)

    @property
    def clock(self) -> float:
        """The simulated time the run has reached: its next event's (inf once none is left)."""
        return self.run.next_time()

    def _backlog(self) -> float:
        """The latest end the busy replicas' unserved samples can have (solver/serve/sim.py
        `backlog`), less the latest arrival: after its iteration in flight each replica runs at
        least as many iterations as the sample that needs most still needs, and as its samples'
        cache held over their decode iterations over the cache's capacity (no iteration holds
        more: `begin_generation` turned away a layout whose longest sample does not fit), each no
        shorter than the cheapest iteration; and its samples' decode steps at no less than the
        cheapest cost a token (`bound`'s premises). A margin of 1e-9 of the end covers the rounding
        of the simulation's sums of iteration times."""
        backlog = self.run.backlog(self.waiting)
        if not backlog:
            return -math.inf
        if self._floors is None:
            sizes = _batch_sizes(self.layout.config.batch)
            self._floors = (min(self.r.iteration(b, 0) for b in sizes), min(self.r.iteration(b, 0) / b for b in sizes),
                            max(q.arrival for q in self.requests))
        shortest, per_slot, latest = self._floors
        return max((b.end + max(max(b.longest, b.area / self.kv) * shortest, b.slots * per_slot)) * (1 - 1e-9)
                   for b in backlog) - latest

    def _generation(self) -> Generation:
        r, layout = self.r, self.layout
        one = self.run.outcome()
        makespan = max(one.e2e)
        stream = min(makespan, self.steady)
        # the weights, a prefill chunk's activations and buffers, and the most cache the simulation held
        cache = one.peak_kv_tokens * r.kv.per_token_per_gpu() / layout.config.ep
        memory = r.memory(0, r.engine.chunk, 0) + cache
        return Generation(layout, makespan, stream, self.kv, memory, one.preemptions, one.peak_batch,
                          iterations(r, layout, self.requests, self.kv, self.depth))


def steady(r: Replica, layout: GenLayout, requests: tuple[Request, ...], kv: float, depth: int = 1,
           stats: tuple[float, float, int, int] | None = None) -> float:
    """The samples over the pool's steady rate: each replica as full as it gets (as many
    sequences of the mean lengths as its cache holds, at most `max_batch`, and at most its share
    of `depth` steps' samples), prefilling what it completes. An asynchronous engine off-policy by
    k steps generates for the next k policy versions at once (NeMo-RL's trajectory collector:
    nemo_rl/algorithms/async_utils.py, `max_trajectory_age_steps`), so k steps' samples may be in
    flight: deeper staleness fills the batch further, never less. `stats`: `sample_stats(requests)`
    where the caller keeps them."""
    prompt, output, _, n = stats or sample_stats(requests)
    batch = _batch_held(r, layout, n, prompt, output, kv, depth)
    full = estimate(attrs.evolve(r, config=attrs.evolve(r.config, batch=batch)), prompt, output)
    return len(requests) / (layout.replicas * full.requests_per_s)


def sample_stats(requests: tuple[Request, ...]) -> tuple[float, float, int, int]:
    """(mean prompt, mean response, the longest response, samples): what `iterations` reads of them."""
    n = len(requests)
    return sum(q.prompt for q in requests) / n, sum(q.output for q in requests) / n, max(q.output for q in requests), n


def _batch_held(r: Replica, layout: GenLayout, n: int, prompt: float, output: float, kv: float, depth: int) -> int:
    """The batch a fed replica holds (`steady`, `iterations`): as many sequences of the mean lengths as
    its cache takes, at most max_batch and its share of `depth` steps' samples."""
    held = max(1.0, r.kv.tokens_held(prompt, output))
    flight = max(1, depth) * math.ceil(n / layout.replicas)
    return max(1, min(layout.config.batch, int(kv // held), flight))


def iterations(r: Replica, layout: GenLayout, requests: tuple[Request, ...], kv: float, depth: int = 1,
               stats: tuple[float, float, int, int] | None = None) -> tuple[float, float]:
    """Engine iterations, as a stack's host time per iteration counts them (model/rl/stacks.py
    `Calibration.engine_host_s`): the slowest sample's decode steps (its response over the tokens a
    step emits, drafts included), and a fed replica's (its share of the output tokens over the steady
    batch's tokens a step). Neither depends on the simulation, so bounds and exact points agree.
    `stats`: `sample_stats(requests)` where the caller keeps them."""
    prompt, output, longest, n = stats or sample_stats(requests)
    steps = r.engine.tokens_per_step
    batch = _batch_held(r, layout, n, prompt, output, kv, depth)
    return longest / steps, n * output / (layout.replicas * batch * steps)


def bound(r: Replica, layout: GenLayout, requests: tuple[Request, ...], kv: float = 0.0,
          depth: int = 1, areas: list[float] | None = None, kept: dict | None = None,
          stats: tuple[float, float, int, int] | None = None) -> tuple[float, float]:
    """(makespan, stream) lower bounds without simulating: the busiest replica's tail and work;
    with the cache's capacity `kv`, the stream's is exact where the steady time is below the
    makespan's bound (the stream is the smaller of the two). `areas`: `cache_areas` of these
    requests on these replicas, where the caller keeps them (they depend on neither the batch
    nor the memory bound, which most layouts of a search differ by); `kept`: a dict where the
    caller keeps the shares' sums (`ShareTerms`) for the next layout that deals them alike;
    `stats`: `sample_stats(requests)` where it keeps them."""
    steps = r.engine.tokens_per_step
    sizes = _batch_sizes(layout.config.batch)
    cheapest = min(r.iteration(b, 0) / (b * steps) for b in sizes)
    shortest = min(r.iteration(b, 0) for b in sizes)
    tail = work = 0.0
    if kv > 0 and areas is None:
        areas = cache_areas(r, requests, layout.replicas)
    key = (areas_key(r, layout.replicas), layout.config.batch)
    terms = kept.get(key) if kept is not None else None
    if terms is None:
        terms = [ShareTerms.of(r, share, layout.config.batch) if share else None
                 for share in shares(requests, layout.replicas)]
        if kept is not None:
            kept[key] = terms
    costs: dict[int, float] = {}
    for i, share in enumerate(terms):
        if share is None:
            continue
        tail = max(tail, _tail(r, share, kv, costs))
        work = max(work, share.outputs * cheapest)
        if kv > 0:
            work = max(work, areas[i] / kv * shortest)
        work = max(work, _prefill_work(r, share.fresh))
    mean = sum(q.output - 1 for q in requests) / layout.replicas * cheapest
    makespan = max(tail, work)
    if kv > 0:
        return makespan, min(makespan, max(mean, steady(r, layout, requests, kv, depth, stats)))
    return makespan, mean


def cache_areas(r: Replica, requests: tuple[Request, ...], replicas: int) -> list[float]:
    """`_cache_area` of each replica's share (`shares`); a search keeps it by `areas_key`."""
    return [_cache_area(r, share) for share in shares(requests, replicas)]


def areas_key(r: Replica, replicas: int) -> tuple:
    """What `cache_areas` reads: the tokens a step makes and what `KVLayout.tokens_held` reads
    (the model's layers and window, the shared prefix, the page), not how the cache is split or
    stored (tp, pp, precision: they change its bytes, not its tokens), nor the batch."""
    kv = r.kv
    return kv.shape, kv.prefix_share, kv.block, r.engine.tokens_per_step, replicas


def _cache_area(r: Replica, share: tuple[Request, ...]) -> float:
    """A lower bound of the cached tokens summed over a replica's decode iterations: in the
    later half of its n decode iterations a sample has made at least n // 2 steps' tokens and
    holds their cache. No iteration holds more than the cache's capacity, so this over the
    capacity is a lower bound of the iterations: what a cache too small for the batch costs."""
    steps, area = r.engine.tokens_per_step, 0.0
    for q in share:
        n = math.ceil((q.output - 1) / steps)
        half = n // 2
        area += max(n * r.kv.tokens_held(q.prompt, 0), (n - half) * r.kv.tokens_held(q.prompt, half * steps))
    return area


@frozen
class ShareTerms:
    """What `bound` reads of one replica's share that neither the cache's capacity nor the
    iteration's costs change: sums over its samples, and its first `max_batch` (`_tail`). Each
    sum runs over the share in its order, as the bound always summed it: the same bits."""

    longest: Request             # its longest sample (the first of them)
    outputs: float               # its output tokens after each first: sum of output - 1
    fresh: float                 # its fresh prompt tokens (Engine.split)
    first_held: float            # the cache its first max_batch samples hold at their ends
    first_fresh: float           # their fresh prompt tokens
    together: bool               # whether the longest is among them
    others: tuple[int, ...]      # the others' outputs, longest first

    @classmethod
    def of(cls, r: Replica, share: tuple[Request, ...], batch: int) -> "ShareTerms":
        longest = max(share, key=lambda q: q.output)
        first = share[:batch]
        return cls(longest, sum(q.output - 1 for q in share), sum(r.engine.split(q.prompt)[0] for q in share),
                   sum(r.kv.tokens_held(q.prompt, q.output) for q in first),
                   sum(r.engine.split(q.prompt)[0] for q in first), longest in first,
                   tuple(sorted((q.output for q in first if q is not longest), reverse=True)))


def _prefill_work(r: Replica, fresh: float) -> float:
    """The share's `fresh` prompt tokens (a shared prefix is prefilled once), each no cheaper than
    a prompt token in the cheapest iteration of prompt tokens alone up to a chunk (an iteration
    that decodes beside its chunk costs no less)."""
    if fresh <= 0:
        return 0.0
    cheapest = min(r.iteration(0, 0.0, n, 0.0, 1) / n for n in _batch_sizes(max(1, int(r.engine.chunk))))
    return fresh * cheapest


def _tail(r: Replica, share: ShareTerms, kv: float, costs: dict[int, float] | None = None) -> float:
    """The longest sample of a replica's share: its prefill and its decode steps, each step as
    long as an empty-cache step of the sequences certainly decoding beside it (module docstring).
    `costs`: those steps' times by batch, kept over the replica's shares."""
    costs = {} if costs is None else costs
    steps = r.engine.tokens_per_step
    longest = share.longest
    together = share.together and share.first_held <= kv
    lags = math.ceil(share.first_fresh / r.engine.chunk) if together else 0
    others = share.others if together else ()
    time, step, alive = first_token_time(r, longest.prompt), 0, len(others)
    total = math.ceil((longest.output - 1) / steps)
    while step < total:
        while alive and others[alive - 1] <= step * steps + lags:   # those done by this step have left
            alive -= 1
        # the same batch lasts until the next of them may leave
        until = total if not alive else min(total, max(step + 1, math.floor((others[alive - 1] - lags) / steps)))
        cost = costs.get(1 + alive)
        if cost is None:
            cost = costs[1 + alive] = r.iteration(1 + alive, 0)
        time += (until - step) * cost
        step = until
    return time


def _batch_sizes(most: int) -> list[int]:
    """1 and the powers of two up to `most`, and `most`: the per-token cost of a decode step
    falls with the batch (the weights are read once a step), so its least is at the largest;
    the few sizes below guard a cost that turned up again."""
    sizes, b = {1, most}, 2
    while b < most:
        sizes.add(b)
        b *= 2
    return sorted(sizes)
