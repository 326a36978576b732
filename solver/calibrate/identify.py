"""Which constants an operator's training runs can tell apart.

A training run's throughput reads its chip's GEMM efficiency and its fused attention
efficiency together: one run, or runs of one attention share, move both the same way, and
only their product is measured (the GEMM efficiency takes it, as observe_train.py says).
Runs of one model whose attention shares differ (another sequence length, or context
parallelism) tell them apart: each efficiency then moves by what its own share of the step
explains. Runs of different models do not: whatever else the model misprices in one of them
(its MoE layers, its widths) would be read as attention. This module finds, per chip, whether
the runs do, from the model's own sensitivities.
"""

from __future__ import annotations

import math

import attrs

from ...model import compute
from .observe import Observation
from .params import applied

STEP = 1.05          # the relative change of a constant a sensitivity is measured over
# Runs tell the attention efficiency apart from the GEMM efficiency when the ratio of their
# sensitivities to the two differs by this factor between the runs (ASSUMPTION: a ratio 25 %
# apart leaves the two constants' joint fit a condition number below ~10 at the shares seen).
APART = 1.25


def sensitivity(obs: Observation, key: tuple[str, str, str], prior: float) -> float:
    """d log(prediction) / d log(constant `key`) at its prior value."""
    base = obs.predict(obs.partition)
    moved = obs.predict(applied(obs.partition, {key: prior * STEP}))
    return math.log(moved / base) / math.log(STEP) if base > 0 and moved > 0 else 0.0


def with_attention(found: list[Observation]) -> list[Observation]:
    """The observations, each training run also informing its chip's attention efficiency
    where training runs of one model on the chip tell attention apart from the GEMMs (APART)."""
    ratios: dict[tuple[str, object], list[float]] = {}
    for obs in found:
        if obs.kind != "train":
            continue
        chip = obs.partition.node.accelerator
        gemm = next(k for k in obs.informs if k[0] == "chip")
        prior = compute.gemm_efficiency(chip, gemm[2])
        attention = sensitivity(obs, ("chip", chip.name, "attention"), compute.attention_efficiency(chip))
        share = sensitivity(obs, gemm, prior)
        if share > 0 and attention > 0:
            model = attrs.evolve(obs.shape, seq=0) if obs.shape is not None else None   # one model at any length
            ratios.setdefault((chip.name, model), []).append(attention / share)
    told = {chip for (chip, _), found_ratios in ratios.items()
            if len(found_ratios) > 1 and max(found_ratios) >= APART * min(found_ratios)}
    return [attrs.evolve(obs, informs=obs.informs + (("chip", obs.partition.node.accelerator.name, "attention"),))
            if obs.kind == "train" and obs.partition.node.accelerator.name in told
            and ("chip", obs.partition.node.accelerator.name, "attention") not in obs.informs else obs
            for obs in found]
