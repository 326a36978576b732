"""The GCL language: source files, the parser, the AST and the formatter."""

from __future__ import annotations

from functools import lru_cache

from . import ast
from .parse_cache import cached_parse
from .parser import grammar_text
from .source import SourceFile, Span, source_text
from .syntax import ParseError, parse_source


def parse(text: str, path: str = "<string>") -> ast.Module:
    """Parse GCL text into a `Module`; raises `ParseError` (with diagnostics) on bad input."""
    return _parse(source_text(text), path)


@lru_cache(maxsize=64)
def _parse(text: str, path: str) -> ast.Module:
    """Modules are frozen, so a sweep that checks one file a thousand times parses it (and
    the standard library it imports) once per process; errors are raised, never cached."""
    return cached_parse(text, path, grammar_text(), lambda: parse_source(SourceFile(path, text)))


__all__ = ["ParseError", "SourceFile", "Span", "ast", "parse"]
