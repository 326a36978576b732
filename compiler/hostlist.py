"""Slurm-style host lists: `dgx[001-127]` <-> the names it stands for.

The syntax is Slurm's hostlist expression (slurm.conf(5), "NodeName"): a prefix, one
bracketed list of numbers and ranges, a suffix; zero padding is kept. Only the last
bracket of a name is a range here, as in Slurm's one-dimensional host lists.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..dsl.plain_number import PlainNumberError, parse_plain

_BRACKET = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<body>[^\[\]]+)\](?P<suffix>[^\[\]]*)$")
_TAIL_NUMBER = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)(?P<suffix>\D*)$")
# RFC 1123 host names, lowercase as Kubernetes node names need them (DNS-1123 subdomain).
HOSTNAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")


# The largest clusters have about 100,000 nodes: ten times that is the most a design lists,
# so that expanding its host lists stays within memory (a name is ~60 bytes as a string).
MAX_HOSTS = 1_000_000


class HostlistError(ValueError):
    """A malformed expression; the message says what and how to write it."""


def expand(hostlist: str, most: int | None = None) -> list[str]:
    """`node[01-03,07],login` -> node01 node02 node03 node07 login: the comma-separated
    parts (commas inside brackets belong to the range), each expanded. The names are counted
    first: more than `most` is a HostlistError before any is made."""
    total = count(hostlist)
    if most is not None and total > most:
        raise HostlistError(f"`{_shown(hostlist)}` names {total:,} hosts; at most {most:,} are expected here")
    return [name for piece in _split(hostlist) for name in _expand_one(piece)]


def count(hostlist: str) -> int:
    """How many names `hostlist` stands for, without making them (`n[0-99999999999]` is a number,
    not 100 billion strings)."""
    return sum(len(_ranges(piece)[1]) if "[" in piece or "]" in piece else 1 for piece in _split(hostlist))


def _split(hostlist: str) -> list[str]:
    pieces, depth, start = [], 0, 0
    for i, char in enumerate(hostlist):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            pieces.append(hostlist[start:i])
            start = i + 1
    return pieces + [hostlist[start:]]


class _Numbers:
    """The numbers of one bracket: ranges of (first, last, width), counted without expanding."""

    def __init__(self, ranges: list[tuple[int, int, int]]):
        self.ranges = ranges

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.ranges)

    def __iter__(self):
        return ((n, width) for first, last, width in self.ranges for n in range(first, last + 1))


def _ranges(expression: str) -> tuple[re.Match, _Numbers]:
    if not expression.strip():
        raise HostlistError("a host list has an empty name between its commas")
    match = _BRACKET.match(expression)
    if match is None:
        raise HostlistError(f"`{_shown(expression)}` is not a host list: write one range, such as `dgx[001-127]`")
    ranges = []
    for part in match["body"].split(","):
        low, dash, high = part.partition("-")
        first, last = _number(low, part, expression), _number(high, part, expression) if dash else None
        width = len(low) if low.startswith("0") or (dash and len(low) == len(high)) else 0
        last = first if last is None else last
        if last < first:
            raise HostlistError(f"the range `{_shown(part)}` in `{_shown(expression)}` runs backwards")
        ranges.append((first, last, width))
    return match, _Numbers(ranges)


def _number(text: str, part: str, expression: str) -> int:
    """One end of a range: ASCII digits only, through the one plain-number parser."""
    try:
        return parse_plain(text, whole=True, low=0, digits_only=True, what="a host number")
    except PlainNumberError as error:
        raise HostlistError(f"`{_shown(part)}` in `{_shown(expression)}` is not a number or a range such as "
                            f"`001-127`: {error}") from None


def _expand_one(expression: str) -> list[str]:
    if "[" not in expression and "]" not in expression:
        if not expression.strip():
            raise HostlistError("a host list has an empty name between its commas")
        return [expression]
    match, numbers = _ranges(expression)
    return [f"{match['prefix']}{n:0{width}d}{match['suffix']}" for n, width in numbers]


def _shown(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:40]}…{text[-12:]}"


def expand_all(expressions: Iterable[str], most: int | None = None) -> list[str]:
    """Every name of `expressions`; more than `most` in all is a HostlistError before any is made."""
    expressions = list(expressions)
    total = count_all(expressions)
    if most is not None and total > most:
        raise HostlistError(f"the host lists name {total:,} hosts; at most {most:,} are expected here")
    return [name for expression in expressions for name in expand(expression)]


def count_all(expressions: Iterable[str]) -> int:
    return sum(count(expression) for expression in expressions)


def compress(names: Iterable[str]) -> str:
    """The shortest comma-separated host list for `names`, in their order: runs of names that
    differ only in their last number (same padding) become one range."""
    return ",".join(pieces(names))


def pieces(names: Iterable[str]) -> list[str]:
    """The comma-separated parts of `compress(names)`."""
    groups: list[tuple[str, str, int, list[int]]] = []  # prefix, suffix, width, numbers
    for name in names:
        match = _TAIL_NUMBER.match(name)
        if match is None:
            groups.append((name, "", -1, []))
            continue
        prefix, number, suffix = match["prefix"], match["number"], match["suffix"]
        last = groups[-1] if groups else None
        if (last is not None and last[:2] == (prefix, suffix) and _fits(number, last[2])
                and int(number) > last[3][-1]):
            last[3].append(int(number))
        else:
            groups.append((prefix, suffix, len(number) if number.startswith("0") else 0, [int(number)]))
    return [_group_text(*group) for group in groups]


def lines(names: Iterable[str], width: int = 1000) -> list[str]:
    """`compress(names)` cut at commas into host lists of at most about `width` characters."""
    out, current = [], ""
    for piece in pieces(names):
        if current and len(current) + 1 + len(piece) > width:
            out.append(current)
            current = ""
        current = f"{current},{piece}" if current else piece
    return out + ([current] if current else [])


def _fits(number: str, width: int) -> bool:
    """Whether `number` prints as itself at zero-padding `width` (0: no padding)."""
    return len(number) == width if number.startswith("0") else width == 0 or len(number) == width


def _group_text(prefix: str, suffix: str, width: int, numbers: list[int]) -> str:
    if width < 0:
        return prefix
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]:0{width}d}{suffix}"
    runs, start = [], numbers[0]
    for previous, current in zip(numbers, numbers[1:] + [None]):
        if current is None or current != previous + 1:
            runs.append(f"{start:0{width}d}" if start == previous else f"{start:0{width}d}-{previous:0{width}d}")
            start = current
    return f"{prefix}[{','.join(runs)}]{suffix}"
