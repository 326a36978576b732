"""Typing one field's expression against the type its schema expects: quantities in
their dimension and range, words among their choices, references to declarations of the
right kind, constructors with their arguments, lists, targets and sweep axes.

`FieldTyper` is a mixin of `check.Checker`: it reports through `self.error`, evaluates
with `self.evaluator`, and resolves names with `self.program`, `self.param` and
`self.entity` (which builds a declaration's entity on first use)."""

from __future__ import annotations

from typing import Any

from ..dsl import ast
from ..dsl import codes
from ..dsl.units import Quantity, format_quantity
from . import schema as sc
from .design import Construct, Entity, Partition, Record, Repeat, Symbol
from .evaluate import INVALID, Structure, describe_value, symbol_of
from .names import unknown_name_notes, word_notes
from .resolve import Body, FieldEntry, build_body, merge


class FieldTyper:
    """The `typed_*` methods, one per schema type (`typed` dispatches on the type's name)."""

    def typed(self, expr: ast.Expr, ftype: sc.FieldType, field: str) -> Any:
        method = getattr(self, "typed_" + type(ftype).__name__.lower())
        return method(expr, ftype, field)

    def mismatch(self, expr: ast.Expr, ftype: sc.FieldType, field: str, value: Any) -> Any:
        if value is INVALID:
            return INVALID
        return self.error(codes.WRONG_TYPE.make(expr.span, field=field, expected=ftype.describe(),
                                                got=describe_value(value)))

    def typed_qty(self, expr: ast.Expr, ftype: sc.Qty, field: str) -> Any:
        if (stray := self.stray_word(expr, ftype, field)) is not None:
            return stray
        value = self.evaluator.eval(expr)
        if not isinstance(value, Quantity) or isinstance(value, bool):
            return self.mismatch(expr, ftype, field, value)
        if value.dim != ftype.dim:
            return self.error(codes.WRONG_DIMENSION.make(
                expr.span, field=field, expected=sc.u.describe_dim(ftype.dim), got=sc.u.describe_dim(value.dim),
                label=f"this is {format_quantity(value)}", notes=[_unit_hint(expr, ftype)]))
        return self.in_range(expr, ftype, field, value)

    def in_range(self, expr: ast.Expr, ftype: sc.Qty, field: str, value: Quantity) -> Any:
        low_ok = ftype.low is None or (value.value > ftype.low if ftype.low_open else value.value >= ftype.low)
        high_ok = ftype.high is None or value.value <= ftype.high
        if not (low_ok and high_ok):
            percent = is_share(expr) and ftype.dim == sc.u.NONE  # `105%` is told in percent
            # the value as written, every digit: `1.0001` beyond `<= 1` must not read as `1`
            shown = f"{_number_text(value.value * 100, 9)}%" if percent else format_quantity(value, 9)
            return self.error(codes.OUT_OF_RANGE.make(expr.span, field=field, bound=_bound_text(ftype, percent),
                                                      value=shown, notes=[ftype.why] if ftype.why else []))
        if ftype.integer and value.value.denominator != 1:
            return self.error(codes.NOT_INTEGER.make(expr.span, field=field, value=format_quantity(value, 9)))
        return int(value.value) if ftype.integer else value

    def typed_text(self, expr: ast.Expr, ftype: sc.Text, field: str) -> Any:
        if (stray := self.stray_word(expr, ftype, field)) is not None:
            return stray
        value = self.evaluator.eval(expr)
        return value if isinstance(value, str) else self.mismatch(expr, ftype, field, value)

    def typed_flag(self, expr: ast.Expr, ftype: sc.Flag, field: str) -> Any:
        value = self.evaluator.eval(expr)
        return value if isinstance(value, bool) else self.mismatch(expr, ftype, field, value)

    def typed_choice(self, expr: ast.Expr, ftype: sc.Choice, field: str) -> Any:
        # one of the field's keywords is that keyword even where a declaration shares its
        # name (`arch = dense` beside `train dense { ... }`): no declaration is a choice
        if self.keyword(expr) in ftype.options:
            return symbol_of(expr)
        value = self.word(expr)
        if isinstance(value, Symbol):
            if value.name in ftype.options:
                return value
            return self.error(codes.BAD_CHOICE.make(expr.span, value=value.name, field=field,
                                                    notes=[codes.suggest(value.name, ftype.options),
                                                           f"`{field}` is {ftype.describe()}"]))
        return self.mismatch(expr, ftype, field, value)

    def keyword(self, expr: ast.Expr) -> str | None:
        """The bare word `expr` is, unless it names a param."""
        if isinstance(expr, ast.Ref) and len(expr.path.parts) == 1:
            name = expr.path.parts[0].text
            return None if name in self.program.params else name
        return None

    def word(self, expr: ast.Expr) -> Any:
        """A bare word is a keyword unless it names a param."""
        if isinstance(expr, ast.Ref) and len(expr.path.parts) == 1:
            name = expr.path.parts[0].text
            if name in self.program.params:
                return self.param(name)
            if name not in self.program.declarations:
                return symbol_of(expr)
        return self.evaluator.eval(expr)

    def typed_partref(self, expr: ast.Expr, ftype: sc.PartRef, field: str) -> Any:
        if not (isinstance(expr, ast.Ref) and len(expr.path.parts) == 1):
            return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        return self.declaration(expr.path.parts[0], ftype.kinds, field)

    def declaration(self, name: ast.Identifier, kinds: tuple[str, ...], field: str) -> Any:
        decl = self.program.declarations.get(name.text)
        if decl is None and name.text in self.program.params:
            return self.part_param(name, kinds, field)
        if decl is None:
            if self.program.broken_imports or name.text in self.program.unknown_kinds:
                return INVALID  # declared in a file that failed to load, or with a misspelled kind: said already
            candidates = [n for n, d in self.program.declarations.items() if d.kind.text in kinds]
            return self.error(codes.UNKNOWN_NAME.make(name.span, name=name.text, notes=unknown_name_notes(
                name.text, candidates, kinds, " or ".join(f"{k}s" for k in kinds))))
        if decl.kind.text not in kinds:
            return self.error(codes.WRONG_REFERENCE.make(name.span, field=field, expected=" or ".join(f"a {k}" for k in kinds),
                                                         name=name.text, got=decl.kind.text))
        return self.entity(name.text) or INVALID

    def part_param(self, name: ast.Identifier, kinds: tuple[str, ...], field: str) -> Any:
        """A param that names a part (`param server = DGX_H100`), so that `--set` and sweeps swap it."""
        value = self.param(name.text)
        if value is INVALID:
            return INVALID
        if isinstance(value, Entity) and value.kind in kinds:
            return value
        return self.error(codes.WRONG_TYPE.make(
            name.span, field=field, expected=" or ".join(f"a {k}" for k in kinds),
            got=f"the param `{name.text}`, which is {describe_value(value)}"))

    def typed_repeatof(self, expr: ast.Expr, ftype: sc.RepeatOf, field: str) -> Any:
        if not isinstance(expr, ast.Multiplicity):
            if isinstance(expr, ast.Ref) and len(expr.path.parts) == 1:
                expr = ast.Multiplicity(ast.Number("1"), expr.path, None, span=expr.span)
            else:
                return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        count = self.typed_qty(expr.count, sc.COUNT if ftype.least else sc.COUNT0, f"count of `{field}`")
        if len(expr.part.parts) != 1:
            return self.error(codes.WRONG_TYPE.make(expr.part.span, field=field, expected=ftype.describe(), got="a field"))
        part = self.declaration(expr.part.parts[0], ftype.kinds, field)
        if count is INVALID or part is INVALID:
            return INVALID
        if expr.overrides:
            decl = self.program.declarations[part.name]
            own = build_body(expr.overrides, self.diagnostics, f"`{part.name}` here")
            part = self.build(decl, merge(self.program.bodies[part.name], own), expr.span)
        return Repeat(count, part)

    def typed_construct(self, expr: ast.Expr, ftype: sc.Construct, field: str) -> Any:
        if isinstance(expr, ast.Ref) and len(expr.path.parts) == 1:
            expr = ast.Call(expr.path.parts[0], (), span=expr.span)
        if not isinstance(expr, ast.Call):
            return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        form = ftype.forms.get(expr.name.text)
        if form is None:
            return self.error(codes.UNKNOWN_CONSTRUCTOR.make(expr.name.span, what=ftype.what, name=expr.name.text,
                                                             notes=[codes.suggest(expr.name.text, ftype.forms),
                                                                    f"`{field}` is {ftype.describe()}"]))
        block = sc.Block(form.args, required=form.required)
        body: Body = {}
        for arg in expr.args:
            if arg.name.text in body:
                self.error(codes.DUPLICATE_FIELD.make(arg.name.span, field=arg.name.text, where=f"`{expr.name.text}(...)`"))
            elif arg.name.text not in form.args:
                self.error(codes.UNKNOWN_ARGUMENT.make(arg.name.span, name=arg.name.text, call=expr.name.text,
                                                       notes=[codes.suggest(arg.name.text, form.args)]))
            else:
                body[arg.name.text] = FieldEntry(arg.name, arg.value, arg.span)
        items = [self.field_entry(k, e, block, f"`{expr.name.text}`") for k, e in body.items()]
        unknown = [arg.name.text for arg in expr.args if arg.name.text not in form.args]
        missing = [name for name in form.required if name not in body
                   and not any(codes.suggest(key, [name]) for key in unknown)]  # `raidx` is said once
        for name in missing:
            self.error(codes.MISSING_ARGUMENT.make(expr.span, call=expr.name.text, name=name))
        if missing or None in items:
            return INVALID
        return Construct(expr.name.text, Record(tuple(items)))

    def typed_countor(self, expr: ast.Expr, ftype: sc.CountOr, field: str) -> Any:
        if isinstance(expr, ast.Call):
            return self.typed_construct(expr, ftype.construct, field)
        if (stray := self.stray_word(expr, ftype, field)) is not None:  # told with the distributions too
            return stray
        return self.typed_qty(expr, sc.COUNT, field)

    def typed_listof(self, expr: ast.Expr, ftype: sc.ListOf, field: str) -> Any:
        held = self.param_list(expr)
        if held is not None:  # `recompute_modules = mods` with `param mods = [core_attention, mlp]`
            if self.param(expr.path.parts[0].text) is INVALID:
                return INVALID
            expr = held
        if not isinstance(expr, ast.ListExpr):
            return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        if len(expr.items) < ftype.least:  # `torus(dims = [])`: a shape with no extent
            return self.error(codes.OUT_OF_RANGE.make(expr.span, field=field, bound=f"a list of at least {ftype.least}",
                                                      value="empty" if not expr.items else f"{len(expr.items)} long"))
        items = tuple(self.typed(item, ftype.item, field) for item in expr.items)
        return INVALID if INVALID in items else items

    def typed_targets(self, expr: ast.Expr, ftype: sc.Targets, field: str) -> Any:
        if isinstance(expr, ast.ListExpr) and not expr.items:  # `on = []`: nowhere to run
            return self.error(codes.OUT_OF_RANGE.make(expr.span, field=field, value="an empty list",
                                                      bound="a cluster, a partition or a list of at least one",
                                                      notes=["help: write `on = Cluster` or `on = [Cluster.part]`"]))
        if isinstance(expr, ast.ListExpr):
            items = tuple(self.target(item, ftype, field) for item in expr.items)
            return INVALID if INVALID in items else items
        return self.target(expr, ftype, field)

    def target(self, expr: ast.Expr, ftype: sc.Targets, field: str) -> Any:
        if not isinstance(expr, ast.Ref) or len(expr.path.parts) > 2:
            return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        first, *rest = expr.path.parts
        cluster = self.declaration(first, ("cluster",), field)
        if cluster is INVALID or not rest:
            return cluster
        partitions = cluster.get("partition") or Record()
        if rest[0].text not in partitions.names():
            return self.error(codes.UNKNOWN_NAME.make(rest[0].span, name=expr.path.text,
                                                      notes=[codes.suggest(rest[0].text, partitions.names()) or
                                                             f"`{first.text}` has partitions: {', '.join(partitions.names()) or 'none'}"]))
        return Partition(cluster, rest[0].text)

    def typed_priority(self, expr: ast.Expr, ftype: sc.Priority, field: str) -> Any:
        value = self.word(expr)
        if isinstance(value, Symbol):
            return self.typed_choice(expr, sc.Choice(ftype.classes), field)
        if isinstance(value, Quantity) and value.dim == sc.u.NONE:
            return self.in_range(expr, sc.COUNT, field, value)
        return self.mismatch(expr, ftype, field, value)

    def param_list(self, expr: ast.Expr) -> ast.ListExpr | None:
        """The list a param holds when `expr` names that param (typed item by item where it is used)."""
        if isinstance(expr, ast.Ref) and len(expr.path.parts) == 1:
            param = self.program.params.get(expr.path.parts[0].text)
            if param is not None and isinstance(param.value, ast.ListExpr):
                return param.value
        return None

    def typed_anything(self, expr: ast.Expr, ftype: sc.Anything, field: str) -> Any:
        if isinstance(expr, ast.ListExpr):  # `param mods = [core_attention, mlp]`: words are keywords here too
            items = tuple(self.typed_anything(item, ftype, field) for item in expr.items)
            return INVALID if INVALID in items else items
        value = self.word(expr)
        if isinstance(value, Structure):  # `param racks = 3 x DGX`: params hold plain values
            return self.error(codes.WRONG_TYPE.make(expr.span, field=field, got=value.what,
                                                    expected="a number, quantity, string, `true`/`false` or word"))
        return value

    def typed_axis(self, expr: ast.Expr, ftype: sc.Axis, field: str) -> Any:
        """`[16, 32, 64]` (each a value a param may hold) or `range(low = .., high = .., step | times = ..)`."""
        if isinstance(expr, ast.Call):
            return self.typed_construct(expr, sc.RANGE, field)
        if not isinstance(expr, ast.ListExpr):
            return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        if not expr.items:
            return self.error(codes.WRONG_TYPE.make(expr.span, field=field, expected=ftype.describe(),
                                                    got="an empty list"))
        items = tuple(self.typed_anything(item, sc.Anything(), field) for item in expr.items)
        return INVALID if INVALID in items else items

    def stray_word(self, expr: ast.Expr, ftype: sc.FieldType, field: str) -> Any:
        """`prompt = fp8`: a keyword (or unit) where a value of another type belongs is told
        by the type expected, not as an unknown name; None when `expr` is no such word."""
        if not (isinstance(expr, ast.Ref) and len(expr.path.parts) == 1):
            return None
        word = expr.path.parts[0].text
        known = list(self.program.params) + list(self.program.declarations)
        if word in known or self.program.broken_imports or codes.suggest(word, known) or not word_notes(word):
            return None
        return self.error(codes.WRONG_TYPE.make(expr.span, field=field, expected=ftype.describe(),
                                                got=f"the word `{word}`", notes=word_notes(word)))


def is_share(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Number) and expr.unit == "%"


def _bound_text(ftype: sc.Qty, percent: bool = False) -> str:
    def show(v):
        return f"{_number_text(v * 100)}%" if percent else format_quantity(Quantity(v, ftype.dim))
    low = None if ftype.low is None else (f"> {show(ftype.low)}" if ftype.low_open else f">= {show(ftype.low)}")
    high = None if ftype.high is None else f"<= {show(ftype.high)}"
    return " and ".join(x for x in (low, high) if x)


def _unit_hint(expr: ast.Expr, ftype: sc.Qty) -> str:
    if isinstance(expr, ast.Number) and expr.unit and ftype.dim == sc.u.BANDWIDTH and "/" not in expr.unit:
        return f"help: a bandwidth is a rate: `{expr.text} {expr.unit}/s`"
    example = sc.u.EXAMPLE_UNITS.get(ftype.dim)
    return f"help: write it in units such as `{example}`" if example else ""


def _number_text(value, digits: int = 3) -> str:
    return format_quantity(Quantity(value), digits)
