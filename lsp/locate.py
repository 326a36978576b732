"""What is under the cursor: a walk of the document's AST down to the innermost name.

The answer says what the name is (a field being set, a reference, a part counted by
`x`, a declaration, an import) and where it sits (the declaration and the block path),
which is all hover and go-to-definition need.
"""

from __future__ import annotations

from typing import Iterator


from ..dsl import ast
from ..dsl.records import frozen


@frozen
class Spot:
    """A name at the cursor.

    kind: `field` (a field being set: `decl` and `path` say which), `ref` (a reference;
    `path` is the dotted path, first part a declaration or param), `declaration` (the
    name in `chip H100 {`), `import` (`path` holds the import text), `block` (a nested
    block's name), `kind` (the word `chip`).
    """

    kind: str
    ident: ast.Identifier | None
    decl: ast.Declaration | None = None
    path: tuple[str, ...] = ()
    override_of: str | None = None  # set inside `8 x Part { ... }`: fields are Part's


def spot_at(module: ast.Module, offset: int) -> Spot | None:
    for item in module.items:
        if not _inside(item.span, offset):
            continue
        if isinstance(item, ast.Import):
            return Spot("import", None, path=(item.path,))
        if isinstance(item, ast.Param):
            if _inside(item.name.span, offset):
                return Spot("ref", item.name, path=(item.name.text,))
            return _in_expr(item.value, offset, None)
        return _in_declaration(item, offset)
    return None


def _in_declaration(decl: ast.Declaration, offset: int) -> Spot | None:
    if _inside(decl.kind.span, offset):
        return Spot("kind", decl.kind, decl)
    if _inside(decl.name.span, offset):
        return Spot("declaration", decl.name, decl, (decl.name.text,))
    if decl.parent is not None and _inside(decl.parent.span, offset):
        return Spot("ref", _part_at(decl.parent, offset), decl, tuple(p.text for p in decl.parent.parts))
    return _in_members(decl.members, offset, decl, (), None)


def _in_members(members, offset: int, decl, prefix: tuple[str, ...], override_of: str | None) -> Spot | None:
    for member in members:
        if not _inside(member.span, offset):
            continue
        if isinstance(member, ast.Block):
            path = prefix + (member.name.text,) if member.label is None else prefix + (f"{member.name.text} {member.label.text}",)
            if _inside(member.name.span, offset) or (member.label and _inside(member.label.span, offset)):
                return Spot("block", member.name, decl, path, override_of)
            return _in_members(member.members, offset, decl, path, override_of)
        target = member.target
        if _inside(target.span, offset):
            upto = tuple(p.text for p in target.parts[: target.parts.index(_part_at(target, offset)) + 1])
            kind = "field" if isinstance(member, ast.Field) else "constraint"
            return Spot(kind, _part_at(target, offset), decl, prefix + upto, override_of)
        return _in_expr(member.value, offset, decl)
    return None


def _in_expr(expr: ast.Expr, offset: int, decl) -> Spot | None:
    for node in _walk(expr):
        if isinstance(node, ast.Ref) and _inside(node.span, offset):
            part = _part_at(node.path, offset)
            upto = node.path.parts[: node.path.parts.index(part) + 1]
            return Spot("ref", part, decl, tuple(p.text for p in upto))
        if isinstance(node, ast.Multiplicity):
            if _inside(node.part.span, offset):
                return Spot("ref", _part_at(node.part, offset), decl, tuple(p.text for p in node.part.parts))
            if node.overrides and not _inside(node.count.span, offset):
                found = _in_members(node.overrides, offset, decl, (), node.part.text)
                if found is not None:
                    return found
        if isinstance(node, ast.Call) and _inside(node.name.span, offset):
            return Spot("constructor", node.name, decl, (node.name.text,))
    return None


def _walk(expr) -> Iterator[object]:
    """Expression nodes, outermost first, without recursion limits for long sums."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.BinOp):
            stack += [node.right, node.left]
        elif isinstance(node, (ast.Neg, ast.Marked)):
            stack.append(node.operand)
        elif isinstance(node, ast.ListExpr):
            stack += reversed(node.items)
        elif isinstance(node, ast.Call):
            stack += [arg.value for arg in reversed(node.args)]
        elif isinstance(node, ast.Multiplicity):
            stack.append(node.count)


def _part_at(dotted: ast.Dotted, offset: int) -> ast.Identifier:
    for part in dotted.parts:
        if part.span.start <= offset <= part.span.end:
            return part
    return dotted.parts[-1]


def _inside(span, offset: int) -> bool:
    return span.start <= offset <= span.end
