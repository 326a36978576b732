"""Rules of an `rl` job: models that fit the algorithm (PPO trains a critic, GRPO compares a
prompt's samples), samples that split into the mini-batches, an objective it can be planned
for, and pools that run where the job may run: each on one partition of one cluster, both on
the same one when colocated."""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic, Label
from ...dsl.numbers import count, percent
from ...dsl.units import NONE, Quantity
from ..design import Bound, Entity, Item, Partition, Record
from .job import _chips_of, batch_split, job_precision, one_objective
from .serve import draft_rules, moe_path_rules

POOLS = ("generate", "train")
# Samples a step the planner simulates: every sample's generation is simulated for each pair of
# pools it tries (the example's search took 20 s of CPU at 8,192 samples and 75 s at 32,768 on a
# shared 2-core machine). 16,384 is twice DAPO's 512 prompts x 16 responses (arXiv:2503.14476,
# its training details) and eight times the largest step in benchmarks/data/rl_runs.csv (64 x 32).
MAX_SAMPLES = 16_384


def rl_rules(job: Entity) -> Iterator[Diagnostic]:
    yield from one_objective(job)
    yield from _algorithm(job)
    yield from _batch(job)
    yield from _old_logprobs(job)
    yield from _objective(job)
    yield from _pools(job)
    yield from _heads(job)
    yield from _engine_memory(job)
    yield from moe_path_rules(job, "generate.engine.moe_path", job.get("model"))
    yield from draft_rules(job, "generate.engine")
    pool = rl_train_pool(job)
    if pool is not None:   # the batch split a train job's pins get (job.py), on the pool's optimizer batch
        yield from batch_split(pool)


def _algorithm(job: Entity) -> Iterator[Diagnostic]:
    algorithm = getattr(job.get("algorithm"), "name", "grpo")
    critic = job.get("critic")
    if algorithm == "ppo" and critic is None:
        at = job.span_of("algorithm") if "algorithm" in job.record else job.span
        yield codes.RL_JOB.make(at, what="PPO trains a value model beside the policy: the job names no `critic`",
                                notes=["help: add `critic = SomeModel`, or use `algorithm = grpo` (its baseline is "
                                       "the mean reward of a prompt's samples)"])
    if algorithm == "grpo" and critic is not None:
        yield codes.RL_JOB.make(job.span_of("critic"), what="GRPO has no value model; this `critic` would be trained "
                                "for nothing", notes=["help: remove `critic`, or use `algorithm = ppo`"])
    samples = job.get("samples")
    if algorithm == "grpo" and isinstance(samples, int) and samples < 2:
        yield codes.RL_JOB.make(job.span_of("samples"), what=f"GRPO's baseline is the mean of a prompt's samples; "
                                f"`samples = {samples}` leaves each sample alone in its group",
                                notes=["help: draw 2 or more samples per prompt (8 to 64 are common)"])


def _batch(job: Entity) -> Iterator[Diagnostic]:
    prompts, samples, minibatches = job.get("prompts"), job.get("samples") or 1, job.get("minibatches")
    if isinstance(prompts, int) and isinstance(samples, int) and prompts * samples > MAX_SAMPLES:
        yield codes.RL_JOB.make(job.span_of("samples" if "samples" in job.record else "prompts"),
                                what=f"{prompts * samples:,} samples a step (prompts x samples = {prompts:,} x "
                                     f"{samples:,}); gclc plans at most {MAX_SAMPLES:,}",
                                labels=[Label(job.span_of("prompts"), f"{prompts:,} prompts")],
                                notes=["help: each sample's generation is simulated for every pair of pools the "
                                       "planner tries; plan a step of fewer prompts (its time per sample is the same)"])
        return
    if not isinstance(prompts, int) or not isinstance(minibatches, int):
        return
    total = prompts * samples
    if total % minibatches:
        yield codes.RL_JOB.make(job.span_of("minibatches"),
                                what=f"{total} samples a step (prompts x samples = {prompts} x {samples}) do not "
                                     f"split into {minibatches} mini-batches",
                                labels=[Label(job.span_of("prompts"), f"{prompts} prompts")],
                                notes=[f"help: pick a number of mini-batches that divides {total}"])


def _old_logprobs(job: Entity) -> Iterator[Diagnostic]:
    """Skipping the old log-probabilities holds the importance ratio at 1, true only for the first
    optimizer step after generation (NeMo-RL refuses `force_on_policy_ratio` unless
    train_global_batch_size = prompts x samples: nemo_rl/algorithms/grpo.py v0.7.0 line 429)."""
    if job.get("old_logprobs") is not False:
        return
    epochs, minibatches = job.get("epochs") or 1, job.get("minibatches") or 1
    if isinstance(epochs, int) and isinstance(minibatches, int) and epochs * minibatches > 1:
        yield codes.RL_JOB.make(job.span_of("old_logprobs"),
                                what=f"`old_logprobs = false` holds the importance ratio at 1, but the step takes "
                                     f"{count(epochs * minibatches, 'optimizer step')} ({count(epochs, 'epoch')} x "
                                     f"{count(minibatches, 'mini-batch', 'mini-batches')}) and the policy moves after "
                                     f"the first",
                                notes=["help: remove `old_logprobs = false`, or train one epoch of one mini-batch a "
                                       "step (NeMo-RL's `force_on_policy_ratio` asks train_global_batch_size = "
                                       "prompts x samples)"])


def _objective(job: Entity) -> Iterator[Diagnostic]:
    minimize = getattr(job.get("minimize"), "name", None)
    if minimize == "time" and job.get("steps") is None:
        yield codes.RL_JOB.make(job.span_of("minimize"), what="`minimize = time` needs the run's `steps`", notes=[
            f"help: add `steps = ...` to `{job.name}`: the time of a run is its steps times the step time"])
    if minimize == "cost" and not any(t.cluster.get("economics") is not None for t in _partitions(job.get("on"))):
        yield codes.RL_JOB.make(job.span_of("minimize"), what="`minimize = cost` needs the cluster's `economics`", notes=[
            "help: add an `economics { years = ...  energy_price = ... }` block to the cluster: a GPU-hour's cost "
            "comes from its cost of ownership"])


def _partitions(target: object) -> list[Partition]:
    """The partitions a target names (a whole cluster: each of its partitions)."""
    out: list[Partition] = []
    for t in target if isinstance(target, tuple) else (target,):
        if isinstance(t, Partition):
            out.append(t)
        elif isinstance(t, Entity) and t.kind == "cluster":
            parts = t.get("partition")
            out += [Partition(t, i.name) for i in getattr(parts, "items", ())] or [Partition(t, "")]
    return out


def _key(p: Partition) -> tuple[str, str]:
    return p.cluster.name, p.name


def _pools(job: Entity) -> Iterator[Diagnostic]:
    allowed = {_key(p) for p in _partitions(job.get("on"))}
    clusters = {name for name, _ in allowed}
    if len(clusters) > 1:
        yield codes.RL_JOB.make(job.span_of("on"), what=f"the pools of `{job.name}` run on one cluster; `on` names "
                                f"{len(clusters)} ({', '.join(sorted(clusters))})",
                                notes=["help: the weights move between the pools over one cluster's scale-out "
                                       "fabric; run the job on the partitions of one cluster"])
        return
    chosen = {}
    for pool in POOLS:
        target = job.get(f"{pool}.on")
        if target is None:
            continue
        if not isinstance(target, Partition) and not (isinstance(target, Entity) and len(_partitions(target)) == 1):
            yield codes.RL_JOB.make(job.span_of(f"{pool}.on"), what=f"the {pool} pool runs on one partition",
                                    notes=["help: name one partition, such as `on = Cluster.h100`"])
            continue
        key = _key(_partitions(target)[0])
        if allowed and key not in allowed:
            yield codes.RL_JOB.make(job.span_of(f"{pool}.on"),
                                    what=f"the {pool} pool's `{'.'.join(k for k in key if k)}` is not among the "
                                         f"partitions the job runs `on`",
                                    labels=[Label(job.span_of("on"), "where the job may run")])
        chosen[pool] = key
    placement = getattr(job.get("placement"), "name", "auto")
    if placement == "colocated" and len(set(chosen.values())) > 1:
        yield codes.RL_JOB.make(job.span_of("placement"), what="colocated pools share their GPUs, but the pools run "
                                "on different partitions", labels=[Label(job.span_of("generate.on"), "generation"),
                                                                   Label(job.span_of("train.on"), "training")],
                                notes=["help: put both pools `on` one partition, or use `placement = disaggregated`"])
    sizes = [(p, job.get(f"{p}.gpus")) for p in POOLS if job.get(f"{p}.gpus") is not None]
    if placement == "colocated" and len(sizes) == 2 and sizes[0][1] != sizes[1][1]:
        yield codes.RL_JOB.make(job.span_of("train.gpus"), what=f"colocated pools share their GPUs: {sizes[0][1]} "
                                f"for generation, {sizes[1][1]} for training",
                                labels=[Label(job.span_of("generate.gpus"), "generation's")],
                                notes=["help: give one count, or use `placement = disaggregated`"])


def _engine_memory(job: Entity) -> Iterator[Diagnostic]:
    """The generation engine's `memory` above the job's `memory` bound (a share of HBM): the
    planner holds every pool to the bound (solver/rl/search.py `gen_limit`), so the larger
    share would be accepted and change nothing."""
    share = job.get("generate.engine.memory")
    item = next((i for i in getattr(job.get("subject to"), "items", ())
                 if isinstance(i.value, Bound) and i.value.target == "memory"), None)
    if share is None or item is None:
        return
    bound = item.value
    limit = bound.value if isinstance(bound.value, Quantity) else Quantity.of(bound.value)
    if limit.dim != NONE or not float(share) > float(limit.value):   # bytes per GPU: set per chip, not compared
        return
    yield codes.RL_JOB.make(job.span_of("generate.engine.memory"),
                            what=f"the engine may fill {percent(float(share))} of each GPU's HBM, above the job's "
                                 f"`memory {bound.op} {percent(float(limit.value))}`, which holds every pool: the "
                                 "bound would win and this setting change nothing",
                            labels=[Label(item.span, "the job's bound")],
                            notes=[f"help: set `memory` to at most {percent(float(limit.value))}, or raise the "
                                   "job's bound"])


def _heads(job: Entity) -> Iterator[Diagnostic]:
    """A pinned tensor-parallel width must split the policy's attention heads in either pool."""
    model = job.get("model")
    heads = model.get("heads") if isinstance(model, Entity) else None
    for pool in POOLS:
        tp = job.get(f"{pool}.parallelism.tp")
        if isinstance(tp, int) and isinstance(heads, int) and heads % tp:
            yield codes.SHAPE.make(job.span_of(f"{pool}.parallelism.tp"),
                                   what=f"tp = {tp} does not divide the model's {heads} attention heads",
                                   labels=[Label(model.span_of("heads"), "here")],
                                   notes=[f"help: pick a tp that divides {heads}"])


def rl_precision(job: Entity) -> Iterator[Diagnostic]:
    """Each pool's number format must be one its chips run (run by the driver once the
    declarations are clean, as `job_precision` for train and serve jobs)."""
    for pool in POOLS:
        precision = job.get(f"{pool}.precision")
        on = job.get(f"{pool}.on") or job.get("on")
        if precision is None or not _chips_of(on):
            continue
        yield from job_precision(_pool_entity(job, pool))


def _pool_entity(job: Entity, pool: str) -> Entity:
    """The pool as a job of its own for the precision check: its `precision`, and `on` its partition."""
    import attrs
    from ..design import Item, Record

    record = job.get(pool)
    on = record.get("on") or job.get("on")
    items = tuple(i for i in record.items if i.name == "precision") + (Item("on", on, job.span_of(f"{pool}.on")),)
    return attrs.evolve(job, record=Record(items))


def rl_train_pool(job: Entity) -> Entity | None:
    """An rl job's `train { parallelism { ... } }` as the train job model/rl/job.py plans (the
    policy, the pool's or the job's `on`), its fields keeping their spans; None without pins."""
    pool = job.get("train")
    if not isinstance(pool, Record) or pool.get("parallelism") is None:
        return None
    on = pool.get("on") or job.get("on")
    items = (Item("model", job.get("model"), job.span_of("model")), Item("on", on, job.span_of("on")),
             *(i for i in pool.items if i.name != "on"))
    prompts, samples, minibatches = job.get("prompts"), job.get("samples") or 1, job.get("minibatches") or 1
    if all(isinstance(n, int) and not isinstance(n, bool) for n in (prompts, samples, minibatches)):
        # each optimizer step trains on a mini-batch of the step's samples (model/rl/job.py)
        at = job.span_of("minibatches") if "minibatches" in job.record else job.span_of("prompts")
        items += (Item("batch", prompts * samples // minibatches, at),)
    return Entity("train", f"{job.name}.train", Record(items), job.span)


def rl_generate_pool(job: Entity) -> Entity | None:
    """An rl job's `generate { parallelism { ... } }` as the replica layout solver/rl searches
    (the policy served), its fields keeping their spans; None without pins."""
    pool = job.get("generate")
    if not isinstance(pool, Record) or pool.get("parallelism") is None:
        return None
    items = (Item("model", job.get("model"), job.span_of("model")), *pool.items)
    return Entity("serve", f"{job.name}.generate", Record(items), job.span)
