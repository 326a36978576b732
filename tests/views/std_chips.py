"""The standard library's chips as the IR holds them, for the exports' tests: an export takes the chip
its plan runs on (its vendor, its generation: compiler/formats.py), not a name."""

from __future__ import annotations

import functools

from gclc.compiler.driver import check_text
from gclc.compiler.ir import Accelerator
from gclc.compiler.lower import accelerator


@functools.cache
def std_chip(name: str) -> Accelerator:
    design = check_text('import "std/nvidia"\nimport "std/amd"\n', "std_chips.gcl").design
    return accelerator(design[name])
