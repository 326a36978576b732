"""Where each comment of a module goes when `gclc fmt` prints it (dsl/format.py): before
the member that follows it, at the end of a line, after a block's `{` or before its `}`. A
comment between an expression's tokens moves before its member, or into the end of the
override block it follows, which keeps all comments in source order."""

from __future__ import annotations

import bisect

import attrs

from . import ast
from .records import define, frozen


@define
class Notes:
    """Where each comment goes, keyed by `id()` of members and containers."""

    leading: dict[int, list[tuple[ast.Comment, bool]]] = attrs.Factory(dict)  # (comment, blank before)
    trailing: dict[int, ast.Comment] = attrs.Factory(dict)
    opening: dict[int, ast.Comment] = attrs.Factory(dict)  # after a container's `{`
    footer: dict[int, list[tuple[ast.Comment, bool]]] = attrs.Factory(dict)  # before its `}`
    blank: set[int] = attrs.Factory(set)  # members with a blank line before them
    busy: set[int] = attrs.Factory(set)  # containers with a comment inside


@frozen
class _Scope:
    """A run of members: the module's items, a declaration's, block's or override's members."""

    key: int
    members: tuple
    header_line: int | None  # the line of the `{`, as far as the AST knows
    comments: list[ast.Comment]


def attach(module: ast.Module) -> Notes:
    notes = Notes()
    comments = sorted(module.comments, key=lambda c: c.span.start)
    work = [_Scope(id(module), module.items, None, comments)]
    while work:
        work.extend(_place(notes, work.pop()))
    return notes


def _place(notes: Notes, scope: _Scope) -> list[_Scope]:
    """Place the comments between `scope`'s members; return the scopes nested in it."""
    if scope.comments:
        notes.busy.add(scope.key)
    ends = [m.span.end for m in scope.members]
    inner: list[list[ast.Comment]] = [[] for _ in scope.members]
    loose = []
    for comment in scope.comments:
        i = bisect.bisect_right(ends, comment.span.start)
        if i < len(ends) and scope.members[i].span.start <= comment.span.start:
            inner[i].append(comment)
        else:
            loose.append(comment)
    _place_loose(notes, scope, loose)
    children = []
    for member, comments in zip(scope.members, inner):
        children.extend(_route(notes, member, comments))
    return children


def _place_loose(notes: Notes, scope: _Scope, loose: list[ast.Comment]) -> None:
    prev_line, prev, j = scope.header_line, None, 0
    for member in (*scope.members, None):
        stop = member.span.start if member is not None else float("inf")
        while j < len(loose) and loose[j].span.start < stop:
            comment = loose[j]
            j += 1
            line = comment.span.line
            if prev is not None and prev.span.end_line == line and id(prev) not in notes.trailing:
                notes.trailing[id(prev)] = comment
            elif prev is None and line == scope.header_line and scope.key not in notes.opening:
                notes.opening[scope.key] = comment
            else:
                blank = prev_line is not None and line - prev_line >= 2
                target = notes.leading.setdefault(id(member), []) if member is not None else \
                    notes.footer.setdefault(scope.key, [])
                target.append((comment, blank))
            prev_line = line
        if member is not None:
            if prev_line is not None and member.span.line - prev_line >= 2:
                notes.blank.add(id(member))
            prev, prev_line = member, member.span.end_line


def _route(notes: Notes, member, comments: list[ast.Comment]) -> list[_Scope]:
    """Split the comments inside `member` among its bodies; the rest go before it."""
    bodies = _bodies(member)
    starts = [start for start, _ in bodies]
    routed: list[list[ast.Comment]] = [[] for _ in bodies]
    hoisted = []
    for comment in comments:
        k = bisect.bisect_right(starts, comment.span.start) - 1
        (routed[k] if k >= 0 else hoisted).append(comment)
    if hoisted:
        blank = id(member) in notes.blank
        notes.blank.discard(id(member))
        lead = notes.leading.setdefault(id(member), [])
        lead.extend((c, blank and i == 0) for i, c in enumerate(hoisted))
    return [attrs.evolve(scope, comments=cs) for (_, scope), cs in zip(bodies, routed)]


def _bodies(member) -> list[tuple[int, _Scope]]:
    """Where each body of `member` starts (its header's end), and the body as a scope."""
    if isinstance(member, (ast.Declaration, ast.Block)):
        last = member.parent if isinstance(member, ast.Declaration) else member.label
        head = (last or member.name).span
        return [(head.end, _Scope(id(member), member.members, head.end_line, []))]
    value = getattr(member, "value", None)
    if value is None:
        return []
    found = sorted(_overrides(value), key=lambda m: m.part.span.end)
    return [(m.part.span.end, _Scope(id(m), m.overrides, m.part.span.end_line, [])) for m in found]


def _overrides(expr) -> list[ast.Multiplicity]:
    """The multiplicities with override blocks in `expr`, not looking inside those blocks."""
    found, stack = [], [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Multiplicity) and node.overrides is not None:
            found.append(node)
        stack.extend(_subexpressions(node))
    return found


def _subexpressions(node) -> tuple:
    if isinstance(node, ast.BinOp):
        return node.left, node.right
    if isinstance(node, (ast.Neg, ast.Marked)):
        return (node.operand,)
    if isinstance(node, ast.Multiplicity):
        return (node.count,)
    if isinstance(node, ast.Call):
        return tuple(arg.value for arg in node.args)
    if isinstance(node, ast.ListExpr):
        return node.items
    return ()
