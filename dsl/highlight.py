"""A Pygments lexer for GCL, registered as the `gcl` lexer (entry point
`pygments.lexers`), so Sphinx, MkDocs, `pygmentize` and `gclc --color` colour it."""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

KINDS = ("chip", "cpu", "nic", "dpu", "switch", "node", "supernode", "fabric", "cluster", "model", "train", "serve")
_NAME = r"[^\W\d]\w*"
# A unit directly after a number on the same line (`80 GB`, `3.35 TB/s`, `90%`), unless the
# word starts the next member (`700 W  hbm {`, `8 x H100`).
_UNIT = r"(?:%|(?!(?:x|bidir|sparse)\b)[^\W\d]\w*(?:/[^\W\d]\w*)?\b(?![ \t]*[=<>{(.]))"


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
            (rf"({'|'.join(KINDS)})(\s+)({_NAME})(\s+)(extends)(\s+)({_NAME})",
             bygroups(Keyword.Declaration, Whitespace, Name.Class, Whitespace, Keyword, Whitespace, Name.Class)),
            (rf"({'|'.join(KINDS)})(\s+)({_NAME})(?=\s*\{{)", bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            (r"(subject)(\s+)(to)\b", bygroups(Keyword, Whitespace, Keyword)),
            (words(("true", "false"), suffix=r"\b"), Keyword.Constant),
            (words(("bidir", "sparse"), suffix=r"\b"), Keyword.Pseudo),
            (rf"\bx(?=[ \t]+{_NAME})", Operator.Word),
            (r"\d+(?:\.\d+)?:\d+(?:\.\d+)?", Number),
            (rf"((?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)([ \t]*)({_UNIT})",
             bygroups(Number, Whitespace, Keyword.Type)),
            (r"(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", Number),
            (rf"{_NAME}(?:\.{_NAME})*(?=\s*(?:=(?!=)|<=|>=|==|<|>))", Name.Attribute),
            (rf"{_NAME}(?=\s*\()", Name.Function),
            (rf"{_NAME}(?=\s*\{{)", Name.Tag),
            (_NAME, Name),
            (r"<=|>=|==|[=<>+\-*/]", Operator),
            (r"[{}()\[\],.]", Punctuation),
            (r".", Text),
        ],
    }
