"""The phases of an RL step besides generation (which the serving simulator times,
solver/rl/generation.py), each from the model of its own kind of work:

- scoring: forward passes over every sample (the policy's old log-probabilities, the reference's
  for the KL term, the reward model's score, the critic's values) on the training pool at its
  layout, timed by the inference model as prefill (model/serve/inference.py);
- training: the policy's (and PPO's critic's) optimizer steps, timed by the training model
  (model/train/step.py) at the layout solver/train chooses: epochs x mini-batches steps;
- the weights' move from the training layout to the generation layout: a broadcast over the
  link between the pools when they are apart, a gather inside the model-parallel group when
  they share GPUs;
- colocated pools' offload: the optimizer state and gradients go to host memory while the
  engine generates in the HBM they free, and come back before training.
"""

from __future__ import annotations

import math

import attrs

from ...compiler.ir import Partition, Tier
from .. import comms
from ..serve.inference import ServeConfig, replica, weight_bytes
from ..shape import ModelShape
from ..train.step import Estimate

SCORE_CHUNK = 8192        # prompt tokens per scoring iteration (the serving engine's default chunk)
HOST_LINK = 32e9          # bytes/s per GPU to host memory where a node states none: PCIe Gen4 x16 per direction
                          # (the A100 data sheet's 64 GB/s both ways); nodes state theirs (`host_link`)


@attrs.frozen
class Link:
    """The path the weights take between the pools: per-GPU bandwidth each way, latency."""

    name: str
    bandwidth: float
    latency: float

    @classmethod
    def of(cls, tier: Tier) -> "Link":
        return cls(tier.name, tier.bandwidth * tier.efficiency, tier.latency)


def link_between(generate: Partition, train: Partition, gen_gpus: int, train_gpus: int) -> Link:
    """The tier that joins the pools. On one partition the pools hold consecutive ranks
    (training first): the tier spanning both (NVLink when both fit one scale-up domain). On
    two partitions, the scale-out fabric they share, at the slower side's per-GPU rate."""
    if generate == train:
        both = gen_gpus + train_gpus
        return Link.of(next((t for t in train.tiers if t.group_gpus >= both), train.tiers[-1]))
    a, b = (Link.of(p.tiers[-1]) for p in (generate, train))
    slower = min(a, b, key=lambda link: link.bandwidth)
    return Link(slower.name, slower.bandwidth, max(a.latency, b.latency))


def policy_bytes(shape: ModelShape, precision: str) -> float:
    """The policy's weights as the engine holds them (fp8: one byte a weight)."""
    return shape.params * weight_bytes(precision)


def broadcast_time(nbytes: float, senders: int, shard: int, link: Link) -> float:
    """The trained weights to every generation replica: `senders` training GPUs each send a
    distinct 1/senders of them, and each generation GPU receives its replica's 1/shard of
    them and passes it on to the next replica (a pipelined broadcast: each link carries the
    weights once), so the slower of the two ends sets the pace."""
    return max(nbytes / senders, nbytes / shard) / link.bandwidth + link.latency


def reshard_time(nbytes: float, held: int, shard: int, partition: Partition) -> float:
    """Colocated pools: each GPU holds 1/held of the weights in the training layout and needs
    1/shard in the generation layout. A coarser generation shard gathers held/shard pieces
    inside the model-parallel group (consecutive ranks); a finer one is a local slice, an HBM copy."""
    if shard >= held:
        return nbytes / shard / partition.node.accelerator.hbm_bandwidth
    group = math.ceil(held / shard)
    return comms.all_gather(nbytes / shard, comms.place(group, 1, partition.tiers))


def offload_bytes(e: Estimate) -> float:
    """What colocated training moves to host memory per GPU while the engine generates: its
    gradients and optimizer state (the weights stay, for the resharding)."""
    return e.memory.gradients + e.memory.optimizer


def offload_time(nbytes: float, partition: Partition) -> float:
    """Out to host memory after training and back before the next, over each GPU's host link."""
    link = partition.node.host_link or HOST_LINK
    return 2 * nbytes / link


def score_time(shape: ModelShape, partition: Partition, gpus: int, tp: int, pp: int, precision: str,
               samples: int, seq: float) -> float:
    """Forward passes over `samples` sequences of `seq` tokens by `gpus // (tp x pp)` replicas
    of `shape` in the training layout's model-parallel groups, as prefill in chunks of whole
    sequences (about SCORE_CHUNK tokens)."""
    r = replica(shape, ServeConfig(tp, 1, precision, pp=pp), partition)
    length = max(1, round(seq))
    per_chunk = max(1, SCORE_CHUNK // length)
    chunk = per_chunk * length
    iteration = r.iteration(0, 0, chunk, per_chunk * r.kv.pairs(0, length), per_chunk)
    replicas = max(1, gpus // (tp * pp))
    return samples * length / chunk * iteration / replicas


def train_time(e: Estimate, epochs: int, minibatches: int) -> float:
    """Every epoch runs one optimizer step per mini-batch, each the training model's step."""
    return epochs * minibatches * e.step_time
