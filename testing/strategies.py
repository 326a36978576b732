"""Hypothesis strategies for valid GCL syntax trees (and commented source text).

`modules()` draws a whole `ast.Module` that the parser could have produced, apart from
spans and comments: generated modules carry no comments, because a comment's place is
its span. `commented_sources()` covers comments instead: it prints a module and puts
comments into the text between tokens and at line starts.

What is *not* generated, and why:

* identifiers equal to a keyword (`x bidir sparse extends true false import param`);
* identifiers that merely *start* with `bidir` or `sparse` (`sparse_ratio`): the
  grammar's `MARKER.4: "bidir" | "sparse"` is a prioritized regex with no word
  boundary, so right after a value (`a = b` then `sparse_ratio = 2` on the next line)
  the lexer splits the name into the marker `sparse` and the name `_ratio`. Such an
  identifier is valid in the AST but cannot always be printed back.
* numbers without a unit that are immediately followed by a word: the `QUANTITY`
  terminal would take the word as the unit. The formatter never prints a number next
  to a word except for `x`, `bidir` and `sparse`, which `QUANTITY` refuses as units,
  so every `Number` is safe; units are drawn from `UNITS` (real ones), none a keyword.
"""

from __future__ import annotations

import functools

import attrs
from hypothesis import assume, strategies as st

from ..dsl import ast
from ..dsl.source import Span

KEYWORDS = frozenset({"x", "bidir", "sparse", "extends", "true", "false", "import", "param"})
UNITS = ("GB", "TB/s", "Gb/s", "W", "kW", "MW", "GHz", "PFLOPS", "%", "us", "B", "T", "GiB", "kWh")
CHINESE_NAMES = ("名字", "节点", "带宽", "功耗", "集群")
LONG_NAMES = ("interconnect_bandwidth_per_direction", "maximum_sustained_power_draw")
NUMBER_TEXTS = ("8", "3.35", "1_000", "1e9", ".5", "0", "700", "2.5e-3", "1E6", "80", "1_024.5")
COMPARISONS = ("<=", ">=", "==", "<", ">")
MARKERS = ("bidir", "sparse")


def _usable(name: str) -> bool:
    return name not in KEYWORDS and not name.startswith(MARKERS)


@functools.cache
def identifiers() -> st.SearchStrategy[ast.Identifier]:
    ascii_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True).filter(_usable)
    names = st.one_of(
        ascii_names,
        st.sampled_from(("a", "b", "hbm", "gpu", "tdp", "H100", "B200", "_x")),
        st.sampled_from(CHINESE_NAMES + LONG_NAMES),
    )
    return st.builds(ast.Identifier, names)


@functools.cache
def dotted() -> st.SearchStrategy[ast.Dotted]:
    return st.builds(ast.Dotted, st.lists(identifiers(), min_size=1, max_size=3).map(tuple))


def numbers() -> st.SearchStrategy[ast.Number]:
    texts = st.one_of(
        st.sampled_from(NUMBER_TEXTS),
        st.integers(0, 10**9).map(str),
        st.floats(0, 1e6, allow_nan=False, allow_infinity=False).map(lambda x: repr(x) if x == 0 or x >= 1e-29 else "0.5"),
    )
    return st.builds(ast.Number, texts, st.none() | st.sampled_from(UNITS))


def strings() -> st.SearchStrategy[ast.String]:
    tricky = st.sampled_from(('"', "\\", "\n", "\t", "\x00", "\r", "\u2028", "名字", "é", "\U0001f600"))
    text = st.lists(st.one_of(st.text(max_size=3), tricky), max_size=4).map("".join)
    return st.builds(ast.String, text)


def atoms() -> st.SearchStrategy:
    ratio_part = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,2})?", fullmatch=True)
    return st.one_of(
        numbers(),
        st.builds(ast.Ratio, ratio_part, ratio_part),
        strings(),
        st.builds(ast.Bool, st.booleans()),
        st.builds(ast.Ref, dotted()),
    )


@functools.cache
def expressions(depth: int = 2) -> st.SearchStrategy:
    """Expressions whose override blocks nest at most `depth` deep."""

    def extend(inner):
        return st.one_of(
            st.builds(ast.BinOp, st.sampled_from("+-*/"), inner, inner),
            st.builds(ast.Neg, inner),
            st.builds(ast.Marked, inner, st.sampled_from(MARKERS)),
            st.builds(ast.Call, identifiers(), st.lists(st.builds(ast.Arg, identifiers(), inner),
                                                        max_size=3).map(tuple)),
            st.builds(ast.ListExpr, st.lists(inner, max_size=3).map(tuple)),
            st.builds(ast.Multiplicity, inner, dotted(), _overrides(depth)),
        )

    return st.recursive(atoms(), extend, max_leaves=8)


def _overrides(depth: int) -> st.SearchStrategy:
    if depth <= 0:
        return st.none() | st.just(())
    return st.none() | st.lists(members(depth - 1), max_size=6).map(tuple)


@functools.cache
def members(depth: int = 2) -> st.SearchStrategy:
    """Fields, constraints and blocks; blocks and override blocks nest at most `depth` deep."""
    values = expressions(min(depth, 1))
    fields = st.builds(ast.Field, dotted(), values)
    constraints = st.builds(ast.Constraint, dotted(), st.sampled_from(COMPARISONS), values)
    if depth <= 0:
        return fields | constraints
    inner = st.lists(members(depth - 1), max_size=6).map(tuple)
    blocks = st.builds(ast.Block, identifiers(), st.none() | identifiers(), inner)
    return st.one_of(fields, constraints, blocks)


def items() -> st.SearchStrategy:
    strings_ = st.text(max_size=12)
    declarations = st.builds(
        ast.Declaration, identifiers(), identifiers(), st.none() | dotted(),
        st.lists(members(2), max_size=6).map(tuple),
    )
    return st.one_of(
        st.builds(ast.Import, strings_),
        st.builds(ast.Param, identifiers(), expressions(1)),
        declarations,
    )


def modules() -> st.SearchStrategy[ast.Module]:
    """Valid modules without comments (see the module docstring)."""
    return st.builds(ast.Module, st.lists(items(), max_size=4).map(tuple))


def comment_texts() -> st.SearchStrategy[str]:
    chars = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))
    body = st.one_of(st.text(chars, max_size=12), st.sampled_from(("注释：中文", " TODO 名字", "")))
    return body.map(lambda text: ("#" + text).rstrip())


@st.composite
def commented_sources(draw) -> str:
    """A formatted module with comments put in between its tokens (a node's start or end)
    and at line starts: end-of-line comments, own-line comments and blank lines.

    A new line can change what a line means (a name after a unitless number may become
    its unit once a comment follows it); such a text is still a module, and the laws are
    checked against its own parse. Texts that no longer parse are rejected."""
    from ..dsl import ParseError, parse
    from ..dsl.format import format_module

    text = format_module(draw(modules()))
    places = sorted(_boundaries(parse(text)) | {i + 1 for i, ch in enumerate(text) if ch == "\n"})
    inserts = draw(st.lists(st.tuples(st.sampled_from(places), st.sampled_from(("  ", "\n", "\n\n", "\t")),
                                      comment_texts()), max_size=6))
    for at, before, comment in sorted(inserts, key=lambda t: -t[0]):
        text = text[:at] + before + comment + "\n" + text[at:]
    try:
        parse(text)
    except ParseError:
        assume(False)
    return text


def _boundaries(module: ast.Module) -> set[int]:
    """Where the module's nodes start and end: every one a token boundary."""
    found, stack = {0}, [module]
    while stack:
        node = stack.pop()
        span = getattr(node, "span", None)
        if span is not None:
            found.update((span.start, span.end))
        for attribute in attrs.fields(type(node)):
            child = getattr(node, attribute.name)
            children = child if isinstance(child, tuple) else (child,)
            stack.extend(c for c in children if attrs.has(type(c)) and not isinstance(c, Span))
    return found
