"""Where a syntax mistake really is, when the parser notices it a line late.

Members are separated by whitespace alone, so the parser reads on past a line that
ends too early or too late: `batch = 2048 +` takes the next line's `tokens` as its
operand and fails at that line's `=`; `latency = 0.6 us us` takes the second `us` as
the start of a member and fails on the next line. When the failing line starts like a
well-formed member, the mistake is at the end of the line before: a dangling operator,
or a word left after a complete value. This module finds it from the text alone.
"""

from __future__ import annotations

import re


import gclc.dsl.codes as codes  # absolute: the package `dsl` imports this module
from .diagnostics import Diagnostic
from .units import UnitError, parse_unit
from .source import SourceFile
from .records import frozen

_NUMBER = r"(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
# A number with its unit is one token, as in the grammar's QUANTITY (`0.6 us`, `400 Gb/s`).
_QUANTITY = _NUMBER + r"(?:[ \t]*(?:%|(?!(?:x|bidir|sparse)\b)[^\W\d]\w*(?:/[^\W\d]\w*)?\b(?![ \t]*[=<>{(.])))?"
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|' + _QUANTITY + r'|[^\W\d]\w*|<=|>=|==|\S')
_DANGLING = {"+", "-", "*", "/", "=", "<", ">", "<=", ">=", "==", ",", "x"}
_KEYWORDS = {"x", "bidir", "sparse", "extends", "true", "false", "import", "param"}
_VALUE_END = re.compile(r'(?:"|\w|\)|\]|%)')  # how a complete value can end


@frozen
class _Tok:
    text: str
    start: int
    line: int


def relocate(source: SourceFile, offset: int, last: bool = True) -> Diagnostic | None:
    """A better-placed diagnostic for a parse failure at `offset`, or None to keep it.
    `last`: the text ends where the file does (else at the next declaration)."""
    tokens = _tokens(source, offset)
    if not tokens:
        return None
    line = source.position(offset)[0] if offset < len(source.text) else tokens[-1].line + 1
    on_line = [t for t in tokens if t.line == line]
    if len(on_line) > 2 or not all(_is_name(t.text) for t in on_line):
        return None  # the failing line itself is malformed: the parser's place is right
    # `field`, `param name`, `chip Name`, `partition a`: the line starts a member or a declaration
    before = [t for t in tokens if t.line < line]
    if not before:
        return None
    last_line = before[-1].line
    previous = [t for t in before if t.line == last_line]
    if previous[-1].text in _DANGLING:
        return _dangling(source, previous, at_end=offset >= len(source.text), last=last)
    return _trailing_word(source, previous) or _bare_name(source, previous)


def _dangling(source: SourceFile, line: list[_Tok], at_end: bool, last: bool = True) -> Diagnostic:
    op = line[-1]
    span = source.span(op.start, op.start + len(op.text))
    if op.text in ("=", "<", ">", "<=", ">=", "=="):
        name = " ".join(t.text for t in line[:-1][-1:])
        return codes.SYNTAX.make(span, found=f"end of the line after `{op.text}`", label="nothing follows it",
                                 notes=[f"help: write the value of `{name}` on this line"])
    return codes.SYNTAX.make(
        span, found=f"end of the line after `{op.text}`", label="nothing follows it on this line",
        notes=[("the file ends here" if last else "the next declaration begins there") if at_end
               else "the next line would be read as its operand",
               f"help: finish the expression on this line, or remove the `{op.text}`"])


def _trailing_word(source: SourceFile, line: list[_Tok]) -> Diagnostic | None:
    """The first word after a complete statement (`name = value`, `import "..."`, a closed
    block) that does not start a member of its own."""
    for i in range(1, len(line)):
        word, before = line[i], line[i - 1]
        following = line[i + 1].text if i + 1 < len(line) else ""
        complete = "=" in [t.text for t in line[:i]] or line[0].text == "import" or before.text == "}"
        if (_is_name(word.text) and word.text not in _KEYWORDS and before.text not in _DANGLING
                and before.text not in ("x", ".") and _VALUE_END.fullmatch(before.text[-1]) or before.text == "}") \
                and following not in ("=", ".", "{", "<", ">", "<=", ">=", "==", "(") and complete:
            span = source.span(word.start, word.start + len(word.text))
            if _after_quantity(line, i) and _is_unit(word.text):
                note = f"help: a number takes one unit, as in `{_value_text(line, i)}`"
            elif line[0].text == "import":
                note = "help: an import names one file: `import \"std/nvidia\"`"
            else:
                note = f"help: to start another member on this line, write `{word.text} = ...`"
            return codes.SYNTAX.make(span, found=f"name `{word.text}`", label="not expected after the value",
                                     notes=[note])
    return None


def _bare_name(source: SourceFile, line: list[_Tok]) -> Diagnostic | None:
    """A name alone at the end of a line (`  power { us`): a member without its value."""
    word = line[-1]
    if not _is_name(word.text) or word.text in _KEYWORDS or (len(line) > 1 and line[-2].text != "{"):
        return None
    span = source.span(word.start, word.start + len(word.text))
    return codes.SYNTAX.make(span, found=f"name `{word.text}`", label="a name without a value",
                             notes=[f"help: a field is written `{word.text} = value`, a block `{word.text} {{ ... }}`"])


def _after_quantity(line: list[_Tok], i: int) -> bool:
    """`0.6 us us`: a number with its unit, and one more word."""
    return re.fullmatch(_NUMBER + r"[ \t]*[^\W\d].*", line[i - 1].text) is not None


def _value_text(line: list[_Tok], i: int) -> str:
    return line[i - 1].text


def _tokens(source: SourceFile, stop: int) -> list[_Tok]:
    """Tokens of the text before `stop`, comments left out."""
    code = _without_comments(source.text[:stop])
    return [_Tok(m.group(), m.start(), source.position(m.start())[0]) for m in _TOKEN.finditer(code)]


def _without_comments(text: str) -> str:
    """`text` with each comment blanked (strings kept), so offsets stay as they were."""
    out, i = list(text), 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            end = re.compile(r'(?:[^"\\\n]|\\.)*').match(text, i + 1).end()
            i = end + 1
        elif ch == "#":
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        else:
            i += 1
    return "".join(out)


def _is_unit(text: str) -> bool:
    try:
        parse_unit(text)
    except UnitError:
        return False
    return True


def _is_name(text: str) -> bool:
    return re.fullmatch(r"[^\W\d]\w*", text) is not None


