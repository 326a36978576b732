"""The compiler's spans and diagnostics in LSP terms: 0-based lines, UTF-16 columns."""

from __future__ import annotations

from lsprotocol import types as t
from pygls.uris import from_fs_path

from ..dsl.diagnostics import Diagnostic, Severity
from ..dsl import ast
from ..dsl.source import SourceFile, Span
from ..compiler.files import read_text
from .analysis import Analysis, real_path

_SEVERITY = {Severity.ERROR: t.DiagnosticSeverity.Error, Severity.WARNING: t.DiagnosticSeverity.Warning,
             Severity.NOTE: t.DiagnosticSeverity.Information}


def lsp_range(span: Span, analysis: Analysis) -> t.Range:
    source = analysis.sources.get(span.path) or _read(span.path)
    return t.Range(_position(source, span.line, span.column), _position(source, span.end_line, span.end_column))


def _position(source: SourceFile | None, line: int, column: int) -> t.Position:
    text = source.line_text(line) if source is not None else ""
    units = len(text[: column - 1].encode("utf-16-le")) // 2 if column - 1 <= len(text) else column - 1
    return t.Position(max(0, line - 1), max(0, units))


def _read(path: str) -> SourceFile | None:
    """An imported file the analysis did not keep, through the one bounded reader."""
    text = read_text(path, real_path(path), None, [])
    return SourceFile(path, text) if text is not None else None


def lsp_diagnostics(analysis: Analysis, uri: str) -> list[t.Diagnostic]:
    """The document's diagnostics; one found in an imported file is shown on its import."""
    out = []
    for d in analysis.diagnostics:
        if d.subject is not None and d.subject.path == analysis.path:
            where = lsp_range(d.subject, analysis)
            message = d.summary
        else:
            where = _import_range(analysis, d)
            message = f"{d.subject}: {d.summary}" if d.subject is not None else d.summary
        notes = "\n".join(d.notes)
        related = [t.DiagnosticRelatedInformation(
            location=t.Location(uri=_uri(label.span.path), range=lsp_range(label.span, analysis)),
            message=label.message) for label in d.labels]
        if d.subject is not None and d.subject.path != analysis.path:
            related.insert(0, t.DiagnosticRelatedInformation(
                location=t.Location(uri=_uri(d.subject.path), range=lsp_range(d.subject, analysis)),
                message=d.subject_label or d.summary))
        out.append(t.Diagnostic(range=where, message=message + (f"\n{notes}" if notes else ""),
                                severity=_SEVERITY[d.severity], code=d.code, source="gclc",
                                related_information=related or None))
    return out


def _import_range(analysis: Analysis, d: Diagnostic) -> t.Range:
    """The import that led to the file the diagnostic is in, else the first line."""
    for item in analysis.module.items if analysis.module else ():
        if isinstance(item, ast.Import) and d.subject is not None and item.path.removesuffix(".gcl") in d.subject.path:
            return lsp_range(item.span, analysis)
    return t.Range(t.Position(0, 0), t.Position(0, 0))


def _uri(path: str) -> str:
    return from_fs_path(str(real_path(path).resolve())) or path
