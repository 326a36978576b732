"""An `rl` plan's two pools as their software's settings (`gclc export vllm` and `gclc export
megatron` on an rl job): the generation pool as vLLM's launch (views/export/vllm.py's mapping,
one pool named `generate`) and the training pool as Megatron-LM's arguments
(views/export/megatron.py) for the policy's train job (model/rl/job.py `train_job`) at the layout
the plan chose.

One answer: both describe the plan's best pair of pools. The engine gets the plan's layout,
replica batch, chunk, page, cache precision and share of HBM (the step's simulated engine:
solver/rl/search.py `Context`), the longest sequence a sample may reach (prompt + max_response),
prefix caching (a prompt's samples share its cache in the plan), and, where the pools share
their GPUs, vLLM's sleep mode (the engine's weights wait in host memory while the pool trains:
the step's offload phase). Training gets the pool's GPUs, layout, mini-batch (the step's samples
over `minibatches`) and the plan's mean sequence, and Megatron's precision-aware optimizer where the
RL stack runs it (model/rl/stacks.py: NeMo-RL's; the training pool's `precision_aware_optimizer`, whose
state the training model counts and the plan's host copies move at 10 bytes a parameter). The RL loop itself (the weight sync between
the two, the staleness, the scoring passes) is the RL framework's, which the files do not
configure: the header says so.
"""

from __future__ import annotations

from ...compiler.design import Entity
from ...model.rl.step import COLOCATED
from ...model.shape import ModelShape
from ...solver.rl.plan import RLPlan, plan_rl
from ...solver.rl.search import Context
from ...solver.train.plan import placement
from .megatron import export as megatron_export
from .replica_nodes import nodes_per_replica
from .vllm import check as vllm_check, is_moe, replica_arguments, write as vllm_write
from .jobs import Infeasible, train_share
from .target import JobPlan, Run

LOOP = "the RL loop (weight sync between the pools, staleness, scoring) is the RL framework's, not set here"


def best(entity: Entity) -> RLPlan:
    plan = plan_rl(entity, top=0)
    if plan.best is None:
        reasons = plan.result.reasons
        more = f" (and {len(reasons) - 3} more; `gclc plan` lists them)" if len(reasons) > 3 else ""
        raise Infeasible(f"`{entity.name}` has no plan: " + "; ".join(reasons[:3]) + more)
    return plan


def generation(entity: Entity, source: str) -> dict[str, str]:
    """vLLM's launch settings of the generation pool: one replica's flags, and how many."""
    plan = best(entity)
    chosen, job = plan.best, plan.job
    layout = chosen.generation.layout
    context = Context(job)
    partition = job.partition(layout.partition)
    chip = partition.node.accelerator
    model = entity.get("model")
    experts = is_moe(model)
    vllm_check(layout.config, context.engine, chip, bool(model.get("mtp")), experts)
    memory = context.gen_limit(layout, chosen.placement, chosen.train) / chip.hbm_capacity
    longest = int(entity.get("prompt")) + int(entity.get("max_response") or plan.longest)
    colocated = chosen.placement == COLOCATED
    c = layout.config
    args = replica_arguments(getattr(model, "name", "model"), c, context.engine, longest, min(1.0, memory),
                                  "generate", sleep=colocated, experts=experts)
    said = (f"{layout.replicas} replica(s) of {c.gpus} GPU(s) (TP {c.tp} x DP {c.ep} x PP {c.pp}) on "
            f"{layout.partition}, " + ("sharing the training pool's GPUs" if colocated else
                                       f"apart from the training pool ({chosen.train.gpus} GPUs of "
                                       f"{chosen.train.partition})") + f"; {LOOP}")
    nodes = nodes_per_replica(c.gpus, partition.node.gpus, "generate")
    return vllm_write(entity.name, [("generate", layout.replicas, said, args, nodes)], source)


def training(entity: Entity, source: str) -> dict[str, str]:
    """Megatron-LM's arguments of the training pool: the policy's train job at the plan's layout."""
    plan = best(entity)
    pool = plan.best.train
    job, estimate = pool.job, pool.policy
    partition = plan.job.partition(pool.partition)
    config = estimate.config
    jp = JobPlan(job.name, job.entity, ModelShape.from_entity(entity.get("model")), job.precision, job.stack,
                 "single", (train_share(partition, config, config.gpus, job.batch),), Run(),
                 estimate.tokens_per_s, estimate, placement(estimate, job), partition)
    chip = partition.node.accelerator
    files = megatron_export(jp, chip, source)
    note = (f"# the training pool of rl job `{entity.name}`: {pool.gpus} GPUs of {pool.partition}, one optimizer step "
            f"a mini-batch; {LOOP}\n")
    return {name: note + text for name, text in files.items()}
