"""One RL step from its phases: the step time, what each pool does when, and the overlap
asynchronous operation buys.

- Colocated (one pool of GPUs in turn): generate, then bring the optimizer state back from host
  memory, score, train, send it out again and reshard the weights into the generation layout:
  the sum of the phases.
- Disaggregated and synchronous (staleness 0): the generation pool generates while the
  training pool waits; the training pool scores (swapping the reference model's weights in and
  out: `offload`) and trains while the generation pool waits; then the weights cross the link
  between them: generate + offload + score + train + sync.
- Disaggregated and asynchronous (staleness k >= 1: a sample may come from a policy up to k
  steps old): the generation pool generates the next step's samples while the training pool
  trains on this step's. The engine keeps generating across step boundaries, so a step's
  generation costs its share of the engine's steady throughput (`stream`), not the wait for
  its slowest sample, and both pools pause for the weights: sync + max(stream, offload + score + train).
  Deeper staleness lets the engine hold more steps' samples at once (a fuller batch, a cheaper
  token: solver/rl/generation.py `steady`), so the stream never grows with it.

`stream <= generate` (solver/rl/generation.py takes the smaller), so for the same pools an
asynchronous step is never slower than a synchronous one.
"""

from __future__ import annotations

from ...dsl.records import frozen

COLOCATED, DISAGGREGATED = "colocated", "disaggregated"


@frozen
class Phases:
    """Seconds of each phase of one step."""

    generate: float            # the rollout batch, from the first prompt to the slowest sample
    stream: float              # the same samples' share of a steadily fed engine's time (<= generate)
    score: float               # forward passes: old log-probabilities, reference, reward, critic values
    train: float               # optimizer steps (policy and critic)
    sync: float                # the weights from the training layout to the generation layout
    offload: float = 0.0       # the training pool's copies to and from host memory (model/rl/host.py)


@frozen
class Span:
    pool: str                  # generate | train (colocated: both are "colocated")
    phase: str                 # generate, score, train, sync, offload, idle
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@frozen
class RLStep:
    placement: str             # colocated | disaggregated
    staleness: int             # 0: synchronous
    phases: Phases
    step_time: float
    timeline: tuple[Span, ...]

    @property
    def overlapped(self) -> bool:
        return self.placement == DISAGGREGATED and self.staleness > 0

    def busy(self, pool: str) -> float:
        """Share of the step the pool computes (generation, scoring or training)."""
        work = sum(s.seconds for s in self.timeline if s.pool == pool and s.phase in ("generate", "score", "train"))
        return min(1.0, work / self.step_time) if self.step_time > 0 else 0.0


def compose(phases: Phases, placement: str, staleness: int) -> RLStep:
    p = phases
    if placement == COLOCATED:
        marks = _chain("colocated", (("generate", p.generate), ("offload", p.offload / 2), ("score", p.score),
                                     ("train", p.train), ("offload", p.offload / 2), ("sync", p.sync)))
        return RLStep(placement, staleness, phases, p.generate + p.offload + p.score + p.train + p.sync, marks)
    trainer = p.offload + p.score + p.train
    if staleness == 0:
        gen = _chain("generate", (("generate", p.generate), ("idle", trainer), ("sync", p.sync)))
        train = _chain("train", (("idle", p.generate), ("offload", p.offload), ("score", p.score), ("train", p.train),
                                 ("sync", p.sync)))
        return RLStep(placement, staleness, phases, p.generate + trainer + p.sync, gen + train)
    period = max(p.stream, trainer)
    gen = _chain("generate", (("generate", p.stream), ("idle", period - p.stream), ("sync", p.sync)))
    train = _chain("train", (("offload", p.offload), ("score", p.score), ("train", p.train),
                             ("idle", period - trainer), ("sync", p.sync)))
    return RLStep(placement, staleness, phases, period + p.sync, gen + train)


def _chain(pool: str, parts) -> tuple[Span, ...]:
    out, at = [], 0.0
    for phase, seconds in parts:
        if seconds > 0:
            out.append(Span(pool, phase, at, at + seconds))
            at += seconds
    return tuple(out)
