"""SGLang 0.5.23's own server-argument checks, run on this CPU (used by test_export_sglang.py).

`python sglang_real.py REQUEST.json` reads cases {"name", "argv"} and prints one JSON line per
case: what SGLang made of the words (the fields the export sets, after resolution), or the
error it raised. Each argv goes through SGLang's own `prepare_server_args` (argparse built by
`ServerArgs.add_cli_args`, a `--config FILE.yaml` merged by SGLang's ConfigArgumentMerger), then
`ServerArgs.resolve_once` (the resolution pipeline the launcher runs: the model's config read,
parallel, MoE, memory, speculative and disaggregation hooks) and `check_server_args`.

SGLang is imported once per run, from .ci/setup's folder .venv/engines/sglang, with vLLM's
folder after it for the pure-Python packages both import (the caller sets PYTHONPATH).

Stubs, named:
- `torchvision`: PyPI's torchvision wheels load C++ operators built against CUDA torch, which
  fail on the .venv's CPU torch ("operator torchvision::nms does not exist"), and SGLang's model
  configs import it at module level for image preprocessing (InterpolationMode, transforms)
  that argument resolution never runs. A stand-in package with only those names is put in
  sys.modules after transformers has found no torchvision (so transformers keeps its own
  no-torchvision paths).
- the checkpoint is a folder holding only a Hugging Face `config.json` of the design's model
  (the test writes it), with `--skip-tokenizer-init`; the device is SGLang's `cpu` (no GPU
  answers here, so the checks that read a CUDA device's memory or compute capability do not run).

Cases whose `tool` is `dynamo.sglang` go through NVIDIA Dynamo's SGLang worker parsing
(ai-dynamo 1.6.1, .venv/engines/dynamo first on the PYTHONPATH). Dynamo 1.6.1 pins SGLang
0.5.21; it runs here on 0.5.23, the release the SGLang export targets (SGLang's own parser reads
the flags, so one 0.5.23 lacked would fail the case). Dynamo reserves a disaggregation bootstrap
port by binding a socket on localhost and closing it: nothing listens or connects.
"""

from __future__ import annotations

import enum
import importlib.machinery
import json
import sys
import types


def stub_torchvision() -> None:
    from transformers.utils import import_utils

    assert not import_utils.is_torchvision_available()   # decided (and cached) before the stand-in exists

    class InterpolationMode(enum.Enum):   # torchvision.transforms.InterpolationMode's members SGLang names
        NEAREST, BILINEAR, BICUBIC = "nearest", "bilinear", "bicubic"

    for name in ("torchvision", "torchvision.transforms", "torchvision.transforms.functional"):
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        module.__path__ = []
        module.InterpolationMode = InterpolationMode
        sys.modules[name] = module
    sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]
    sys.modules["torchvision.transforms"].functional = sys.modules["torchvision.transforms.functional"]


FIELDS = ("tp_size", "pp_size", "attn_dp_size", "ep_size", "max_running_requests", "chunked_prefill_size",
          "page_size", "kv_cache_dtype", "mem_fraction_static", "context_length", "quantization",
          "disable_radix_cache", "enable_mixed_chunk", "disable_overlap_schedule", "num_continuous_decode_steps",
          "speculative_algorithm", "speculative_num_steps", "disaggregation_mode",
          "disaggregation_transfer_backend", "served_model_name", "device", "nnodes", "node_rank", "dist_init_addr",
          "moe_a2a_backend", "deepep_mode")


def server_args(argv: list[str]) -> dict:
    from sglang.srt.server_args import prepare_server_args

    args = prepare_server_args(argv)
    args.resolve_once()
    args.check_server_args()
    return {field: getattr(args, field) for field in FIELDS} | {"ranks": node_ranks(args)}


def node_ranks(args) -> dict | None:
    """The pipeline stages and TP ranks (attention DP inside them) this node runs, as SGLang's
    launcher assigns them: `_calculate_rank_ranges` (sglang/srt/entrypoints/engine.py) on the
    resolved arguments, published first as the launcher publishes them (`publish(server_args,
    role="tokenizer")` in Engine's launch) for the parallel context it reads (None on one node)."""
    if args.nnodes == 1:
        return None
    from sglang.srt.entrypoints.engine import _calculate_rank_ranges
    from sglang.srt.runtime_context import get_parallel, publish

    publish(args, role="tokenizer")
    pp, tp, _, _ = _calculate_rank_ranges(args.node_rank)
    parallel = get_parallel()
    return {"pp": list(pp), "tp": list(tp), "context": [parallel.nnodes, parallel.pp_size, parallel.tp_size]}


def dynamo_worker(argv: list[str]) -> dict:
    """Dynamo's SGLang worker (ai-dynamo 1.6.1, `python -m dynamo.sglang`): its own `parse_args`
    (Dynamo's flags, SGLang's through SGLang's parser, Dynamo's checks, `ServerArgs.from_cli_args`),
    then the resolution and checks SGLang runs on the ServerArgs Dynamo made."""
    import asyncio

    from dynamo.sglang.args import parse_args

    config = asyncio.run(parse_args(argv))
    args = config.server_args
    args.resolve_once()
    args.check_server_args()
    return {"component": config.dynamo_args.component, **{field: getattr(args, field) for field in FIELDS},
            "ranks": node_ranks(args)}


TOOLS = {"sglang": server_args, "dynamo.sglang": dynamo_worker}


def main(request: str) -> None:
    stub_torchvision()
    for case in json.load(open(request)):
        try:
            verdict = {"name": case["name"], "args": TOOLS[case.get("tool", "sglang")](case["argv"])}
        except (Exception, SystemExit) as error:   # argparse exits on a word it does not know
            verdict = {"name": case["name"], "error": f"{type(error).__name__}: {error}"}
        print("VERDICT " + json.dumps(verdict, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
