"""From a checked `rl` block to what the model and the planner evaluate: the policy and the
other models' shapes, the algorithm's shape, each pool's pins, the limits, and the training
pool as a train job of its own (so that solver/train plans its layout as any train job's)."""

from __future__ import annotations

import math
from fractions import Fraction

import attrs

from ...compiler.design import Bound, Entity, Item, Partition as PartitionRef, Record, Symbol
from ...compiler.ir import ClusterGraph, Partition
from ...compiler.lower import lower_cluster
from ...dsl.units import BYTES, NONE, Quantity
from ..job import Job, JobError, job_from_entity
from ..shape import ModelShape
from ..train.optimizer import REMAINDER_STACKS
from ...dsl.records import frozen
from .stacks import DEFAULT, STACKS, RLStack, stack

# Fields of a train job the training pool's block passes on (compiler/schema.py RL_TRAIN).
TRAIN_FIELDS = ("precision", "software", "optimizer_state", "second_moment", "master_weights", "main_grads",
                "precision_aware_optimizer",
                "parallelism")


@frozen
class PoolPins:
    """What the file fixes of one pool: its partition, its GPU count, its precision."""

    partition: str | None
    gpus: int | None
    precision: str


@frozen
class RLJob:
    name: str
    entity: Entity
    cluster: Entity
    graph: ClusterGraph
    partitions: tuple[Partition, ...]      # where the job may run
    policy: ModelShape
    reference: ModelShape | None
    reward: ModelShape | None
    critic: ModelShape | None
    algorithm: str                         # grpo | ppo
    prompts: int
    samples: int
    epochs: int
    minibatches: int
    staleness: int                         # the most steps a sample's policy may lag (0: synchronous)
    placement: str                         # auto | colocated | disaggregated
    generate: PoolPins
    train: PoolPins
    objective: str                         # throughput | time | cost | energy
    steps: int | None
    memory: float                          # share of HBM (<= 1) or bytes per GPU a pool may use
    memory_share: bool
    power: float                           # W at the facility (inf: no bound)
    gpus: int                              # GPUs the pools may use together
    stack: RLStack = attrs.field(default=STACKS[DEFAULT])   # the RL stack's release (model/rl/stacks.py)
    old_logprobs: bool = True              # false: the policy's old log-probabilities are not computed (ratio 1)

    @property
    def batch(self) -> int:
        """Samples a step generates and trains on."""
        return self.prompts * self.samples

    def memory_of(self, partition: Partition) -> float:
        """Bytes per GPU a pool on `partition` may use."""
        hbm = partition.node.accelerator.hbm_capacity
        return min(hbm, self.memory * hbm if self.memory_share else self.memory)

    def partition(self, name: str) -> Partition:
        return next(p for p in self.partitions if p.name == name)


def rl_job(entity: Entity) -> RLJob:
    cluster, graph, partitions = _targets(entity)
    shapes = {k: ModelShape.from_entity(entity.get(k)) if entity.get(k) is not None else None
              for k in ("model", "reference", "reward", "critic")}
    memory, share, power, gpus = _limits(entity, graph)
    objective = _word(entity.get("minimize")) or "throughput"
    return RLJob(entity.name, entity, cluster, graph, partitions, shapes["model"], shapes["reference"], shapes["reward"],
                 shapes["critic"], _word(entity.get("algorithm")) or "grpo", entity.get("prompts"),
                 entity.get("samples") or 1, entity.get("epochs") or 1, entity.get("minibatches") or 1,
                 entity.get("staleness") or 0, _word(entity.get("placement")) or "auto",
                 _pins(entity, "generate"), _pins(entity, "train"), objective, entity.get("steps"),
                 memory, share, power, min(gpus, sum(p.gpus for p in partitions)), stack(_word(entity.get("stack"))),
                 entity.get("old_logprobs") is not False)


def _word(value: object) -> str | None:
    return value.name if isinstance(value, Symbol) else None


def _targets(entity: Entity) -> tuple[Entity, ClusterGraph, tuple[Partition, ...]]:
    """The cluster's graph and the partitions `on` names (a whole cluster: all of them)."""
    target = entity.get("on")
    targets = target if isinstance(target, tuple) else (target,)
    cluster = getattr(targets[0], "cluster", targets[0])
    graph = lower_cluster(cluster)
    names: list[str] = []
    for t in targets:
        if getattr(getattr(t, "cluster", t), "name", None) != cluster.name:
            raise JobError(f"`{entity.name}` runs its pools on one cluster")
        names += [t.name] if isinstance(t, PartitionRef) else [p.name for p in graph.partitions]
    return cluster, graph, tuple(graph.partition(n) for n in dict.fromkeys(names))


def _pins(entity: Entity, pool: str) -> PoolPins:
    on = entity.get(f"{pool}.on")
    name = on.name if isinstance(on, PartitionRef) else None
    if on is not None and name is None:      # a cluster of one partition
        name = lower_cluster(on).partitions[0].name
    return PoolPins(name, entity.get(f"{pool}.gpus"), _word(entity.get(f"{pool}.precision")) or "bf16")


def _limits(entity: Entity, graph: ClusterGraph) -> tuple[float, bool, float, int]:
    """`subject to`: memory (a share of HBM or bytes per GPU), facility power, GPUs; a strict
    `<` is the largest value below the bound, as for serve jobs (solver/serve/space.py)."""
    memory, share, power, gpus = 1.0, True, graph.power_budget or math.inf, 10**9
    for item in getattr(entity.get("subject to"), "items", ()):
        bound = item.value
        if not isinstance(bound, Bound):
            continue
        quantity = bound.value if isinstance(bound.value, Quantity) else Quantity.of(bound.value)
        value = float(quantity.value)
        if bound.op == "<":
            value = value - 1 if bound.target == "gpus" else math.nextafter(value, -math.inf)
        if bound.target == "memory":
            memory, share = value, quantity.dim == NONE
        elif bound.target == "power":
            power = min(power, value)
        elif bound.target == "gpus":
            gpus = min(gpus, int(value))
    return memory, share, power, gpus


def train_job(job: RLJob, partition: Partition, gpus: int, seq: int, memory: float, model: str = "model") -> Job:
    """The training pool as a train job: the policy (or `model = "critic"`) on `gpus` GPUs of
    `partition`, each optimizer step on batch / minibatches samples of `seq` tokens, with the
    pool's stack and pins, within `memory` bytes per GPU (the pool's bound less what the other
    models keep there). The job's power bound is the whole job's: solver/rl checks it."""
    return _pool_train_job(job, job.entity.get(model), partition, gpus, seq, memory)


def _pool_train_job(job: RLJob, model: Entity, partition: Partition, gpus: int, seq: int, memory: float) -> Job:
    entity, span, cluster = job.entity, job.entity.span, job.cluster
    ref = PartitionRef(cluster, partition.name) if cluster.get("partition") is not None else cluster
    pool = entity.get("train") or Record()
    items = [Item("model", model, entity.span_of("model")), Item("on", ref, entity.span_of("on")),
             Item("batch", job.batch // job.minibatches, entity.span_of("minibatches")),
             Item("seq", seq, entity.span_of("response"))]
    items += [Item(i.name, i.value, i.span) for i in pool.items if i.name in TRAIN_FIELDS]
    at = entity.span_of("subject to.memory") if "subject to" in entity.record else span
    bound = Bound("memory", "<=", Quantity(Fraction(max(0, math.floor(memory))), BYTES))
    items.append(Item("subject to", Record((Item("memory", bound, at),)), at))
    train = Entity("train", f"{job.name}.train", Record(tuple(items)), span)
    pool_job = job_from_entity(train)
    # NeMo-RL runs Megatron's precision-aware optimizer unless the pool says otherwise (model/rl/stacks.py [pao]);
    # it needs the distributed optimizer, so a pool that pins plain data parallelism (ZeRO 0) runs without it
    aware = pool.get("precision_aware_optimizer")
    if aware is None:
        aware = (job.stack.remainder_master and pool_job.stack in REMAINDER_STACKS
                 and pool_job.pinned.get("zero") not in (0, "0"))
    return attrs.evolve(pool_job, gpus=gpus, precision_aware_optimizer=aware)
