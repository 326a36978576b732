"""A serve plan as vLLM's launch settings (`vllm serve`), one set per pool.

Flags as defined by vLLM 0.33.0's `EngineArgs` (vllm/engine/arg_utils.py), whose own parser and
`create_engine_config` accept every export (tests/views/test_export_vllm.py). Each pool of the
plan (aggregated: `serving`; disaggregated: `prefill` and `decode`) becomes a replica's flags,
written twice: `vllm.args`, bash arrays to splice into the launch line, and `vllm-<pool>.yaml`,
the same flags as vLLM's `--config` file. A replica is one `vllm serve` process group; the
plan's replica count is how many of them to start (Slurm and Kubernetes exports place them).

The mapping, plan -> vLLM: tp -> --tensor-parallel-size; pp -> --pipeline-parallel-size; the
attention groups sharing the routed experts (ep) -> --data-parallel-size; the experts as the
plan costs them (model/serve/moe.py `expert_layout`) -> --enable-expert-parallel where each GPU
holds whole experts (vLLM's EP spans TP x DP GPUs), off where they are TP-sharded over the
replica's TP GPUs (the vllm_v1 profile's `ep_with_dp`: on exactly with several attention
groups), and the dispatcher -> --all2all-backend: `deepep` deepep_high_throughput (DeepEP's normal kernels,
which vLLM runs without CUDA graphs, as the plan costs them), `allgather` allgather_reducescatter (vLLM's
default, the vllm_v1 profile's; `alltoall` has no vLLM backend and is refused); the batch limit over the DP ranks -> --max-num-seqs (vLLM's limit is per DP rank); the
engine's chunk -> --max-num-batched-tokens (chunked prefill is vLLM's only mode since V1); the
KV page -> --block-size; the KV precision -> --kv-cache-dtype; the memory bound ->
--gpu-memory-utilization (vLLM's share of HBM for weights, activations and KV together, what
the plan's memory bound limits); the model's sequence -> --max-model-len; a declared prefix
share -> prefix caching on (off where the plan counts no hits); speculative decoding -> the
model's own MTP heads; the CUDA-graph ceiling, in tokens (the vllm_v1 profile's 512 or a stated
`graph_batch`) -> --max-cudagraph-capture-size (0: --enforce-eager); the host's work overlapped with the GPU's or not (the engine's `overlap`)
-> --async-scheduling or --no-async-scheduling (vLLM 0.33.0 turns async scheduling on when
neither is given, vllm/config/vllm.py, which the vllm_v1 profile does not cost). Disaggregated pools exchange KV through NIXL (`NixlConnector`, both
roles `kv_both` as vLLM's disaggregated-serving guide runs them). A replica that spans nodes
gets a function setting each node's --nnodes/--node-rank/--master-addr/--master-port and
--headless (views/export/replica_nodes.py).

Engine knobs vLLM has no flag for are refused, never dropped: more than one decode step per
scheduling round (V1 schedules every step), a draft without MTP heads to draft with (the
design names no draft model), preemption by swapping or reserving (V1's scheduler frees a
preempted request's blocks and recomputes it: vllm/v1/core/sched/scheduler.py
`_preempt_request`), prompts run alone (`mixed = false`: V1 schedules prompt chunks beside the
decoding requests in every step), the host overlapped across pipeline stages (vLLM refuses
async scheduling with pipeline parallelism), weights or a KV cache in a precision the mapping has no flag for,
and experts laid out in a way vLLM has no launch for (TP-sharded within each of several
attention groups, or a loop over experts).
"""

from __future__ import annotations

import json
import shlex

import yaml

from ...dsl.numbers import number
from ...model.serve import moe
from ...model.shape import ModelShape
from .engine_checks import check_common
from .replica_nodes import function_lines, nodes_per_replica, vllm_node_flags
from .target import ExportError, header

VENDORS = ("NVIDIA", "AMD")   # vLLM's GPU platforms (CUDA and ROCm)
WEIGHTS = {"bf16": None, "fp8": "fp8"}            # the plan's weight precision -> --quantization
KV_CACHE = {"bf16": "auto", "fp8": "fp8"}          # the plan's KV precision -> --kv-cache-dtype
KV_CONNECTOR = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def pool_arguments(served, side, role: str) -> list[tuple[str, object]]:
    """(flag, value) pairs for one replica of `side` (a solver/serve/screen.py Side): True and
    False are a switch on and off, a dict vLLM's JSON argument."""
    replica, entity = side.replica, served.entity
    model = entity.get("model")
    experts = is_moe(model)
    check(replica.config, replica.engine, served.partition.node.accelerator, bool(model.get("mtp")), experts)
    return replica_arguments(getattr(model, "name", "model"), replica.config, replica.engine, shape_seq(entity),
                             memory_share(served), role, experts=experts)


def is_moe(model) -> bool:
    return ModelShape.from_entity(model).is_moe


def expert_parallel(c, engine, experts: bool) -> bool:
    """Whether vLLM must hold whole experts per GPU (--enable-expert-parallel) to run the
    experts as the plan costs them (model/serve/moe.py `expert_layout`)."""
    return experts and c.tp * c.ep > 1 and moe.expert_layout(engine.moe_path, c.tp, c.ep)[0] == 1


# the plan's dispatcher -> vLLM 0.33.0's --all2all-backend (vllm/config/parallel.py All2AllBackend;
# model/serve/engines.py [deepep] [vllmagrs]); vLLM has no backend sending every top_k copy ("naive" and
# "pplx" were removed, falling back to allgather_reducescatter), so `alltoall` has none
ALL2ALL_BACKENDS = {"deepep": "deepep_high_throughput", "allgather": "allgather_reducescatter"}


def replica_arguments(model: str, c, engine, max_len: int, memory: float, role: str,
                      sleep: bool = False, experts: bool = False) -> list[tuple[str, object]]:
    """One replica's flags: the layout `c` (a ServeConfig), the engine, the longest sequence,
    the share of HBM; `sleep`: the engine hands its GPUs to training between batches
    (vLLM's sleep mode, as colocated RL engines run); `experts`: the model routes to experts."""
    args: list[tuple[str, object]] = [
        ("--served-model-name", model), ("--dtype", "bfloat16"),
        ("--tensor-parallel-size", c.tp), ("--pipeline-parallel-size", c.pp)]
    if c.ep > 1:
        args.append(("--data-parallel-size", c.ep))
    if expert_parallel(c, engine, experts):
        args.append(("--enable-expert-parallel", True))
        # the dispatcher the plan prices, written even where it is vLLM's default ([vllmagrs])
        args.append(("--all2all-backend", ALL2ALL_BACKENDS[engine.dispatcher]))
    if WEIGHTS[c.precision]:
        args.append(("--quantization", WEIGHTS[c.precision]))
    # vLLM's --max-num-seqs bounds each data-parallel rank's scheduler (vllm/config/scheduler.py):
    # the replica's batch split over its ep attention groups
    args += [("--max-model-len", max_len), ("--max-num-seqs", -(-c.batch // c.ep)),
             ("--max-num-batched-tokens", engine.chunk), ("--block-size", engine.block),
             ("--kv-cache-dtype", KV_CACHE[c.kv]),
             ("--gpu-memory-utilization", round(memory, 4)),
             ("--enable-chunked-prefill", True), ("--enable-prefix-caching", engine.prefix_share > 0),
             ("--async-scheduling", engine.overlaps(c.pp))]
    if engine.draft:
        args.append(("--speculative-config", {"method": "mtp", "num_speculative_tokens": engine.draft}))
    args += graph_arguments(engine)
    if role in ("prefill", "decode"):
        args.append(("--kv-transfer-config", dict(KV_CONNECTOR)))
    if sleep:
        args.append(("--enable-sleep-mode", True))
    return args


def graph_arguments(engine) -> list[tuple[str, object]]:
    """The plan's CUDA-graph ceiling, in tokens as vLLM V1 counts it (`graph_tokens`: every iteration of
    at most that many tokens graphed, a decode step of B sequences with k draft tokens being B (1 + k);
    model/serve/engines.py [v1graphs]) -> --max-cudagraph-capture-size, 0 (no graphs) -> --enforce-eager.
    Written even where it is the profile's: vLLM's default ceiling is min(max_num_seqs x (1 + k) x 2, 512;
    1024 on data-center Blackwell), the plan's 512 only for some batches, drafts and chips."""
    if engine.eager_op_s <= 0:
        return []
    if engine.graph_tokens:
        return [("--max-cudagraph-capture-size", engine.graph_tokens)]
    if engine.graph_batch:
        raise ExportError(f"the plan graphs decode steps of up to {engine.graph_batch} sequences; vLLM's V1 engine "
                          "counts its CUDA-graph ceiling in tokens: plan with the vllm_v1 profile's ceiling "
                          "(`engine { graph_batch = N }` on it is N tokens)")
    return [("--enforce-eager", True)]


def shape_seq(entity) -> int:
    return int(entity.get("model").get("seq"))


def memory_share(served) -> float:
    """The plan's memory bound as a share of HBM (1.0 where the design sets none)."""
    hbm = served.partition.node.accelerator.hbm_capacity
    return min(1.0, served.limits.memory_bytes(hbm) / hbm)


def check(config, engine, chip, mtp: bool, experts: bool = False) -> None:
    """What vLLM cannot run of a replica of `config` with `engine` on `chip` (`mtp`: the model
    has MTP heads to draft with; `experts`: it routes to experts): an ExportError saying why."""
    check_common("vLLM", "vllm", "vllm_v1", config, engine, chip, VENDORS, WEIGHTS, KV_CACHE)
    if experts and config.tp * config.ep > 1:
        path = moe.run_path(engine.moe_path, config.ep)
        if path == "per_expert":
            raise ExportError("the plan loops over experts one by one (`moe_path = per_expert`, vLLM 0.2's kernel); "
                              "vLLM 0.33.0 runs them fused: plan with `moe_path = ep_with_dp` (the vllm_v1 profile's)")
        if path == "tp_sharded" and config.ep > 1:
            raise ExportError(f"the plan shards each expert over TP {config.tp} within each of {config.ep} attention "
                              f"groups; vLLM shards them over all TP x DP GPUs, or with --enable-expert-parallel "
                              f"holds whole experts: plan with `moe_path = ep_with_dp` (the vllm_v1 profile's)")
    if experts and engine.dispatcher not in ALL2ALL_BACKENDS and expert_parallel(config, engine, experts):
        raise ExportError(f"the plan sends every routed copy of a token in an all-to-all (`dispatcher = "
                          f"{engine.dispatcher}`), and vLLM 0.33.0 has no backend that does (its default, "
                          "allgather_reducescatter, gathers every attention group's tokens on every GPU; naive "
                          "and pplx were removed): plan with `dispatcher = allgather` (the vllm_v1 profile's) "
                          "or `dispatcher = deepep`")
    if engine.dispatcher == "deepep" and not expert_parallel(config, engine, experts):
        raise ExportError("the plan dispatches tokens with DeepEP (`dispatcher = deepep`), which sends them between "
                          "expert-parallel GPUs, and this replica's experts are TP-sharded (no --enable-expert-parallel): "
                          "plan with `dispatcher = alltoall`, or with several attention groups")
    if engine.scheduler_steps != 1:
        raise ExportError(f"the plan runs {engine.scheduler_steps} decode steps per scheduling round; vLLM's "
                          "V1 engine schedules every step (no --num-scheduler-steps): remove `scheduler_steps`")
    if engine.preemption != "recompute":
        raise ExportError(f"the plan preempts requests by `{engine.preemption}`; vLLM's V1 engine recomputes a "
                          "preempted request (it frees its KV blocks, vllm/v1/core/sched/scheduler.py): plan with "
                          "`engine { preemption = recompute }`")
    if not engine.mixed:
        raise ExportError("the plan runs waiting prompts alone before decoding (`mixed = false`); vLLM's V1 engine "
                          "schedules prompt chunks beside the decoding requests in every step: plan with "
                          "`engine { mixed = true }` (the vllm_v1 profile's)")
    if config.pp > 1 and engine.overlaps(config.pp):
        raise ExportError(f"the plan overlaps the host's work with the GPU's over {config.pp} pipeline stages; vLLM "
                          "refuses async scheduling with pipeline parallelism: plan with `engine { overlap = false }`")
    if engine.draft and not mtp:
        raise ExportError("the plan drafts speculative tokens, but the model has no MTP heads to draft with and "
                          "the design names no draft model for vLLM's --speculative-config")


def pools(served) -> list[tuple[str, object]]:
    """(role, side): aggregated `serving`, or `prefill` then `decode`."""
    if served.best is None:
        raise ExportError(f"`{served.name}` has no plan to export")
    return [("prefill", served.prefill), ("decode", served.decode)] if served.prefill else [("serving", served.decode)]


def words(args: list[tuple[str, object]]) -> list[str]:
    out: list[str] = []
    for flag, value in args:
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag.removeprefix("--"))
        else:
            out += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return out


def export(served, source: str) -> dict[str, str]:
    entries = []
    node_gpus = served.partition.node.gpus
    for role, side in pools(served):
        c = side.replica.config
        entries.append((role, side.count, f"{side.count} replica(s) of {c.gpus} GPU(s) (TP {c.tp} x DP {c.ep} x PP "
                                         f"{c.pp}), {number(side.estimate.tokens_per_s)} output tokens/s each in the plan",
                       pool_arguments(served, side, role), nodes_per_replica(c.gpus, node_gpus, role)))
    return write(served.name, entries, source)


def write(name: str, entries: list[tuple[str, int, str, list, int]], source: str) -> dict[str, str]:
    """`vllm.args` (one bash array per pool, and a node function where a replica spans nodes)
    and one `vllm-<pool>.yaml` each, from [(role, replicas, what the plan says of them, flags,
    nodes per replica)]."""
    lines = [header(source, f"vLLM 0.33.0 launch settings of `{name}`: one array per pool"),
             "# launch each replica: vllm serve \"$CHECKPOINT\" \"${VLLM_<POOL>_ARGS[@]}\""]
    files: dict[str, str] = {}
    for role, count, said, args, nodes in entries:
        lines += ["", f"# {role}: {said}", f"VLLM_{role.upper()}_ARGS=("]
        lines += [f"  {shlex.join(words([pair]))}" for pair in args]
        lines.append(")")
        if nodes > 1:
            lines += function_lines("vllm", role, nodes, vllm_node_flags, ["--headless"])
        keyed = {flag.removeprefix("--"): value for flag, value in args}
        where = f"; on each of its {nodes} nodes add the node flags of vllm.args" if nodes > 1 else ""
        files[f"vllm-{role}.yaml"] = (header(source, f"vLLM `--config` of the {role} pool of `{name}` "
                                              f"({count} replica(s){where})") + "\n"
                                       + yaml.safe_dump(keyed, sort_keys=False))
    return {"vllm.args": "\n".join(lines) + "\n", **files}
