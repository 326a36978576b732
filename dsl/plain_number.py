"""The one parser of numbers that do not come from GCL text: CSV cells, command-line options
(`--seed`, `--epochs`), host-list ranges. It accepts what a GCL literal accepts, within the
same limits (`dsl/units.py`: 1e-30..1e30, 40 significant digits), and nothing else:

- ASCII digits only: no `²`, no Arabic-Indic or full-width digits (`str.isdigit` and `int`
  take them), no `_` separators (`int("1_000")` takes those), no `inf` or `nan`, no hex;
  thousands separators only where a tool prints them (`grouped`: torchtitan's `1,234.5`), in
  groups of three;
- a whole number where one is asked for (`1e3` is 1000; `2.5` is refused, never truncated);
- bounds checked on the exact value, before any float arithmetic can overflow.

Every failure is a `PlainNumberError` whose message says what is wrong and how to write it;
the caller adds where (a cell's line and column, an option's name).
"""

from __future__ import annotations

import re
from fractions import Fraction

from .numbers import number
from .units import literal_problem

_DIGITS = re.compile(r"[0-9]+\Z", re.ASCII)
_PLAIN = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z", re.ASCII)
_GROUPED = re.compile(r"[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?\Z", re.ASCII)
_SHOWN = 24  # characters of a bad number quoted in a message


class PlainNumberError(ValueError):
    """A text that is not an accepted number; the message says why and how to write one."""


def shown(text: str) -> str:
    """`text` as a message quotes it: short, its ends kept."""
    return text if len(text) <= _SHOWN else f"{text[:12]}…{text[-6:]} ({len(text):,} characters)"


def parse_plain(text: str, *, whole: bool = False, low: float | None = None, high: float | None = None,
                low_open: bool = False, digits_only: bool = False, grouped: bool = False,
                what: str = "a number") -> int | float:
    """The value of `text` (spaces around it allowed): an int when `whole`, else a float.
    `low`/`high` bound it (`low_open`: strictly above `low`); `digits_only`: nothing but
    ASCII digits (a host number: no sign, point or exponent); `grouped`: thousands
    separators allowed in groups of three (`1,234.5`, as a tool prints it)."""
    text = text.strip(" \t")
    if digits_only and not _DIGITS.match(text):
        raise PlainNumberError(f"`{shown(text)}` is not a number: {_why_not(text, 'write only the digits 0-9')}")
    if grouped and _GROUPED.match(text):
        text = text.replace(",", "")
    if not whole and low is None and high is None:
        _exact_problem(text)
        return float(text)  # correctly rounded, as float(Fraction(text)): no bound needs the exact value
    value = _exact(text, what)
    if whole and value.denominator != 1:
        raise PlainNumberError(f"`{shown(text)}` is not a whole number: {what} counts whole units")
    if (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high):
        raise PlainNumberError(f"`{shown(text)}` is out of range: {what} must be {_bounds(low, high, low_open)}")
    return int(value) if whole else float(value)


def _exact(text: str, what: str) -> Fraction:
    _exact_problem(text)
    return Fraction(text)


def _exact_problem(text: str) -> None:
    """Raise why `text` is no plain number within GCL's limits (nothing: it is one)."""
    if not _PLAIN.match(text):
        raise PlainNumberError(f"`{shown(text)}` is not a number: {_why_not(text)}")
    problem = literal_problem(text)
    if problem:
        raise PlainNumberError(f"`{shown(text)}` is out of range: {problem}, the limits of any number gclc reads")


def _why_not(text: str, otherwise: str = "write digits 0-9 with an optional sign, `.` and exponent, "
                                         "such as 12, 0.5 or 1e3") -> str:
    if not text:
        return "it is empty"
    if "_" in text or "," in text:
        return "write the digits without separators (1000, not 1_000 or 1,000)"
    if any(c.isdigit() and not c.isascii() for c in text):
        return "write it in ASCII digits 0-9"
    if text.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return "it must be a finite number"
    return otherwise


def _bounds(low: float | None, high: float | None, low_open: bool) -> str:
    above = f"{'above' if low_open else 'at least'} {_written(low)}" if low is not None else ""
    below = f"at most {_written(high)}" if high is not None else ""
    return " and ".join(p for p in (above, below) if p)


def _written(bound: float) -> str:
    return f"{bound:,}" if isinstance(bound, int) else number(bound)
