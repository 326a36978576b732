"""The planner's space for an `rl` job: where each pool runs and on how many GPUs, the
generation layout, colocated or apart, and the staleness.

- Pool sizes (`sizes`): 1, 2 and 4 GPUs below a node, then whole nodes: every count up to
  32 nodes, doubling beyond (and the whole partition). Pools on one partition take disjoint
  GPUs; together the pools take at most the job's GPUs.
- Generation layouts (`gen_layouts`): tp inside the scale-up domain dividing the heads, pp of
  1, 2 or 4, ep dividing the routed experts (MoE), `max_batch` of 64, 256 or 1024 sequences
  (or the engine's), as many replicas as fill the pool's GPUs exactly; the file's pins fix any.
- Placement: colocated (both pools on the same GPUs of one partition) and disaggregated
  (apart, on one partition or two), as `placement` allows; `generate { on }` and `train { on }`
  pin the partitions, `gpus` the sizes.
- Staleness: 0, and 1 when the job allows it and the pools are apart (one step already
  overlaps the phases whole: model/rl/step.py).
"""

from __future__ import annotations

import itertools
from typing import Iterator


from ...compiler.ir import Partition
from ...model.rl.job import RLJob
from ...model.rl.step import COLOCATED, DISAGGREGATED
from ...model.serve.inference import ServeConfig
from ..serve.space import scaleup_domain
from .generation import BATCHES, GenLayout
from ...dsl.records import frozen

WIDTHS = (1, 2, 4, 8, 16, 32, 64)
DEPTHS = (1, 2, 4)
ALL_NODES_UP_TO = 32


@frozen
class Pools:
    """Where the pools run and their GPU counts (colocated: one count for both)."""

    placement: str
    generate: str                # partition names
    train: str
    gen_gpus: int
    train_gpus: int


def sizes(partition: Partition, most: int) -> list[int]:
    node = partition.node.gpus
    out = [n for n in (1, 2, 4) if n < node and n <= most]
    nodes = most // node
    counts = list(range(1, min(nodes, ALL_NODES_UP_TO) + 1))
    k = ALL_NODES_UP_TO * 2
    while k < nodes:
        counts.append(k)
        k *= 2
    if nodes > ALL_NODES_UP_TO:
        counts.append(nodes)
    return out + [c * node for c in dict.fromkeys(counts)]


def pools(job: RLJob) -> Iterator[Pools]:
    names = [p.name for p in job.partitions]
    gens = [job.generate.partition] if job.generate.partition else names
    trains = [job.train.partition] if job.train.partition else names
    if job.placement in ("auto", COLOCATED):
        for name in names:
            if name in gens and name in trains:
                p = job.partition(name)
                most = min(p.gpus, job.gpus)
                for n in _sized(sizes(p, most), job.generate.gpus or job.train.gpus, most):
                    yield Pools(COLOCATED, name, name, n, n)
    if job.placement in ("auto", DISAGGREGATED):
        for g_name, t_name in itertools.product(gens, trains):
            gp, tp = job.partition(g_name), job.partition(t_name)
            most = min(gp.gpus, job.gpus)
            for g in _sized(sizes(gp, most), job.generate.gpus, most):
                room = min(gp.gpus - g if g_name == t_name else tp.gpus, job.gpus - g)
                for t in _sized(sizes(tp, room), job.train.gpus, room):
                    yield Pools(DISAGGREGATED, g_name, t_name, g, t)


def _sized(candidates: list[int], pinned: int | None, most: int) -> list[int]:
    """The candidate sizes, or the pinned one where it fits the room (pools on one partition
    take disjoint GPUs: two pinned pools of 8 on one 8-GPU partition are no point)."""
    if pinned:
        return [pinned] if pinned <= most else []
    return candidates


def gen_layouts(job: RLJob, partition: Partition, gpus: int) -> list[GenLayout]:
    """Every generation layout that fills `gpus` GPUs of `partition` exactly."""
    e, shape = job.entity, job.policy
    pin = lambda k: e.get(f"generate.parallelism.{k}")  # noqa: E731
    domain = scaleup_domain(partition)
    tps = [pin("tp")] if pin("tp") else [t for t in WIDTHS if t <= domain and shape.heads % t == 0]
    pps = [pin("pp")] if pin("pp") else [p for p in DEPTHS if p <= shape.layers]
    eps = [pin("ep")] if pin("ep") else ([x for x in WIDTHS if shape.routed % x == 0] if shape.is_moe else [1])
    cap = e.get("generate.engine.max_batch")
    batches = [cap] if cap else list(BATCHES)
    kv = e.get("generate.engine.kv_precision")
    out = []
    for tp, pp, ep, batch in itertools.product(tps, pps, eps, batches):
        width = tp * pp * ep
        if width <= gpus and gpus % width == 0:
            config = ServeConfig(tp, batch, job.generate.precision, ep, pp, kv.name if kv is not None else None)
            out.append(GenLayout(partition.name, config, gpus // width))
    return out


def staleness_choices(job: RLJob, placement: str) -> tuple[int, ...]:
    """Synchronous, and pools apart as off-policy as the job allows (deeper staleness keeps more
    samples in flight: never slower, solver/rl/generation.py `steady`)."""
    return (0, job.staleness) if placement == DISAGGREGATED and job.staleness >= 1 else (0,)
