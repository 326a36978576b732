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
- its source (NVIDIA/TensorRT-LLM, Apache-2.0) is on GitHub only, and a check by its own code
  needs a whole release tag's tree, not a file or two: `tensorrt_llm/llmapi/llm_args.py`
  (TorchLlmArgs) imports at module level the CUDA-built C++ bindings (`bindings.executor`,
  `bindings.internal.batch_manager`, `bindings.internal.algorithms`), torch, transformers and
  about ten of the package's own modules whose classes take part in the validation
  (`mapping.Mapping` checks the TP/PP/CP/MoE layout, `models.modeling_utils.QuantConfig` the
  precision, `_torch.peft.lora.config`, `sampling_params`, `tokenizer`, `usage.config`,
  `llmapi.utils`, ...), and `tensorrt_llm/commands/serve.py` (trtllm-serve's click options)
  builds its arguments from `tensorrt_llm.llmapi` (BuildConfig, KvCacheConfig,
  SchedulerConfig) and imports the whole OpenAI server. Only the bindings may be stubs (a
  device question); those modules must come from the same tag, or the check would be a mix of
  releases or a re-implementation. Tried on 2026-12-06: no copy of a release tag's tree could
  be brought into this project's environment (PyPI, Debian and npm only; the GitHub history is
  2.5 GB, and the single files within reach are versions from unrelated commits of the main
  branch, none at a release commit such as 1.2.0rc2's 31116825 or 1.3.0rc1's 45d7022c), so
  nothing is vendored.
An export nothing here can check is not written (the standard every other target meets: the
target's own code accepts it in CI); the vLLM, SGLang and Dynamo exports are the checked
launches of a serve plan.
"""

from __future__ import annotations

from .target import ExportError

UNCHECKABLE = ("no TensorRT-LLM code installs here to check a launch against (every tensorrt-llm release on "
               "PyPI is a `wheel_stub` package that downloads the wheel from NVIDIA's own index at install time, "
               "its wheels need CUDA to import, and its source is on no package registry), so gclc writes none")


def export(served, source: str) -> dict[str, str]:
    raise ExportError(f"TensorRT-LLM settings are not exported: {UNCHECKABLE}; plan with `engine {{ profile = "
                      f"vllm_v1 }}` or `sglang` and export `--to vllm`, `--to sglang` or `--to dynamo`")
