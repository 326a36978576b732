"""Megatron-LM's own `parse_args` and `validate_args`, run on an exported args file.

The code is Megatron-LM's at the tag `core_v0.16.1` (commit 55ac7082517c3878ae653c07c09c534b8aed49f6):
`megatron/core` is the `megatron-core==0.16.1` package from PyPI (built from that tag), and
`megatron/training/{arguments,argument_utils,training_config,common_config,resilience_config}.py`,
which no package carries, are vendored unchanged under
tests/data/exports/megatron_lm_core_v0_16_1/ with Megatron-LM's LICENSE.

What is not Megatron's own code here, each a stub for a question a CPU cannot answer:
- STUB `megatron.training` package: its `__init__` imports the whole training loop (checkpointing,
  the tokenizers, `initialize_megatron`), none of which parse_args/validate_args call; the
  package here is the vendored modules without that `__init__`.
- STUB `megatron.training.utils`: the module imports `megatron.legacy` and the training loop's
  globals; the five functions arguments.py imports from it are taken from the vendored
  utils.py's source unchanged (`print_rank_0`, `warn_rank_0`, `is_rank0`, `update_use_dist_ckpt`),
  except `get_device_arch_version`, which asks CUDA for the GPU's compute capability: it answers
  the major version of the chip the export targets (`ARCH`).
- STUB `is_te_min_version`: Transformer Engine needs CUDA to install; arguments.py asks it for
  the TE version, answered as `TE_VERSION` (ASSUMPTION: the TE of NVIDIA's PyTorch container
  26.01, release notes: https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/).
- `torch.cuda.get_device_capability` (asked only under --moe-grouped-gemm) answers `ARCH`.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

VENDORED = Path(__file__).resolve().parents[1] / "data" / "exports" / "megatron_lm_core_v0_16_1"
TAG, COMMIT = "core_v0.16.1", "55ac7082517c3878ae653c07c09c534b8aed49f6"
TE_VERSION = "2.11.0"
# compute capability majors (NVIDIA CUDA GPUs list: https://developer.nvidia.com/cuda-gpus)
ARCH = {"A100": 8, "H100": 9, "H200": 9, "GH200": 9, "B200": 10, "GB200": 10, "B300": 10, "GB300": 10}
_UTILS = ("print_rank_0", "warn_rank_0", "is_rank0", "update_use_dist_ckpt")


class Arch:
    """The compute capability major get_device_arch_version answers (set per export)."""
    major = 9


def arch_of(accelerator: str) -> int:
    name = accelerator.upper()
    return next((major for chip, major in sorted(ARCH.items(), key=lambda kv: -len(kv[0])) if name.startswith(chip)), 9)


def _utils_module() -> types.ModuleType:
    """megatron.training.utils: Megatron's own functions from the vendored source, and the
    device query as a stub."""
    from megatron.core._rank_utils import safe_get_rank

    module = types.ModuleType("megatron.training.utils")
    module.__dict__.update(_safe_get_rank=safe_get_rank, warnings=importlib.import_module("warnings"))
    tree = ast.parse((VENDORED / "megatron" / "training" / "utils.py").read_text())
    wanted = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in _UTILS]
    assert {f.name for f in wanted} == set(_UTILS), "the vendored utils.py lacks a function arguments.py imports"
    exec(compile(ast.Module(wanted, []), str(VENDORED / "megatron/training/utils.py"), "exec"), module.__dict__)
    module.get_device_arch_version = lambda: Arch.major      # STUB: CUDA's compute capability
    return module


def load() -> types.ModuleType:
    """megatron.training.arguments, imported once."""
    if "megatron.training.arguments" in sys.modules:
        return sys.modules["megatron.training.arguments"]
    import megatron
    import torch
    from packaging.version import Version

    package = types.ModuleType("megatron.training")          # STUB: the package without its __init__
    package.__path__ = [str(VENDORED / "megatron" / "training")]
    sys.modules["megatron.training"] = package
    megatron.training = package
    sys.modules["megatron.training.utils"] = package.utils = _utils_module()
    arguments = importlib.import_module("megatron.training.arguments")
    # STUB: Transformer Engine's version
    arguments.is_te_min_version = lambda v, check_equality=True: (
        Version(TE_VERSION) >= Version(v) if check_equality else Version(TE_VERSION) > Version(v))
    torch.cuda.get_device_capability = lambda *a, **k: (Arch.major, 0)  # STUB: the GPU's capability
    return arguments


def shell_environment(script: str) -> tuple[list[str], dict[str, str]]:
    """The words of MEGATRON_ARGS and the variables the file exports, as bash sees them."""
    probe = (script + '\nprintf "%s\\0" "${MEGATRON_ARGS[@]}"; printf "\\1"; env -0')
    done = subprocess.run(["env", "-i", "bash", "-c", probe], capture_output=True, check=True, timeout=30)
    words, env = done.stdout.decode().split("\1")
    variables = dict(item.split("=", 1) for item in env.split("\0") if "=" in item)
    return words.split("\0")[:-1], {k: v for k, v in variables.items() if k not in ("PWD", "SHLVL", "_")}


def parse_and_validate(words: list[str], world: int, env: dict[str, str], accelerator: str):
    """Megatron's parse_args on `words` (as its sys.argv), then validate_args, in the environment
    the export sets and on `world` ranks; returns the validated args, or raises what Megatron
    raises (AssertionError, ValueError, RuntimeError, SystemExit for an argparse error). The
    same command line in the same environment validates once (Megatron's checks are a
    function of them): a copy of the first answer is returned."""
    key = (tuple(words), world, tuple(sorted(env.items())), arch_of(accelerator))
    if key not in _VALIDATED:
        try:
            _VALIDATED[key] = _validate(words, world, env, accelerator)
        except BaseException as problem:   # noqa: BLE001 - Megatron's own verdict, replayed below
            _VALIDATED[key] = problem
    answer = _VALIDATED[key]
    if isinstance(answer, BaseException):
        raise answer
    return copy.deepcopy(answer)


_VALIDATED: dict = {}


def _validate(words: list[str], world: int, env: dict[str, str], accelerator: str):
    arguments = load()
    Arch.major = arch_of(accelerator)
    with _environment({**env, "WORLD_SIZE": str(world), "RANK": "0"}), _argv(["pretrain_gpt.py", *words]), \
            contextlib.redirect_stdout(open(os.devnull, "w")):
        args = arguments.parse_args()
        return arguments.validate_args(args, {})


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    keys = {"CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_CPU_OFFLOAD_V1", "NCCL_ALGO", *values}
    saved = {k: os.environ.get(k) for k in keys}
    for key in keys:
        os.environ.pop(key, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _argv(argv: list[str]):
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved


def transformer_config(args):
    """Megatron-Core's TransformerConfig as pretrain_gpt.py builds it from validated `args`
    (arguments.py core_transformer_config_from_args); its __post_init__ raises what the model
    refuses that validate_args lets through (CPU offloading beside a pipeline or recompute)."""
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        return load().core_transformer_config_from_args(args)


def parse_only(words: list[str]):
    """Megatron's parse_args alone: the values the command line gives, before validate_args."""
    arguments = load()
    with _environment({"WORLD_SIZE": "1", "RANK": "0"}), _argv(["pretrain_gpt.py", *words]), \
            contextlib.redirect_stdout(open(os.devnull, "w")):
        return arguments.parse_args()
