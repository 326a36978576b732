"""The clock a chip sustains under its power limits: one DVFS curve, used by the step model (a
limited chip computes slower), by job power and by the planner's clock steps.

Clocks are ratios of the full clock (`clock`, the one the peaks are quoted at).

- The curve: at full load the chip draws P(f) = idle + (P_top - idle) f^k at clock ratio f.
  P_top is `power.full_clock`, the draw at full load at the full clock; a chip that does not
  state it reaches its full clock at its TDP (P_top = tdp: the default curve, which is what the
  std chips state, their efficiency being calibrated on parts at that TDP). Dynamic power grows
  as clock^k: with voltage scaled along with frequency, P_dyn ~ C V^2 f ~ f^3, so k = 3 by
  default (Le Sueur and Heiser, "Dynamic voltage and frequency scaling: the laws of diminishing
  returns", HotPower 2010); a chip may declare its own `power.dvfs_exponent`.
- `tdp` is the sustained limit the chip enforces itself, `power.cap` an operator's lower one:
  while it computes (full load) the chip holds the clock at which it draws the lower of the
  two, f = ((limit - idle) / (P_top - idle))^(1/k), at most 1. So a chip whose TDP is below
  its curve's top computes slower; one whose work draws less than the limit is not slowed.
- At the limit the chip sustains `at_tdp` x f: `at_tdp` is 1.0 when the chip's efficiency
  for the precision was measured (a measured share of peak already includes whatever clock
  the chip held), or base / boost when it declares `base_clock` and nothing was measured (the
  clock the vendor guarantees at TDP under full load).
- Below `power.min_clock` the voltage cannot fall further: the curve's floor. Without a
  declared floor, half the full clock (ASSUMPTION, as the power GP always used).
"""

from __future__ import annotations

import functools

import attrs

from ..compiler.ir import Accelerator, Partition

DEFAULT_EXPONENT = 3.0
DEFAULT_FLOOR = 0.5


def exponent(chip: Accelerator) -> float:
    return chip.dvfs_exponent or DEFAULT_EXPONENT


def floor(chip: Accelerator) -> float:
    """The lowest clock ratio the chip runs at under a cap."""
    if chip.min_clock and chip.clock:
        return min(1.0, chip.min_clock / chip.clock)
    return DEFAULT_FLOOR


def at_tdp(chip: Accelerator, measured: bool = True) -> float:
    """Clock ratio sustained at TDP (see the module docstring)."""
    if not measured and chip.base_clock and chip.clock:
        return min(1.0, chip.base_clock / chip.clock)
    return 1.0


def power(idle: float, full: float, f: float, k: float = DEFAULT_EXPONENT) -> float:
    """Watts at clock ratio `f` of the clock that draws `full`."""
    return idle + (full - idle) * f ** k


def clock_at(idle: float, full: float, cap: float, k: float = DEFAULT_EXPONENT) -> float:
    """The clock ratio (of the one drawing `full`) at which the chip draws `cap`: the inverse of `power`."""
    if cap >= full or full <= idle:
        return 1.0
    return max(0.0, (cap - idle) / (full - idle)) ** (1 / k)


def top(chip: Accelerator) -> float:
    """Watts at full load at the full clock: the curve's top (`power.full_clock`, else the TDP)."""
    return chip.full_clock or chip.tdp


def limit(chip: Accelerator) -> float:
    """The sustained power limit the chip computes under: its TDP, or an operator's lower cap."""
    return min(chip.tdp, chip.power_cap) if chip.power_cap is not None else chip.tdp


def capped(chip: Accelerator) -> float:
    """Clock ratio the chip holds at full load under its limit (1.0 when the limit is at or
    above its curve's top)."""
    watts, full = limit(chip), top(chip)
    if watts >= full:
        return 1.0
    return max(floor(chip), clock_at(chip.idle, full, watts, exponent(chip)))


def sustained(chip: Accelerator, measured: bool = True) -> float:
    """Clock ratio (of the full clock) the chip computes at in a step: its TDP clock times its limit's."""
    return at_tdp(chip, measured) * capped(chip)


def draw(chip: Accelerator) -> float:
    """Watts the chip draws at full load: its limit, or less where its curve's top is lower."""
    return power(chip.idle, top(chip), capped(chip), exponent(chip))


def below_full_clock(chip: Accelerator) -> bool:
    """Whether the chip computes below its full clock: a TDP or cap below its curve's top."""
    return capped(chip) < 1.0


# ----------------------------------------------------------------- operating points under a cap

# The planner's clock resolution: steps of 2.5 % of the chip's own sustained clock, down to its
# floor (21 steps to a floor of half the clock). Each step is one more pass of the search (most
# of it cut by bounds); the power GP's continuous clock (solver/power/program.py) bounds what
# finer steps could add, and the plan prints that gap (about 1.5 % at most on the examples).
CLOCK_STEP = 0.025


def cap_for(chip: Accelerator, ratio: float) -> float:
    """The power cap (W) under which `chip` computes at `ratio` of its own sustained clock
    (the clock its TDP and its own `power.cap` leave it): its full-load draw at that clock."""
    return power(chip.idle, top(chip), ratio * capped(chip), exponent(chip))


def lowest_ratio(chip: Accelerator) -> float:
    """The lowest ratio of its own sustained clock a cap can hold the chip at: the DVFS floor,
    and no cap below the firmware's `min_cap`."""
    own = capped(chip)
    low = floor(chip) / own if own > 0 else 1.0
    if chip.min_cap:
        low = max(low, clock_at(chip.idle, top(chip), chip.min_cap, exponent(chip)) / own if own > 0 else 1.0)
    return min(1.0, low)


def clock_steps(chip: Accelerator) -> tuple[tuple[float, float | None], ...]:
    """(ratio of the chip's own clock, the cap that holds it there) for every step the planner
    searches, fastest first; the first is the chip as it is (cap None)."""
    low, out, i = lowest_ratio(chip), [(1.0, None)], 1
    while 1.0 - i * CLOCK_STEP >= low - 1e-9:
        ratio = round(1.0 - i * CLOCK_STEP, 6)
        out.append((ratio, cap_for(chip, ratio)))
        i += 1
    return tuple(out)


@functools.lru_cache(maxsize=512)   # asked for every estimate: the same few caps of one partition
def with_cap(partition: Partition, cap: float | None) -> Partition:
    """`partition` with its accelerators under an operator's power cap of `cap` W (the lower of
    it and the chip's own `power.cap`); the partition itself when `cap` is None or changes nothing."""
    if cap is None:
        return partition
    chip = partition.node.accelerator
    lower = min(cap, chip.power_cap) if chip.power_cap is not None else cap
    if lower == chip.power_cap or lower >= limit(chip):
        return partition
    node = attrs.evolve(partition.node, accelerator=attrs.evolve(chip, power_cap=lower))
    return attrs.evolve(partition, node=node)


def clock_of(partition: Partition, cap: float | None) -> float:
    """The ratio of the chip's own sustained clock that `cap` holds it at (1.0 for None)."""
    chip = partition.node.accelerator
    own = capped(chip)
    return capped(with_cap(partition, cap).node.accelerator) / own if own > 0 else 1.0
