"""The one number formatter of every output (plan text, explain, the HTML report, diagram
labels): a number reads as an architect writes it — thousands separators (`88,565`), three
significant digits unless the number is whole (`35.5 s`, `0.463`, never `0.4633` or
`1.031e+05`), no `.0` on a count, SI prefixes on units (`966 kW`, `44.1 GB`), durations in the
unit that reads best (`63 min`, `39.2 days`), big counts in words of the language (`300 B
tokens`, as GCL writes `405 B`), ranges with one unit (`78,200–100,000 tokens/s`) and
counts with the right plural (`1 switch`, `16 switches`). Memory reads in the family of units
its data sheet uses: `80 GB` for an H100, `95 GiB` for a TPU v5p (`memory`, `hbm`)."""

from __future__ import annotations

import math
import re

# Prefixes per unit, largest first: a value is shown in the first one it reaches.
_SI = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_SMALL = (("", 1.0), ("m", 1e-3), ("u", 1e-6), ("n", 1e-9))
_SCALED = {"W", "B", "B/s", "b/s", "FLOPS", "FLOP", "J", "Wh", "USD", "Hz"}
_WORDS = (("T", 1e12), ("B", 1e9), ("M", 1e6))   # big plain counts, as GCL writes them (`405 B`)
_DAY = 86400.0
_BINARY = (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10),
           ("bytes", 1))


def number(value: float, digits: int = 3) -> str:
    """`88,565`, `35.5`, `0.463`, `1,120`: separators, `digits` significant digits for a
    fraction (all the whole digits of a number of 10**digits or more), no exponent."""
    value = float(value)
    if not math.isfinite(value):
        return "unbounded" if value > 0 else "-unbounded" if value < 0 else "undefined"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def count(n: int | float, word: str, plural: str | None = None) -> str:
    """`1 switch`, `16 switches`, `1,016 links`; a whole float counts as an integer."""
    n = int(n) if float(n).is_integer() else n
    return f"{number(n)} {word if n == 1 else plural or word + 's'}"


def big(value: float, digits: int = 3) -> str:
    """A plain count in the language's words: `300 B`, `15 T`, `8,192`."""
    for suffix, factor in _WORDS:
        if abs(value) >= factor:
            return f"{number(value / factor, digits)} {suffix}"
    return number(round(value) if abs(value) >= 10**digits else value, digits)


def quantity(value: float, unit: str, digits: int = 3) -> str:
    """`966 kW`, `44.1 GB`, `3.35 TB/s`, `1.98 PFLOPS`, `2.1 MUSD`; `s` as a duration;
    a unit without prefixes (`tokens/s`, `J/token`) after the plain number."""
    if unit == "B" and abs(value) < 1000:
        return count(round(value), "byte")
    factor, name = _scale(value, unit)
    return f"{number(value / factor, digits)} {name}".rstrip()


def binary_bytes(value: float) -> bool:
    """Whether a byte figure was written in binary units (`95 GiB`, `81559 MiB`): a whole
    number of MiB that is no whole number of MB (`80 GB`, `141 GB` are). Both at once takes
    a multiple of 15,625 MiB (16.384 GB), which reads as decimal."""
    v = float(value)
    return math.isfinite(v) and v >= 2**20 and v % 2**20 == 0 and v % 10**6 != 0


def memory(value: float, binary: bool = False, digits: int = 3) -> str:
    """Bytes in the family of units the part's data sheet uses: `73.4 GB`, or with `binary`
    `68.4 GiB` (2**30 bytes)."""
    if not binary:
        return quantity(value, "B", digits)
    v = abs(float(value))
    name, factor = next(((n, f) for n, f in _BINARY if v >= f * 0.9995), _BINARY[-1])
    return count(round(value), "byte") if factor == 1 else f"{number(value / factor, digits)} {name}"


def datasheet_memory(value: float) -> str:
    """A memory figure in the family of units it was written in: `80 GB`, `95 GiB`."""
    return memory(value, binary_bytes(value), 4)


def hbm(datasheet: float, usable: float) -> str:
    """A part's HBM as its data sheet states it (`80 GB`, `95 GiB`), with what the driver
    exposes beside it when that differs: `80 GB (79.6 GiB usable)`, the figure plans fit in."""
    stated = datasheet_memory(datasheet)
    if usable == datasheet:
        return stated
    return f"{stated} ({memory(usable, binary_bytes(usable))} usable)"


def exact_bytes(value: float) -> int | float:
    """A byte count for JSON as the integer it is (85520809984, not 8.55e10) when it is whole."""
    return int(value) if math.isfinite(value) and float(value).is_integer() else value


def memory_of(used: float, datasheet: float, usable: float) -> str:
    """Memory a plan uses of a part's HBM, both in the data sheet's family of units:
    `73.4 GB of 80 GB (79.6 GiB usable)`, `60.1 GiB of 95 GiB`."""
    return f"{memory(used, binary_bytes(datasheet))} of {hbm(datasheet, usable)}"


def duration(seconds: float, digits: int = 3) -> str:
    """`850 us`, `35.5 s`, `63 min`, `10.4 h`, `39.2 days`, `2.1 years`."""
    factor, name = _scale(seconds, "s")
    return f"{number(seconds / factor, digits)} {name}"


def percent(share: float, digits: int | None = None) -> str:
    """`39.8%`, `9.8%`, `0.52%`, `100%`, `<0.1%` from a share (0.398): three significant
    digits from 10 % up, two below."""
    value = float(share) * 100
    if 0 < abs(value) < 0.1:
        return "<0.1%" if value > 0 else "-<0.1%"
    if digits is None:
        digits = 3 if abs(value) >= 10 else 2
    return f"{number(value, digits if abs(value) < 100 else 0)}%"


def span(low: float, high: float, unit: str = "", digits: int = 3) -> str:
    """`78,200–100,000 tokens/s`, `33.1–41.9 s`, `38–42%`: both ends in the scale of the higher."""
    if unit == "%":
        return f"{number(low * 100, digits)}–{percent(high, digits)}"
    factor, name = _scale(max(abs(low), abs(high)), unit)
    return f"{number(low / factor, digits)}–{number(high / factor, digits)} {name}".rstrip()


def _scale(value: float, unit: str) -> tuple[float, str]:
    """(factor, unit text) for showing `value` in `unit`: an SI prefix, or a unit of time."""
    v = abs(float(value))
    if unit == "s":
        if v == 0:
            return 1.0, "s"
        if v < 1:
            prefix, factor = next(((p, f) for p, f in _SMALL if v >= f * 0.9995), _SMALL[-1])
            return factor, prefix + "s"
        for name, factor, limit in (("s", 1, 120), ("min", 60, 120 * 60), ("h", 3600, 72 * 3600),
                                    ("days", _DAY, 730 * _DAY)):
            if v < limit:
                return float(factor), name
        return 365.25 * _DAY, "years"
    if unit not in _SCALED:
        return 1.0, unit
    scales = _SI + _SMALL[1:] if unit == "J" and 0 < v < 1 else _SI
    prefix, factor = next(((p, f) for p, f in scales if v >= f * 0.9995), scales[-1])
    return factor, prefix + unit


_BARE = re.compile(r"(?<![\w.,])(\d+)(?:\.(\d+))?(?![\w.,]|\.\d)")


def readable(text: str) -> str:
    """Numbers written into a sentence or formula by code (`1120 x 80 TFLOPS`, `7.0%`,
    `0.8125`) as `number` writes them: `1,120`, `7%`, `0.812`. Names (`H100`, `dgx001`)
    and numbers with separators already are left alone."""
    def one(match: re.Match) -> str:
        whole, fraction = match[1], match[2]
        if fraction is None or fraction.strip("0") == "":
            return f"{int(whole):,}"
        if len(fraction) >= 4:
            return number(float(match[0]), 3)
        return match[0]
    return _BARE.sub(one, text)
