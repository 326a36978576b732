"""HBM generations: what a chip's `hbm.type` states, as physics the model reads.

Each generation carries the energy one bit costs to move between the DRAM and the chip
(activation, on-die data movement and the interposer I/O together, pJ/bit). The power model
charges it on the traffic a memory-bound phase streams (model/power.py): a chip that streams
its optimizer state at full HBM bandwidth draws that traffic's power beside its clocks'.

Figures and their sources (every std chip's HBM sits beside its die on a 2.5D silicon
interposer; that is the packaging these figures measure):
- HBM2: about 3.9 pJ/bit. O'Connor et al., "Fine-Grained DRAM: Energy-Efficient DRAM for
  Extreme Bandwidth Systems", MICRO-50 2017 (doi 10.1145/3123939.3124545), Sec. 2: the HBM2
  baseline's energy per bit, row activation, on-die movement and I/O (FGDRAM halves it,
  the abstract's "2x").
- HBM2e: ASSUMPTION, HBM2's: the same 1024-bit interface and DRAM process class, clocked higher.
- HBM3e: HBM2e's / 2.5. Micron, HBM3 Gen2 (HBM3E) announcement, July 2023: "2.5x
  improvement in performance per watt" over its HBM2E (tomshardware.com/news/
  microns-new-hbm3-is-worlds-fastest-at-12-tbs-also-highest-capacity-in-8-high-stack);
  performance per watt of a memory is bits per joule, the inverse of energy per bit.
- HBM3: ESTIMATE, the geometric mean of HBM2e's and HBM3e's (the generation between them;
  no vendor energy figure found in the sources read).
- HBM4: HBM3e's / 1.4. SK hynix, HBM4 mass-production announcement, September 2025:
  power efficiency improved by more than 40 % over HBM3E (ESTIMATE: "more than" read as 40 %).
"""

from __future__ import annotations

import math

_HBM2E = 3.9
_HBM3E = _HBM2E / 2.5

# generation (as written, lower case) -> pJ per bit moved
PJ_PER_BIT = {
    "hbm2": 3.9,
    "hbm2e": _HBM2E,
    "hbm3": math.sqrt(_HBM2E * _HBM3E),
    "hbm3e": _HBM3E,
    "hbm4": _HBM3E / 1.4,
}

NAMES = ("HBM2", "HBM2e", "HBM3", "HBM3e", "HBM4")


def known(kind: str) -> bool:
    return kind.strip().lower() in PJ_PER_BIT


def joules_per_byte(kind: str | None) -> float | None:
    """Energy of one byte moved to or from HBM of generation `kind` (None when not stated)."""
    if kind is None or not known(kind):
        return None
    return PJ_PER_BIT[kind.strip().lower()] * 8e-12
