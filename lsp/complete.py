"""Completion from the text before the cursor, which is usually not valid GCL yet.

The enclosing blocks come from a bracket scan (their headers give the declaration's kind
and the block path); the current line's prefix says whether a member name, a value or a
unit is being typed. Values are typed by the schema: part names of the right kind
(including `std/` parts not yet imported, with the import added), units of the right
dimension, a choice's keywords, a topology's constructors.
"""

from __future__ import annotations

import re
from typing import Any, Iterable


from ..compiler import schema as sc
from ..compiler.files import MAX_SOURCE_BYTES, read_bounded
from ..compiler.resolve import KINDS, STD_ROOT
from ..dsl.units import BYTES, NONE, UNITS, parse_unit
from ..dsl.library import std_parts
from .analysis import Analysis
from .hover import describe_type, field_type
from ..dsl.records import frozen


@frozen
class Suggestion:
    label: str
    kind: str  # field, block, unit, part, keyword, param, module, constructor
    detail: str = ""
    documentation: str = ""
    insert: str | None = None  # text to insert, when it differs from the label
    needs_import: str | None = None  # `std/nvidia`: add this import with the suggestion


_MEMBER = re.compile(r"^\s*(?P<dotted>(?:[^\W\d]\w*\.)*)(?P<word>[^\W\d]\w*)?$")
_VALUE = re.compile(r"^\s*(?P<field>[^\W\d][\w.]*)\s*(?:=|<=|>=|==|<|>)\s*(?P<value>.*)$")
_NUMBER_UNIT = re.compile(r"(?:^|[\s(+*/-])\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?\s*[\w/%]*$")
_COUNT_X = re.compile(r"\bx\s+\w*$")
_HEADER_DECL = re.compile(r"^\s*(?P<kind>[^\W\d]\w*)\s+(?P<name>[^\W\d]\w*)(?:\s+extends\s+[\w.]+)?\s*$")
_HEADER_OVERRIDE = re.compile(r"=.*\bx\s+(?P<part>[^\W\d]\w*)\s*$")
_IMPORT = re.compile(r'^\s*import\s+"(?P<path>[^"]*)$')
_EXTENDS = re.compile(r"^\s*(?P<kind>[^\W\d]\w*)\s+[^\W\d]\w*\s+extends\s+\w*$")
_CALL = re.compile(r"(?P<field>[^\W\d]\w*)\s*=\s*(?P<call>[^\W\d]\w*)\s*$")


def complete(analysis: Analysis, text: str, offset: int) -> list[Suggestion]:
    """What may be typed at `offset` of `text` (the document as the editor has it now)."""
    opens = _open_brackets(text, offset)
    start = max(text.rfind("\n", 0, offset), text.rfind("{", 0, offset), text.rfind("}", 0, offset),
                text.rfind("(", 0, offset), text.rfind(",", 0, offset)) + 1
    prefix = text[start:offset]
    if not opens:
        return _top_level(analysis, prefix)
    if opens[-1][0] == "(":
        return _arguments(text, opens[-1][1], prefix)
    kind, path = _scope(analysis, text, [o for c, o in opens if c == "{"])
    if kind is None:
        return []
    value = _VALUE.match(prefix)
    if value:
        return _values(analysis, kind, path + tuple(value["field"].split(".")), value["value"])
    member = _MEMBER.match(prefix)
    if member:
        dotted = tuple(p for p in member["dotted"].split(".") if p)
        return _members(kind, path + dotted)
    return []


# ----------------------------------------------------------------- where the cursor is


def _open_brackets(text: str, stop: int) -> list[tuple[str, int]]:
    """The brackets open at `stop`, outside strings and comments."""
    stack: list[tuple[str, int]] = []
    i = 0
    while i < stop:
        ch = text[i]
        if ch == "#":
            newline = text.find("\n", i)
            i = stop if newline < 0 else newline
        elif ch == '"':
            close = re.compile(r'"|\n').search(text, i + 1)
            i = stop if close is None else close.start()
        elif ch in "{([":
            stack.append((ch, i))
        elif ch in "})]" and stack:
            stack.pop()
        i += 1
    return stack


def _header(text: str, brace: int) -> str:
    start = max(text.rfind("\n", 0, brace), text.rfind("{", 0, brace), text.rfind("}", 0, brace)) + 1
    return re.sub(r"#.*", "", text[start:brace]).strip()


def _scope(analysis: Analysis, text: str, braces: list[int]) -> tuple[str | None, tuple[str, ...]]:
    """The kind whose schema applies inside the innermost block, and the block path."""
    kind: str | None = None
    path: tuple[str, ...] = ()
    for depth, brace in enumerate(braces):
        header = _header(text, brace)
        override = _HEADER_OVERRIDE.search(header)
        if depth == 0:
            match = _HEADER_DECL.match(header)
            kind = match["kind"] if match and match["kind"] in KINDS else None
        elif override:
            kind, path = _kind_of(analysis, override["part"]), ()
        else:
            path += (" ".join(header.split()),)
    return kind, path


def _kind_of(analysis: Analysis, name: str) -> str | None:
    decl = analysis.program.declarations.get(name)
    if decl is not None:
        return decl.kind.text
    return next((p.kind for p in std_parts() if p.name == name), None)


# ----------------------------------------------------------------- what may come


def _top_level(analysis: Analysis, prefix: str) -> list[Suggestion]:
    imported = _IMPORT.match(prefix)
    if imported:
        typed_dir = "/" in imported["path"]  # the editor replaces only the word after the `/`
        return [Suggestion(f"std/{f.stem}", "module", "standard library", _first_comment(f),
                           insert=f.stem if typed_dir else f"std/{f.stem}")
                for f in sorted(STD_ROOT.glob("*.gcl"))]
    extends = _EXTENDS.match(prefix)
    if extends:
        return _parts(analysis, (extends["kind"],))
    if _MEMBER.match(prefix) and "." not in prefix:
        return [Suggestion(k, "keyword", describe_type(sc.KINDS[k]).split(";")[0], insert=f"{k} ") for k in KINDS] + [
            Suggestion("import", "keyword", 'import "std/..." or a file below this one', insert='import "'),
            Suggestion("param", "keyword", "a value `--set` can override", insert="param ")]
    return []


def _members(kind: str, path: tuple[str, ...]) -> list[Suggestion]:
    block = field_type(kind, path)
    if not isinstance(block, sc.Block):
        return []
    out = [Suggestion(name, "field", describe_type(ftype), insert=f"{name} = ") for name, ftype in block.fields.items()]
    out += [Suggestion(name, "block", describe_type(inner), insert=f"{name} {{") for name, inner in block.blocks.items()]
    out += [Suggestion(name, "block", f"labelled: `{name} NAME {{ ... }}`", insert=f"{name} ") for name in block.labelled]
    out += [Suggestion(name, "field", f"constraint: {describe_type(t)}", insert=f"{name} <= ")
            for name, t in block.constraints.items()]
    return out


def _values(analysis: Analysis, kind: str, path: tuple[str, ...], value: str) -> list[Suggestion]:
    ftype = field_type(kind, path)
    if ftype is None or isinstance(ftype, sc.Block):
        return []
    if _NUMBER_UNIT.search(value) and not _COUNT_X.search(value):
        units = _units(ftype)
        if isinstance(ftype, sc.RepeatOf):
            units.insert(0, Suggestion("x", "keyword", "a count of a part: `8 x Name`", insert="x "))
        return units
    kinds = getattr(ftype, "kinds", None)
    if kinds is not None:
        return _parts(analysis, kinds)
    if isinstance(ftype, sc.Choice):
        return [Suggestion(o, "keyword", describe_type(ftype)) for o in ftype.options]
    if isinstance(ftype, sc.Flag):
        return [Suggestion(w, "keyword", "a flag") for w in ("true", "false")]
    if isinstance(ftype, sc.Construct):
        return [Suggestion(name, "constructor", ftype.what, insert=_call_text(name, form))
                for name, form in ftype.forms.items()]
    if isinstance(ftype, sc.Targets):
        return _targets(analysis)
    return [Suggestion(name, "param", "param") for name in analysis.program.params]


def _units(ftype: Any) -> list[Suggestion]:
    dim = ftype.dim if isinstance(ftype, sc.Qty) else NONE
    seen = [name for name in _unit_names() if parse_unit(name)[1] == dim]
    detail = describe_type(ftype)
    return [Suggestion(name, "unit", detail) for name in seen]


def _unit_names() -> Iterable[str]:
    yield from UNITS
    yield from (f"{name}/s" for name, (_, dim) in UNITS.items() if dim == BYTES)  # bandwidths


def _parts(analysis: Analysis, kinds: Iterable[str]) -> list[Suggestion]:
    kinds = tuple(kinds)
    out = []
    for name, decl in analysis.program.declarations.items():
        if decl.kind.text in kinds:
            cited = analysis.value(name, "source") if decl.span.path != analysis.path else None
            out.append(Suggestion(name, "part", f"{decl.kind.text} — {decl.span.path}",
                                  cited if isinstance(cited, str) else ""))
    for part in std_parts():
        if part.kind in kinds and part.name not in analysis.program.declarations:
            out.append(Suggestion(part.name, "part", f"{part.kind} — {part.library} (adds the import)",
                                  part.source, needs_import=part.library))
    return out


def _targets(analysis: Analysis) -> list[Suggestion]:
    out = []
    for name, decl in analysis.program.declarations.items():
        if decl.kind.text == "cluster":
            out.append(Suggestion(name, "part", "cluster"))
            for key in analysis.program.bodies.get(name, {}):
                if key.startswith("partition "):
                    out.append(Suggestion(f"{name}.{key.split()[1]}", "part", "partition"))
    return out


def _arguments(text: str, paren: int, prefix: str) -> list[Suggestion]:
    call = _CALL.search(text, max(0, text.rfind("\n", 0, paren)), paren)
    if call is None or not re.fullmatch(r"\s*\w*", prefix):
        return []
    form = sc.TOPOLOGY.forms.get(call["call"])
    if form is None:
        return []
    return [Suggestion(name, "field", describe_type(t), insert=f"{name} = ") for name, t in form.args.items()]


def _call_text(name: str, form: sc.Constructor) -> str:
    if not form.args:
        return name
    return f"{name}(" + ", ".join(f"{a} = " for a in form.required or form.args) + ")"


def _first_comment(path) -> str:
    try:
        first = read_bounded(path, MAX_SOURCE_BYTES, "too large").decode("utf-8", "replace").splitlines()[0]
    except (OSError, IndexError):
        return ""
    return first.lstrip("# ").strip()
