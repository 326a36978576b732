"""Building GCL syntax trees in code: identifiers, numbers with exact decimals, fields,
blocks, declarations, references; `_Renders`, the base of every spec (testing/specs.py),
prints its declarations through the canonical formatter."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable

from ..dsl import ast
from ..dsl.format import format_module


def _id(text: str) -> ast.Identifier:
    return ast.Identifier(text)


def _dotted(path: str) -> ast.Dotted:
    return ast.Dotted(tuple(_id(part) for part in path.split(".")))


def _num(value: int | Fraction | str, unit: str | None = None) -> ast.Number:
    return ast.Number(value if isinstance(value, str) else _decimal(value), unit)


def _decimal(value: int | Fraction) -> str:
    """An exact decimal text for an int or a fraction with a terminating expansion."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    digits = 0
    while (value * 10**digits).denominator != 1:
        digits += 1
        if digits > 12:
            raise ValueError(f"{value} has no short decimal expansion")
    whole = value * 10**digits
    text = f"{whole.numerator:0{digits + 1}d}"
    return (text[:-digits] + "." + text[-digits:]).rstrip("0").rstrip(".")


def _terminates(value: Fraction) -> bool:
    """Whether the fraction has a finite decimal expansion (of at most 12 digits)."""
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1 and (value * 10**12).denominator == 1


def _field(path: str, value: ast.Expr) -> ast.Field:
    return ast.Field(_dotted(path), value)


def _block(name: str, members: Iterable, label: str | None = None) -> ast.Block:
    return ast.Block(_id(name), _id(label) if label else None, tuple(members))


def _decl(kind: str, name: str, members: Iterable, parent: str | None = None) -> ast.Declaration:
    return ast.Declaration(_id(kind), _id(name), _dotted(parent) if parent else None, tuple(members))


def _ref(name: str) -> ast.Ref:
    return ast.Ref(_dotted(name))


def _times(count: int, part: str) -> ast.Multiplicity:
    return ast.Multiplicity(_num(count), _dotted(part), None)


def _call(name: str, **args: ast.Expr) -> ast.Call:
    return ast.Call(_id(name), tuple(ast.Arg(_id(k), v) for k, v in args.items()))


def _unique(declarations: Iterable[ast.Declaration]) -> tuple[ast.Declaration, ...]:
    seen: dict[str, ast.Declaration] = {}
    for d in declarations:
        seen.setdefault(d.name.text, d)
    return tuple(seen.values())


class GclText(str):
    """GCL source text that prints as a block of text in hypothesis reports."""

    def __repr__(self) -> str:
        return "GclText('''\n" + str(self) + "''')"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


class _Renders:
    """Specs render to declarations; `.module()` and `.text` add nothing else."""

    def declarations(self) -> tuple[ast.Declaration, ...]:
        raise NotImplementedError

    def module(self) -> ast.Module:
        return ast.Module(_unique(self.declarations()))

    @property
    def text(self) -> GclText:
        return GclText(format_module(self.module()))


def _pin(value: Any) -> ast.Expr:
    if isinstance(value, bool):
        return ast.Bool(value)
    if isinstance(value, int):
        return _num(value)
    return _ref(str(value))
