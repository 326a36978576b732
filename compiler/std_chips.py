"""The standard library's chips as accelerators (compiler/ir.py), by name: the parts the published
runs were measured on, against which a design's chip is compared (model/calibration.py
`calibrated_as`: a chip that extends B200 and changes none of its physics is calibrated as B200)."""

from __future__ import annotations

import functools
import re

from ..dsl.library import STD_ROOT, std_files
from .ir import Accelerator

# A chip declaration at the start of a line of a std file (`chip B200 {`, `chip GB200 extends B200 {`);
# tests/model/test_calibrated_as.py checks it finds the chips the parser finds, no more and no fewer.
_DECLARED = re.compile(r"^chip\s+([A-Za-z_][A-Za-z0-9_]*)\b", re.MULTILINE)


@functools.cache
def std_chips() -> dict[str, Accelerator]:
    """Every chip of `std/`, lowered as a design that imports it would lower it."""
    from .driver import check_text   # the checker imports far more than this module needs at import
    from .lower import accelerator

    imports = "".join(f'import "{f.library}"\n' for f in std_files() if any(p.kind == "chip" for p in f.parts))
    design = check_text(imports, "std_chips.gcl").design
    return {e.name: accelerator(e) for e in design.of_kind("chip")}


@functools.cache
def chip_libraries() -> dict[str, str]:
    """The std library that declares each chip, by name, read off the files' text: parsing the whole of
    std/ (`std_files`) cost every `gclc plan` 0.2 s of the first `calibrated_as`, for the one or two
    chips it compares."""
    return {name: f"std/{path.stem}" for path in sorted(STD_ROOT.glob("*.gcl"))
            for name in _DECLARED.findall(path.read_text(encoding="utf-8"))}


@functools.cache
def std_chip(name: str) -> Accelerator | None:
    """The std chip `name`, lowered on demand from its own library alone (None: std declares none)."""
    library = chip_libraries().get(name)
    if library is None:
        return None
    from .driver import check_text
    from .lower import accelerator

    return accelerator(check_text(f'import "{library}"\n', "std_chips.gcl").design[name])
