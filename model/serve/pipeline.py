"""A serve replica's pipeline: the tier each hop between neighbouring stages crosses, and the
seconds a micro-batch spends in those hops on one pass through the stages."""

from __future__ import annotations

from .. import comms


def pipeline_hops(r, tokens: float) -> float:
    """Seconds one micro-batch of `tokens` of replica `r` (model/serve/inference.py) spends between
    stages on a pass through the pipeline: pp - 1 activation hops (bf16, hidden wide) and the sampled token ids (int32)
    returned from the last stage to the first, each on the tier between neighbouring stages."""
    if r.config.pp == 1:
        return 0.0
    activations = sum(comms.point_to_point(tokens * r.shape.hidden * 2, tier) for tier in r.pp_hops)
    return activations + comms.point_to_point(tokens * 4, r.pp_return)


def hop_tier(first: int, last: int, tiers: tuple):
    """The innermost tier whose domains (blocks of `group_gpus` consecutive ranks) hold every
    rank from `first` to `last`: what a send between ranks in that span crosses."""
    return next((t for t in tiers if first // t.group_gpus == last // t.group_gpus), tiers[-1] if tiers else None)


def stage_hops(per_stage: int, pp: int, tiers: tuple) -> tuple:
    """The tier of each hop between neighbouring stages of `per_stage` consecutive ranks: rank
    i of stage s sends to rank i of stage s + 1, so the hop spans ranks s * per_stage to
    (s + 2) * per_stage - 1; one that leaves a node pays the tier outside it."""
    return tuple(hop_tier(s * per_stage, (s + 2) * per_stage - 1, tiers) for s in range(pp - 1))
