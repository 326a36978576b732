"""Checking: every declaration's effective body against its kind's schema.

Walks `schema.KINDS`, evaluates each field with the type it expects, reports unknown,
missing and ill-typed fields with suggestions, and builds the typed `Design`.
"""

from __future__ import annotations

from typing import Any

from ..dsl import ast
from ..dsl.source import Span
from ..dsl import codes
from . import schema as sc
from .design import Bound, Construct, Design, Entity, Item, Partition, Record, Repeat, Symbol
from ..dsl.diagnostics import Diagnostic, Label, sort_unique
from .evaluate import INVALID, Evaluator, Structure, describe_value, symbol_of
from .names import unknown_name_notes, word_notes
from .resolve import BlockEntry, Body, ConstraintEntry, FieldEntry, Program, build_body, merge
from .rules import check_entity
from .settings import apply_settings
from ..dsl.units import Quantity, UNITS, format_quantity


def check_program(program: Program, settings: dict[str, str] | None = None,
                  reachable: bool = False) -> tuple[Design | None, tuple[Diagnostic, ...]]:
    """The typed design (None when there are errors) and all diagnostics, sorted. With
    `reachable`, only the root file's declarations and what they use are checked: a sweep
    checks the whole design once, then each point's changes."""
    checker = Checker(program)
    apply_settings(program, settings or {}, checker.diagnostics)
    checker.check_overrides()  # first, so that a refused override is reported once, not at every use
    names = [n for n, d in program.declarations.items() if not reachable or d.span.path == program.root]
    for name in names:
        checker.entity(name)
    entities = [checker.entities.get(name) for name in program.declarations]
    checker.diagnostics.extend(_sweep_axes(entities, program))
    params = [Item(name, checker.param(name), p.span) for name, p in program.params.items()]
    diagnostics = sort_unique(program.diagnostics + checker.diagnostics)
    if any(d.is_error for d in diagnostics):
        return None, diagnostics
    design = Design(tuple(e for e in entities if e is not None), tuple(params),
                    tuple(program.sources.values()), program.root)
    return design, diagnostics


class Checker:
    def __init__(self, program: Program):
        self.program = program
        self.diagnostics: list[Diagnostic] = []
        self.evaluator = Evaluator(self.diagnostics, self.lookup)
        self.entities: dict[str, Entity | None] = {}
        self.values: dict[tuple[str, str], Any] = {}
        self.active: list[str] = []  # what is being evaluated, for cycle reports
        self.partial = False  # building a declaration whose `extends` failed: fields may be missing
        self.holes = False  # a field of the declaration being built had an invalid value
        self.building: tuple[ast.Declaration, str] | None = None  # and how messages name it

    def error(self, diagnostic: Diagnostic) -> Any:
        self.diagnostics.append(diagnostic)
        return INVALID

    # ------------------------------------------------------------ declarations
    def entity(self, name: str) -> Entity | None:
        if name not in self.entities:
            decl = self.program.declarations[name]
            self.entities[name] = None  # a placeholder while building breaks reference loops
            entity = self.build(decl, self.program.bodies[name], decl.span)
            self.entities[name] = entity
        return self.entities[name]

    def build(self, decl: ast.Declaration, body: Body, span: Span) -> Entity:
        kind = decl.kind.text
        where = f"{kind} `{decl.name.text}`"
        saved = (self.partial, self.holes, self.building)
        self.partial, self.holes, self.building = decl.name.text in self.program.broken_extends, False, (decl, where)
        try:
            record = self.record(body, sc.KINDS[kind], where, decl.name.span)
            holes = self.holes
        finally:
            self.partial, self.holes, self.building = saved
        parent = decl.parent.text if decl.parent else None
        entity = Entity(kind, decl.name.text, record, span, parent)
        if not holes or kind in HOLE_SAFE_RULES:  # a rule on a record with holes would report only the holes
            self.diagnostics.extend(check_entity(entity, complete=not holes))
        return entity

    def record(self, body: Body, block: sc.Block, where: str, at: Span) -> Record:
        items = [self.entry(key, entry, block, where) for key, entry in body.items()]
        invalid = None in items
        items = _group_labelled([i for i in items if i is not None])
        unknown = [key for key, entry in body.items() if key not in block.fields and key not in block.blocks
                   and not isinstance(entry, ConstraintEntry) and key.partition(" ")[0] not in block.labelled
                   and block.free is None]
        absent = [name for name in block.required if name not in body
                  and not any(all(a in body for a in group) for group in block.alternatives.get(name, ()))]
        self.holes = self.holes or bool(absent) or invalid
        missing = [name for name in absent if not self.partial
                   and not any(codes.suggest(key, [name]) for key in unknown)]  # `bandwdith` is said once
        if missing:
            names = [f"`{name}`" for name in missing]
            listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            self.error(codes.MISSING_FIELD.make(at, field=listed, where=where, label="declared here",
                                                notes=[_field_hint(name, block) for name in missing]))
        return Record(tuple(items))

    def entry(self, key: str, entry, block: sc.Block, where: str) -> Item | None:
        if isinstance(entry, FieldEntry):
            return self.field_entry(key, entry, block, where)
        if isinstance(entry, ConstraintEntry):
            return self.constraint_entry(entry, block, where)
        if key in block.blocks:
            inner = self.record(entry.body, block.blocks[key], f"`{key}`", entry.name.span)
            return Item(key, inner, entry.span)
        if entry.label is not None and entry.name.text in block.labelled:
            inner = self.record(entry.body, block.labelled[entry.name.text], f"`{key}`", entry.label.span)
            return Item(key, inner, entry.span)
        if key in block.fields:
            return self.error(codes.WRONG_TYPE.make(entry.name.span, field=key, expected=block.fields[key].describe(),
                                                    got="a block")) and None
        return self.unknown(entry.name, key, block, where)

    def field_entry(self, key: str, entry: FieldEntry, block: sc.Block, where: str) -> Item | None:
        ftype = block.fields.get(key) or (block.free if key not in block.blocks else None)
        if ftype is None:
            if key in block.blocks:
                return self.error(codes.WRONG_TYPE.make(entry.name.span, field=key, expected="a block",
                                                        got="a single value",
                                                        notes=[f"help: write `{key} {{ ... }}`"])) and None
            return self.unknown(entry.name, key, block, where)
        value = self.typed(entry.expr, ftype, key)
        return None if value is INVALID else Item(key, value, entry.span)

    def constraint_entry(self, entry: ConstraintEntry, block: sc.Block, where: str) -> Item | None:
        target = entry.target.text
        ftype = block.constraints.get(target)
        if ftype is None:
            notes = [codes.suggest(target, block.constraints) or
                     (f"help: `{where}` takes constraints on {', '.join(block.constraints)}" if block.constraints
                      else "help: constraints belong in `subject to { ... }`")]
            return self.error(codes.BAD_CONSTRAINT.make(entry.target.span, target=target, notes=notes)) and None
        if target == "memory" and _is_share(entry.expr):
            ftype = sc.SHARE  # `memory <= 90%` is a share of HBM
        value = self.typed(entry.expr, ftype, target)
        return None if value is INVALID else Item(f"{target} {entry.op}", Bound(target, entry.op, value), entry.span)

    def unknown(self, name: ast.Identifier, key: str, block: sc.Block, where: str) -> None:
        known = list(block.fields) + list(block.blocks) + list(block.labelled)
        owner = self.inherited_from(name.span)
        if owner is not None and self.building and where == self.building[1]:
            where = f"{owner.kind.text} `{owner.name.text}`"  # the same words as the parent's own report
        note = codes.suggest(key, known) or f"{where} has: {', '.join(known)}"
        self.error(codes.UNKNOWN_FIELD.make(name.span, field=key, where=where, notes=[note]))
        return None

    def inherited_from(self, span: Span) -> ast.Declaration | None:
        """The ancestor (by `extends`) of the declaration being built that wrote `span`."""
        if self.building is None:
            return None
        decl, seen = self.building[0], set()
        while decl.parent is not None and decl.name.text not in seen:
            seen.add(decl.name.text)
            decl = self.program.declarations.get(decl.parent.text)
            if decl is None:
                return None
            if decl.span.path == span.path and decl.span.start <= span.start < decl.span.end:
                return decl
        return None

    # ------------------------------------------------------------ typed values
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
            percent = _is_share(expr) and ftype.dim == sc.u.NONE  # `105%` is told in percent
            shown = f"{_number_text(value.value * 100)}%" if percent else format_quantity(value)
            return self.error(codes.OUT_OF_RANGE.make(expr.span, field=field, bound=_bound_text(ftype, percent),
                                                      value=shown))
        if ftype.integer and value.value.denominator != 1:
            return self.error(codes.NOT_INTEGER.make(expr.span, field=field, value=format_quantity(value)))
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
        value = self.word(expr)
        if isinstance(value, Symbol):
            if value.name in ftype.options:
                return value
            return self.error(codes.BAD_CHOICE.make(expr.span, value=value.name, field=field,
                                                    notes=[codes.suggest(value.name, ftype.options),
                                                           f"`{field}` is {ftype.describe()}"]))
        return self.mismatch(expr, ftype, field, value)

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
        count = self.typed_qty(expr.count, sc.COUNT, f"count of `{field}`")
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
        return self.typed_qty(expr, sc.COUNT, field)

    def typed_listof(self, expr: ast.Expr, ftype: sc.ListOf, field: str) -> Any:
        if not isinstance(expr, ast.ListExpr):
            return self.mismatch(expr, ftype, field, self.evaluator.eval(expr))
        if len(expr.items) < ftype.least:  # `torus(dims = [])`: a shape with no extent
            return self.error(codes.OUT_OF_RANGE.make(expr.span, field=field, bound=f"a list of at least {ftype.least}",
                                                      value="empty" if not expr.items else f"{len(expr.items)} long"))
        items = tuple(self.typed(item, ftype.item, field) for item in expr.items)
        return INVALID if INVALID in items else items

    def typed_targets(self, expr: ast.Expr, ftype: sc.Targets, field: str) -> Any:
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

    def typed_anything(self, expr: ast.Expr, ftype: sc.Anything, field: str) -> Any:
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

    def check_overrides(self) -> None:
        """A `--set` value must have the type (and dimension) of the value it replaces."""
        for name, original in self.program.overridden.items():
            before, after = self.word(original), self.param(name)
            if INVALID in (before, after) or _same_type(before, after):
                continue
            self.error(codes.SETTING_TYPE.make(self.program.params[name].value.span, name=name,
                                               expected=describe_value(before), got=describe_value(after),
                                               labels=[Label(original.span, "the param's own value")]))
            self.values[("", name)] = INVALID

    # ------------------------------------------------------------ names
    def lookup(self, ref: ast.Ref) -> Any:
        first, *rest = ref.path.parts
        if first.text in self.program.params and not rest:
            return self.param(first.text)
        if first.text in self.program.declarations:
            return self.field_of(first.text, rest, ref) if rest else self.entity(first.text) or INVALID
        if self.program.broken_imports or first.text in self.program.unknown_kinds:
            return INVALID  # declared in a file that failed to load, or with a misspelled kind: said already
        names = list(self.program.params) + list(self.program.declarations)
        notes = word_notes(first.text) if first.text in UNITS else unknown_name_notes(first.text, names, None, "names")
        return self.error(codes.UNKNOWN_NAME.make(first.span, name=first.text, notes=notes))

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

    def param(self, name: str) -> Any:
        return self.memo(("", name), lambda: self.typed(self.program.params[name].value, sc.Anything(), name))

    def field_of(self, decl: str, path: list[ast.Identifier], ref: ast.Ref) -> Any:
        body, block = self.program.bodies[decl], sc.KINDS[self.program.declarations[decl].kind.text]
        for i, part in enumerate(path):
            entry = body.get(part.text)
            last = i == len(path) - 1
            if last and isinstance(entry, FieldEntry) and part.text in block.fields:
                key = (decl, ".".join(p.text for p in path))
                return self.memo(key, lambda: self.typed(entry.expr, block.fields[part.text], part.text))
            if last or not isinstance(entry, BlockEntry) or part.text not in block.blocks:
                return self.error(codes.UNKNOWN_FIELD.make(part.span, field=part.text, where=f"`{decl}`",
                                                           notes=[codes.suggest(part.text, body)]))
            body, block = entry.body, block.blocks[part.text]
        return INVALID

    def memo(self, key: tuple[str, str], compute) -> Any:
        label = ".".join(k for k in key if k)
        if key in self.values:
            return self.values[key]
        if label in self.active:
            cycle = " -> ".join(self.active[self.active.index(label):] + [label])
            self.values[key] = INVALID
            return self.error(codes.REFERENCE_CYCLE.make(self._span_of(key), name=label, cycle=cycle))
        self.active.append(label)
        try:
            self.values[key] = value = compute()
        finally:
            self.active.pop()
        return value

    def _span_of(self, key: tuple[str, str]) -> Span:
        decl, name = key
        if not decl:
            return self.program.params[name].name.span
        entry: Any = BlockEntry(self.program.declarations[decl].name, None, self.program.bodies[decl], None)
        for part in name.split("."):
            entry = entry.body.get(part) if isinstance(entry, BlockEntry) else None
        return entry.name.span if entry is not None else self.program.declarations[decl].name.span


def _sweep_axes(entities: list[Entity | None], program: Program) -> list[Diagnostic]:
    """Each field of a `sweep` block (but `pareto`) names a param of the design."""
    return [codes.UNKNOWN_AXIS.make(item.span, sweep=e.name, name=item.name,
                                    notes=[codes.suggest(item.name, program.params)])
            for e in entities if e is not None and e.kind == "sweep"
            for item in e.record.items if item.name != "pareto" and item.name not in program.params]


# Kinds whose rules look only at fields that are present, so they may run on a record
# with holes (an invalid or missing field) without reporting a consequence of the hole.
HOLE_SAFE_RULES = frozenset({"fabric", "train", "serve", "workload"})


def _group_labelled(items: list[Item]) -> list[Item]:
    """`partition a {}` `partition b {}` -> one item `partition` holding records `a` and `b`."""
    out: list[Item] = []
    groups: dict[str, list[Item]] = {}
    for item in items:
        head, _, label = item.name.partition(" ")
        if label and head != "subject" and not isinstance(item.value, Bound):
            if head not in groups:
                groups[head] = []
                out.append(Item(head, None, item.span))
            groups[head].append(Item(label, item.value, item.span))
        else:
            out.append(item)
    return [Item(i.name, Record(tuple(groups[i.name])), i.span) if i.name in groups and i.value is None else i
            for i in out]


def _same_type(a: Any, b: Any) -> bool:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.dim == b.dim
    if isinstance(a, Entity) and isinstance(b, Entity):
        return a.kind == b.kind  # a part swap keeps the kind: a node for a node
    return type(a) is type(b)


def _is_share(expr: ast.Expr) -> bool:
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


def _field_hint(name: str, block: sc.Block) -> str:
    others = " or ".join(", ".join(f"`{a}`" for a in group) for group in block.alternatives.get(name, ()))
    instead = f" (or give {others} to derive it)" if others else ""
    if name in block.blocks:
        return f"help: add `{name} {{ ... }}`{instead}"
    ftype = block.fields.get(name)
    return f"help: add `{name} = ...`, {ftype.describe()}{instead}" if ftype else ""


def _number_text(value) -> str:
    return format_quantity(Quantity(value))
