"""The launch flags of a serving replica that spans nodes (the vLLM, SGLang and Dynamo exports).

A replica of more GPUs than a node holds is one engine over several nodes: every node of the
replica starts the same launch with the replica's node count, its own rank in the replica and
the head node's address, where the ranks meet. The engines' flags:

- vLLM 0.33.0 (its multiprocessing backend, vllm/engine/arg_utils.py and config/parallel.py):
  `--nnodes N --node-rank R --master-addr HEAD --master-port PORT`; vLLM lays the replica's
  world (DP x PP x TP) over the nodes in equal shares (`--nnodes` must divide it) and infers
  each node's data-parallel ranks; nodes other than the head add `--headless` (workers only, no
  API server: vllm/entrypoints/cli/serve.py `run_headless`).
- SGLang 0.5.23: `--nnodes N --node-rank R --dist-init-addr HEAD:PORT` (its check: tp x pp a
  multiple of nnodes, sglang/srt/arg_groups/validation_hook.py); every node starts the server,
  the head serves the API.
- Dynamo 1.6.1's vLLM worker takes vLLM's node flags, and its own `--headless` on the other
  nodes (dynamo/vllm/headless.py); its SGLang worker takes SGLang's.

The node's rank and the head's address are known only at launch (the launcher's node list:
Slurm's SLURM_NODEID and the first host of SLURM_JOB_NODELIST, or a JobSet's pod index), so the
args file writes them as a bash function of the two: `<prefix>_<pool>_node_args RANK HEAD` sets
the array `<PREFIX>_<POOL>_NODE_ARGS` for that node.

Refused: a replica whose GPUs are not a whole number of nodes (the engines place an equal
share on every node; the plan's replica would leave part of a node to another).
"""

from __future__ import annotations

import shlex

from .target import ExportError

MASTER_PORT = 29501     # vLLM's default --master-port (ParallelConfig.master_port)
DIST_INIT_PORT = 5000   # SGLang's port beside --dist-init-addr (ASSUMPTION: any free port)


def nodes_per_replica(gpus: int, node_gpus: int, pool: str) -> int:
    """How many nodes one replica of `gpus` spans on nodes of `node_gpus`."""
    if gpus <= node_gpus:
        return 1
    if gpus % node_gpus:
        raise ExportError(f"a replica of the {pool} pool takes {gpus} GPUs on nodes of {node_gpus}: the engines put an "
                          f"equal share of a replica on each of its nodes, so it must fill whole nodes of {node_gpus} GPUs "
                          f"or fit in one")
    return gpus // node_gpus


def vllm_node_flags(nodes: int, rank: str, head: str) -> list[str]:
    return ["--nnodes", str(nodes), "--node-rank", rank, "--master-addr", head, "--master-port", str(MASTER_PORT)]


def sglang_node_flags(nodes: int, rank: str, head: str) -> list[str]:
    return ["--nnodes", str(nodes), "--node-rank", rank, "--dist-init-addr", f"{head}:{DIST_INIT_PORT}"]


def function_lines(prefix: str, role: str, nodes: int, flags, follower: list[str]) -> list[str]:
    """A bash function that sets one node's flags: `flags(nodes, "$1", "$2")`, and `follower`
    added on the nodes other than the head."""
    name, array = f"{prefix.lower()}_{role}_node_args", f"{prefix.upper()}_{role.upper()}_NODE_ARGS"
    words = " ".join(w if w.startswith('"$') else shlex.quote(w) for w in flags(nodes, '"$1"', '"$2"'))
    lines = [f"# {role}: each replica spans {nodes} nodes; on each of them, before the launch:",
             f"#   {name} NODE_RANK HEAD_ADDR   (NODE_RANK 0..{nodes - 1}, 0 on the head; HEAD_ADDR the head's "
             f"address)", f"# then add \"${{{array}[@]}}\" to the launch line",
             f"{name}() {{",
             f"  {array}=({words})"]
    if follower:
        lines.append(f"  if (( $1 > 0 )); then {array}+=({' '.join(follower)}); fi")
    return lines + ["}"]
