"""A chip's numbers derived from its microarchitecture, each with its formula.

- Peak per precision = cores x clock x operations per core per clock. The operations
  come from `ops_per_clock { bf16 = 4096 }` or from a multiply-add array per core,
  `systolic { rows = 128  cols = 128  arrays = 4 }` (2 x rows x cols x arrays for the
  array's precision, bf16 unless it says otherwise). `clock` is the boost clock, the one
  data sheets quote peaks at (e.g. NVIDIA's H100 whitepaper: 989.4 TFLOPS = 132 SMs x
  1.83 GHz x 4096).
- HBM capacity = stacks x stack_capacity; bandwidth = stacks x stack_bandwidth.

A stated number wins (it is the data sheet); a derived one fills what is not stated;
when both exist and differ by more than `TOLERANCE`, `rules` warns with both.
"""

from __future__ import annotations


from .design import Entity, Record
from .formats import FAMILIES, family
from ..dsl.numbers import number, quantity
from ..dsl.records import frozen

TOLERANCE = 0.05
PRECISIONS = FAMILIES


@frozen
class Derived:
    key: str            # "peak.bf16", "hbm.capacity", ...
    value: float        # base units
    unit: str           # "FLOPS", "B", "B/s"
    formula: str
    stated: float | None  # the stated value, if any


def _f(value: object) -> float | None:
    return None if value is None else float(value)


def ops_per_clock(chip: Entity) -> dict[str, float]:
    """Dense operations per core per clock, per precision (ops_per_clock wins over systolic)."""
    ops: dict[str, float] = {}
    array: Record | None = chip.get("systolic")
    if array is not None:
        native = getattr(array.get("precision"), "name", "bf16")
        ops[native] = 2.0 * array.get("rows") * array.get("cols") * array.get("arrays", 1)
    table: Record | None = chip.get("ops_per_clock")
    for item in getattr(table, "items", ()):
        ops[item.name] = float(item.value)
    return ops


def _ops_formula(chip: Entity, precision: str) -> str:
    table = chip.get("ops_per_clock")
    if table is not None and table.get(precision) is not None:
        return f"{number(float(table.get(precision)), 6)} ops/clock"
    array = chip.get("systolic")
    return f"2 x {array.get('rows')} x {array.get('cols')} x {array.get('arrays', 1)} array ops/clock"


def derived_peaks(chip: Entity) -> tuple[Derived, ...]:
    cores, clock = chip.get("cores"), _f(chip.get("clock"))
    ops = ops_per_clock(chip)
    if not ops or cores is None or clock is None:
        return ()
    peak = chip.get("peak")
    return tuple(Derived(f"peak.{p}", cores * clock * ops[p], "FLOPS",
                         f"{number(cores)} cores x {number(clock / 1e9, 6)} GHz x {_ops_formula(chip, p)}",
                         _f(peak.get(p)) if peak is not None else None)
                 for p in PRECISIONS if p in ops)


def derived_hbm(chip: Entity) -> tuple[Derived, ...]:
    stacks = chip.get("hbm.stacks")
    if stacks is None:
        return ()
    out = []
    for field, per, unit in (("capacity", "stack_capacity", "B"), ("bandwidth", "stack_bandwidth", "B/s")):
        each = _f(chip.get(f"hbm.{per}"))
        if each is not None:
            out.append(Derived(f"hbm.{field}", stacks * each, unit, f"{stacks} stacks x {_text(each, unit)} per stack",
                               _f(chip.get(f"hbm.{field}"))))
    return tuple(out)


def derivations(chip: Entity) -> tuple[Derived, ...]:
    return derived_peaks(chip) + derived_hbm(chip)


def disagreements(chip: Entity) -> tuple[Derived, ...]:
    """Derivations whose stated value is more than TOLERANCE away."""
    return tuple(d for d in derivations(chip) if d.stated and abs(d.stated - d.value) > TOLERANCE * d.stated)


def peaks(chip: Entity) -> tuple[tuple[str, float], ...]:
    """Dense peak per precision: stated, else derived."""
    stated = chip.get("peak")
    derived = {d.key.split(".")[1]: d.value for d in derived_peaks(chip)}
    out = []
    for p in PRECISIONS:
        value = stated.get(p) if stated is not None else None
        value = _f(value) if value is not None else derived.get(p)
        if value:
            out.append((p, value))
    return tuple(out)


def hbm(chip: Entity, field: str) -> float:
    """HBM capacity or bandwidth: stated, else stacks x per-stack value, else 0."""
    stated = _f(chip.get(f"hbm.{field}"))
    if stated is not None:
        return stated
    return next((d.value for d in derived_hbm(chip) if d.key == f"hbm.{field}"), 0.0)


def _text(value: float, unit: str) -> str:
    return quantity(value, unit)


def stated_formats(chip: Entity) -> tuple[str, ...]:
    """The formats the chip's `formats = [...]` lists (empty when it lists none)."""
    listed = chip.get("formats")
    return tuple(dict.fromkeys(str(v) for v in listed)) if listed else ()


def formats(chip: Entity) -> tuple[str, ...]:
    """The formats the chip runs: as listed, else the families its peaks imply."""
    return stated_formats(chip) or tuple(name for name, _ in peaks(chip))


def formats_without_peak(chip: Entity) -> tuple[str, ...]:
    """Listed formats whose family has no peak (stated or derived): nothing to run them at."""
    have = {name for name, _ in peaks(chip)}
    return tuple(f for f in stated_formats(chip) if family(f) not in have)


def format_help(chip: Entity, precision: str, formats: tuple[str, ...], field: str) -> str:
    """How to fix a format the chip does not run: pick one it does, or declare it."""
    fam = family(precision)
    if stated_formats(chip):
        declare = f"add {precision} to `{chip.name}`'s `formats`" + (
            "" if any(fam == name for name, _ in peaks(chip)) else f" with a `peak.{fam}`")
    elif fam != precision and any(fam == name for name, _ in peaks(chip)):
        declare = f"list the named formats `{chip.name}` runs, `formats = [..., {precision}]`"
    else:
        declare = f"give `{chip.name}` a `peak.{fam}` (or `ops_per_clock.{fam}`)"
    return f"help: set `{field}` to one of {', '.join(formats)}, or {declare} if it runs {precision}"
