"""A serve plan as NVIDIA Dynamo's launch (ai-dynamo 1.6.1): one frontend and the workers of
each pool, each worker running the engine the plan was made for.

Files: `dynamo.args`, bash arrays to splice into the launch lines it names: the frontend's
flags (`python -m dynamo.frontend`: HTTP port and the router), and one array per pool for the
backend worker (`python -m dynamo.vllm` or `python -m dynamo.sglang`), whose flags are Dynamo's
own (`--disaggregation-mode` for vLLM workers) followed by the engine's, as the vLLM and SGLang
exports write them (views/export/vllm.py, sglang.py: the same mapping, the same refusals).
Checked by Dynamo's own argument parsing (tests/views/test_export_dynamo.py): the frontend's
`parse_args` and the vLLM worker's `parse_args` from the ai-dynamo 1.6.1 wheel, with the
engine config vLLM builds from it; the SGLang worker's from the same wheel.

The mapping, plan -> Dynamo: each pool's replicas -> that many workers of the pool's role
(aggregated: `agg`; disaggregated: `prefill` and `decode`, the KV cache moving over NIXL as
the engine exports state it: vLLM's `NixlConnector`, SGLang's `--disaggregation-transfer-
backend nixl`); the plan's router -> the frontend's --router-mode (least_requests ->
least-loaded, round_robin -> round-robin, random, power_of_two -> power-of-two); a replica that
spans nodes -> a function setting each node's engine node flags, with Dynamo's own --headless on
the vLLM worker's other nodes (views/export/replica_nodes.py).

Refused, nothing written: what the engine's own export refuses, and a plan made for
TensorRT-LLM: Dynamo's TensorRT-LLM worker imports TensorRT-LLM's own argument classes, and
no TensorRT-LLM code installs here to check them (views/export/trtllm.py says why).
"""

from __future__ import annotations

import shlex

from ...dsl.numbers import number
from ...model.serve.engines import PROFILES
from .replica_nodes import function_lines, nodes_per_replica, sglang_node_flags, vllm_node_flags
from .sglang import pool_arguments as sglang_arguments
from .target import ExportError, header
from .trtllm import UNCHECKABLE
from .vllm import pool_arguments as vllm_arguments, pools, words

RELEASE = "ai-dynamo 1.6.1"
BACKENDS = {"vllm": ("dynamo.vllm", vllm_arguments), "sglang": ("dynamo.sglang", sglang_arguments)}
NODE_FLAGS = {"vllm": (vllm_node_flags, ["--headless"]), "sglang": (sglang_node_flags, [])}
ROUTERS = {"least_requests": "least-loaded", "round_robin": "round-robin", "random": "random",
           "power_of_two": "power-of-two"}   # the plan's router -> the frontend's --router-mode
HTTP_PORT = 8000


def backend_of(served) -> str:
    """The engine family the plan was made for (an engine-less plan runs on vLLM, as its export)."""
    name = pools(served)[-1][1].replica.engine.name
    family = PROFILES[name].family if name in PROFILES else "vllm"
    if family == "trtllm":
        raise ExportError(f"the plan was made for TensorRT-LLM (`{name}`); {UNCHECKABLE}: plan with "
                          f"`engine {{ profile = vllm_v1 }}` or `sglang` to export a Dynamo launch")
    return "vllm" if family == "ideal" else family


def worker_arguments(backend: str, served, side, role: str) -> list[tuple[str, object]]:
    """Dynamo's worker flags for one replica of `side`, then the engine's."""
    engine_args = BACKENDS[backend][1](served, side, role)
    if backend == "sglang":   # SGLang's own --disaggregation-mode names the role (Dynamo reads it)
        return engine_args
    return [("--disaggregation-mode", role if role in ("prefill", "decode") else "agg"), *engine_args]


def frontend_arguments(served) -> list[tuple[str, object]]:
    from ...solver.serve.space import router_of

    return [("--http-port", HTTP_PORT), ("--router-mode", ROUTERS[router_of(served.entity)])]


def export(served, source: str) -> dict[str, str]:
    roles = pools(served)
    backend = backend_of(served)
    module = BACKENDS[backend][0]
    lines = [header(source, f"NVIDIA Dynamo ({RELEASE}) launch of `{served.name}` on {backend}: one array per process kind"),
             "# Dynamo's discovery (etcd) and event plane (NATS) run beside it, as its deployment guide starts them.",
             "# the frontend, once: python -m dynamo.frontend \"${DYNAMO_FRONTEND_ARGS[@]}\"",
             f"# each worker: python -m {module} --model{'-path' if backend == 'sglang' else ''} \"$CHECKPOINT\" "
             "\"${DYNAMO_<POOL>_ARGS[@]}\"", "", "DYNAMO_FRONTEND_ARGS=("]
    lines += [f"  {shlex.join(words([pair]))}" for pair in frontend_arguments(served)]
    lines.append(")")
    for role, side in roles:
        c = side.replica.config
        lines += ["", f"# {role}: {side.count} worker(s) of {c.gpus} GPU(s), {number(side.estimate.tokens_per_s)} "
                      f"output tokens/s each in the plan", f"DYNAMO_{role.upper()}_ARGS=("]
        lines += [f"  {shlex.join(words([pair]))}" for pair in worker_arguments(backend, served, side, role)]
        lines.append(")")
        nodes = nodes_per_replica(c.gpus, served.partition.node.gpus, role)
        if nodes > 1:
            lines += function_lines("dynamo", role, nodes, *NODE_FLAGS[backend])
    return {"dynamo.args": "\n".join(lines) + "\n"}
