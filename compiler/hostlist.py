"""Slurm-style host lists: `dgx[001-127]` <-> the names it stands for.

The syntax is Slurm's hostlist expression (slurm.conf(5), "NodeName"): a prefix, one
bracketed list of numbers and ranges, a suffix; zero padding is kept. Only the last
bracket of a name is a range here, as in Slurm's one-dimensional host lists.
"""

from __future__ import annotations

import re
from typing import Iterable

_BRACKET = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<body>[^\[\]]+)\](?P<suffix>[^\[\]]*)$")
_TAIL_NUMBER = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)(?P<suffix>\D*)$")
# RFC 1123 host names, lowercase as Kubernetes node names need them (DNS-1123 subdomain).
HOSTNAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")


class HostlistError(ValueError):
    """A malformed expression; the message says what and how to write it."""


def expand(hostlist: str) -> list[str]:
    """`node[01-03,07],login` -> node01 node02 node03 node07 login: the comma-separated
    parts (commas inside brackets belong to the range), each expanded."""
    return [name for piece in _split(hostlist) for name in _expand_one(piece)]


def _split(hostlist: str) -> list[str]:
    pieces, depth, start = [], 0, 0
    for i, char in enumerate(hostlist):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            pieces.append(hostlist[start:i])
            start = i + 1
    return pieces + [hostlist[start:]]


def _expand_one(expression: str) -> list[str]:
    if not expression.strip():
        raise HostlistError("a host list has an empty name between its commas")
    if "[" not in expression and "]" not in expression:
        return [expression]
    match = _BRACKET.match(expression)
    if match is None:
        raise HostlistError(f"`{expression}` is not a host list: write one range, such as `dgx[001-127]`")
    names = []
    for part in match["body"].split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise HostlistError(f"`{part}` in `{expression}` is not a number or a range such as `001-127`")
        width = len(low) if low.startswith("0") or (dash and len(low) == len(high)) else 0
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise HostlistError(f"the range `{part}` in `{expression}` runs backwards")
        names += [f"{match['prefix']}{n:0{width}d}{match['suffix']}" for n in range(first, last + 1)]
    return names


def expand_all(expressions: Iterable[str]) -> list[str]:
    return [name for expression in expressions for name in expand(expression)]


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
