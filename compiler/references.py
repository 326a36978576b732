"""Reference chains evaluated deepest first, without recursion.

A param or field is evaluated when something refers to it, and its own references are
evaluated inside that evaluation: `param a1 = a0 + 1` ... `param a200 = a199 + 1` nests 200
evaluations, each a dozen Python frames, past Python's recursion limit. Before evaluating a
value, `prefetch` walks what it depends on (params and fields, through their references) with
an explicit stack and evaluates them in post-order, so every evaluation finds its references
done. A loop found on the way is reported here, where the path is at hand, however long.
"""

from __future__ import annotations

from typing import Iterator

from ..dsl import ast, codes
from ..dsl.source import Span
from . import schema as sc
from .evaluate import INVALID
from .resolve import BlockEntry, FieldEntry, Program

Key = tuple[str, str]   # ("", param) or (declaration, "dotted.field"), as the checker memoizes them
_SHOWN = 6              # names of a long loop shown at each end


def prefetch(checker, key: Key) -> None:
    """Evaluate what `key` depends on, deepest first, through `checker.lookup`."""
    program: Program = checker.program
    root = expression_of(program, key)
    if root is None:
        return
    path, on_path, seen = [key], {key}, {key}
    stack = [(key, None, iter(_cached(checker, key, root)))]
    order: list[ast.Ref] = []
    while stack:
        current, ref, deps = stack[-1]
        for dep, dep_ref, dep_expr in deps:
            if dep in checker.values or dep in checker.active_keys or dep in seen and dep not in on_path:
                continue
            if dep in on_path:
                _loop(checker, path[path.index(dep):] + [dep])
                continue
            seen.add(dep)
            path.append(dep)
            on_path.add(dep)
            stack.append((dep, dep_ref, iter(_cached(checker, dep, dep_expr))))
            break
        else:
            stack.pop()
            path.pop()
            on_path.discard(current)
            if ref is not None:
                order.append(ref)
    for ref in order:
        checker.lookup(ref)   # memoized: each finds its own references evaluated


def _cached(checker, key: Key, expr: ast.Expr) -> list[tuple[Key, ast.Ref, ast.Expr]]:
    """The dependencies of `key`, found once per check."""
    found = checker.dependencies.get(key)
    if found is None:
        found = checker.dependencies[key] = list(_dependencies(checker.program, expr))
    return found


def expression_of(program: Program, key: Key) -> ast.Expr | None:
    decl, name = key
    if not decl:
        param = program.params.get(name)
        return param.value if param is not None else None
    found = _field(program, decl, name.split("."))
    return found.expr if found is not None else None


def _dependencies(program: Program, expr: ast.Expr) -> Iterator[tuple[Key, ast.Ref, ast.Expr]]:
    """(key, the reference, its expression) of each param or field `expr` refers to."""
    stack: list[object] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Ref):
            found = _target(program, node)
            if found is not None:
                yield found
            continue
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, tuple):
                stack.extend(v for v in value if _is_node(v))
            elif _is_node(value):
                stack.append(value)


def _is_node(value: object) -> bool:
    return bool(_fields(type(value)))


_FIELDS: dict[type, tuple[str, ...]] = {Span: ()}


def _fields(kind: type) -> tuple[str, ...]:
    """The attrs fields of an AST node's class (none for anything else, or for a Span)."""
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = tuple(a.name for a in getattr(kind, "__attrs_attrs__", ()))
    return found


def _target(program: Program, ref: ast.Ref) -> tuple[Key, ast.Ref, ast.Expr] | None:
    first, *rest = (p.text for p in ref.path.parts)
    if not rest:
        param = program.params.get(first)
        return (("", first), ref, param.value) if param is not None else None
    if first not in program.declarations:
        return None
    entry = _field(program, first, rest)
    return ((first, ".".join(rest)), ref, entry.expr) if entry is not None else None


def _field(program: Program, decl: str, path: list[str]) -> FieldEntry | None:
    """The field entry `decl.path` as the checker memoizes it (a schema field), else None."""
    body, block = program.bodies.get(decl), sc.KINDS.get(program.declarations[decl].kind.text)
    if body is None or block is None:
        return None
    for i, part in enumerate(path):
        entry = body.get(part)
        if i == len(path) - 1:
            return entry if isinstance(entry, FieldEntry) and part in block.fields else None
        if not isinstance(entry, BlockEntry) or part not in block.blocks:
            return None
        body, block = entry.body, block.blocks[part]
    return None


def _loop(checker, keys: list[Key]) -> None:
    """Report a loop of references at its first name; its value is invalid."""
    names = [".".join(k for k in key if k) for key in keys]
    if len(names) > 2 * _SHOWN + 1:
        names = names[:_SHOWN] + [f"... ({len(names) - 2 * _SHOWN:,} more)"] + names[-_SHOWN:]
    first = keys[0]
    checker.values[first] = INVALID
    checker.error(codes.REFERENCE_CYCLE.make(checker._span_of(first), name=names[0], cycle=" -> ".join(names)))
