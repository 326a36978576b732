"""HBM generations (and GDDR): what a chip's `hbm.type` states, as physics the model reads.

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
- GDDR6 and GDDR6X (board memory, not HBM: an Ada part's, L40S, L4, RTX 6000 Ada; the type also tells
  compiler/formats.py `generation` Ada from Hopper): ESTIMATE, HBM2e's times Micron's ratio of their
  average device power to HBM2E's (micron.com/products/ultra-bandwidth-solutions, "Memory Comparison":
  GDDR6 7.5, GDDR6X 7.25, HBM2E 6.0 pJ/bit), so that one basis (O'Connor's) prices every type.

Packaging (`hbm { packaging = interposer | stacked }`): the figures above are for HBM beside the die
on a 2.5D interposer (`interposer`, the default). Stacked on the logic die (`stacked`, 3D, hybrid
bonded) the same DRAM core (activation, on-die movement) sends its bits through a vertical bond
instead of the interposer's PHYs and wires, so only the link's share changes:
- the 2.5D link: 0.3 pJ/bit, UCIe's 2.5D (CoWoS, EMIB; 25-55 um bump pitch) PHY above 16 GT/s,
  D. Das Sharma (Intel), IEEE Hot Interconnects 2025, "UCIe for on-package memory"
  (convergedigest.com summary): 2.5D 0.25-0.3 pJ/b, 3D hybrid bonding 0.05-0.01 pJ/b. ESTIMATE
  (a floor of the saving): HBM's own bidirectional multi-drop interface is less efficient than
  UCIe's unidirectional PHY (the same talk's point), so its link costs at least this much;
- the 3D link: 0.05 pJ/bit, the top of that hybrid-bonding range (UCIe 2.0, August 2024: down
  to 0.01 pJ/bit at a 1 um pitch).
So a stacked part saves 0.25 pJ/bit of any HBM generation (HBM3e: 1.56 -> 1.31 pJ/bit).
GDDR is board memory: its chips sit on the board beside the package, on neither an interposer nor the
die, so no packaging applies to it: its figure is Micron's as published, its round trip untouched
(`on_board`), and a `packaging` stated for it is an error (compiler/rules/hardware.py).
Latency: a 2.5D crossing costs about 2 ns round trip (UCIe, same talk: ~2 ns, under 1 ns each
way in and out of the PHY); ESTIMATE, the upper bound of what stacking saves: the whole of it per
memory round trip. The model has no DRAM latency of its own: each kernel pays a fixed launch and
tail (model/compute.py KERNEL_OVERHEAD_S, 4 us), of which one exposed memory round trip is part; a
stacked part's kernels pay it 2 ns shorter (`kernel_overhead`), 0.05 % of that tail. Bandwidth is
the chip's stated figure either way.
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
    "gddr6": _HBM2E * 7.5 / 6.0,
    "gddr6x": _HBM2E * 7.25 / 6.0,
}

NAMES = ("HBM2", "HBM2e", "HBM3", "HBM3e", "HBM4")   # the HBM generations, oldest first
BOARD = ("GDDR6", "GDDR6X")                          # board memory: no interposer, no stack
TYPES = NAMES + BOARD                                # what `hbm.type` may state

PACKAGINGS = ("interposer", "stacked")   # 2.5D beside the die (every std chip), 3D on the logic die
LINK_PJ_PER_BIT = {"interposer": 0.3, "stacked": 0.05}
LINK_ROUND_TRIP_S = {"interposer": 2e-9, "stacked": 0.0}   # ESTIMATE: the crossing's latency a stack removes


def known(kind: str) -> bool:
    return kind.strip().lower() in PJ_PER_BIT


def on_board(kind: str | None) -> bool:
    """Whether `kind` is board memory (GDDR), which no HBM packaging term applies to."""
    return kind is not None and kind.strip().lower() in {b.lower() for b in BOARD}


def joules_per_byte(kind: str | None, packaging: str = "interposer") -> float | None:
    """Energy of one byte moved to or from HBM of generation `kind` in `packaging` (None when the
    generation is not stated): the generation's 2.5D figure, its link's share swapped for a stack's;
    board memory's (GDDR) as published, whatever `packaging` says."""
    if kind is None or not known(kind):
        return None
    pj = PJ_PER_BIT[kind.strip().lower()]
    if packaging != "interposer" and not on_board(kind):   # (the interposer's figure as published, untouched by arithmetic)
        pj += LINK_PJ_PER_BIT[packaging] - LINK_PJ_PER_BIT["interposer"]
    return pj * 8e-12


def latency_saved(packaging: str) -> float:
    """Seconds of each memory round trip the packaging saves over the 2.5D interposer (0 for it)."""
    return LINK_ROUND_TRIP_S["interposer"] - LINK_ROUND_TRIP_S[packaging]
