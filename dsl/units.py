"""Physical quantities: exact values with dimensions, and the table of units.

A small table of our own rather than `pint`: GCL needs `B` to mean billion (`405 B`
params) while `GB` means gigabytes, `T` trillion rather than tesla, `Gb` vs `GB`,
FLOP as a dimension of its own, and exact `Fraction` arithmetic so that conversions
are exact; pint fights each of these and costs ~0.5 s to import.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction


from .numbers import big, binary_bytes, number
from .records import frozen

# Binary byte sizes, for the code that counts memory and buffers in them.
MIB, GIB = 2**20, 2**30

# Base dimensions: bytes, seconds, joules, floating-point operations, money (US dollars).
Dim = tuple[int, int, int, int, int]
NONE: Dim = (0, 0, 0, 0, 0)
BYTES: Dim = (1, 0, 0, 0, 0)
TIME: Dim = (0, 1, 0, 0, 0)
ENERGY: Dim = (0, 0, 1, 0, 0)
FLOP: Dim = (0, 0, 0, 1, 0)
RATE: Dim = (0, -1, 0, 0, 0)  # frequency, tokens per second
BANDWIDTH: Dim = (1, -1, 0, 0, 0)
POWER: Dim = (0, -1, 1, 0, 0)
FLOPS: Dim = (0, -1, 0, 1, 0)
MONEY: Dim = (0, 0, 0, 0, 1)
ENERGY_PRICE: Dim = (0, 0, -1, 0, 1)  # USD/kWh

DIMENSION_NAMES: dict[Dim, str] = {
    NONE: "a plain number", BYTES: "a data size", TIME: "a time", ENERGY: "an energy",
    FLOP: "an amount of FLOP", RATE: "a frequency or rate", BANDWIDTH: "a bandwidth",
    POWER: "a power", FLOPS: "a compute rate (FLOPS)", MONEY: "an amount of money",
    ENERGY_PRICE: "a price of energy",
}
EXAMPLE_UNITS: dict[Dim, str] = {
    NONE: "", BYTES: "GB", TIME: "s", ENERGY: "kWh", FLOP: "PFLOP", RATE: "GHz",
    BANDWIDTH: "GB/s", POWER: "W", FLOPS: "TFLOPS", MONEY: "USD", ENERGY_PRICE: "USD/kWh",
}


def _mul(a: Dim, b: Dim, sign: int = 1) -> Dim:
    return tuple(x + sign * y for x, y in zip(a, b))  # type: ignore[return-value]


def _units() -> dict[str, tuple[Fraction, Dim]]:
    table: dict[str, tuple[Fraction, Dim]] = {"%": (Fraction(1, 100), NONE)}
    decimal = {"k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    for count, power in {"K": 3, "M": 6, "B": 9, "T": 12}.items():
        table[count] = (Fraction(10) ** power, NONE)  # thousand, million, billion, trillion
    for word in ("token", "tokens", "seq", "seqs", "req", "reqs", "request", "requests"):
        table[word] = (Fraction(1), NONE)
    for word in ("byte", "bytes"):
        table[word] = (Fraction(1), BYTES)
    for word in ("bit", "bits"):
        table[word] = (Fraction(1, 8), BYTES)
    for prefix, power in decimal.items():
        table[prefix + "B"] = (Fraction(10) ** power, BYTES)
        table[prefix + "b"] = (Fraction(10) ** power / 8, BYTES)
        table[prefix + "FLOP"] = (Fraction(10) ** power, FLOP)
        table[prefix + "FLOPS"] = (Fraction(10) ** power, FLOPS)
        table[prefix + "OPS"] = (Fraction(10) ** power, FLOPS)
    for prefix, power in binary.items():
        table[prefix + "B"] = (Fraction(2) ** power, BYTES)
        table[prefix + "b"] = (Fraction(2) ** power / 8, BYTES)
    table.update({"FLOP": (Fraction(1), FLOP), "FLOPS": (Fraction(1), FLOPS), "OPS": (Fraction(1), FLOPS)})
    for name, factor in {"ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "µs": Fraction(1, 10**6),
                         "ms": Fraction(1, 1000), "s": Fraction(1), "min": Fraction(60),
                         "h": Fraction(3600), "d": Fraction(86400)}.items():
        table[name] = (factor, TIME)
    si = {"m": Fraction(1, 1000), "": Fraction(1), "k": Fraction(10**3), "M": Fraction(10**6),
          "G": Fraction(10**9), "T": Fraction(10**12)}
    for prefix, factor in si.items():
        table[prefix + "Hz"] = (factor, RATE)
        table[prefix + "W"] = (factor, POWER)
        table[prefix + "J"] = (factor, ENERGY)
        table[prefix + "Wh"] = (factor * 3600, ENERGY)
    for prefix, power in {"": 0, "k": 3, "M": 6, "B": 9}.items():
        table[prefix + "USD"] = (Fraction(10) ** power, MONEY)  # `25 kUSD`, `1.2 MUSD`
    return table


UNITS: dict[str, tuple[Fraction, Dim]] = _units()

# Spellings that are easy to get wrong, with the reason why they are refused.
UNIT_HINTS = {
    "FLOPs": "write `FLOP` for an amount or `FLOPS` for a rate",
    "TFLOPs": "write `TFLOP` for an amount or `TFLOPS` for a rate",
    "PFLOPs": "write `PFLOP` for an amount or `PFLOPS` for a rate",
    "GBps": "write `GB/s`", "Gbps": "write `Gb/s`", "TBps": "write `TB/s`",
    "sec": "write `s`", "hr": "write `h`", "hours": "write `h`", "days": "write `d`",
}


def respell(unit: str) -> str | None:
    """The GCL spelling of a unit written out: `Gbit/s` -> `Gb/s`, `GBytes` -> `GB`,
    `Gbitps` -> `Gb/s`; None when `unit` is not such a spelling."""
    numerator, slash, denominator = unit.partition("/")
    match = re.fullmatch(r"(?P<prefix>[kKMGTPE]i?)?(?P<word>bits?|bytes?|Bytes?)(?P<ps>ps)?", numerator)
    if match is None or (match["ps"] and slash):
        return None
    symbol = "b" if match["word"].startswith("bit") else "B"
    if not match["prefix"]:
        return None  # `bit`, `bytes` are units already
    written = f"{match['prefix']}{symbol}" + ("/s" if match["ps"] else "") + slash + denominator
    try:
        parse_unit(written)
    except UnitError:
        return None
    return written


class UnitError(ValueError):
    """An unknown unit; the message is the unit text."""


def parse_unit(text: str) -> tuple[Fraction, Dim]:
    """`'TB/s'` -> (10**12, BANDWIDTH). Raises UnitError naming the unknown part."""
    numerator, _, denominator = text.partition("/")
    if numerator not in UNITS:
        raise UnitError(numerator)
    factor, dim = UNITS[numerator]
    if denominator:
        if denominator not in UNITS:
            raise UnitError(denominator)
        d_factor, d_dim = UNITS[denominator]
        factor, dim = factor / d_factor, _mul(dim, d_dim, -1)
    return factor, dim


# Bounds on magnitudes, so that no input builds a huge Fraction (`1e-999999999` is 10**999999999
# in its denominator) or a float that overflows later. A literal has at most 40 significant
# digits and lies within 1e±30 (the largest real figure, a training budget, is ~1e26 FLOP); a
# computed value in base units lies within 1e±60, which products of such figures reach only
# when something is wrong.
MAX_DIGITS = 40
LITERAL_EXPONENT = 30
VALUE_EXPONENT = 60
_LITERAL = re.compile(r"(?P<whole>\d*)(?:\.(?P<fraction>\d*))?(?:[eE](?P<exponent>[+-]?\d+))?\Z")


class MagnitudeError(ValueError):
    """A number too large, too small or too long to compute with; the message says which."""


@functools.lru_cache(maxsize=8192)  # a design repeats its literals (every part that extends a std one)
def literal_problem(text: str) -> str | None:
    """Why the number literal `text` is refused (None: it is fine), found from its digits
    alone, before any arithmetic."""
    text = text.replace("_", "").strip()
    if "/" in text:  # `Fraction("1/3")` form, as Quantity.of accepts
        return next(filter(None, map(literal_problem, text.split("/", 1))), None)
    match = _LITERAL.match(text.lstrip("+-"))
    if not match:
        return "it is not a number"
    whole, fraction = match["whole"] or "", match["fraction"] or ""
    exponent_text = (match["exponent"] or "0").lstrip("+-").lstrip("0")
    digits = (whole + fraction).lstrip("0")
    if len(exponent_text) > 6 or len(whole) + len(fraction) > 4 * MAX_DIGITS:
        return "it is too long to be a figure of a design"  # even for zero: Fraction would expand it
    if not digits:
        return None  # zero
    if len(digits.rstrip("0")) > MAX_DIGITS:
        return f"it has more than {MAX_DIGITS} significant digits"
    exponent = int(match["exponent"] or 0)
    stripped = whole.lstrip("0")
    leading = len(stripped) - 1 if stripped else -(len(fraction) - len(fraction.lstrip("0")) + 1)
    if not -LITERAL_EXPONENT <= leading + exponent <= LITERAL_EXPONENT:
        return f"it lies outside 1e-{LITERAL_EXPONENT}..1e{LITERAL_EXPONENT}"
    return None


def value_in_range(value: Fraction) -> bool:
    """Zero, or a magnitude within 1e±VALUE_EXPONENT (checked on bit lengths: no big division)."""
    if value == 0:
        return True
    bits = abs(value.numerator).bit_length() - value.denominator.bit_length()
    return abs(bits) <= VALUE_EXPONENT * 3.33  # log2(10) ~ 3.32: the bound to within one bit


@functools.lru_cache(maxsize=8192)
def parse_number(text: str) -> Fraction:
    problem = literal_problem(text)
    if problem:
        raise MagnitudeError(problem)
    return Fraction(text.replace("_", ""))


@frozen
class Quantity:
    """An exact value in base units (bytes, seconds, joules, FLOP) and its dimension."""

    value: Fraction
    dim: Dim = NONE

    @classmethod
    def of(cls, number: str | int | float | Fraction, unit: str | None = None) -> Quantity:
        value = parse_number(number) if isinstance(number, str) else Fraction(number)
        if not unit:
            return cls(value)
        factor, dim = parse_unit(unit)
        return cls(value * factor, dim)

    def __add__(self, other: Quantity) -> Quantity:
        _same(self, other)
        return Quantity(self.value + other.value, self.dim)

    def __sub__(self, other: Quantity) -> Quantity:
        _same(self, other)
        return Quantity(self.value - other.value, self.dim)

    def __mul__(self, other: Quantity) -> Quantity:
        return Quantity(self.value * other.value, _mul(self.dim, other.dim))

    def __truediv__(self, other: Quantity) -> Quantity:
        if other.value == 0:
            raise ZeroDivisionError
        return Quantity(self.value / other.value, _mul(self.dim, other.dim, -1))

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.dim)

    def __lt__(self, other: Quantity) -> bool:
        _same(self, other)
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        _same(self, other)
        return self.value <= other.value

    def scaled(self, factor: Fraction | int) -> Quantity:
        return Quantity(self.value * factor, self.dim)

    def to(self, unit: str) -> Fraction:
        """The value expressed in `unit` (exact); raises ValueError on a dimension mismatch."""
        factor, dim = parse_unit(unit)
        if dim != self.dim:
            raise ValueError(f"cannot express {describe_dim(self.dim)} in {unit}")
        return self.value / factor

    @property
    def is_integer(self) -> bool:
        return self.dim == NONE and self.value.denominator == 1

    def __float__(self) -> float:
        return float(self.value)

    def __str__(self) -> str:
        return format_quantity(self)


def _same(a: Quantity, b: Quantity) -> None:
    if a.dim != b.dim:
        raise DimensionError(a.dim, b.dim)


class DimensionError(ValueError):
    def __init__(self, left: Dim, right: Dim):
        super().__init__(f"{describe_dim(left)} vs {describe_dim(right)}")
        self.left, self.right = left, right


def describe_dim(dim: Dim) -> str:
    if dim in DIMENSION_NAMES:
        unit = EXAMPLE_UNITS[dim]
        return DIMENSION_NAMES[dim] + (f" ({unit})" if unit else "")
    names = ("byte", "s", "J", "FLOP", "USD")
    parts = [f"{n}^{p}" if p != 1 else n for n, p in zip(names, dim) if p]
    return "a quantity in " + "·".join(parts)


# ----------------------------------------------------------------- display

_BINARY_BYTES = (("EiB", Fraction(2**60)), ("PiB", Fraction(2**50)), ("TiB", Fraction(2**40)), ("GiB", Fraction(2**30)),
                 ("MiB", Fraction(2**20)), ("bytes", Fraction(1)))
_DISPLAY: dict[Dim, tuple[tuple[str, Fraction], ...]] = {
    BYTES: (("EB", Fraction(10**18)), ("PB", Fraction(10**15)), ("TB", Fraction(10**12)),
            ("GB", Fraction(10**9)), ("MB", Fraction(10**6)), ("kB", Fraction(10**3)), ("bytes", Fraction(1))),
    BANDWIDTH: (("PB/s", Fraction(10**15)), ("TB/s", Fraction(10**12)), ("GB/s", Fraction(10**9)),
                ("MB/s", Fraction(10**6)), ("bytes/s", Fraction(1))),
    TIME: (("d", Fraction(86400)), ("h", Fraction(3600)), ("s", Fraction(1)), ("ms", Fraction(1, 1000)),
           ("us", Fraction(1, 10**6)), ("ns", Fraction(1, 10**9))),
    POWER: (("GW", Fraction(10**9)), ("MW", Fraction(10**6)), ("kW", Fraction(1000)), ("W", Fraction(1))),
    ENERGY: (("TWh", Fraction(36 * 10**14)), ("GWh", Fraction(36 * 10**11)), ("MWh", Fraction(36 * 10**8)),
             ("kWh", Fraction(36 * 10**5)), ("J", Fraction(1))),
    FLOPS: (("EFLOPS", Fraction(10**18)), ("PFLOPS", Fraction(10**15)), ("TFLOPS", Fraction(10**12)),
            ("GFLOPS", Fraction(10**9)), ("FLOPS", Fraction(1))),
    FLOP: (("ZFLOP", Fraction(10**21)), ("EFLOP", Fraction(10**18)), ("PFLOP", Fraction(10**15)),
           ("TFLOP", Fraction(10**12)), ("FLOP", Fraction(1))),
    MONEY: (("BUSD", Fraction(10**9)), ("MUSD", Fraction(10**6)), ("kUSD", Fraction(10**3)), ("USD", Fraction(1))),
    ENERGY_PRICE: (("USD/kWh", Fraction(1, 36 * 10**5)),),
    RATE: (("GHz", Fraction(10**9)), ("MHz", Fraction(10**6)), ("kHz", Fraction(1000)), ("/s", Fraction(1))),
}
UNITS["ZFLOP"] = (Fraction(10**21), FLOP)


def format_quantity(q: Quantity, digits: int = 3) -> str:
    """A readable form in the units GCL writes (`3.35 TB/s`, `1.2 MW`, `405 B` for large plain
    counts), its number written by the one formatter (`dsl/numbers.py`): separators, `digits`
    significant digits, whole numbers in full, never an exponent."""
    value = Fraction(q.value)  # an int or float value (from counts) formats like a Fraction
    if q.dim == NONE:
        return big(float(value), digits)
    scales = _DISPLAY.get(q.dim)
    if q.dim == BYTES and value.denominator == 1 and binary_bytes(value):
        scales = _BINARY_BYTES  # written in MiB or GiB (`81559 MiB`, `95 GiB`): shown so
    if not scales:
        return f"{number(float(value), digits)} [{describe_dim(q.dim)}]"
    magnitude = abs(value)
    for name, factor in scales:
        if magnitude >= factor:
            break
    return f"{number(float(value / factor), digits)} {name}".replace(" /s", "/s")


def format_distinct(a: Quantity, b: Quantity) -> tuple[str, str]:
    """Two quantities a message compares (`idle` must be below `tdp`), with as many digits
    as it takes to tell them apart (at most 9): never `1 GHz must be below 1 GHz`."""
    for digits in range(3, 10):
        left, right = format_quantity(a, digits), format_quantity(b, digits)
        if left != right or a == b:
            break
    return left, right
