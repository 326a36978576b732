"""The training pool and a pair of pools, evaluated.

The training pool's layout is the training planner's (solver/train: exact branch and bound
over the train job the pool stands for, model/rl/job.py `train_job`), within the pool's
memory less the weights of the models it also keeps (reward, a reference of another shape than
the policy's and, for PPO, the critic's when the policy's layout is planned; the policy's when the
critic's is), sharded over the pool. It scores the samples (model/rl/phases.py `score_time`: the training stack's forward
passes) at its layout.

A pair of pools (`Candidate`) is one point of the planner's space: where each pool runs, how
many GPUs, the generation layout, the training layout, colocated or apart, the staleness.
"""

from __future__ import annotations

import math


from ...compiler.ir import Partition
from ...dsl.numbers import count, quantity
from ...model.job import Job
from ...model.power import job_power
from ...model.rl import host, phases as ph
from ...model.rl.job import RLJob, train_job
from ...model.rl.stacks import Calibration
from ...model.rl.step import COLOCATED, Phases, RLStep, compose
from ...model.train.step import Estimate
from ..train.plan import plan
from .cost import usd_per_gpu_second
from .generation import GenLayout, Generation
from ...dsl.records import frozen


def shares_weights(train: "TrainPool", layout: GenLayout) -> bool:
    """Colocated pools whose layouts split the weights alike: the engine reads the trained
    weights in place (veRL's 3D-HybridEngine), so neither keeps or moves a second copy."""
    c = train.policy.config
    return (c.tp, c.pp) == (layout.config.tp, layout.config.pp) and c.zero < 3

WEIGHT_BYTES = 2.0          # bf16 weights of the models a pool keeps beside the one it trains


@frozen
class TrainPool:
    partition: str
    gpus: int
    policy: Estimate
    critic: Estimate | None
    job: Job                     # the policy's train job (its layout's explanation when infeasible)
    score: float                 # seconds of forward passes a step
    train: float                 # seconds of optimizer steps a step
    resident: float              # bytes per GPU of the other models' weights


def swaps_reference(job: RLJob) -> bool:
    """A reference of the policy's own shape waits in host memory and is swapped into the policy's
    buffers for its log-probabilities (NeMo-RL's `use_reference_model`: model/rl/host.py), so it
    takes no GPU memory of its own; one of another shape is kept on the GPUs as the reward model is."""
    return job.reference is not None and job.reference == job.policy


def other_weights(job: RLJob, gpus: int, trained: str = "model") -> float:
    """Bytes per GPU of the models the training pool keeps beside the one it trains, sharded
    over its GPUs (ZeRO-3 style, as veRL and OpenRLHF keep them); a swapped reference is not kept."""
    reference = None if swaps_reference(job) else job.reference
    shapes = [reference, job.reward] + ([job.critic] if trained == "model" else [job.policy])
    return sum(s.params * WEIGHT_BYTES for s in shapes if s is not None) / gpus


def train_pool(job: RLJob, partition: Partition, gpus: int, seq: int, limit: float) -> TrainPool | None:
    """The training pool on `gpus` GPUs of `partition`, within `limit` bytes per GPU; None
    when no layout fits."""
    found = plan_train_pool(job, partition, gpus, seq, limit)
    return found if isinstance(found, TrainPool) else None


def plan_train_pool(job: RLJob, partition: Partition, gpus: int, seq: int, limit: float) -> TrainPool | str:
    """`train_pool`, or why no layout fits (the training planner's reason: what does not fit
    and how many GPUs would hold it)."""
    resident = other_weights(job, gpus)
    if resident >= limit:      # the other models' weights alone fill what a GPU may use
        return (f"the other models' weights alone take {_gb(resident)} of the {_gb(limit)} a GPU may use "
                f"(sharded over {count(gpus, 'GPU')})")
    policy_job = train_job(job, partition, gpus, seq, limit - resident)
    policy = plan(policy_job, "throughput", 0)
    best = policy.best
    if best is None:
        return _why(policy)
    critic = None
    if job.critic is not None:
        critic_plan = plan(train_job(job, partition, gpus, seq, limit - other_weights(job, gpus, "critic"), "critic"),
                           "throughput", 0)
        critic = critic_plan.best
        if critic is None:
            return "the critic: " + _why(critic_plan)
    old = job.policy if job.old_logprobs else None   # `old_logprobs = false`: the ratio held at 1, no pass
    score = ph.score_time(best, job.minibatches, (old, job.reference, job.reward, job.critic), job.policy, seq)
    train = ph.train_time(best, job.epochs, job.minibatches)
    if critic is not None:
        train += ph.train_time(critic, job.epochs, job.minibatches)
    return TrainPool(partition.name, gpus, best, critic, policy_job, score, train, resident)


def _why(planned) -> str:
    reason = getattr(planned, "infeasibility", None)
    return reason.message if reason is not None else "no layout is admissible"


def _gb(nbytes: float) -> str:
    return quantity(nbytes, "B")


@frozen
class Candidate:
    placement: str
    staleness: int
    generation: Generation
    train: TrainPool
    step: RLStep
    power: float                 # W at the facility, both pools at their busy shares
    energy: float                # J a step
    cost: float | None           # USD a step (None: the cluster has no economics)

    @property
    def gpus(self) -> int:
        g, t = self.generation.layout.gpus, self.train.gpus
        return t if self.placement == COLOCATED else g + t

    def value(self, objective: str) -> float:
        """Lower is better."""
        if objective == "energy":
            return self.energy
        if objective == "cost":
            return self.cost if self.cost is not None else math.inf
        return self.step.step_time


def sync_time(job: RLJob, gen: GenLayout, train: TrainPool, placement: str, gen_partition: Partition,
              train_partition: Partition) -> float:
    """The weights from the training layout to the generation layout. With whole tensors
    (model/rl/phases.py WHOLE_TENSORS) colocated, every training GPU gathers each tensor and hands it
    to its engine; apart, one training GPU broadcasts each to every generation GPU on NCCL's ring."""
    c = train.policy.config
    nbytes = ph.sync_bytes(job.policy, gen.config.precision, c)
    held = c.tp * c.pp * (c.dp * c.cp if c.zero >= 3 else 1)
    spread = held if c.zero >= 3 else held * c.ep   # experts shard over ep, which ZeRO-3's dp x cp already holds
    fixed = ph.refit_overhead(job.policy)
    if placement == COLOCATED:
        if ph.WHOLE_TENSORS and c.zero < 3:   # Megatron-Bridge's export, group by group
            return ph.bridge_export_time(job.policy, nbytes, c, train_partition, fixed)
        if ph.WHOLE_TENSORS:
            return ph.export_time(nbytes, spread, train_partition, fixed)
        return ph.reshard_time(nbytes, held, gen.shard, train_partition, fixed)
    if ph.WHOLE_TENSORS:   # one NCCL ring over both pools carries every tensor whole
        link = ph.broadcast_link(gen_partition, train_partition, gen.gpus, train.gpus)
        return ph.broadcast_time(nbytes, 1, 1, link, fixed)
    link = ph.link_between(gen_partition, train_partition, gen.gpus, train.gpus)
    return ph.broadcast_time(nbytes, train.gpus, gen.shard, link, fixed)


def evaluate(job: RLJob, placement: str, staleness: int, generation: Generation, train: TrainPool,
             makespan: float | None = None, stream: float | None = None) -> Candidate:
    """The pair of pools at `generation`'s times (or at the bounds given instead)."""
    gen = generation.layout
    gp, tp = job.partition(gen.partition), job.partition(train.partition)
    engine = ph.policy_bytes(job.policy, gen.config.precision) / gen.shard
    reference = 1.0 if swaps_reference(job) else 0.0
    offload = host.host_moves(train.policy, engine, reference, placement == COLOCATED, shares_weights(train, gen), tp,
                               job.stack)
    physics = Phases(makespan if makespan is not None else generation.makespan,
                     stream if stream is not None else generation.stream, train.score, train.train,
                     sync_time(job, gen, train, placement, gp, tp), offload)
    step = compose(calibrated(physics, generation.iterations, job.stack.calibration), placement, staleness)
    power, cost = _power_and_cost(job, placement, step, gen, train)
    return Candidate(placement, staleness, generation, train, step, power, power * step.step_time,
                     None if cost is None else cost * step.step_time)


def calibrated(p: Phases, iterations: tuple[float, float], c: Calibration) -> Phases:
    """The phases as the stack runs them (model/rl/stacks.py `Calibration`): the engine's host time on
    each iteration (the makespan's and the stream's, the stream never over the makespan), the other
    phases scaled. Each term grows with its phase, so the laws of the physics hold calibrated too."""
    generate = p.generate + c.engine_host_s * iterations[0]
    return Phases(generate, min(generate, p.stream + c.engine_host_s * iterations[1]), p.score * c.training,
                  p.train * c.training, p.sync * c.sync, p.offload * c.host_copies)


def _power_and_cost(job: RLJob, placement: str, step: RLStep, gen: GenLayout, train: TrainPool):
    """Facility watts of the pools at their busy shares, and USD a second of the GPUs they hold."""
    graph = job.graph
    if placement == COLOCATED:
        pools = [(train.partition, train.gpus, step.busy("colocated"))]
    else:
        pools = [(gen.partition, gen.gpus, step.busy("generate")), (train.partition, train.gpus, step.busy("train"))]
    power = sum(job_power(graph, job.partition(name), gpus, busy).total for name, gpus, busy in pools)
    rates = [usd_per_gpu_second(job.cluster, graph, name) for name, _, _ in pools]
    cost = None if any(r is None for r in rates) else sum(r * gpus for r, (_, gpus, _) in zip(rates, pools))
    return power, cost
