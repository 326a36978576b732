"""Sweep axes from `--vary name=values`, and the design points they span.

    nodes=16,32,64          a list (any GCL values: `pue=1.1,1.2`, `server=DGX_H100,DGX_B200`)
    nodes=16..128           a range, step 1
    nodes=16..128+16        an arithmetic range
    nodes=16..1024*2        a geometric range: 16, 32, ..., 1024

Values stay GCL text: each point is a set of `--set` overrides, typed by the checker like
any other. A bad axis is a located diagnostic on a pseudo-file holding the argument.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction
from typing import Iterator


from ...dsl import codes
from ...dsl.diagnostics import Diagnostic
from ...dsl.plain_number import shown
from ...dsl.source import SourceFile
from ...dsl.units import literal_problem
from ...dsl.records import frozen

MAX_POINTS = 10_000_000  # a guard against a typo such as `1..1e9`; far beyond any sweep that finishes
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"\s*({_NUMBER})\s*\.\.\s*({_NUMBER})\s*(?:([+*])\s*({_NUMBER}))?\s*\Z")


@frozen
class Axis:
    name: str
    values: tuple[str, ...]


class AxisError(ValueError):
    """Bad `--vary` text; `.diagnostic` points into `.source`."""

    def __init__(self, diagnostic: Diagnostic, source: SourceFile):
        super().__init__(diagnostic.summary)
        self.diagnostic, self.source = diagnostic, source


def parse_axis(text: str, index: int = 0) -> Axis:
    """One `--vary` argument; raises AxisError located in the argument."""
    source = SourceFile(f"<--vary {index + 1}>", text)
    name, sep, values = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise _error(source, 0, len(name) or len(text), "write it as `name=values`, such as `nodes=16..1024*2`")
    start = len(name) + 1
    if not values.strip():
        raise _error(source, start, len(text), "no values after `=`")
    if ".." in values:
        return Axis(name.strip(), _range(values, source, start))
    items = _split(values)
    for offset, item in items:
        if not item.strip():
            raise _error(source, start + offset, start + offset + len(item) or start + offset + 1,
                         "an empty value in the list")
    return Axis(name.strip(), tuple(item.strip() for _, item in items))


def _split(values: str) -> list[tuple[int, str]]:
    """Split at commas outside quotes: `budget="2 MW","3 MW"`."""
    out, start, quote = [], 0, None
    for i, ch in enumerate(values):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            out.append((start, values[start:i]))
            start = i + 1
    out.append((start, values[start:]))
    return [(o, v.strip().strip("\"'") if v.strip()[:1] in "\"'" else v) for o, v in out]


def _range(values: str, source: SourceFile, start: int) -> tuple[str, ...]:
    match = _RANGE.match(values)
    end = start + len(values)
    if match is None:
        raise _error(source, start, end, "a range is `low..high`, `low..high+step` or `low..high*factor` "
                                         "with plain numbers")
    for group in (1, 2, 4):   # each value is written into the design: GCL's limits, checked before any arithmetic
        problem = literal_problem(match[group]) if match[group] else None
        if problem:
            raise _error(source, start + match.start(group), start + match.end(group),
                         f"`{shown(match[group])}` is out of range: {problem}, the limits of any number gclc reads")
    low, high = Fraction(match[1]), Fraction(match[2])
    op, step = match[3] or "+", Fraction(match[4] or 1)
    try:
        return range_values(low, high, op, step)
    except ValueError as error:
        at = start + match.start(4) if match[4] and "step" in str(error) else start
        raise _error(source, at, end, str(error)) from None


def range_values(low: Fraction, high: Fraction, op: str, step: Fraction) -> tuple[str, ...]:
    """`low`, `low op step`, ... up to `high` as GCL numbers; ValueError says why there are none."""
    if op == "+" and step <= 0:
        raise ValueError("the step must be positive")
    if op == "*" and (step <= 1 or low <= 0):
        raise ValueError("a geometric range needs low > 0 and a step factor > 1")
    if high >= low and _count(low, high, op, step) > MAX_POINTS:  # counted before any is written
        raise ValueError(f"more than {MAX_POINTS:,} values: a larger step or a narrower range")
    if op == "*" and (low.denominator != 1 or step.denominator != 1):
        return _geometric(low, high, step)
    out, value = [], low
    while value <= high:
        out.append(_text(value))
        value = value + step if op == "+" else value * step
        if len(out) > MAX_POINTS:
            raise ValueError(f"more than {MAX_POINTS:,} values: a larger step or a narrower range")
    if not out:
        raise ValueError(f"the range is empty ({_text(low)} is above {_text(high)})")
    return tuple(out)


def _geometric(low: Fraction, high: Fraction, step: Fraction) -> tuple[str, ...]:
    """A geometric range of a fractional start or factor, `low * step**k`, in floats: exact
    products grow a digit or more a value (1.0001**k), so 800,000 of them took minutes. Each
    value is written to 12 significant digits anyway; `high` itself is kept despite rounding."""
    first, factor, last = float(low), float(step), float(high)
    out, k = [], 0
    while (value := first * factor ** k) <= last * (1 + 1e-12):
        out.append(f"{value:.12g}")
        k += 1
    if not out:
        raise ValueError(f"the range is empty ({_text(low)} is above {_text(high)})")
    return tuple(out)


def _count(low: Fraction, high: Fraction, op: str, step: Fraction) -> int | float:
    """About how many values `low..high op step` holds (logarithms of whole numbers: 1e400 is no float)."""
    if op == "+":
        return (high - low) // step + 1  # a whole number: 1e400 / 1e-300 is no float
    return (_log(high) - _log(low)) / _log(step) + 1


def _log(value: Fraction) -> float:
    return math.log(value.numerator) - math.log(value.denominator)


def _text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.12g}"


def _error(source: SourceFile, start: int, end: int, why: str) -> AxisError:
    diagnostic = codes.BAD_AXIS.make(source.span(start, max(end, start + 1)), text=source.text, why=why)
    return AxisError(diagnostic, source)


def points(axes: tuple[Axis, ...]) -> Iterator[dict[str, str]]:
    """Every combination, the last axis varying fastest; lazily, so memory stays flat."""
    names = [a.name for a in axes]
    for combo in itertools.product(*(a.values for a in axes)):
        yield dict(zip(names, combo))


def count(axes: tuple[Axis, ...]) -> int:
    total = 1
    for axis in axes:
        total *= len(axis.values)
    return total
