"""Editing a design's text in place: set params and fields, or, for parts declared in an
imported file, add derived copies (`chip X_varied extends X { ... }`) and point the file's
references at them. Used by `gclc.testing` to vary a user's own design."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Iterator, Mapping

from ..dsl import ast, parse
from .gcl_tree import _decimal, _terminates

def _value_text(value: Any, old: ast.Expr | None, old_text: str | None) -> str:
    """GCL text for a value; numbers take the unit (and marker) `old` is written with."""
    if callable(value):
        if old_text is None:
            raise ValueError("a function value needs a field that has a value")
        return str(value(old_text))
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Fraction)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a finite number: {value}")
        exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
        marker = None
        if isinstance(old, ast.Marked):
            old, marker = old.operand, old.marker
        unit = old.unit if isinstance(old, ast.Number) else None
        tail = (unit if unit == "%" else f" {unit}") if unit else ""
        if _terminates(exact):
            number = _decimal(exact) + tail
        else:  # `1 / 3 GB` would divide by a quantity: scale one unit instead
            number = f"{exact.numerator} / {exact.denominator}" + (f" * 1{tail}" if unit else "")
        return number + (f" {marker}" if marker else "")
    raise TypeError(f"cannot write {value!r} as GCL")


_Edit = tuple[int, int, str]


def _apply(text: str, edits: list[_Edit]) -> str:
    edits = sorted(edits, key=lambda e: (e[0], e[1]))
    for (s1, e1, _), (s2, _e2, _) in zip(edits, edits[1:]):
        if s2 < e1:
            raise ValueError("overlapping edits (the same field set twice?)")
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text


def _find_member(members: tuple, path: list[str]):
    """The field that sets `path` in these members (dotted or through nested blocks)."""
    for member in members:
        if isinstance(member, ast.Field):
            parts = [p.text for p in member.target.parts]
            if parts == path:
                return member
            if parts == path[: len(parts)] and len(parts) < len(path):
                continue
        elif isinstance(member, ast.Block) and member.label is None and member.name.text == path[0] and len(path) > 1:
            found = _find_member(member.members, path[1:])
            if found is not None:
                return found
    return None


def _closing_brace(text: str, decl: ast.Declaration) -> int:
    at = text.rfind("}", decl.span.start, decl.span.end)
    if at < 0:
        raise ValueError(f"cannot find the end of `{decl.name.text}`")
    return at


def _inherited(program, decl: str, path: list[str]):
    """The effective `FieldEntry` for `decl.path` in a loaded program (None when unset)."""
    from ..compiler.resolve import BlockEntry, FieldEntry

    body = program.bodies.get(decl, {})
    for part in path[:-1]:
        entry = body.get(part)
        if not isinstance(entry, BlockEntry):
            return None
        body = entry.body
    entry = body.get(path[-1])
    return entry if isinstance(entry, FieldEntry) else None


def _expr_text(program, expr: ast.Expr) -> str:
    source = program.sources.get(expr.span.path)
    return source.text[expr.span.start:expr.span.end] if source is not None else ""


def edit_source(text: str, path: str, params: Mapping[str, Any], fields: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """Set params and fields of the design `text` (standing for `path`): (new text, `--set`
    settings for params declared in imported files)."""
    text = text.removeprefix("\ufeff")  # spans count from after a byte-order mark
    module = parse(text, path)
    params_here = {i.name.text: i for i in module.items if isinstance(i, ast.Param)}
    decls_here = {i.name.text: i for i in module.items if isinstance(i, ast.Declaration)}
    edits: list[_Edit] = []
    settings: dict[str, str] = {}
    program = None

    def loaded():
        nonlocal program
        if program is None:
            from ..compiler.resolve import load

            program = load(path, text)
        return program

    for name, value in params.items():
        param = params_here.get(name)
        if param is not None:
            old = text[param.value.span.start:param.value.span.end]
            edits.append((param.value.span.start, param.value.span.end, _value_text(value, param.value, old)))
        elif name in loaded().params:
            p = loaded().params[name]
            settings[name] = _value_text(value, p.value, _expr_text(loaded(), p.value))
        else:
            raise KeyError(f"no param `{name}` in {path}")
    imported: list[tuple[str, list[str], Any]] = []
    for key, value in fields.items():
        decl_name, _, rest = key.partition(".")
        if not rest:
            raise KeyError(f"`{key}` names no field: write `Declaration.field`")
        field_path = rest.split(".")
        decl = decls_here.get(decl_name)
        if decl is None:
            if decl_name not in loaded().declarations:
                raise KeyError(f"no declaration `{decl_name}` in {path} or its imports")
            imported.append((decl_name, field_path, value))
            continue
        member = _find_member(decl.members, field_path)
        if member is not None:
            old = text[member.value.span.start:member.value.span.end]
            edits.append((member.value.span.start, member.value.span.end, _value_text(value, member.value, old)))
        else:
            entry = _inherited(loaded(), decl_name, field_path)
            old_expr = entry.expr if entry is not None else None
            new = _value_text(value, old_expr, _expr_text(loaded(), old_expr) if old_expr is not None else None)
            brace = _closing_brace(text, decl)
            line_start = text.rfind("\n", 0, brace) + 1
            if text[line_start:brace].strip():  # `chip A { ... }` on one line: break before `}`
                edits.append((brace, brace, f"\n  {rest} = {new}\n"))
            else:
                edits.append((line_start, line_start, f"  {rest} = {new}\n"))
    appended = ""
    if imported:
        more, appended = _derive(loaded(), module, text, imported)
        edits += more
    new_text = _apply(text, edits)
    if appended:
        new_text = new_text.rstrip("\n") + "\n\n" + appended
    return new_text, settings


# ------------------------------------------------------------ parts declared in imports


def _references(expr) -> Iterator[ast.Identifier]:
    """The first identifier of every name an expression refers to (parts, params, fields)."""
    if isinstance(expr, ast.Ref):
        yield expr.path.parts[0]
    elif isinstance(expr, ast.Multiplicity):
        yield from _references(expr.count)
        yield expr.part.parts[0]
        for member in expr.overrides or ():
            yield from _member_references(member)
    elif isinstance(expr, ast.BinOp):
        yield from _references(expr.left)
        yield from _references(expr.right)
    elif isinstance(expr, (ast.Neg, ast.Marked)):
        yield from _references(expr.operand)
    elif isinstance(expr, ast.Call):
        for arg in expr.args:
            yield from _references(arg.value)
    elif isinstance(expr, ast.ListExpr):
        for item in expr.items:
            yield from _references(item)


def _member_references(member) -> Iterator[ast.Identifier]:
    if isinstance(member, (ast.Field, ast.Constraint)):
        yield from _references(member.value)
    elif isinstance(member, ast.Block):
        for inner in member.members:
            yield from _member_references(inner)


def _body_entries(body: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    from ..compiler.resolve import BlockEntry

    for key, entry in body.items():
        if isinstance(entry, BlockEntry):
            yield from _body_entries(entry.body, f"{prefix}{key}.")
        else:
            yield prefix + key, entry


def _entry_expr(entry):
    return getattr(entry, "expr", None)


def _body_names(body: dict) -> set[str]:
    return {ident.text for _, entry in _body_entries(body) if _entry_expr(entry) is not None
            for ident in _references(entry.expr)}


def _derive(program, module: ast.Module, text: str, targets: list[tuple[str, list[str], Any]]) -> tuple[list[_Edit], str]:
    """Overrides of parts declared in imported files: a derived copy of each part that
    (through references) holds an overridden field and is used by this file, with this
    file's references pointed at the copies."""
    decls = program.declarations
    root = program.root
    local = {n for n, d in decls.items() if d.span.path == root}

    def ancestors(name: str) -> list[str]:
        out, seen = [], {name}
        parent = decls[name].parent
        while parent is not None and parent.text in decls and parent.text not in seen:
            out.append(parent.text)
            seen.add(parent.text)
            parent = decls[parent.text].parent
        return out

    names = {n: _body_names(program.bodies.get(n, {})) for n in decls}
    own_entry = {(x, tuple(p)): _inherited(program, x, p) for x, p, _ in targets}

    def sets_target(d: str) -> list[tuple[str, list[str], Any]]:
        return [(x, p, v) for x, p, v in targets
                if d == x or (x in ancestors(d) and _inherited(program, d, p) is own_entry[(x, tuple(p))])]

    changed = {x for x, _, _ in targets}
    grew = True
    while grew:
        grew = False
        for d in decls:
            if d in changed or d in local:
                continue
            if names[d] & changed or sets_target(d):
                changed.add(d)
                grew = True
    # Keep the copies this file uses (directly, or through the parts it uses).
    frontier = set()
    for d in local:
        frontier |= names[d]
        if decls[d].parent is not None:
            frontier.add(decls[d].parent.text)
    for item in module.items:
        if isinstance(item, ast.Param):
            frontier |= {i.text for i in _references(item.value)}
    used, stack = set(), [n for n in frontier if n in decls and n not in local]
    while stack:
        d = stack.pop()
        if d in used:
            continue
        used.add(d)
        nxt = set(names[d]) | ({decls[d].parent.text} if decls[d].parent is not None else set())
        stack.extend(n for n in nxt if n in decls and n not in local)
    copies = [d for d in decls if d in changed and d in used]
    if not copies:
        unused = ", ".join(sorted({x for x, _, _ in targets}))
        raise KeyError(f"{root} does not use `{unused}` (declared in an imported file), so varying it changes nothing")
    taken = set(decls) | set(program.params)
    rename: dict[str, str] = {}
    for d in copies:
        new = f"{d}_varied"
        k = 2
        while new in taken:
            new, k = f"{d}_varied{k}", k + 1
        taken.add(new)
        rename[d] = new

    def renamed(expr) -> str:
        source = program.sources[expr.span.path].text
        base = expr.span.start
        local_edits = [(i.span.start - base, i.span.end - base, rename[i.text]) for i in _references(expr)
                       if i.text in rename]
        return _apply(source[expr.span.start:expr.span.end], local_edits)

    blocks = []
    for d in copies:
        decl = decls[d]
        members, done = [], set()
        for x, p, value in sets_target(d):
            entry = own_entry[(x, tuple(p))]
            old_expr = entry.expr if entry is not None else None
            old_text = _expr_text(program, old_expr) if old_expr is not None else None
            members.append(f"{'.'.join(p)} = {_value_text(value, old_expr, old_text)}")
            done.add(".".join(p))
        for key, entry in _body_entries(program.bodies.get(d, {})):
            expr = _entry_expr(entry)
            if key in done or expr is None or not any(i.text in rename for i in _references(expr)):
                continue
            if " " in key or not hasattr(entry, "name"):
                raise NotImplementedError(f"cannot derive `{d}`: `{key}` refers to a varied part")
            members.append(f"{key} = {renamed(expr)}")
        body = "\n".join(f"  {m}" for m in members)
        blocks.append(f"{decl.kind.text} {rename[d]} extends {d} {{  # gclc.testing: varied copy\n{body}\n}}\n")
    edits: list[_Edit] = []
    for item in module.items:
        if isinstance(item, ast.Declaration):
            if item.parent is not None and item.parent.parts[0].text in rename:
                ident = item.parent.parts[0]
                edits.append((ident.span.start, ident.span.end, rename[ident.text]))
            for member in item.members:
                edits += [(i.span.start, i.span.end, rename[i.text]) for i in _member_references(member)
                          if i.text in rename]
        elif isinstance(item, ast.Param):
            edits += [(i.span.start, i.span.end, rename[i.text]) for i in _references(item.value) if i.text in rename]
    return edits, "\n".join(blocks)
