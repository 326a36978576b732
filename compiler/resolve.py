"""Loading and name resolution: files and imports (reading one file is `compiler/files.py`),
the symbol table, `extends` chains.

Imports are hermetic: a path is either `std/...` (the shipped library) or relative to
the importing file's folder, never absolute and never through `..`. The result is a
`Program`: every declaration's *effective body* (its parents' members with its own
overrides applied), ready for evaluation and checking.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Union

import attrs

from ..dsl import ParseError, ast, parse
from ..dsl.source import SourceFile, Span, source_text
from ..dsl import codes
from ..dsl.diagnostics import Diagnostic, Label, has_errors
from .files import MAX_DESIGN_BYTES, MAX_SOURCE_BYTES, Budget, read_bounded, read_text, shown_path, unreadable_help
from .names import unknown_name_notes
from ..dsl.records import define

STD_ROOT = Path(__file__).resolve().parent.parent / "dsl" / "std"
KINDS = ("chip", "cpu", "nic", "dpu", "switch", "node", "supernode", "fabric",
         "cluster", "model", "train", "serve", "sweep", "workload", "tenant", "scheduler", "rl")


# ----------------------------------------------------------------- effective bodies


@define
class FieldEntry:
    name: ast.Identifier
    expr: ast.Expr
    span: Span


@define
class BlockEntry:
    name: ast.Identifier
    label: ast.Identifier | None
    body: dict[str, "Entry"]
    span: Span


@define
class ConstraintEntry:
    target: ast.Dotted
    op: str
    expr: ast.Expr
    span: Span


Entry = Union[FieldEntry, BlockEntry, ConstraintEntry]
Body = dict[str, Entry]


def build_body(members: tuple[ast.Member, ...], diagnostics: list[Diagnostic], where: str) -> Body:
    """Members -> entries keyed by name; dotted targets (`power.tdp`) nest."""
    body: Body = {}
    for member in members:
        if isinstance(member, ast.Field):
            _insert_field(body, member, diagnostics, where)
        elif isinstance(member, ast.Constraint):
            key = f"{member.target.text} {member.op}"
            _put(body, key, ConstraintEntry(member.target, member.op, member.value, member.span),
                 member.target.span, diagnostics, where)
        else:
            key = member.name.text if member.label is None else f"{member.name.text} {member.label.text}"
            inner = build_body(member.members, diagnostics, f"`{key}`")
            _put(body, key, BlockEntry(member.name, member.label, inner, member.span),
                 member.name.span, diagnostics, where)
    return body


def _insert_field(body: Body, field: ast.Field, diagnostics: list[Diagnostic], where: str) -> None:
    *heads, last = field.target.parts
    for head in heads:
        entry = body.get(head.text)
        if not isinstance(entry, BlockEntry):
            entry = BlockEntry(head, None, {}, head.span)
            if head.text in body:
                _put(body, head.text, entry, head.span, diagnostics, where)
            body[head.text] = entry
        body, where = entry.body, f"`{head.text}`"
    _put(body, last.text, FieldEntry(last, field.value, field.span), field.target.span, diagnostics, where)


def _put(body: Body, key: str, entry: Entry, span: Span, diagnostics: list[Diagnostic], where: str) -> None:
    first = body.get(key)
    if first is not None:
        diagnostics.append(codes.DUPLICATE_FIELD.make(
            span, field=key, where=where, label="set again here",
            labels=[Label(_key_span(first), "first set here")]))
        return
    body[key] = entry


def _key_span(entry: Entry) -> Span:
    return entry.target.span if isinstance(entry, ConstraintEntry) else entry.name.span


# A field whose restatement drops what was written beside it: a data sheet's `hbm.nominal`
# names the `capacity` it came with, not a variant's other memory (`H100_SXM { hbm.capacity = 96 GB }`).
_COMPANIONS = {"capacity": ("nominal",)}


def merge(parent: Body, child: Body) -> Body:
    """`child` over `parent`: fields replace, blocks merge member by member."""
    out: Body = dict(parent)
    for key, companions in _COMPANIONS.items():
        if key in child:
            for companion in companions:
                if companion not in child:
                    out.pop(companion, None)
    for key, entry in child.items():
        base = out.get(key)
        if isinstance(base, BlockEntry) and isinstance(entry, BlockEntry):
            entry = BlockEntry(entry.name, entry.label, merge(base.body, entry.body), entry.span)
        out[key] = entry
    return out


# ----------------------------------------------------------------- the program


@define
class Program:
    root: str
    sources: dict[str, SourceFile] = attrs.Factory(dict)
    modules: list[ast.Module] = attrs.Factory(list)
    declarations: dict[str, ast.Declaration] = attrs.Factory(dict)
    params: dict[str, ast.Param] = attrs.Factory(dict)
    bodies: dict[str, Body] = attrs.Factory(dict)
    overridden: dict[str, ast.Expr] = attrs.Factory(dict)  # param -> its value before `--set`
    diagnostics: list[Diagnostic] = attrs.Factory(list)
    # Declarations whose `extends` failed (so fields may be missing only because of it),
    # and whether an imported file failed to load (so names may be unknown only because of it).
    broken_extends: set[str] = attrs.Factory(set)
    broken_imports: bool = False
    unknown_kinds: set[str] = attrs.Factory(set)  # names declared with a misspelled kind (`chp H100`)


def load(path: str, text: str | None = None) -> Program:
    """Read `path` (or use `text` for it), follow imports, build effective bodies."""
    return _load(path, text)[0]


def _load(path: str, text: str | None) -> tuple[Program, tuple[tuple[Path, bytes], ...]]:
    program = Program(root=path)
    loader = _Loader(program)
    loader.load(path, Path(path), text, [])
    _collect_symbols(program)
    _resolve_extends(program)
    return program, tuple(loader.read)


_LOADED: dict[str, tuple[tuple[tuple[Path, bytes], ...], Program]] = {}


def load_again(path: str) -> Program:
    """`load(path)` for a design loaded before in this process (a sweep's next point): the
    files are read again and, when none changed, the resolved program is reused. The copy
    has its own params, sources and overrides, which `--set` changes."""
    cached = _LOADED.get(path)
    if cached is None or not all(_read(real) == data for real, data in cached[0]):
        program, read = _load(path, None)
        if has_errors(program.diagnostics):
            return program
        cached = _LOADED[path] = (read, program)
    base = cached[1]
    return attrs.evolve(base, sources=dict(base.sources), params=dict(base.params), overridden=dict(base.overridden),
                        diagnostics=list(base.diagnostics))


def _read(real: Path) -> bytes | None:
    try:
        return read_bounded(real, MAX_SOURCE_BYTES, "too large")
    except OSError:
        return None


class _Loader:
    def __init__(self, program: Program):
        self.program = program
        self.done: set[Path] = set()
        self.read: list[tuple[Path, bytes]] = []  # every file read, to tell whether a cached load is stale
        self.budget = Budget()  # bytes left for the design and all its imports together

    def load(self, display: str, real: Path, text: str | None, stack: list[tuple[Path, Span | None]]) -> None:
        key = _resolved(real) if text is None else Path(display)
        if key in self.done:
            return
        self.done.add(key)
        if text is not None and len(text) > self.budget.left:  # the editor's buffer: bounded like a file
            self.program.diagnostics.append(attrs.evolve(codes.IO_ERROR.make(None, path=display, reason=(
                f"it is {len(text):,} characters; a design may hold at most {MAX_DESIGN_BYTES:,} bytes")), file=display))
            self.program.broken_imports = True
            return
        if text is not None:
            self.budget.left -= len(text)
        if text is None:
            text = read_text(display, real, stack[-1][1] if stack else None, self.program.diagnostics,
                             self.program.sources, self.budget)
            if text is None:
                self.program.broken_imports = True
                return
            self.read.append((real, text.encode("utf-8")))
        self.program.sources[display] = SourceFile(display, source_text(text))
        try:
            module = parse(text, display)
        except ParseError as error:
            self.program.diagnostics.extend(error.diagnostics)
            self.program.broken_imports = True
            return
        self.program.modules.append(module)
        for item in module.items:
            if isinstance(item, ast.Import):
                self.follow(item, real, stack + [(key, item.span)])

    def follow(self, item: ast.Import, importer: Path, stack: list[tuple[Path, Span | None]]) -> None:
        target = import_target(item, importer, self.program.diagnostics)
        if target is None:
            self.program.broken_imports = True
            return
        display, real = target
        chain = [p for p, _ in stack]
        if _resolved(real) in chain:
            cycle = " -> ".join(p.name for p in chain[chain.index(_resolved(real)):] + [_resolved(real)])
            self.program.diagnostics.append(codes.IMPORT_CYCLE.make(item.span, cycle=cycle, label="closes the cycle"))
            return
        self.load(display, real, None, stack)


def import_target(item: ast.Import, importer: Path, diagnostics: list[Diagnostic]) -> tuple[str, Path] | None:
    raw = item.path
    pure = PurePosixPath(raw if raw.endswith(".gcl") else raw + ".gcl")
    if pure.is_absolute() or ".." in pure.parts or "\\" in raw or ":" in raw:
        diagnostics.append(codes.IMPORT_ESCAPE.make(
            item.span, path=raw, notes=["help: import `std/...` or a path below this file's folder, without `..`"]))
        return None
    if pure.parts and pure.parts[0] == "std":
        root, display = STD_ROOT, str(pure)
        real = STD_ROOT.joinpath(*pure.parts[1:])
    else:
        root = importer.parent
        real = root.joinpath(*pure.parts)
        display = os.path.normpath(os.path.join(os.path.dirname(_display_of(importer)), str(pure)))
    try:
        found, inside = real.is_file(), real.resolve().is_relative_to(root.resolve())
    except OSError as error:  # a name too long for the file system, a link loop
        diagnostics.append(codes.IO_ERROR.make(item.span, path=shown_path(raw), reason=error.strerror or str(error),
                                               notes=unreadable_help(raw, real, error)))
        return None
    if not found:
        options = sorted(p.stem for p in STD_ROOT.glob("*.gcl"))
        note = f"the standard library has: {', '.join('std/' + o for o in options)}" if str(pure).startswith("std/") else ""
        diagnostics.append(codes.IMPORT_NOT_FOUND.make(item.span, path=raw, notes=[note]))
        return None
    if not inside:
        diagnostics.append(codes.IMPORT_ESCAPE.make(item.span, path=raw, notes=["help: a link leads outside the folder"]))
        return None
    return display, real


def _display_of(path: Path) -> str:
    return str(path)


def _resolved(path: Path) -> Path:
    """`path` with links followed, or as it is when the file system refuses (a name too long)."""
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


# ----------------------------------------------------------------- symbols


def _collect_symbols(program: Program) -> None:
    seen: dict[str, Span] = {}
    for module in program.modules:
        for item in module.items:
            if isinstance(item, ast.Import):
                continue
            name = item.name
            if name.text in seen:
                program.diagnostics.append(codes.DUPLICATE.make(
                    name.span, name=name.text, label="declared again here",
                    labels=[Label(seen[name.text], "first declared here")],
                    notes=["help: rename one, or derive a variant with `extends`"]))
                continue
            seen[name.text] = name.span
            if isinstance(item, ast.Param):
                program.params[name.text] = item
            elif item.kind.text not in KINDS:
                program.unknown_kinds.add(name.text)  # uses of the name are not reported again
                program.diagnostics.append(codes.UNKNOWN_KIND.make(
                    item.kind.span, kind=item.kind.text, notes=[codes.suggest(item.kind.text, KINDS)]))
            else:
                program.declarations[name.text] = item


def _resolve_extends(program: Program) -> None:
    for name in program.declarations:
        _effective(program, name, [])


def _effective(program: Program, name: str, chain: list[str]) -> Body:
    if name in program.bodies:
        return program.bodies[name]
    decl = program.declarations[name]
    own = build_body(decl.members, program.diagnostics, f"{decl.kind.text} `{name}`")
    body = own
    if decl.parent is not None:
        parent = _parent(program, decl, chain + [name])
        if parent is None:
            program.broken_extends.add(name)
        else:
            body = merge(_effective(program, parent.name.text, chain + [name]), own)
            if parent.name.text in program.broken_extends:
                program.broken_extends.add(name)
    program.bodies[name] = body
    return body


def _parent(program: Program, decl: ast.Declaration, chain: list[str]) -> ast.Declaration | None:
    ref = decl.parent
    assert ref is not None
    parent = program.declarations.get(ref.text)
    if parent is None:
        if program.broken_imports or ref.text in program.unknown_kinds:
            return None  # most likely declared in the file that failed to load
        names = [n for n, d in program.declarations.items() if d.kind.text == decl.kind.text and d is not decl]
        program.diagnostics.append(codes.UNKNOWN_NAME.make(ref.span, name=ref.text, notes=unknown_name_notes(
            ref.text, names, (decl.kind.text,), f"{decl.kind.text}s")))
        return None
    if ref.text in chain:
        cycle = " -> ".join(chain[chain.index(ref.text):] + [ref.text])
        program.diagnostics.append(codes.EXTENDS_CYCLE.make(ref.span, name=ref.text, cycle=cycle,
                                                            label="closes the cycle"))
        return None
    if parent.kind.text != decl.kind.text:
        program.diagnostics.append(codes.EXTENDS_KIND.make(
            ref.span, kind=decl.kind.text, name=decl.name.text, parent_kind=parent.kind.text,
            parent=ref.text, labels=[Label(parent.kind.span, f"`{ref.text}` is a {parent.kind.text}")]))
        return None
    return parent
