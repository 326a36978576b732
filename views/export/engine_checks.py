"""What every serving engine's export refuses alike (views/export/vllm.py, sglang.py): a plan
made for another engine family (its batches and host costs are not this engine's), a chip
without the engine's GPU platform, and weights or a KV cache in a precision the engine has
no flag for. Each export adds its own refusals after these."""

from __future__ import annotations

from ...compiler.vendors import vendor_of
from ...model.serve.engines import PROFILES
from .target import ExportError


def check_common(target: str, family: str, profile: str, config, engine, chip, vendors, weights, kv_cache) -> None:
    """`target` is the engine as users know it (`vLLM`), `family` its profiles' family,
    `profile` the profile to plan with; `vendors`, `weights` and `kv_cache` what it runs."""
    planned = PROFILES[engine.name].family if engine.name in PROFILES else family
    if planned not in (family, "ideal"):
        raise ExportError(f"the plan was made for the `{engine.name}` engine ({engine.releases}), whose batches "
                          f"and host costs are not {target}'s: plan with `engine {{ profile = {profile} }}` to "
                          f"export to {target}")
    if vendor_of(chip.vendor) not in vendors:
        raise ExportError(f"{target} serves on NVIDIA and AMD GPUs here; `{chip.name}` is {chip.vendor or 'neither'}'s")
    if config.precision not in weights:
        raise ExportError(f"the plan serves {config.precision} weights, which the {target} export has no "
                          f"--quantization for ({', '.join(weights)}); pin `precision` to one of them")
    if config.kv not in kv_cache:
        raise ExportError(f"the plan keeps the KV cache in {config.kv}; {target}'s --kv-cache-dtype here is "
                          f"{' or '.join(kv_cache)}: set `engine {{ kv_precision = ... }}`")
