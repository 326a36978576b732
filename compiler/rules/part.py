"""Rules of chips' number formats and of DPUs (kept apart from rules.py: one job each)."""

from __future__ import annotations

from typing import Iterator

from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from .. import chip as chip_numbers
from ..design import Entity
from ..formats import family


def chip_formats(chip: Entity) -> Iterator[Diagnostic]:
    """Each listed format runs at its family's peak: the chip must have one."""
    for name in chip_numbers.formats_without_peak(chip):
        fam = family(name)
        yield codes.FORMAT_WITHOUT_PEAK.make(
            chip.span_of("formats"), chip=chip.name, format=name, family=fam,
            notes=[f"help: give `{chip.name}` a `peak.{fam}` (or `ops_per_clock.{fam}`), "
                   f"or drop {name} from `formats`"])


def dpu_rules(dpu: Entity) -> Iterator[Diagnostic]:
    """A DPU that takes over the network runs it on its Arm cores (model/train/dpu.py): say how many."""
    offload = dpu.get("offload") or ()
    if "network" in (str(v) for v in offload) and dpu.get("cores") is None:
        yield codes.MISSING_FIELD.make(
            dpu.span_of("offload"), field="`cores`", where=f"dpu `{dpu.name}` offloading the network",
            notes=["help: the transport and collective progress run on the DPU's cores; "
                   "for example `cores = 16` (BlueField-3)"])
