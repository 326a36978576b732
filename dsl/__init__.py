"""The GCL language: source files, the parser, the AST and the formatter."""

from __future__ import annotations

from . import ast
from .source import SourceFile, Span, source_text
from .syntax import ParseError, parse_source


def parse(text: str, path: str = "<string>") -> ast.Module:
    """Parse GCL text into a `Module`; raises `ParseError` (with diagnostics) on bad input."""
    return parse_source(SourceFile(path, source_text(text)))


__all__ = ["ParseError", "SourceFile", "Span", "ast", "parse"]
