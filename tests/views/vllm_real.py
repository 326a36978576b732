"""vLLM 0.33.0's own engine-argument checks, run on this CPU (used by test_export_vllm.py).

`python vllm_real.py REQUEST.json` reads cases {"name", "argv"} and prints one JSON line per
case: what vLLM's `create_engine_config` made of the words (the fields the export sets), or
the error it raised. Each argv goes through vLLM's own `FlexibleArgumentParser` with
`EngineArgs.add_cli_args` (so `--config FILE.yaml` is read by vLLM's own loader),
`EngineArgs.from_cli_args` and `create_engine_config`, which validates the parallel layout
against the model's config, the scheduler limits and the cache settings.

vLLM is imported once per run (about 30 s: its import graph is large), from the folder
.ci/setup installs it in (.venv/engines/vllm, beside the .venv's CPU torch 2.13).

Stubs, named: the checkpoint is a folder holding only a Hugging Face `config.json` of the
design's model (the test writes it; `--load-format dummy` and `--skip-tokenizer-init` keep
vLLM from asking for weights or a tokenizer); the platform is vLLM's own CPU platform
(`VLLM_TARGET_DEVICE=cpu`, set by the caller), since no GPU answers here: the checks that need
a CUDA device (the chip's compute capability for fp8 kernels) do not run. A case that asks for
the stub `sleep_mode` also has the CPU platform answer that it can sleep (vLLM's CUDA platform
does; the CPU one refuses `--enable-sleep-mode`), so that the rest of the engine config is
checked; the same case without the stub is the control that the flag reached vLLM's check.
The CUDA-graph capture sizes are vLLM's own rule (`_set_cudagraph_sizes`) rerun with a graph mode
on, which the CPU platform turns off (`capture_sizes`).
The CPU platform's answer to "has this host AMX tiles?" is stubbed to yes: without AMX, vLLM's
CPU platform turns chunked prefill and prefix caching off for an MLA model, forces its block
size to 16 and raises the batched tokens (platforms/cpu.py, for its own CPU MLA kernel), so the
verdict would depend on which CPU the test runs on; the GPU platforms the export targets have
no such override.

Cases whose `tool` is `vllm.serve` go through `vllm serve`'s own parser and checks (the serve
flags, `--headless` among them, beside the engine's), as each node of a replica that spans
nodes starts it.

Cases whose `tool` is `dynamo.vllm` or `dynamo.frontend` go through NVIDIA Dynamo's own parsers
(ai-dynamo 1.6.1 and its runtime, installed by .ci/setup into .venv/engines/dynamo, on the
PYTHONPATH before vLLM's folder). Dynamo 1.6.1 pins vLLM 0.31.0; its worker runs here on
vLLM 0.33.0, the release the vLLM export targets: the two differ in no flag the export writes
(vLLM's own parser reads them, so a flag 0.33.0 lacked would fail the case, not pass unseen).

The experts' layout is vLLM's own `FusedMoEParallelConfig.make` (vllm/model_executor/layers/
fused_moe/config.py) on the engine config's parallel settings, as each MoE layer builds it; its
three rank look-ups (`get_tensor_model_parallel_rank`, `get_dp_group`, `get_pcp_group`) ask
process groups that exist only in a launched engine and are stubbed to rank 0 (a rank moves no
size). The verdict reports the layer's expert TP and EP sizes.
"""

from __future__ import annotations

import json
import sys


def engine_config(argv: list[str]) -> dict:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    return engine_config_of(EngineArgs.from_cli_args(parser.parse_args(argv)))


def engine_config_of(engine_args, headless: bool = False) -> dict:
    config = engine_args.create_engine_config(headless=headless)
    p, s, c, m = config.parallel_config, config.scheduler_config, config.cache_config, config.model_config
    transfer = config.kv_transfer_config
    return {"tp": p.tensor_parallel_size, "pp": p.pipeline_parallel_size, "dp": p.data_parallel_size,
            "expert_parallel": p.enable_expert_parallel, "all2all_backend": p.all2all_backend,
            "max_num_seqs": s.max_num_seqs,
            "max_num_batched_tokens": s.max_num_batched_tokens, "chunked_prefill": s.enable_chunked_prefill,
            "block_size": c.block_size, "cache_dtype": str(c.cache_dtype),
            "gpu_memory_utilization": c.gpu_memory_utilization, "prefix_caching": c.enable_prefix_caching,
            "max_model_len": m.max_model_len, "quantization": m.quantization,
            "served_model_name": m.served_model_name,
            "kv_connector": transfer.kv_connector if transfer else None,
            "kv_role": transfer.kv_role if transfer else None, "sleep_mode": m.enable_sleep_mode,
            "experts": expert_layout(p), "graph_sizes": capture_sizes(config), "nodes": {
                "nnodes": p.nnodes, "node_rank": p.node_rank, "master_addr": p.master_addr,
                "master_port": p.master_port, "dp_local": p.data_parallel_size_local, "dp_rank": p.data_parallel_rank,
                "world": p.world_size, "ranks": node_ranks(p)},
            "groups": rank_groups(config)}


def capture_sizes(config) -> list[int]:
    """The CUDA-graph capture sizes, in tokens, vLLM's CUDA platform would take for this config: its
    own `_set_cudagraph_sizes` rerun with a graph mode on (the CPU platform graphs nothing: it skips
    the rule and clears the sizes; the named stub). The largest is the ceiling past which a batch
    runs without a graph. [] under --enforce-eager."""
    from vllm.config import CUDAGraphMode

    c = config.compilation_config
    if config.model_config.enforce_eager:
        return []
    mode, c.cudagraph_mode, c.cudagraph_capture_sizes = c.cudagraph_mode, CUDAGraphMode.PIECEWISE, None
    try:
        config._set_cudagraph_sizes()
        return list(c.cudagraph_capture_sizes)
    finally:
        c.cudagraph_mode = mode


def node_ranks(p) -> list[int]:
    """The global ranks this node's workers take, from vLLM's ParallelConfig: its data-parallel
    ranks (`data_parallel_rank`, `data_parallel_size_local`), and for each the workers its
    MultiprocExecutor starts here (`local_world_size` of them from `local_world_size x
    node_rank_within_dp`, vllm/v1/executor/multiproc_executor.py), each offset by the DP rank's
    `world_size` as init_distributed_environment numbers a DP rank's workers."""
    first = p.local_world_size * p.node_rank_within_dp
    return [d * p.world_size + first + r for d in range(p.data_parallel_rank, p.data_parallel_rank + p.data_parallel_size_local)
            for r in range(p.local_world_size)]


def rank_groups(config) -> dict:
    """vLLM's own process groups of the whole replica (all DP ranks): {"tp", "pp", "ep": [ranks of
    each group]}, as `initialize_model_parallel` (vllm/distributed/parallel_state.py) computes them
    for the engine config. Stubbed, named: the process-group calls it makes (torch.distributed's
    world size, rank and backend, vLLM's world group, and `init_model_parallel_group`, which would
    create each group's communicators and here records its ranks), since no processes run."""
    from types import SimpleNamespace

    import torch.distributed as dist
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state as ps

    p, made = config.parallel_config, {}
    world = p.world_size_across_dp

    def record(group_ranks, local_rank, backend, **kwargs):
        made[kwargs.get("group_name")] = [list(g) for g in group_ranks]
        return SimpleNamespace(destroy=lambda: None, rank_in_group=0)

    saved = {(dist, n): getattr(dist, n) for n in ("is_initialized", "get_world_size", "get_rank", "get_backend")}
    saved |= {(ps, n): getattr(ps, n) for n in ("init_model_parallel_group", "get_world_group")}
    dist.is_initialized, dist.get_world_size, dist.get_rank = (lambda: True), (lambda *a: world), (lambda *a: 0)
    dist.get_backend = lambda *a: "gloo"
    ps.init_model_parallel_group = record
    ps.get_world_group = lambda: SimpleNamespace(local_rank=0, device_group=None, world_size=world, rank=0)
    try:
        with set_current_vllm_config(config):
            ps.initialize_model_parallel(p.tensor_parallel_size, p.pipeline_parallel_size)
    finally:
        ps.destroy_model_parallel()
        for (module, name), value in saved.items():
            setattr(module, name, value)
    return {k: made[k] for k in ("tp", "pp", "ep") if k in made}


def serve_config(argv: list[str]) -> dict:
    """`vllm serve`'s own path (vllm/entrypoints/cli/serve.py): the serve parser
    (`make_arg_parser`: the engine's flags and the server's, `--headless` among them),
    `validate_parsed_serve_args`, then the engine config as `run_headless` makes it on a node
    that serves no API (`create_engine_config(headless=True)`)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
    validate_parsed_serve_args(args)
    config = engine_config_of(AsyncEngineArgs.from_cli_args(args), headless=args.headless)
    return {**config, "headless": args.headless}


def expert_layout(parallel) -> dict:
    """vLLM's MoE layer layout of `parallel` (a ParallelConfig): {"tp", "ep"} of each expert."""
    from types import SimpleNamespace

    from vllm.model_executor.layers.fused_moe import config as moe_config

    rank0 = SimpleNamespace(rank_in_group=0)   # the named stubs: rank look-ups, see above
    saved = {name: getattr(moe_config, name) for name in ("get_tensor_model_parallel_rank", "get_dp_group",
                                                           "get_pcp_group")}
    moe_config.get_tensor_model_parallel_rank = lambda: 0
    moe_config.get_dp_group = moe_config.get_pcp_group = lambda: rank0
    try:
        made = moe_config.FusedMoEParallelConfig.make(parallel.tensor_parallel_size, 1, parallel.data_parallel_size,
                                                      1, parallel)
    finally:
        for name, value in saved.items():
            setattr(moe_config, name, value)
    return {"tp": made.tp_size, "ep": made.ep_size}


def dynamo_worker(argv: list[str]) -> dict:
    """Dynamo's vLLM worker (ai-dynamo 1.6.1, `python -m dynamo.vllm`): its own `parse_args`
    (Dynamo's flags, then vLLM's through vLLM's parser, Dynamo's cross-checks), then the engine
    config vLLM builds from the engine arguments Dynamo hands it."""
    from dynamo.vllm.args import parse_args

    config = parse_args(argv)
    mode = config.disaggregation_mode
    return {"mode": getattr(mode, "value", mode), "component": config.component, "endpoint": config.endpoint,
            "headless": config.headless, "engine": engine_config_of(config.engine_args, headless=config.headless)}


def dynamo_frontend(argv: list[str]) -> dict:
    """Dynamo's frontend (`python -m dynamo.frontend`): its own `parse_args`, which reads sys.argv."""
    from dynamo.frontend import main as frontend

    saved, sys.argv = sys.argv, ["dynamo.frontend", *argv]
    try:
        config = frontend.parse_args()[0]
    finally:
        sys.argv = saved
    return {"http_port": config.http_port, "router_mode": str(getattr(config.router_mode, "value", config.router_mode))}


TOOLS = {"vllm": lambda argv: engine_config(argv), "vllm.serve": serve_config, "dynamo.vllm": dynamo_worker,
         "dynamo.frontend": dynamo_frontend}


def main(request: str) -> None:
    import torch
    from vllm.platforms import current_platform

    torch.cpu._is_amx_tile_supported = lambda: True   # the named stub (see above): one verdict on every CPU
    for case in json.load(open(request)):
        if "sleep_mode" in case.get("stubs", ()):
            current_platform.is_sleep_mode_available = lambda: True   # the named stub (see above)
        try:
            verdict = {"name": case["name"], "config": TOOLS[case.get("tool", "vllm")](case["argv"])}
        except (Exception, SystemExit) as error:   # argparse exits on a word it does not know
            verdict = {"name": case["name"], "error": f"{type(error).__name__}: {error}"}
        finally:
            current_platform.__dict__.pop("is_sleep_mode_available", None)
        print("VERDICT " + json.dumps(verdict), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
