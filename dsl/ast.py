"""The abstract syntax tree: frozen attrs nodes, each with the `Span` it came from.

Spans never take part in equality, so `parse(fmt(module)) == module` compares
structure and values only.
"""

from __future__ import annotations

from typing import Union

import attrs

from .source import Span, no_span
from .records import frozen


def _span() -> attrs.Attribute:
    return attrs.field(eq=False, repr=False, factory=no_span, kw_only=True)


@frozen
class Identifier:
    text: str
    span: Span = _span()


@frozen
class Dotted:
    """`a`, `B200.hbm.capacity`, `power.tdp`."""

    parts: tuple[Identifier, ...]
    span: Span = _span()

    @property
    def text(self) -> str:
        return ".".join(part.text for part in self.parts)


# ----------------------------------------------------------------- expressions


@frozen
class Number:
    """A numeric literal as written (`1_000`, `3.35`, `1e9`) and its unit text, if any."""

    text: str
    unit: str | None = None
    span: Span = _span()


@frozen
class Ratio:
    """`3:1`."""

    left: str
    right: str
    span: Span = _span()


@frozen
class String:
    value: str
    span: Span = _span()


@frozen
class Bool:
    value: bool
    span: Span = _span()


@frozen
class Ref:
    """A name: a param, a declaration, a field of one (`B200.hbm.capacity`), or a keyword."""

    path: Dotted
    span: Span = _span()


@frozen
class Arg:
    name: Identifier
    value: Expr
    span: Span = _span()


@frozen
class Call:
    """A constructor such as `fat_tree(tiers = 2, radix = 64)`."""

    name: Identifier
    args: tuple[Arg, ...]
    span: Span = _span()


@frozen
class ListExpr:
    items: tuple[Expr, ...]
    span: Span = _span()


@frozen
class BinOp:
    op: str  # one of + - * /
    left: Expr
    right: Expr
    span: Span = _span()


@frozen
class Neg:
    operand: Expr
    span: Span = _span()


@frozen
class Marked:
    """A value with a marker: `900 GB/s bidir`, `4.5 PFLOPS sparse`."""

    operand: Expr
    marker: str
    span: Span = _span()


@frozen
class Multiplicity:
    """`8 x H100`, `2 x Grace { cores = 72 }`."""

    count: Expr
    part: Dotted
    overrides: tuple[Member, ...] | None = None
    span: Span = _span()


Expr = Union[Number, Ratio, String, Bool, Ref, Call, ListExpr, BinOp, Neg, Marked, Multiplicity]

# ----------------------------------------------------------------- members


@frozen
class Field:
    target: Dotted
    value: Expr
    span: Span = _span()


@frozen
class Constraint:
    """`power <= 100 MW` inside `subject to { ... }` or `slo { ... }`."""

    target: Dotted
    op: str
    value: Expr
    span: Span = _span()


@frozen
class Block:
    """A nested block: `hbm { ... }`, or labelled: `partition h100 { ... }`."""

    name: Identifier
    label: Identifier | None
    members: tuple[Member, ...]
    span: Span = _span()


Member = Union[Field, Constraint, Block]

# ----------------------------------------------------------------- top level


@frozen
class Import:
    path: str
    span: Span = _span()


@frozen
class Param:
    name: Identifier
    value: Expr
    span: Span = _span()


@frozen
class Declaration:
    """`chip B200 extends Hopper { ... }` — `kind` is checked by the compiler."""

    kind: Identifier
    name: Identifier
    parent: Dotted | None
    members: tuple[Member, ...]
    span: Span = _span()


Item = Union[Import, Param, Declaration]


@frozen
class Comment:
    """A `# ...` comment; kept so that `gclc fmt` can put it back."""

    text: str
    span: Span = _span()


@frozen
class Module:
    items: tuple[Item, ...]
    comments: tuple[Comment, ...] = ()
    path: str = attrs.field(default="<string>", eq=False)
    span: Span = _span()
