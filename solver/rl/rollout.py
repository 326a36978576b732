"""One step's samples: `prompts` prompts of drawn lengths, each sampled `samples` times with
drawn response lengths cut at `max_response`, all asked at once (a synchronous step's batch).
A fixed seed, as the serving demand's (solver/serve/demand.py): plans repeat."""

from __future__ import annotations

import random

from ...compiler.design import Entity
from ...compiler.serve_trace import Request
from ..serve.demand import SEED, _draw


def rollout(entity: Entity) -> tuple[Request, ...]:
    rng = random.Random(SEED)
    prompts, samples = entity.get("prompts"), entity.get("samples") or 1
    prompt, response, most = entity.get("prompt"), entity.get("response"), entity.get("max_response")
    out = []
    for _ in range(prompts):
        length = _draw(prompt, rng)
        for _ in range(samples):
            drawn = _draw(response, rng)
            out.append(Request(0.0, length, min(drawn, most) if most else drawn))
    return tuple(out)


def mean_length(requests: tuple[Request, ...]) -> float:
    """Mean tokens a sample holds, prompt and response: what training and scoring process."""
    return sum(q.prompt + q.output for q in requests) / len(requests)
