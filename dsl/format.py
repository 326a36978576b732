"""The canonical formatter behind `gclc fmt`: `format_module(module) -> str`.

The layout depends only on the AST and its comments (blank lines between members are
the one thing kept from the source), so formatting is idempotent and
`parse(format_module(m)) == m`:

* two-space indent, one member per line, one newline at the end, no trailing spaces;
* top level: imports and params form groups; a blank line separates groups and
  every declaration;
* runs of single-line fields and constraints align `=` / the operator (gofmt style);
  a nested block, a blank line or an own-line comment ends a run;
* a nested or override block goes on one line (`hbm { capacity = 80 GB  bw = 3 TB/s }`)
  when it has at most five members, all one-line fields or constraints, no comment
  inside and the line fits in 100 columns;
* expressions get the fewest parentheses that keep the tree;
* comments stay where they were: own-line before what follows, end-of-line at the end
  of the line, after `{`, or before `}`. A comment between an expression's tokens
  moves before its member, or into the end of the override block it follows, which
  keeps all comments in source order. Comment text is right-stripped.
"""

from __future__ import annotations

import unicodedata

from . import ast
from .comments import Notes, attach
from .source import SourceFile, source_text
from .syntax import parse_source

INDENT = "  "
MAX_WIDTH = 100
MAX_FLAT = 5  # the most members a block may have and still go on one line

# Precedence, loosest first (the grammar's ladder).
_REPEAT, _SUM, _PRODUCT, _UNARY, _POSTFIX, _ATOM = range(6)
_BINARY = {"+": _SUM, "-": _SUM, "*": _PRODUCT, "/": _PRODUCT}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}


def format_text(text: str, path: str = "<string>") -> str:
    """Parse `text` and print it canonically; raises `ParseError` on bad input."""
    return format_module(parse_source(SourceFile(path, source_text(text))))


def format_module(module: ast.Module) -> str:
    """The canonical text of `module`; `""` for a module with no items and no comments."""
    return _Printer(attach(module)).module(module)


# ================================================================= printing


class _NotFlat(Exception):
    """An override block that cannot go on one line."""


class _Printer:
    def __init__(self, notes: Notes):
        self.notes = notes

    # ------------------------------------------------------------ top level
    def module(self, module: ast.Module) -> str:
        lines: list[str] = []
        prev = None
        for item in module.items:
            if prev is not None and (type(prev) is not type(item) or isinstance(item, ast.Declaration)):
                lines.append("")
            lines.extend(self._item(item))
            prev = item
        self._comments(self.notes.footer.get(id(module), ()), 0, lines)
        return "\n".join(lines) + "\n" if lines else ""

    def _item(self, item) -> list[str]:
        out: list[str] = []
        self._comments(self.notes.leading.get(id(item), ()), 0, out)
        if id(item) in self.notes.blank and out:
            out.append("")
        if isinstance(item, ast.Import):
            text = "import " + _quote(item.path)
        elif isinstance(item, ast.Param):
            head = f"param {item.name.text}"
            text = f"{head} = {self._value(head, ' = ', item.value, 0)}"
        else:
            parent = f" extends {item.parent.text}" if item.parent is not None else ""
            header = f"{item.kind.text} {item.name.text}{parent}"
            text = header + " " + self._braced(id(item), item.members, 0)
        out.append(self._trail(item, text))
        return out

    def _comments(self, pairs, depth: int, out: list[str]) -> None:
        for comment, blank in pairs:
            if blank and out:
                out.append("")
            out.append(INDENT * depth + _comment(comment))

    def _trail(self, member, text: str) -> str:
        comment = self.notes.trailing.get(id(member))
        return text if comment is None else f"{text}  {_comment(comment)}"

    # ------------------------------------------------------------ blocks
    def _braced(self, key: int, members, depth: int) -> str:
        """`{ ... }` over several lines, closed at `depth`; `{}` when empty."""
        if not members and key not in self.notes.busy:
            return "{}"
        opening = self.notes.opening.get(key)
        lines = ["{" + (f"  {_comment(opening)}" if opening is not None else "")]
        lines.extend(self._body(key, members, depth + 1))
        lines.append(INDENT * depth + "}")
        return "\n".join(lines)

    def _body(self, key: int, members, depth: int) -> list[str]:
        parts = [self._member(m, depth) for m in members]
        widths = self._alignment(members, parts)
        out: list[str] = []
        for member, (head, rest), width in zip(members, parts, widths):
            self._comments(self.notes.leading.get(id(member), ()), depth, out)
            if id(member) in self.notes.blank and out:
                out.append("")
            line = INDENT * depth + head + " " * (width - _width(head)) + rest
            out.append(self._trail(member, line))
        self._comments(self.notes.footer.get(key, ()), depth, out)
        return out

    def _alignment(self, members, parts) -> list[int]:
        """The width each member's head is padded to: the widest head of its run."""
        widths = [_width(head) for head, _ in parts]
        runs: list[list[int]] = [[]]
        for i, member in enumerate(members):
            single = not isinstance(member, ast.Block) and "\n" not in parts[i][1]
            if runs[-1] and not (single and self._joins(member)):
                runs.append([])
            if single:
                runs[-1].append(i)
        for run in runs:
            widest = max((widths[k] for k in run), default=0)
            for k in run:
                widths[k] = widest
        return widths

    def _joins(self, member) -> bool:
        """Whether `member` may continue the alignment run before it."""
        key = id(member)
        return key not in self.notes.blank and not self.notes.leading.get(key)

    def _member(self, member, depth: int) -> tuple[str, str]:
        """The member as (head, rest): `=` or the operator starts `rest`."""
        if isinstance(member, ast.Block):
            return self._block(member, depth), ""
        head, sep = member.target.text, _separator(member)
        return head, sep + self._value(head, sep, member.value, depth)

    def _block(self, block: ast.Block, depth: int) -> str:
        header = block.name.text + (f" {block.label.text}" if block.label is not None else "")
        if block.members and len(block.members) <= MAX_FLAT and id(block) not in self.notes.busy:
            try:
                text = f"{header} {self._flat_braces(block.members, depth)}"
            except _NotFlat:
                text = None
            if text is not None and _width(INDENT * depth + text) <= MAX_WIDTH:
                return text
        return header + " " + self._braced(id(block), block.members, depth)

    def _flat_braces(self, members, depth: int) -> str:
        texts = []
        for member in members:
            if isinstance(member, ast.Block):
                raise _NotFlat
            texts.append(member.target.text + _separator(member) + self._expr(member.value, depth, True))
        return "{ " + "  ".join(texts) + " }"

    # ------------------------------------------------------------ expressions
    def _value(self, head: str, sep: str, value, depth: int) -> str:
        """`value` on one line when its override blocks allow it and it fits, else broken."""
        try:
            flat = self._expr(value, depth, True)
        except _NotFlat:
            flat = None
        if flat is not None and _width(INDENT * depth + head + sep + flat) <= MAX_WIDTH:
            return flat
        return self._expr(value, depth, False)

    def _expr(self, node, depth: int, flat: bool) -> str:
        kind = type(node)
        if kind is ast.Number:
            unit = node.unit
            return node.text + ("" if unit is None else unit if unit == "%" else " " + unit)
        if kind is ast.Ratio:
            return f"{node.left}:{node.right}"
        if kind is ast.String:
            return _quote(node.value)
        if kind is ast.Bool:
            return "true" if node.value else "false"
        if kind is ast.Ref:
            return node.path.text
        if kind is ast.Call:
            args = (f"{a.name.text} = {self._expr(a.value, depth, flat)}" for a in node.args)
            return f"{node.name.text}({', '.join(args)})"
        if kind is ast.ListExpr:
            return "[" + ", ".join(self._expr(item, depth, flat) for item in node.items) + "]"
        return self._operator(node, depth, flat)

    def _operator(self, node, depth: int, flat: bool) -> str:
        def sub(operand, need: int) -> str:
            text = self._expr(operand, depth, flat)
            return f"({text})" if _precedence(operand) < need else text

        if isinstance(node, ast.BinOp):
            level = _BINARY[node.op]
            return f"{sub(node.left, level)} {node.op} {sub(node.right, level + 1)}"
        if isinstance(node, ast.Neg):
            return "-" + sub(node.operand, _UNARY)
        if isinstance(node, ast.Marked):
            return f"{sub(node.operand, _POSTFIX)} {node.marker}"
        if isinstance(node, ast.Multiplicity):
            return f"{sub(node.count, _SUM)} x {node.part.text}{self._override(node, depth, flat)}"
        raise TypeError(f"not an expression: {node!r}")

    def _override(self, node: ast.Multiplicity, depth: int, flat: bool) -> str:
        members = node.overrides
        if members is None:
            return ""
        busy = id(node) in self.notes.busy
        if not members and not busy:
            return " {}"
        if not flat:
            return " " + self._braced(id(node), members, depth)
        if busy or len(members) > MAX_FLAT:
            raise _NotFlat
        return " " + self._flat_braces(members, depth)


# ================================================================= helpers


def _separator(member) -> str:
    return " = " if isinstance(member, ast.Field) else f" {member.op} "


def _precedence(node) -> int:
    if isinstance(node, ast.BinOp):
        return _BINARY[node.op]
    if isinstance(node, ast.Neg):
        return _UNARY
    if isinstance(node, ast.Marked):
        return _POSTFIX
    if isinstance(node, ast.Multiplicity):
        return _REPEAT
    return _ATOM


def _quote(value: str) -> str:
    """A GCL string literal: `\\ \" \\n \\t` escaped, other unprintable BMP chars as `\\uXXXX`."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable() or ord(ch) > 0xFFFF:  # `\\u` takes four digits; astral stays raw
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}")
    return '"' + "".join(out) + '"'


def _comment(comment: ast.Comment) -> str:
    return comment.text.rstrip()


def _width(text: str) -> int:
    """Columns on a terminal: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
