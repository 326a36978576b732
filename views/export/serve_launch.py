"""One node's launch of a serve replica that spans nodes, for the Slurm and Kubernetes exports.

The engine exports (`--to vllm|sglang|dynamo`) write, per pool whose replica has more GPUs than a
node, a bash function `<engine>_<pool>_node_args NODE_RANK HEAD_ADDR` (views/export/replica_nodes.py).
The launchers know the two: Slurm from the step's node list (SLURM_NODEID and
SLURM_STEP_NODELIST: nodes in order, a replica on each run of `nodes` consecutive ones, its first
the head), a JobSet from its pod's completion index and the Job's first pod's hostname. Here is
the bash that calls the function and starts the plan's engine on one node, given those two
variables; the engine's args file is read from GCLC_ARGS_DIR (the folder `gclc export --to vllm`
or `--to sglang` wrote). A plan made for an engine without such an export (the ideal engine,
TensorRT-LLM) runs the user's own command with NODE_RANK and HEAD_ADDR set.
"""

from __future__ import annotations

import shlex

from ...model.serve.engines import profile
from .replica_nodes import nodes_per_replica

LAUNCH = {   # family: (args file, array prefix, the engine's launch before its flags)
    "vllm": ("vllm.args", "vllm", 'vllm serve "$CHECKPOINT"'),
    "sglang": ("sglang.args", "sglang", 'python -m sglang.launch_server --model-path "$CHECKPOINT"'),
}


def engine_family(job) -> str:
    """The family of the engine the serve plan was made for (vllm, sglang, trtllm, ideal)."""
    return profile(job.served.decode.replica.engine.name).family


def spans(share, node_gpus: int) -> int:
    """Nodes per replica of a serve pool (1: it fits in one node)."""
    return nodes_per_replica(share.together, node_gpus, share.role or "serving")


def node_command(job, share) -> str:
    """The bash one node runs, NODE_RANK and HEAD_ADDR set: the plan's engine with the pool's
    flags and this node's, or the user's command ("$@") where the engine has no export."""
    role = share.role or "serving"
    family = engine_family(job)
    if family not in LAUNCH:
        return 'exec "$@"'
    args, prefix, launch = LAUNCH[family]
    array = f"{prefix.upper()}_{role.upper()}"
    return (f'source "${{GCLC_ARGS_DIR:-.}}/{args}" && {prefix}_{role}_node_args "$NODE_RANK" "$HEAD_ADDR" && '
            f'exec {launch} "${{{array}_ARGS[@]}}" "${{{array}_NODE_ARGS[@]}}"')


def slurm_task(job, share, nodes: int) -> str:
    """The `bash -c` of one Slurm task per node: the node's rank in its replica and the replica's
    head from the step's node list, then the node's launch."""
    body = ('set -eu; NODE_RANK=$((SLURM_NODEID % ' + str(nodes) + ')); '
            'HEAD_ADDR=$(scontrol show hostnames "$SLURM_STEP_NODELIST" | sed -n "$((SLURM_NODEID - NODE_RANK + 1))p"); '
            'export NODE_RANK HEAD_ADDR; ' + node_command(job, share))
    return f"bash -c {shlex.quote(body)} serve"
