"""The standard library's chips as accelerators (compiler/ir.py), by name: the parts the published
runs were measured on, against which a design's chip is compared (model/calibration.py
`calibrated_as`: a chip that extends B200 and changes none of its physics is calibrated as B200)."""

from __future__ import annotations

import functools

from ..dsl.library import std_files
from .ir import Accelerator


@functools.cache
def std_chips() -> dict[str, Accelerator]:
    """Every chip of `std/`, lowered as a design that imports it would lower it."""
    from .driver import check_text   # the checker imports far more than this module needs at import
    from .lower import accelerator

    imports = "".join(f'import "{f.library}"\n' for f in std_files() if any(p.kind == "chip" for p in f.parts))
    design = check_text(imports, "std_chips.gcl").design
    return {e.name: accelerator(e) for e in design.of_kind("chip")}


def std_chip(name: str) -> Accelerator | None:
    return std_chips().get(name)
