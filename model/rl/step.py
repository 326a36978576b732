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
  steps old), as NeMo-RL's trajectory collector runs it (the same at every release with
  asynchronous GRPO, v0.4.0 to v0.7.0: nemo_rl/algorithms/async_utils.py, v0.7.0
  async_utils/trajectory_collector.py `_calculate_target_weights`, `_should_pause_for_generation_limits`,
  `_inflight_sema`, `_run_prompt_group_worker`; replay_buffer.py `sample`). Holding weights version v,
  the engine generates only for the training steps v+1 .. v+k, one batch each, and pauses once they
  are started until the weights move; training step w takes exactly the batch meant for it, waiting
  until it is complete. At most k batches' prompt groups are in flight: a semaphore of
  prompts x k permits, each held by one prompt group's worker until the group's slowest sample is
  done. A group's slowest sample is near its batch's tail (ASSUMPTION: a group of 16-32 samples
  nearly always holds one of the long ones), so a batch's groups start as the batch k before it
  ends: k chains of batches, each batch as long as its slowest sample (`generate`, the makespan),
  the engine stopping for every weight update (in-flight updates keep its running requests, but
  the update runs in its loop between iterations). In steady state a period is then
  sync + max(trainer, stream, generate / k):
  the training pool's work (offload + score + train), which overlaps the next batch; the engine's
  throughput (`stream`, its steady share of the batch with k batches' samples in flight:
  solver/rl/generation.py `steady`); and a batch's latency over the k chains. The version bound
  (the batch for step w + k cannot start before version w lands) is a term (generate + trainer) / (k + 1)
  that is never larger than the larger of trainer and generate / k, so it never sets the period. At k = 1 a step whose batch outlasts
  training costs sync + generate: what github.com/NVIDIA-NeMo/RL pull 2779 measured (DeepSeek-V3
  64n8g-async-1off, H100: 70.2 and 52.5 s a step as MTP drafting cut the batch's latency from 57.4 to
  40.1 s, each step 12.4-12.8 s over it, about the 14.2 s refit). The staggered ends of the groups give
  a little of it back, which this does not count.

`stream <= generate` (solver/rl/generation.py takes the smaller), so each term of the period is at
most generate + trainer, and for the same pools an asynchronous step is never slower than a
synchronous one; nor is a deeper staleness ever slower than a shallower one.
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
    terms = overlap_terms(p, staleness)
    period, latency = max(terms.values()), terms["latency"]
    busy = min(period, max(p.stream, latency))           # a batch's tail keeps the engine going
    gen = _chain("generate", (("generate", busy), ("idle", period - busy), ("sync", p.sync)))
    train = _chain("train", (("offload", p.offload), ("score", p.score), ("train", p.train),
                             ("idle", period - trainer), ("sync", p.sync)))
    return RLStep(placement, staleness, phases, period + p.sync, gen + train)


def overlap_terms(p: Phases, staleness: int) -> dict[str, float]:
    """An overlapped step's period less the sync is the largest of these (module docstring): the
    engine's throughput, the training pool's work, and a batch's latency over the k chains of batches
    the collector's k batches of prompt-group permits make."""
    trainer = p.offload + p.score + p.train
    return {"stream": p.stream, "trainer": trainer, "latency": p.generate / staleness}


def _chain(pool: str, parts) -> tuple[Span, ...]:
    out, at = [], 0.0
    for phase, seconds in parts:
        if seconds > 0:
            out.append(Span(pool, phase, at, at + seconds))
            at += seconds
    return tuple(out)
