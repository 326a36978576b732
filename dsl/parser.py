"""Text -> lark tree, with the grammar loaded once. The lark tree never leaves `dsl/`."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from lark import Lark, Token, Tree

GRAMMAR_PATH = Path(__file__).resolve().parent.parent / "grammar" / "gcl.lark"

_local = threading.local()  # comments seen by the lexer during the current parse


def _collect_comment(token: Token) -> None:
    _local.comments.append(token)


@functools.cache
def grammar_text() -> str:
    return GRAMMAR_PATH.read_text(encoding="utf-8")


@functools.cache
def lark_parser() -> Lark:
    return Lark(
        grammar_text(),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks={"COMMENT": _collect_comment},
        cache=True,  # lark keeps the LALR tables in a temp file keyed by the grammar's hash
    )


def parse_tree(text: str) -> tuple[Tree, list[Token]]:
    """The lark tree and the comment tokens of `text`; lark exceptions propagate."""
    _local.comments = []
    try:
        tree = lark_parser().parse(text)
        return tree, _local.comments
    finally:
        _local.comments = []
