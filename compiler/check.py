"""Checking: every declaration's effective body against its kind's schema.

Walks `schema.KINDS`, reports unknown and missing fields with suggestions, types each
field's value (`field_types.FieldTyper`), resolves names and params (with cycles found),
runs each kind's rules (`rules`), and builds the typed `Design`.
"""

from __future__ import annotations

from typing import Any

from ..dsl import ast
from ..dsl.source import Span
from ..dsl import codes
from . import schema as sc
from .design import Bound, Design, Entity, Item, Record
from ..dsl.diagnostics import Diagnostic, Label, sort_unique
from .evaluate import INVALID, Evaluator, describe_value
from .field_types import FieldTyper, is_share
from .names import unknown_name_notes, word_notes
from .references import prefetch
from .resolve import BlockEntry, Body, ConstraintEntry, FieldEntry, Program
from .rules.entity import check_entity
from .settings import apply_settings
from ..dsl.units import Quantity, UNITS


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


class Checker(FieldTyper):
    def __init__(self, program: Program):
        self.program = program
        self.diagnostics: list[Diagnostic] = []
        self.evaluator = Evaluator(self.diagnostics, self.lookup)
        self.entities: dict[str, Entity | None] = {}
        self.values: dict[tuple[str, str], Any] = {}
        self.active: list[str] = []  # what is being evaluated, for cycle reports
        self.active_keys: set[tuple[str, str]] = set()
        self.dependencies: dict[tuple[str, str], list] = {}  # compiler/references.py
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
        entity = Entity(kind, decl.name.text, record, span, parent, self.ancestors(decl))
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
                                                        notes=[f"help: write `{key} {{ {_required(block.blocks[key])} }}`"])
                                  ) and None
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
        if target == "memory" and is_share(entry.expr):
            ftype = sc.SHARE  # `memory <= 90%` is a share of HBM
        value = self.typed(entry.expr, ftype, target)
        return None if value is INVALID else Item(f"{target} {entry.op}", Bound(target, entry.op, value), entry.span)

    def unknown(self, name: ast.Identifier, key: str, block: sc.Block, where: str) -> None:
        known = list(block.fields) + list(block.blocks) + list(block.labelled)
        owner = self.inherited_from(name.span)
        if owner is not None and self.building and where == self.building[1]:
            where = f"{owner.kind.text} `{owner.name.text}`"  # the same words as the parent's own report
        inner = next((b for b, sub in block.blocks.items() if key in sub.fields), None)
        note = (f"help: `{key}` is a field of the `{inner}` block: write `{inner} {{ {key} = ... }}`" if inner
                else codes.suggest(key, known) or f"{where} has: {', '.join(known)}")
        self.error(codes.UNKNOWN_FIELD.make(name.span, field=key, where=where, notes=[note]))
        return None

    def ancestors(self, decl: ast.Declaration) -> tuple[str, ...]:
        """The names `decl` extends, nearest first (a cycle or an unknown parent ends the chain: reported elsewhere)."""
        out: list[str] = []
        while decl.parent is not None and decl.parent.text not in out and decl.parent.text != decl.name.text:
            out.append(decl.parent.text)
            decl = self.program.declarations.get(decl.parent.text)
            if decl is None:
                break
        return tuple(out)

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

    def check_overrides(self) -> None:
        """A `--set` value must have the type (and dimension) of the value it replaces."""
        for name, original in self.program.overridden.items():
            listed = isinstance(original, ast.ListExpr)  # a list of words holds keywords, as the param does
            before = self.typed_anything(original, sc.Anything(), name) if listed else self.word(original)
            after = self.param(name)
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
        if key in self.active_keys:
            cycle = " -> ".join(self.active[self.active.index(label):] + [label])
            self.values[key] = INVALID
            return self.error(codes.REFERENCE_CYCLE.make(self._span_of(key), name=label, cycle=cycle))
        prefetch(self, key)  # what it refers to first, deepest first: no recursion down a chain
        if key in self.values:  # a loop through it was found and reported
            return self.values[key]
        self.active.append(label)
        self.active_keys.add(key)
        try:
            self.values[key] = value = compute()
        finally:
            self.active.pop()
            self.active_keys.discard(key)
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
HOLE_SAFE_RULES = frozenset({"fabric", "train", "serve", "workload", "rl"})


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


def _required(block: sc.Block) -> str:
    """The fields a block cannot do without, as a template: `routed = ...  top_k = ...`."""
    return "  ".join(f"{name} = ..." for name in block.required) or "..."


def _field_hint(name: str, block: sc.Block) -> str:
    others = " or ".join(", ".join(f"`{a}`" for a in group) for group in block.alternatives.get(name, ()))
    instead = f" (or give {others} to derive it)" if others else ""
    if name in block.blocks:
        return f"help: add `{name} {{ ... }}`{instead}"
    ftype = block.fields.get(name)
    return f"help: add `{name} = ...`, {ftype.describe()}{instead}" if ftype else ""
