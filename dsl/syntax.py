"""Parsing with every failure turned into a coded, located diagnostic.

Lark's exceptions stop here: a user sees `path:line:col: error[syntax]: ...` with the
innermost open block named, never `UnexpectedToken`.
"""

from __future__ import annotations

import re

import attrs
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

import gclc.dsl.codes as codes  # absolute: the package `dsl` imports this module
from .diagnostics import Diagnostic, Label
import gclc.dsl.ast as ast  # absolute: the package `dsl` imports this module
from .parser import lark_parser, parse_tree
from .mistake import relocate
from .source import SourceFile, Span
from .transform import ToAst, comments
from .units import LITERAL_EXPONENT, MAX_DIGITS, literal_problem

MAX_DEPTH = 64  # nesting of blocks and expressions; real designs use fewer than 8

_DESCRIBE = {
    "NAME": "a name", "QUANTITY": "a number", "RATIO": "a ratio such as `1:1`",
    "STRING": "a string", "COMPARE": "a comparison such as `<=`", "MARKER": "a marker (`bidir`, `sparse`)",
    "_X": "`x`", "_EXTENDS": "`extends`", "$END": "the end of the file",
}
_OPENERS = {"{": "}", "(": ")", "[": "]"}
_CLOSERS = frozenset(_OPENERS.values())
_KEYWORD_BEFORE = re.compile(r"(?<![\w.])(x|bidir|sparse|extends|true|false|import|param)[ \t]*\Z")
_CLOSER_TERMINALS = {"}": "RBRACE", ")": "RPAR", "]": "RSQB"}


class ParseError(Exception):
    """The text is not a module; `.diagnostics` says why and where."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...]):
        super().__init__("\n".join(d.summary for d in diagnostics))
        self.diagnostics = diagnostics


def parse_source(source: SourceFile) -> ast.Module:
    text = source.text
    if "\x00" in text:
        offset = text.index("\x00")
        raise ParseError((codes.NUL_BYTE.make(source.span(offset, offset + 1),
                                              notes=["help: is this a binary file?"]),))
    try:
        tree, comment_tokens = parse_tree(text)
    except UnexpectedInput as error:
        raise ParseError(_syntax_errors(error, source)) from None
    transformer = ToAst(source)
    module = transformer.transform(tree)
    module = ast.Module(module.items, comments(comment_tokens, source), source.path, span=module.span)
    problems = [codes.BAD_ESCAPE.make(span, escape=esc) for esc, span in transformer.bad_escapes]
    problems += _bracket_limit(source) or _limits(module)
    if problems:
        raise ParseError(tuple(problems))
    return module


# ----------------------------------------------------------------- limits


def _limits(module: ast.Module) -> list[Diagnostic]:
    """Too-deep nesting and out-of-range numbers, found without recursion."""
    problems: list[Diagnostic] = []
    stack: list[tuple[object, int, object]] = [(item, 1, None) for item in module.items]
    while stack:
        node, depth, top = stack.pop()
        if top is None and isinstance(node, _EXPRESSIONS):
            top = node  # the outermost expression: a long `1 + 1 + ...` is shown whole, not at one term
        if depth > MAX_DEPTH:
            notes = ["help: flatten the expression or the blocks"]
            if isinstance(top, (ast.BinOp, ast.Neg)):
                notes.insert(0, "each operator (`+ - * /`, a leading `-`) nests one level: `a + b + c` is `(a + b) + c`")
            problems.append(codes.TOO_DEEP.make((top or node).span, limit=MAX_DEPTH, notes=notes))
            break
        for text in _number_texts(node):
            why = literal_problem(text)
            if why:
                problems.append(codes.NUMBER_RANGE.make(node.span, text=_shown(text), label=why, notes=[
                    f"help: a number is 0 or lies within 1e-{LITERAL_EXPONENT}..1e{LITERAL_EXPONENT} with at most "
                    f"{MAX_DIGITS} significant digits; a unit scales it (`2 PFLOP`, `5 ns`, `405 B`)"]))
        stack.extend((child, depth + 1, top) for child in _children(node))
    return problems


_EXPRESSIONS = (ast.Number, ast.Ratio, ast.String, ast.Bool, ast.Ref, ast.Call, ast.ListExpr, ast.BinOp,
                ast.Neg, ast.Marked, ast.Multiplicity)


def _bracket_limit(source: SourceFile) -> list[Diagnostic]:
    """Brackets nested too deep: parentheses leave no node in the AST, so count them in the text."""
    depth = 0
    for ch, i in _brackets(source.text):
        depth += 1 if ch in _OPENERS else -1
        if depth > MAX_DEPTH:
            return [codes.TOO_DEEP.make(source.span(i, i + 1), limit=MAX_DEPTH,
                                        notes=["help: flatten the expression or the blocks"])]
    return []


def _brackets(text: str, stop: int | None = None):
    """Each bracket of `text` (before `stop`) outside strings and comments: (char, offset)."""
    i, end = 0, len(text) if stop is None else stop
    while i < end:
        ch = text[i]
        if ch == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
        elif ch == '"':
            i += 1
            while i < end and text[i] not in '"\n':
                i += 2 if text[i] == "\\" else 1
        elif ch in _OPENERS or ch in _CLOSERS:
            yield ch, i
        i += 1


def _number_texts(node: object) -> tuple[str, ...]:
    if isinstance(node, ast.Number):
        return (node.text,)
    if isinstance(node, ast.Ratio):
        return (node.left, node.right)
    return ()


def _shown(text: str) -> str:
    """A 5,000-digit literal is named by its ends, not printed whole."""
    return text if len(text) <= 40 else f"{text[:16]}…{text[-8:]} ({len(text):,} characters)"


def _children(node: object) -> list[object]:
    out: list[object] = []
    for name in getattr(type(node), "__attrs_attrs__", ()):
        value = getattr(node, name.name)
        if isinstance(value, tuple):
            out.extend(v for v in value if hasattr(v, "span"))
        elif hasattr(value, "span") and not isinstance(value, Span):
            out.append(value)
    return out


# ----------------------------------------------------------------- syntax errors


def _syntax_errors(error: UnexpectedInput, source: SourceFile) -> tuple[Diagnostic, ...]:
    """Every syntax error that can be told apart. The file is cut into its top-level items
    (a line that starts, at its first column, with `import`, `param` or a kind and a name)
    and each item is parsed on its own, so a mistake in one (a block left open, a dangling
    `+`) cannot make the next ones look wrong; inside an item, `_errors_in` finds more."""
    items = _items(source.text)
    if len(items) <= 1:
        return tuple(sorted(_errors_in(error, source, MAX_SYNTAX_ERRORS), key=Diagnostic.sort_key))
    found: list[Diagnostic] = []
    for start, end in items:
        if len(found) >= MAX_SYNTAX_ERRORS:
            break
        line = source.position(start)[0]
        alone = SourceFile(source.path, "\n" * (line - 1) + source.text[start:end])  # lines and columns kept
        try:
            parse_tree(alone.text)
        except UnexpectedInput as local:
            more = _errors_in(local, alone, min(MAX_PER_ITEM, MAX_SYNTAX_ERRORS - len(found)),
                              last=end == len(source.text))
            found += [_moved(d, source, start - (line - 1)) for d in more]
    if not found:  # the items parse apart but not together: report the whole file's way
        found = _errors_in(error, source, MAX_SYNTAX_ERRORS)
    return tuple(sorted(found, key=Diagnostic.sort_key))


MAX_PER_ITEM = 5
_ITEM_START = re.compile(r"^(?:import[ \t]*\"|param[ \t]+[^\W\d]|(?:chip|cpu|nic|dpu|switch|node|supernode|fabric|"
                         r"cluster|model|train|serve|sweep|workload)[ \t]+[^\W\d]\w*[ \t]*(?:\{|extends\b))", re.M)


def _items(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the top-level items: each from a line that starts one (at its
    first column) to the next; what comes before the first belongs to it."""
    starts = [m.start() for m in _ITEM_START.finditer(text)]
    if not starts:
        return [(0, len(text))]
    starts[0] = 0
    return list(zip(starts, starts[1:] + [len(text)]))


def _moved(diagnostic: Diagnostic, source: SourceFile, delta: int) -> Diagnostic:
    """A diagnostic found in an item parsed apart, with its spans' offsets in the whole file."""
    def moved(span: Span | None) -> Span | None:
        return None if span is None else source.span(span.start + delta, span.end + delta)
    labels = tuple(attrs.evolve(label, span=moved(label.span)) for label in diagnostic.labels)
    return attrs.evolve(diagnostic, subject=moved(diagnostic.subject), labels=labels)


def _errors_in(error: UnexpectedInput, source: SourceFile, most: int, last: bool = True) -> list[Diagnostic]:
    """The syntax errors of `source` (at most `most`): after each, the line of the mistake is
    blanked (its braces kept, so blocks still nest) and the text parsed again. An error that
    falls inside a blanked line is a consequence of the blanking and ends the search. `last`:
    the text ends where the file does (else the next item begins there)."""
    found: list[Diagnostic] = []
    text, blanked = source.text, []
    while len(found) < most:
        current = SourceFile(source.path, text)
        diagnostic = _syntax_diagnostic(error, current, last)
        subject = diagnostic.subject
        if found and any(start <= subject.start < end for start, end in blanked):
            break
        found.append(diagnostic)
        if diagnostic.code in _FINAL or subject.start >= len(text):
            break
        start, end = _line_of(text, subject.start)
        open_ = _open_brackets(text, subject.start)
        if open_ and open_[-1][0] != "{":  # `(racks * 8` left open: the member began on its line
            start = min(start, _line_start(text, open_[-1][1]))
        text = _blank(text, start, end)
        blanked.append((start, end))
        try:
            parse_tree(text)
            break
        except UnexpectedInput as again:
            error = again
    return found


MAX_SYNTAX_ERRORS = 20
_FINAL = frozenset({"unclosed", "unterminated-string"})  # what follows them is not code as written


def _line_of(text: str, offset: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, len(text) if end < 0 else end


def _blank(text: str, start: int, end: int) -> str:
    """Spaces for `text[start:end]`, keeping what its braces do to the nesting: a line that
    opens as many blocks as it closes goes blank; one that opens a block more keeps that
    `{` behind a stand-in `_ _` (a block or a declaration wherever it stands); else its
    braces stay (outside strings and comments)."""
    braces = [(ch, i) for ch, i in _brackets(text[:end]) if i >= start and ch in "{}"]
    opened = sum(1 if ch == "{" else -1 for ch, _ in braces)
    if opened == 0:
        keep: dict[int, str] = {}
    elif opened == 1 and braces[-1][0] == "{" and braces[-1][1] - start >= 4:
        at = braces[-1][1]
        keep = {at - 4: "_", at - 2: "_", at: "{"}
    else:
        keep = {i: ch for ch, i in braces}
    middle = "".join(keep.get(i, " ") for i in range(start, end))
    return text[:start] + middle + text[end:]


def _syntax_diagnostic(error: UnexpectedInput, source: SourceFile, last: bool = True) -> Diagnostic:
    if isinstance(error, UnexpectedCharacters):
        return _bad_character(error, source)
    token = getattr(error, "token", None)
    if isinstance(error, UnexpectedEOF) or (token is not None and token.type == "$END"):
        ends = "the file ends here" if last else "the next declaration begins after this"
        return _unclosed(source, last) or relocate(source, len(source.text), last) or codes.SYNTAX.make(
            _end_span(source), found="end of the file" if last else "the next declaration", label=ends)
    assert isinstance(error, UnexpectedToken)
    return _unexpected_token(error, source)


def _bad_character(error: UnexpectedCharacters, source: SourceFile) -> Diagnostic:
    offset = error.pos_in_stream
    char = source.text[offset]
    span = source.span(offset, offset + 1)
    if char == '"':
        return codes.UNTERMINATED_STRING.make(span, label="this string",
                                              notes=["help: close it with `\"` on the same line"])
    hints = {
        ":": "help: fields are written `name = value`; ratios as `3:1`",
        ";": "help: members are separated by spaces or new lines; drop the `;`",
        "'": "help: strings use double quotes: \"text\"",
    }
    shown = repr(char) if not char.isprintable() or char.isspace() else f"`{char}`"
    return codes.BAD_CHARACTER.make(span, char=shown, notes=[hints.get(char, "")])


def _unexpected_token(error: UnexpectedToken, source: SourceFile) -> Diagnostic:
    token = error.token
    moved = relocate(source, token.start_pos)
    if moved is not None:
        return moved
    span = source.span(token.start_pos, token.end_pos)
    accepted = _accepted(error)
    expected = sorted({_describe(name) for name in accepted})
    notes = [f"expected {_join(expected)}"] if expected else []
    if str(token) in _OPENERS.values() and _depth_at(source.text, token.start_pos) <= 0:
        notes.append(f"help: this `{token}` closes nothing; remove it")
    elif token.type in ("EQUAL", "COMPARE", "LBRACE") and _KEYWORD_BEFORE.search(source.text, 0, token.start_pos):
        word = _KEYWORD_BEFORE.search(source.text, 0, token.start_pos)[1]
        notes.append(f"help: here `{word}` reads as a keyword (as in `8 x H100`, `900 GB/s bidir`), not as a name")
    elif "EQUAL" in accepted and token.type in ("QUANTITY", "STRING"):
        notes.append("help: a field is written `name = value`")
    elif token.type in ("NAME", "QUANTITY", "STRING", "RATIO") and "COMMA" in accepted:
        notes.append("help: separate arguments and list items with `,`")
    labels = []
    stack = _open_brackets(source.text, token.start_pos)
    if stack and stack[-1][0] != "{" and _CLOSER_TERMINALS[_OPENERS[stack[-1][0]]] in accepted:
        char, offset = stack[-1]
        if source.position(offset)[0] < span.line:  # `(racks * 8` and the next line goes on
            labels.append(Label(source.span(offset, offset + 1), f"this `{char}` is still open"))
    return codes.SYNTAX.make(span, found=_found(token), label="not expected here", labels=labels, notes=notes)


def _accepted(error: UnexpectedToken) -> set[str]:
    """The terminals the parser would take here. LALR's `expected` merges the follow sets
    of every context that shares the state (`}` and `)` inside a list); asking the
    parser is exact."""
    try:
        return set(error.interactive_parser.accepts()) or set(error.expected)
    except Exception:  # noqa: BLE001 — a better message is never worth a crash
        return set(error.expected)


def _unclosed(source: SourceFile, last: bool = True) -> Diagnostic | None:
    stack = _open_brackets(source.text)
    if not stack:
        return None
    char, offset = _likely_unclosed(source.text) or stack[-1]
    return codes.UNCLOSED.make(
        source.span(offset, offset + 1), opener=char, label="opened here",
        first="the file ends" if last else "the next declaration begins",
        labels=[Label(_end_span(source), "the file ends here" if last else "the next declaration begins after this")],
        notes=[f"help: add `{_OPENERS[char]}`"],
    )


def _open_brackets(text: str, stop: int | None = None) -> list[tuple[str, int]]:
    """The brackets still open at `stop`, skipping strings and comments."""
    stack: list[tuple[str, int]] = []
    for ch, i in _brackets(text, stop):
        if ch in _OPENERS:
            stack.append((ch, i))
        elif stack:
            stack.pop()
    return stack


def _likely_unclosed(text: str) -> tuple[str, int] | None:
    """The opener that most likely lacks its closer: the first one whose matching closer,
    on a later line, is indented less than the opener's line (`peak {` closed by the
    declaration's `}`). None when the indentation gives no hint."""
    stack: list[tuple[str, int]] = []
    for ch, i in _brackets(text):
        if ch in _OPENERS:
            stack.append((ch, i))
        elif stack:
            opener = stack.pop()
            if _line_start(text, i) != _line_start(text, opener[1]) and _indent(text, i) < _indent(text, opener[1]):
                return opener
    return None


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent(text: str, offset: int) -> int:
    start = _line_start(text, offset)
    line = text[start:offset + 1]
    return len(line) - len(line.lstrip(" \t"))


def _depth_at(text: str, offset: int) -> int:
    return len(_open_brackets(text, offset))


def _end_span(source: SourceFile) -> Span:
    """Just after the last visible character: an empty last line is no place to point at."""
    end = len(source.text.rstrip())
    return source.span(end, end)


def _describe(terminal: str) -> str:
    if terminal in _DESCRIBE:
        return _DESCRIBE[terminal]
    try:
        pattern = lark_parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal
    return f"`{pattern.value}`" if pattern.type == "str" else terminal.lower()


def _found(token) -> str:
    if token.type == "NAME":
        return f"name `{token}`"
    if token.type == "QUANTITY":
        return f"number `{token}`"
    return f"`{token}`"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]
