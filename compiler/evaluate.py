"""Expression evaluation: literals with units, arithmetic, params and references.

Errors become diagnostics and the value `INVALID`, which later steps pass over
silently, so one mistake is reported once.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

from ..dsl import ast
from ..dsl import codes
from .design import Symbol
from ..dsl.diagnostics import Diagnostic, Label
from ..dsl.units import (BANDWIDTH, FLOPS, VALUE_EXPONENT, DimensionError, MagnitudeError, Quantity, UnitError,
                         UNIT_HINTS, UNITS, describe_dim, parse_number, parse_unit, respell,
                         value_in_range)


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()


class Structure:
    """A call or a count of parts where a plain value was evaluated: not an error yet, for
    the field that receives it says what it wanted (`bandwidth` must be a bandwidth, not
    a count of parts)."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"Structure({self.what!r})"

_MARKERS = {"bidir": (BANDWIDTH, "only a bandwidth can be bidirectional"),
            "sparse": (FLOPS, "only a FLOPS rate can be a sparse figure")}
_VERBS = {"+": "add", "-": "subtract"}


def describe_value(value: Any) -> str:
    """How a value reads in a message: `a data size (GB)`, `a string`, `the chip \\`H100\\``."""
    if isinstance(value, Quantity):
        return describe_dim(value.dim)
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Symbol):
        return f"the word `{value.name}`"
    if isinstance(value, tuple):
        return "a list"
    if isinstance(value, Structure):
        return value.what
    kind = getattr(value, "kind", None)
    return f"the {kind} `{value.name}`" if kind else type(value).__name__.lower()


class Evaluator:
    """Evaluates expressions; `lookup` resolves names (params, declarations, fields)."""

    def __init__(self, diagnostics: list[Diagnostic], lookup: Callable[[ast.Ref], Any]):
        self.diagnostics = diagnostics
        self.lookup = lookup

    def error(self, diagnostic: Diagnostic) -> Any:
        self.diagnostics.append(diagnostic)
        return INVALID

    def eval(self, expr: ast.Expr) -> Any:
        method = getattr(self, "_" + type(expr).__name__.lower())
        return method(expr)

    # ------------------------------------------------------------ literals
    def _number(self, expr: ast.Number) -> Any:
        try:  # the syntax check refused these already; --set text and generated ASTs come here too
            value = parse_number(expr.text)
        except MagnitudeError as error:
            return self.error(codes.NUMBER_RANGE.make(expr.span, text=expr.text[:40], label=str(error)))
        if not expr.unit:
            return Quantity(value)
        try:
            literal = _literal(expr.text, expr.unit)
        except UnitError as error:
            return self.error(unknown_unit(expr, str(error)))
        return self._in_range(expr, literal)

    def _in_range(self, expr: ast.Expr, value: Quantity) -> Any:
        """Every value that reaches the model is finite: refuse one beyond 1e±60 base units here,
        where it has a location, rather than overflow a float in the planner."""
        if value_in_range(value.value):
            return value
        return self.error(codes.VALUE_RANGE.make(expr.span, limit=VALUE_EXPONENT, notes=[
            "help: check the units and the arithmetic; no figure of a real cluster is this large or small"]))

    def _ratio(self, expr: ast.Ratio) -> Any:
        try:
            left, right = parse_number(expr.left), parse_number(expr.right)
        except MagnitudeError as error:
            return self.error(codes.NUMBER_RANGE.make(expr.span, text=f"{expr.left[:20]}:{expr.right[:20]}", label=str(error)))
        if right == 0:
            return self.error(codes.DIVISION_BY_ZERO.make(expr.span))
        return self._in_range(expr, Quantity(left / right))

    def _string(self, expr: ast.String) -> Any:
        return expr.value

    def _bool(self, expr: ast.Bool) -> Any:
        return expr.value

    def _ref(self, expr: ast.Ref) -> Any:
        return self.lookup(expr)

    def _listexpr(self, expr: ast.ListExpr) -> Any:
        items = tuple(self.eval(item) for item in expr.items)
        return INVALID if INVALID in items else items

    # ------------------------------------------------------------ arithmetic
    def _binop(self, expr: ast.BinOp) -> Any:
        left, right = self.eval(expr.left), self.eval(expr.right)
        if left is INVALID or right is INVALID:
            return INVALID
        for side, value in ((expr.left, left), (expr.right, right)):
            if not isinstance(value, Quantity):
                return self.error(codes.WRONG_TYPE.make(
                    side.span, field=f"operand of `{expr.op}`", expected="a number or quantity",
                    got=describe_value(value)))
        try:
            return self._in_range(expr, _APPLY[expr.op](left, right))
        except ZeroDivisionError:
            return self.error(codes.DIVISION_BY_ZERO.make(expr.right.span, label="this is zero"))
        except DimensionError:
            return self.error(codes.DIMENSION_MISMATCH.make(
                expr.span, verb=_VERBS[expr.op], left=describe_dim(left.dim), right=describe_dim(right.dim),
                labels=[Label(expr.left.span, describe_dim(left.dim)),
                        Label(expr.right.span, describe_dim(right.dim))],
                notes=["help: only quantities of the same dimension can be added or subtracted",
                       _percent_hint(expr)]))

    def _neg(self, expr: ast.Neg) -> Any:
        value = self.eval(expr.operand)
        if value is INVALID or isinstance(value, Quantity):
            return -value if value is not INVALID else INVALID
        return self.error(codes.WRONG_TYPE.make(expr.span, field="operand of `-`", expected="a quantity",
                                                got=describe_value(value)))

    def _marked(self, expr: ast.Marked) -> Any:
        value = self.eval(expr.operand)
        if value is INVALID:
            return INVALID
        dim, why = _MARKERS[expr.marker]
        if not isinstance(value, Quantity) or value.dim != dim:
            return self.error(codes.BAD_MARKER.make(expr.span, marker=expr.marker, why=why))
        return value.scaled(Fraction(1, 2))  # both stated as the sum of two halves

    # ------------------------------------------------------------ structures (typed by the checker)
    def _call(self, expr: ast.Call) -> Any:
        return Structure(f"a call of `{expr.name.text}(...)`")

    def _multiplicity(self, expr: ast.Multiplicity) -> Any:
        return Structure("a count of parts such as `8 x Name`")


_APPLY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b,
    "*": lambda a, b: a * b, "/": lambda a, b: a / b,
}


def _percent_hint(expr: ast.BinOp) -> str:
    """`tdp - 5%`: a percentage is a plain number, so scaling is what was meant."""
    if isinstance(expr.right, ast.Number) and expr.right.unit == "%":
        return f"help: a percentage is a plain number; to scale, write `x * (1 {expr.op} {expr.right.text}%)`"
    return ""


@lru_cache(maxsize=4096)
def _literal(text: str, unit: str | None) -> Quantity:
    """`3.35` `TB/s` -> the exact quantity; cached, for the standard library's literals are
    evaluated again at every point of a sweep. Raises UnitError for an unknown unit."""
    value = Fraction(text.replace("_", ""))
    if not unit:
        return Quantity(value)
    factor, dim = parse_unit(unit)
    return Quantity(value * factor, dim)


def unknown_unit(expr: ast.Number, part: str) -> Diagnostic:
    hint = UNIT_HINTS.get(part) or UNIT_HINTS.get(expr.unit or "")
    written = respell(expr.unit or "")
    if written:
        hint = f"write `{written}`"
    note = f"help: {hint}" if hint else codes.suggest(part, UNITS)
    return codes.UNKNOWN_UNIT.make(expr.span, unit=part, notes=[note])



def symbol_of(expr: ast.Ref) -> Symbol:
    return Symbol(expr.path.parts[0].text)
