"""A serve plan as SGLang's launch settings (`python -m sglang.launch_server`), one set per pool.

Flags as defined by SGLang 0.5.23's `ServerArgs` (sglang/srt/server_args.py and its
arg_groups/fields), whose own parser, resolution and `check_server_args` accept every export
(tests/views/test_export_sglang.py). Files, as the vLLM export's: `sglang.args` (bash arrays,
one per pool) and `sglang-<pool>.yaml`, the same flags as SGLang's `--config` file.

The mapping, plan -> SGLang: one replica's GPUs (tp x ep x pp) are SGLang's TP group times its
PP stages: --tp-size tp x ep and --pp-size pp; the attention groups that share the routed
experts (ep) -> --attn-dp-size (attention data parallel inside the TP group, each group's
attention TP = the plan's tp); the routed experts as the plan costs them -> --ep-size: ep where
the engine's MoE path keeps each expert TP-sharded over tp GPUs (SGLang's MoE TP = tp-size /
ep-size), tp x ep where it holds whole experts; `dispatcher = allgather` (the profile's) -> --moe-a2a-backend
none, SGLang's default, whose data-parallel attention gathers every group's tokens over the TP group and
reduce-scatters the outputs back, as the plan costs it (model/serve/engines.py [sgldpa]; in SGLang's
MAX_LEN padding mode only: its SUM_LEN mode, every multi-group prefill and decode within its custom all-reduce,
runs both as all-reduces of about twice the bytes, which the plan does not price); `dispatcher =
deepep` -> --moe-a2a-backend deepep --deepep-mode normal (DeepEP's normal kernels, which SGLang runs
without CUDA graphs, as the plan costs them; `alltoall`, every routed copy sent, is refused where experts
lie on several GPUs: no SGLang backend sends so); the batch limit -> --max-running-requests; the
engine's chunk -> --chunked-prefill-size (prompt chunks join decode batches only with
--enable-mixed-chunk, the engine's `mixed`); the KV page -> --page-size; the KV precision ->
--kv-cache-dtype; the memory bound -> --mem-fraction-static (SGLang's share for weights and the
KV pool; ASSUMPTION: the plan's bound, activations included, as for vLLM); the model's sequence
-> --context-length; no declared prefix share -> --disable-radix-cache (the plan counts no
hits); decode steps per scheduling round -> --num-continuous-decode-steps; the host overlap
off -> --disable-overlap-schedule; speculative decoding through the model's MTP heads ->
NEXTN; disaggregated pools -> --disaggregation-mode prefill|decode over NIXL (as the vLLM export);
a replica that spans nodes -> a function setting each node's --nnodes/--node-rank/--dist-init-addr
(views/export/replica_nodes.py).
The `sglang` profile plans pipeline stages without the overlap, as SGLang runs them
(model/serve/engines.py `overlap_pp`).

Refused, nothing written: a plan made for another engine, a chip SGLang has no platform for
here, weights or KV in a precision without a flag, a draft with no MTP heads, preemption by
swapping or reserving (SGLang retracts and recomputes), a stated `graph_batch` (no capture
ceiling is written), and a pipeline
planned with the host's work overlapped (an engine whose `overlap_pp` was overridden: SGLang
turns it off under PP, so the plan would hide host time SGLang spends).
"""

from __future__ import annotations

import shlex

import yaml

from ...dsl.numbers import number
from ...model.serve import moe
from ...model.serve.engines import PROFILES
from .engine_checks import check_common
from .replica_nodes import function_lines, nodes_per_replica, sglang_node_flags
from .target import ExportError, header
from .vllm import memory_share, pools, shape_seq, words

VENDORS = ("NVIDIA", "AMD")   # SGLang's CUDA and ROCm platforms
WEIGHTS = {"bf16": None, "fp8": "fp8"}            # the plan's weight precision -> --quantization
KV_CACHE = {"bf16": "bf16", "fp8": "fp8_e4m3"}     # the plan's KV precision -> --kv-cache-dtype
TRANSFER = "nixl"
RELEASE = "SGLang 0.5.23"


def pool_arguments(served, side, role: str) -> list[tuple[str, object]]:
    """(flag, value) pairs for one replica of `side`; True and False are a switch on and off
    (SGLang's switches have no `--no-` form: False is left out)."""
    replica, entity = side.replica, served.entity
    c, engine = replica.config, replica.engine
    _check(served, c, engine)
    model = entity.get("model")
    args: list[tuple[str, object]] = [
        ("--served-model-name", getattr(model, "name", "model")), ("--dtype", "bfloat16"),
        ("--tp-size", c.tp * c.ep), ("--pp-size", c.pp)]
    if c.ep > 1:
        args += [("--attn-dp-size", c.ep), ("--ep-size", moe.expert_layout(engine.moe_path, c.tp, c.ep)[1])]
    if engine.dispatcher == "deepep":   # DeepEP's normal kernels (SGLang then runs without CUDA graphs, as planned)
        args += [("--moe-a2a-backend", "deepep"), ("--deepep-mode", "normal")]
    elif c.ep > 1:   # the gather over the TP group under data-parallel attention (allgather: _check)
        args.append(("--moe-a2a-backend", "none"))
    if WEIGHTS[c.precision]:
        args.append(("--quantization", WEIGHTS[c.precision]))
    args += [("--context-length", shape_seq(entity)), ("--max-running-requests", c.batch),
             ("--chunked-prefill-size", engine.chunk), ("--page-size", engine.block),
             ("--kv-cache-dtype", KV_CACHE[c.kv]), ("--mem-fraction-static", round(memory_share(served), 4)),
             ("--enable-mixed-chunk", bool(engine.mixed)), ("--disable-radix-cache", engine.prefix_share == 0),
             ("--disable-overlap-schedule", not engine.overlaps(c.pp))]
    if engine.scheduler_steps > 1:
        args.append(("--num-continuous-decode-steps", engine.scheduler_steps))
    if engine.draft:
        args += [("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", engine.draft),
                 ("--speculative-eagle-topk", 1), ("--speculative-num-draft-tokens", engine.draft + 1)]
    if role in ("prefill", "decode"):
        args += [("--disaggregation-mode", role), ("--disaggregation-transfer-backend", TRANSFER)]
    return [(flag, value) for flag, value in args if value is not False]


def _check(served, config, engine) -> None:
    check_common("SGLang", "sglang", "sglang", config, engine, served.partition.node.accelerator, VENDORS, WEIGHTS,
                 KV_CACHE)
    if engine.draft and not served.entity.get("model").get("mtp"):
        raise ExportError("the plan drafts speculative tokens, but the model has no MTP heads to draft with (NEXTN) "
                          "and the design names no draft model for SGLang's --speculative-draft-model-path")
    if engine.preemption != "recompute":
        raise ExportError(f"the plan preempts requests by `{engine.preemption}`; SGLang retracts a running request "
                          "and recomputes it: plan with `engine { preemption = recompute }`")
    if engine.dispatcher == "deepep" and (config.tp * config.ep <= 1
                                          or moe.expert_layout(engine.moe_path, config.tp, config.ep)[0] != 1):
        raise ExportError("the plan dispatches tokens with DeepEP (`dispatcher = deepep`), which sends them between "
                          "GPUs holding whole experts, and this replica's experts are TP-sharded (or on one GPU): plan "
                          "with `dispatcher = allgather` (the sglang profile's), or with `moe_path = grouped`")
    if engine.dispatcher == "alltoall" and moe.expert_layout(engine.moe_path, config.tp, config.ep)[1] > 1:
        raise ExportError("the plan sends every routed copy of a token in an all-to-all (`dispatcher = alltoall`), "
                          "and SGLang 0.5.23 has no backend that does: its default gathers every attention group's "
                          "tokens over the TP group (or, in one group, all-reduces), and DeepEP's normal kernels send "
                          "a token once per GPU: plan with `dispatcher = allgather` (the sglang profile's) or "
                          "`dispatcher = deepep`")
    default = PROFILES["sglang"].knobs["graph_batch"]
    if engine.graph_batch != default and engine.eager_op_s > 0 and engine.dispatcher != "deepep":
        raise ExportError(f"the plan runs decode batches up to {engine.graph_batch} as CUDA graphs (`graph_batch`); "
                          f"the SGLang export writes no capture ceiling, so SGLang would run its own ({default} in "
                          "the profile): remove `graph_batch`")
    if config.pp > 1 and engine.overlaps(config.pp):
        raise ExportError(f"the plan runs {config.pp} pipeline stages with the host's work overlapped, which SGLang "
                          "turns off under pipeline parallelism: plan it with the `sglang` engine profile, or set "
                          "`engine { overlap = false }`")


def export(served, source: str) -> dict[str, str]:
    roles = pools(served)
    lines = [header(source, f"{RELEASE} launch settings of `{served.name}`: one array per pool"),
             "# launch each replica: python -m sglang.launch_server --model-path \"$CHECKPOINT\" "
             "\"${SGLANG_<POOL>_ARGS[@]}\""]
    files: dict[str, str] = {}
    for role, side in roles:
        args = pool_arguments(served, side, role)
        c = side.replica.config
        lines += ["", f"# {role}: {side.count} replica(s) of {c.gpus} GPU(s) (TP {c.tp * c.ep} with attention DP "
                      f"{c.ep} x PP {c.pp}), {number(side.estimate.tokens_per_s)} output tokens/s each in the plan",
                  f"SGLANG_{role.upper()}_ARGS=("]
        lines += [f"  {shlex.join(words([pair]))}" for pair in args]
        lines.append(")")
        nodes = nodes_per_replica(c.gpus, served.partition.node.gpus, role)
        if nodes > 1:
            lines += function_lines("sglang", role, nodes, sglang_node_flags, [])
        keyed = {flag.removeprefix("--"): value for flag, value in args}
        where = f"; on each of its {nodes} nodes add the node flags of sglang.args" if nodes > 1 else ""
        files[f"sglang-{role}.yaml"] = (header(source, f"SGLang `--config` of the {role} pool of `{served.name}` "
                                                f"({side.count} replica(s){where})") + "\n"
                                         + yaml.safe_dump(keyed, sort_keys=False))
    return {"sglang.args": "\n".join(lines) + "\n", **files}
