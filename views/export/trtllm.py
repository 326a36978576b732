"""`gclc export --to trtllm`: refused, with the reason, nothing written.

A TensorRT-LLM launch (`trtllm-serve` and its `--extra_llm_api_options` YAML) would be checked by
TensorRT-LLM's own code: its click options (tensorrt_llm/commands/serve.py) and its pydantic
`TorchLlmArgs` (tensorrt_llm/llmapi/llm_args.py). No release of that code installs or vendors
here (looked up on PyPI on 2026-12-06):
- all 156 files of the `tensorrt-llm` project on PyPI (0.11.0 to 1.4.0rc1) are source
  distributions of 0.7 to 216 KB, each a `wheel_stub` package: `pyproject.toml` with
  `build-backend = "wheel_stub.buildapi"` and `index_url = "https://pypi.nvidia.com/"`, a
  LICENSE, PKG-INFO and (from 1.3) the C++ attributions, and no Python source; building one
  downloads the wheel from NVIDIA's index, which this machine cannot reach (PyPI, Debian and
  npm only), so `pip download`/`pip install` fail while preparing its metadata;
- the argument code itself cannot run without TensorRT-LLM's compiled extension: llm_args.py
  imports `tensorrt_llm.bindings.executor` and `tensorrt_llm.bindings.internal.batch_manager`
  (C++ bindings built against CUDA and TensorRT) at module level, with torch and the rest of the
  package, so even its source (NVIDIA/TensorRT-LLM on GitHub, not on a package registry) would
  need those bindings stubbed, which would be a re-implementation, not its check.
An export nothing here can check is not written (the standard every other target meets: the
target's own code accepts it in CI); the vLLM, SGLang and Dynamo exports are the checked
launches of a serve plan.
"""

from __future__ import annotations

from .target import ExportError

UNCHECKABLE = ("no TensorRT-LLM code installs here to check a launch against (every tensorrt-llm release on "
               "PyPI is a `wheel_stub` package that downloads the wheel from NVIDIA's own index at install time, "
               "and its wheels need CUDA to import), so gclc writes none")


def export(served, source: str) -> dict[str, str]:
    raise ExportError(f"TensorRT-LLM settings are not exported: {UNCHECKABLE}; plan with `engine {{ profile = "
                      f"vllm_v1 }}` or `sglang` and export `--to vllm`, `--to sglang` or `--to dynamo`")
