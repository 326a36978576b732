"""`gclc export --to trtllm`: refused, with the reason, nothing written.

A TensorRT-LLM launch (`trtllm-serve` and its `--extra_llm_api_options` YAML) would be checked by
TensorRT-LLM's own code: its click options (tensorrt_llm/commands/serve.py) and its pydantic
`TorchLlmArgs` (tensorrt_llm/llmapi/llm_args.py). No release of that code installs here: every
`tensorrt-llm` release on PyPI (0.x to 1.4.0rc1) is a `wheel_stub` source package of a few
kilobytes whose build downloads the real wheel from NVIDIA's own package index, which a
machine that reaches only PyPI, Debian and npm cannot reach, and its wheels import TensorRT
and CUDA libraries a CPU-only machine lacks. An export nothing here can check is not written
(the standard every other target meets: the target's own code accepts it in CI); the vLLM,
SGLang and Dynamo exports are the checked launches of a serve plan.
"""

from __future__ import annotations

from .target import ExportError

UNCHECKABLE = ("no TensorRT-LLM code installs here to check a launch against (every tensorrt-llm release on "
               "PyPI is a `wheel_stub` package that downloads the wheel from NVIDIA's own index at install time, "
               "and its wheels need CUDA to import), so gclc writes none")


def export(served, source: str) -> dict[str, str]:
    raise ExportError(f"TensorRT-LLM settings are not exported: {UNCHECKABLE}; plan with `engine {{ profile = "
                      f"vllm_v1 }}` or `sglang` and export `--to vllm`, `--to sglang` or `--to dynamo`")
