"""The chip vendors the model and the exports tell apart, however a data sheet spells them."""

from __future__ import annotations

# The vendors whose parts something downstream depends on (NVIDIA's tensor-core generations and NCCL,
# AMD's ROCm, Google's TPUs and XLA), as the std chips write them; AMD's full name too, as data sheets write
# it (a host CPU's vendor: NCCL's LL cap across nodes goes by it).
KNOWN = ("NVIDIA", "AMD", "Google")
ALIASES = {"advanced micro devices": "AMD"}


def vendor_of(vendor: str | None) -> str | None:
    """The known vendor a chip's `vendor` names, compared case-insensitively and within a longer name
    ("Nvidia", "NVIDIA Corporation": NVIDIA; "Google Cloud": Google); any other as written."""
    low = (vendor or "").lower()
    named = next((known for alias, known in ALIASES.items() if alias in low), None)
    return named or next((known for known in KNOWN if known.lower() in low), vendor)


def is_nvidia(vendor: str | None) -> bool:
    return vendor_of(vendor) == "NVIDIA"
