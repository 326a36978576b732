"""Floors of a demand's simulated latency percentiles on a replica, request by request: what
the analytic screen may discard a configuration by (a discard must be provable; the mean
lengths say nothing certain of a percentile).

Each request's latencies in the simulation (solver/serve/sim.py) have floors of its own:

- TTFT: its fresh prompt tokens pass through iterations that run one after another, each at
  least as long as one holding only its share of them. An iteration never gets faster for
  more tokens, and its cost is subadditive in them (its fixed costs, the weights read and
  the launches, are paid once; its attention pairs add up over the chunks), so the sum is at
  least one iteration of the whole fresh prompt: the floor, whatever the chunking.
- TPOT: its output after the first token takes ceil((output - 1) / tokens per step) decode
  iterations, each holding at least this sequence with its prompt cached (the shortest
  context it decodes at: layer-mean tokens, model/serve/kv.py `effective`).

A pipeline splits an iteration's tokens over up to pp micro-batches (model/serve/inference.py), so
a floor is the iteration whose tokens are spread over all pp. A nearest-rank percentile (or
a mean) of values each at least its floor is at least that of the floors, over the same
measured requests; the floors grow with the prompt, so a percentile's floor is the floor at
the prompt of its rank. The law that a simulated request never beats its floors:
tests/solver/serve/test_floor.py.
"""

from __future__ import annotations

import bisect
import math

from ...model.serve.inference import Replica
from .outcome import Outcome, first_measured, nearest_rank, slo_percentile

BUCKETS = 16    # a mean's floor: each run of consecutive prompts, in order, at the floor of its least


def least_iteration(r: Replica, decoding: float, kv_tokens: float, prefill: float = 0.0, pairs: float = 0.0) -> float:
    """The least time of any iteration that holds these (layer-mean) tokens among others."""
    spread = max(0.0, r.config.pp - decoding)   # sequences beside them that fill every micro-batch
    return r.iteration(decoding, kv_tokens, prefill, pairs, prefilling=spread, layer_mean=True)


def first_token_floor(r: Replica, prompt: float) -> float:
    """The whole fresh prompt in one iteration (a shared prefix is already cached), and the
    engine's front end the first token crosses."""
    share = r.engine.prefix_share
    fresh, done = prompt * (1 - share), prompt * share
    alone = least_iteration(r, 0, 0.0, fresh, r.kv.pairs(done, fresh)) if fresh > 0 else 0.0
    return alone + r.engine.frontend_s


def step_floor(r: Replica, prompt: float) -> float:
    """A decode step of a sequence with `prompt` tokens cached, per output token: a step
    makes `tokens_per_step` of them on average, and ceil((output - 1) / tokens_per_step) >=
    (output - 1) / tokens_per_step steps make the rest (exact without speculation)."""
    return least_iteration(r, 1, r.kv.effective(prompt)) / r.engine.tokens_per_step


class Floors:
    """The demand's measured requests, ready to bound any replica's percentiles."""

    def __init__(self, requests: tuple, warmup_s: float | None, slo: dict[str, float]):
        measured = requests[first_measured(requests, warmup_s):] if requests else ()
        self.slo = {k: v for k, v in slo.items() if slo_percentile(k)[0] in ("ttft", "tpot", "e2e")}
        self.prompts = sorted(q.prompt for q in measured)
        # TPOT: a single-token request has none (0 in the simulation)
        self.decoding = sorted(q.prompt if q.output > 1 else -1 for q in measured)
        self.requests = measured

    def broken(self, r: Replica, role: str) -> dict[str, float]:
        """SLO key -> its floor, for each SLO the floors already break on `r` in `role` (every
        simulation that holds `r` in that role breaks it)."""
        out, e2e = {}, None
        if not self.requests:
            return out
        for key, bound in self.slo.items():
            metric, p = slo_percentile(key)
            if metric == "ttft" and role != "decode":
                value = self.percentile(self.prompts, p, lambda q: first_token_floor(r, q))
            elif metric == "tpot" and role != "prefill":
                value = self.percentile(self.decoding, p, lambda q: step_floor(r, q) if q >= 0 else 0.0)
            elif metric == "e2e" and role == "both":
                e2e = e2e or self.e2e_floors(r)
                value = e2e.percentile("e2e", p)
            else:
                continue
            if value > bound:
                out[key] = value
        return out

    @staticmethod
    def percentile(keys: list, p: float, floor) -> float:
        """The nearest-rank percentile (mean for p < 0) of floor(key) over the sorted `keys`,
        `floor` never falling as its key grows: one evaluation at the rank's key; a mean in
        BUCKETS runs, each at its least key."""
        n = len(keys)
        if not n:
            return 0.0
        if p >= 0:
            return floor(keys[nearest_rank(p, n)])
        step = math.ceil(n / BUCKETS)
        return sum(floor(keys[i]) * len(keys[i:i + step]) for i in range(0, n, step)) / n

    def e2e_floors(self, r: Replica) -> Outcome:
        """Each request's end-to-end floor: its TTFT floor and output - 1 TPOT floors, each
        taken at the least prompt of its run of BUCKETS (the floors grow with the prompt)."""
        n = len(self.prompts)
        step = max(1, math.ceil(n / BUCKETS))
        edges = self.prompts[::step]
        at = {q: (first_token_floor(r, q), step_floor(r, q)) for q in edges}
        values = []
        for q in self.requests:
            ttft, tpot = at[edges[bisect.bisect_right(edges, q.prompt) - 1]]   # the run's least prompt
            values.append(ttft + max(0, q.output - 1) * tpot)
        return Outcome((), (), tuple(sorted(values)), 0, 0.0, 0.0, 0)
