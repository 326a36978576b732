"""Lark tree -> AST. Lark's `Meta` becomes a `Span` here and nowhere else."""

from __future__ import annotations

import re

from lark import Token, Transformer_NonRecursive

import gclc.dsl.ast as ast  # absolute: the package `dsl` imports this module
from .source import SourceFile, Span

_QUANTITY = re.compile(r"(?P<number>[\d_.]+(?:[eE][+-]?\d+)?)[ \t]*(?P<unit>\S*)\Z")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}
_STRING_PART = re.compile(r'\\u([0-9a-fA-F]{4})|\\(.)|([^\\]+)', re.DOTALL)


def quantity_parts(text: str) -> tuple[str, str | None]:
    """`'3.35 TB/s'` -> `('3.35', 'TB/s')`; `'90%'` -> `('90', '%')`."""
    match = _QUANTITY.match(text)
    assert match, text  # the QUANTITY terminal guarantees the shape
    return match["number"], match["unit"] or None


def unescape(body: str) -> tuple[str, str | None]:
    """The string's value, and the first unknown escape (or None)."""
    out, bad = [], None
    for match in _STRING_PART.finditer(body):
        code, escaped, plain = match.groups()
        if code:
            point = int(code, 16)
            if 0xD800 <= point <= 0xDFFF:  # half of a UTF-16 pair: no character, cannot be written out
                bad, point = bad or "\\u" + code, 0xFFFD
            out.append(chr(point))
        elif escaped is not None:
            if escaped not in _ESCAPES:
                bad = bad or "\\" + escaped
            out.append(_ESCAPES.get(escaped, escaped))
        else:
            out.append(plain)
    return "".join(out), bad


class ToAst(Transformer_NonRecursive):
    """Each rule's method takes the rule's meta and its children, as lark's
    `v_args(meta=True, inline=True)` would pass them; they are called directly, since that
    decorator builds a new wrapper at every call (a third of a large file's parse)."""

    def __init__(self, source: SourceFile):
        super().__init__(visit_tokens=False)  # no method is named after a terminal
        self.source = source
        self.bad_escapes: list[tuple[str, Span]] = []
        self._rules: dict[str, object] = {}

    def _call_userfunc(self, tree, new_children=None):
        children = new_children if new_children is not None else tree.children
        method = self._rules.get(tree.data)
        if method is None:
            method = self._rules[tree.data] = getattr(self, tree.data, None) or False
        if method is False:
            return self.__default__(tree.data, children, tree.meta)
        return method(tree.meta, *children)

    # ------------------------------------------------------------ positions
    def span(self, meta) -> Span:
        if getattr(meta, "empty", False):
            return self.source.span(0, 0)
        return self.source.span(meta.start_pos, meta.end_pos)

    def token_span(self, token: Token) -> Span:
        return self.source.span(token.start_pos, token.end_pos)

    def ident(self, token: Token) -> ast.Identifier:
        return ast.Identifier(str(token), span=self.token_span(token))

    # ------------------------------------------------------------ module
    def start(self, meta, *items):
        return ast.Module(tuple(items), path=self.source.path, span=self.span(meta))

    def import_stmt(self, meta, path):
        return ast.Import(self._string(path), span=self.span(meta))

    def param_stmt(self, meta, name, value):
        return ast.Param(self.ident(name), value, span=self.span(meta))

    def declaration(self, meta, kind, name, parent, *members):
        return ast.Declaration(self.ident(kind), self.ident(name), parent, members, span=self.span(meta))

    # ------------------------------------------------------------ members
    def field(self, meta, target, value):
        return ast.Field(target, value, span=self.span(meta))

    def constraint(self, meta, target, op, value):
        return ast.Constraint(target, str(op), value, span=self.span(meta))

    def block(self, meta, name, label, *members):
        label = self.ident(label) if label is not None else None
        return ast.Block(self.ident(name), label, members, span=self.span(meta))

    def dotted(self, meta, *names):
        return ast.Dotted(tuple(self.ident(n) for n in names), span=self.span(meta))

    # ------------------------------------------------------------ expressions
    def multiplicity(self, meta, count, part, overrides):
        return ast.Multiplicity(count, part, overrides, span=self.span(meta))

    def override(self, meta, *members):
        return tuple(members)

    def _binop(op):  # noqa: N805 — a factory used in the class body
        def method(self, meta, left, right):
            return ast.BinOp(op, left, right, span=self.span(meta))
        return method

    add, sub, mul, div = _binop("+"), _binop("-"), _binop("*"), _binop("/")

    def neg(self, meta, operand):
        return ast.Neg(operand, span=self.span(meta))

    def marked(self, meta, operand, marker):
        return ast.Marked(operand, str(marker), span=self.span(meta))

    def number(self, meta, token):
        text, unit = quantity_parts(str(token))
        return ast.Number(text, unit, span=self.span(meta))

    def ratio(self, meta, token):
        left, right = str(token).split(":")
        return ast.Ratio(left, right, span=self.span(meta))

    def string(self, meta, token):
        return ast.String(self._string(token), span=self.span(meta))

    def true(self, meta):
        return ast.Bool(True, span=self.span(meta))

    def false(self, meta):
        return ast.Bool(False, span=self.span(meta))

    def ref(self, meta, dotted):
        return ast.Ref(dotted, span=self.span(meta))

    def call(self, meta, name, *args):
        return ast.Call(self.ident(name), tuple(a for a in args if a is not None), span=self.span(meta))

    def arg(self, meta, name, value):
        return ast.Arg(self.ident(name), value, span=self.span(meta))

    def list(self, meta, *items):
        return ast.ListExpr(tuple(i for i in items if i is not None), span=self.span(meta))

    # ------------------------------------------------------------ helpers
    def _string(self, token: Token) -> str:
        value, bad = unescape(str(token)[1:-1])
        if bad:
            self.bad_escapes.append((bad, self._escape_span(token)))
        return value

    def _escape_span(self, token: Token) -> Span:
        """The first unknown escape inside the string token, or the whole token."""
        for match in _STRING_PART.finditer(str(token), 1, len(token) - 1):
            if match[2] is not None and match[2] not in _ESCAPES:
                start = token.start_pos + match.start()
                return self.source.span(start, start + len(match[0]))
        return self.token_span(token)


def comments(tokens, source: SourceFile) -> tuple[ast.Comment, ...]:
    return tuple(
        ast.Comment(str(t), span=source.span(t.start_pos, t.end_pos)) for t in tokens
    )
