"""A Pygments lexer for GCL, registered as the `gcl` lexer (entry point
`pygments.lexers`), so Sphinx, MkDocs, `pygmentize` and `gclc --color` colour it.

Its twin for editors is the TextMate grammar `editors/vscode/syntaxes/gcl.tmLanguage.json`:
the same rules in the same order. tests/editors/test_grammar_in_step.py derives the
declaration kinds, labelled blocks and constructors from the checker's schema, the keywords
from grammar/gcl.lark and the units from dsl/units.py, and checks both cover them."""

from __future__ import annotations

import re

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

from .units import UNITS

KINDS = ("chip", "cpu", "nic", "dpu", "switch", "node", "supernode", "fabric", "cluster", "model", "train", "serve",
         "sweep", "workload", "tenant", "scheduler", "rl")
LABELS = ("partition", "job")  # blocks that repeat with a label: `partition h100 { ... }`
CONSTRUCTORS = ("fat_tree", "rail_optimized", "torus", "switched", "full_mesh",  # topologies
                "lognormal", "uniform", "exponential",  # request lengths
                "range")  # sweep axes
_NAME = r"[^\W\d]\w*"
_NUMBER = r"(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_UNIT_WORD = "(?:" + "|".join(re.escape(u) for u in sorted(UNITS, key=lambda u: (-len(u), u))) + ")"
# A unit directly after a number on the same line (`80 GB`, `3.35 TB/s`, `90%`), unless the
# word starts the next member (`seq = 8192` after `vocab = 128256  `).
_UNIT = rf"{_UNIT_WORD}(?:/{_UNIT_WORD})?(?![\w/])(?![ \t]*[=<>{{(.!])"


class GclLexer(RegexLexer):
    name = "GCL"
    aliases = ["gcl"]
    filenames = ["*.gcl"]
    mimetypes = ["text/x-gcl"]

    tokens = {
        "root": [
            (r"[ \t\r\n]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r'"(?:[^"\\\n]|\\.)*"', String.Double),
            (words(("import", "param"), suffix=r"\b"), Keyword.Namespace),
            (rf"({'|'.join(KINDS)})(\s+)({_NAME})(\s+)(extends)(\s+)({_NAME}(?:\.{_NAME})*)",
             bygroups(Keyword.Declaration, Whitespace, Name.Class, Whitespace, Keyword, Whitespace, Name.Class)),
            (rf"({'|'.join(KINDS)})(\s+)({_NAME})(?=\s*\{{)", bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            (rf"({'|'.join(LABELS)})(\s+)({_NAME})(?=\s*\{{)", bygroups(Keyword, Whitespace, Name.Tag)),
            (r"(subject)(\s+)(to)\b", bygroups(Keyword, Whitespace, Keyword)),
            (rf"{_NAME}(?:\.{_NAME})*(?=\s*(?:=(?!=)|<=|>=|==|<|>))", Name.Attribute),
            (words(("true", "false"), suffix=r"\b"), Keyword.Constant),
            (r"(?:bidir|sparse)\b(?![ \t]*[=.{<>])", Keyword.Pseudo),
            (rf"x(?![\w=])(?=[ \t]*[^\W\d])(?![ \t]*{_NAME}[ \t]*[=<>])", Operator.Word),
            (r"\d+(?:\.\d+)?:\d+(?:\.\d+)?", Number),
            (rf"({_NUMBER})([ \t]*)({_UNIT})", bygroups(Number, Whitespace, Keyword.Type)),
            (_NUMBER, Number),
            (words(CONSTRUCTORS, suffix=r"\b"), Name.Builtin),
            (rf"{_NAME}(?=\s*\()", Name.Function),
            (rf"{_NAME}(?=\s*\{{)", Name.Tag),
            (r"extends\b", Keyword),
            (_NAME, Name),
            (r"<=|>=|==|[=<>+\-*/]", Operator),
            (r"[{}()\[\],.]", Punctuation),
            (r".", Text),
        ],
    }
