"""An estimate of the decode replicas a demand needs to meet a TPOT bound: the count a
candidate's serving pool starts confirming from (solver/serve/demand_search.py).

With n replicas each serves rate / n requests per second. In steady state a replica holds N
decoding sequences on average, N = (rate / n) x (output / tokens per step) x t (Little's law),
where t is the mean iteration time. An iteration with N sequences takes at least the
decode-only iteration at N (prompt chunks never make it faster), and that time is convex in
N, so the mean step is at least the smallest fixed point of t -> iteration(N(t)), which
iterating from the unloaded step climbs to (with sliding windows, reading only what the
global layers certainly hold: the mean length says too little of a windowed layer's). A TPOT
bound on the median or a higher percentile that this floor already breaks needs more replicas.
(Averaging the prompts into every iteration would not be a bound: an iteration's cost is not
convex in its prompt tokens.)

ASSUMPTION: this is a steady-state argument on mean lengths, of the same kind as the capacity
count each pool starts from, not a request-by-request floor: a finite run's percentiles need
not obey it (a median need not lie above a mean). What the screen discards by is proved
request by request (solver/serve/floor.py); this count only says where confirming starts,
and a law checks that it never changes the plan the exhaustive search chooses without it
(tests/solver/serve/test_search_laws.py `test_no_bound_discards_the_plan_the_simulation_would_choose`).
"""

from __future__ import annotations

import math

from ...model.serve.inference import Replica

ITERATIONS = 40


def loaded_step(r: Replica, per_replica_rate: float, prompt: float, output: float) -> float:
    """The smallest self-consistent decode-only iteration time (seconds); inf when the
    concurrency it implies exceeds the replica's batch."""
    steps = output / r.engine.tokens_per_step
    context = prompt + output / 2
    # with sliding windows only the global layers' read is certain from mean lengths
    # (model/serve/kv.py `least_total`): reading every sequence at the mean length would not be a bound
    t = r.iteration(1, r.kv.least_total(context), layer_mean=True)
    for _ in range(ITERATIONS):
        n = per_replica_rate * steps * t
        if n > r.config.batch:
            return math.inf
        following = r.iteration(max(n, 1.0), r.kv.least_total(max(n, 1.0) * context), layer_mean=True)
        if following <= t * (1 + 1e-6):
            return max(t, following)
        t = following
    return t


def tpot_replicas(r: Replica, rate: float, start: int, most: int, bound: float, prompt: float, output: float) -> int:
    """The fewest replicas from `start` up to `most` whose TPOT floor is within `bound`
    (`most` + 1 when none is)."""
    if not math.isfinite(bound) or rate <= 0:
        return start
    for n in range(start, most + 1):
        if loaded_step(r, rate / n, prompt, output) / r.engine.tokens_per_step <= bound:
            return n
    return most + 1
