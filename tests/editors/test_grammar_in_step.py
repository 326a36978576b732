"""The TextMate grammar and the Pygments lexer (dsl/highlight.py) cover the language as the
compiler defines it. The sets are derived, not listed: declaration kinds, labelled blocks,
two-word blocks and constructors from the checker's schema (compiler/schema.py), keywords
and markers from the lark grammar's terminals (grammar/gcl.lark), units from dsl/units.py.
Each member is written into a line of GCL and must come out of both highlighters in the
scope of its kind; a keyword the lark grammar gains without a probe here fails the test."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
from lark import Lark
from pygments import lex
from pygments.token import Keyword, Name, Operator

from gclc.compiler import schema
from gclc.dsl import highlight
from gclc.dsl.highlight import GclLexer
from gclc.dsl.units import UNITS

ROOT = Path(__file__).resolve().parents[2]


def _schema_values() -> list:
    """Every field type and block reachable from the schema's module-level values."""
    seen: dict[int, object] = {}

    def walk(value):
        if id(value) in seen or isinstance(value, (str, int, float)) or value is None:
            return
        seen[id(value)] = value
        if attrs.has(type(value)):
            for field in attrs.fields(type(value)):
                walk(getattr(value, field.name))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    for value in vars(schema).values():
        walk(value)
    return list(seen.values())


VALUES = _schema_values()
KINDS = set(schema.KINDS)
LABELS = {label for v in VALUES if isinstance(v, schema.Block) for label in v.labelled}
TWO_WORDS = {name for v in VALUES if isinstance(v, schema.Block) for name in v.blocks if " " in name}
CONSTRUCTORS = {form for v in VALUES if isinstance(v, schema.Construct) for form in v.forms}


def lark_keywords() -> set[str]:
    """Words the lark grammar's terminals match literally: `import`, `true`, markers, `x`."""
    words = set()
    for terminal in Lark.open(str(ROOT / "grammar" / "gcl.lark"), parser="lalr").terminals:
        pattern = terminal.pattern.value
        if terminal.pattern.type == "str" and pattern.isalpha():
            words.add(pattern)
        elif terminal.pattern.type == "re" and (m := re.match(r"\(\?:([a-z|]+)\)|([a-z]+)\(\?", pattern)):
            words.update((m[1] or m[2]).split("|"))
    return words


# keyword -> (a line that uses it, the TextMate scope, the Pygments token type)
KEYWORDS = {
    "import": ('import "std/nvidia"', "keyword.control.import.gcl", Keyword.Namespace),
    "param": ("param nodes = 4", "storage.type.param.gcl", Keyword.Namespace),
    "extends": ("chip A extends H100_SXM {", "storage.modifier.extends.gcl", Keyword),
    "true": ("sp = true", "constant.language.boolean.gcl", Keyword.Constant),
    "false": ("sp = false", "constant.language.boolean.gcl", Keyword.Constant),
    "bidir": ("bandwidth = 800 Gb/s bidir", "storage.modifier.marker.gcl", Keyword.Pseudo),
    "sparse": ("peak = 1979 TFLOPS sparse", "storage.modifier.marker.gcl", Keyword.Pseudo),
    "x": ("units = 8 x DGX_H100", "keyword.operator.multiplicity.gcl", Operator.Word),
}


def probes() -> list[tuple[str, str, str, object]]:
    """(line of GCL, the word to find, its TextMate scope, its Pygments token type)."""
    found = [(line, word, scope, kind) for word, (line, scope, kind) in KEYWORDS.items()]
    found += [(f"{kind} Part {{", kind, "storage.type.gcl", Keyword.Declaration) for kind in sorted(KINDS)]
    found += [(f"{label} one {{", label, "keyword.other.block.gcl", Keyword) for label in sorted(LABELS)]
    for block in sorted(TWO_WORDS):
        found += [(f"{block} {{", word, "keyword.other.constraint.gcl", Keyword) for word in block.split()]
    found += [(f"shape = {name}(a = 1)", name, "support.function.constructor.gcl", Name.Builtin)
              for name in sorted(CONSTRUCTORS)]
    found += [(f"value = 2 {unit}", unit, "keyword.other.unit.gcl", Keyword.Type) for unit in sorted(UNITS)]
    found += [("rate = 2 TB/s", "TB/s", "keyword.other.unit.gcl", Keyword.Type),
              ("price = 0.08 USD/kWh", "USD/kWh", "keyword.other.unit.gcl", Keyword.Type)]
    return found


def test_the_derived_sets_are_what_the_language_has():
    assert {"chip", "cluster", "serve", "sweep", "workload"} <= KINDS and LABELS == {"partition", "job"}
    assert TWO_WORDS == {"subject to"} and {"fat_tree", "torus", "lognormal", "range"} <= CONSTRUCTORS
    assert set(KEYWORDS) == lark_keywords(), "a keyword of grammar/gcl.lark has no probe here (or lost its rule)"
    assert len(UNITS) > 90 and {"GB", "GiB", "Gb", "%", "µs"} <= set(UNITS)


def test_the_lexer_lists_what_the_schema_declares():
    assert set(highlight.KINDS) == KINDS
    assert set(highlight.LABELS) == LABELS
    assert set(highlight.CONSTRUCTORS) == CONSTRUCTORS


@pytest.mark.parametrize("line, word, scope, kind", probes(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_lexer_covers(line, word, scope, kind):
    tokens = [(kind_, value) for kind_, value in lex(line + "\n", GclLexer()) if value.strip()]
    assert (kind, word) in tokens or any(value == word and kind_ in kind for kind_, value in tokens), tokens


def test_the_textmate_grammar_covers(textmate, tmp_path):
    cases = probes()
    probe = tmp_path / "probe.gcl"
    probe.write_text("".join(line + "\n" for line, _, _, _ in cases), encoding="utf-8")
    tokens = textmate(tokens=[probe])["tokens"][str(probe)]
    wrong = []
    for number, (line, word, scope, _) in enumerate(cases, start=1):
        got = [scopes[1:] for at, text, scopes in tokens if at == number and text == word]
        if [scope] not in got:
            wrong.append((line, word, got))
    assert not wrong, f"(line, word, scopes it got): {wrong}"
