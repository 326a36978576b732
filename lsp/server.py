"""The GCL language server (pygls, stdio): diagnostics as you type, hover, go to
definition and completion. `gclc lsp` runs `main()`.

Each change is checked after a short pause in typing (a check takes a few tenths of a
second on a large design), in a worker thread so that the server keeps answering.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__
from .analysis import Analysis, analyse, real_path
from .complete import Suggestion, complete
from .convert import lsp_diagnostics, lsp_range
from .definition import definition
from .hover import hover_text

DEBOUNCE_S = 0.2

_KINDS = {"field": t.CompletionItemKind.Field, "block": t.CompletionItemKind.Module,
          "unit": t.CompletionItemKind.Unit, "part": t.CompletionItemKind.Class,
          "keyword": t.CompletionItemKind.Keyword, "param": t.CompletionItemKind.Variable,
          "module": t.CompletionItemKind.File, "constructor": t.CompletionItemKind.Constructor}


class GclServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("gclc", __version__)
        self.analyses: dict[str, Analysis] = {}  # the last analysis of each document that parsed
        self.pending: dict[str, asyncio.Task] = {}

    def document(self, uri: str):
        return self.workspace.get_text_document(uri)

    def analysis(self, uri: str) -> Analysis:
        """The latest analysis; recomputed when the text changed since (a request raced the pause)."""
        doc = self.document(uri)
        current = self.analyses.get(uri)
        if current is None or current.text != doc.source:
            fresh = analyse(to_fs_path(uri) or uri, doc.source)
            if fresh.module is not None or current is None:
                self.analyses[uri] = current = fresh
        return current

    async def refresh(self, uri: str, delay: float) -> None:
        await asyncio.sleep(delay)
        doc = self.document(uri)
        text, version = doc.source, doc.version
        fresh = await asyncio.to_thread(analyse, to_fs_path(uri) or uri, text)
        if self.document(uri).version != version:
            return  # the user typed on; the next refresh reports
        if fresh.module is not None or uri not in self.analyses:
            self.analyses[uri] = fresh
        self.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=lsp_diagnostics(fresh, uri)))

    def schedule(self, uri: str, delay: float) -> None:
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self.refresh(uri, delay))


server = GclServer()


@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: GclServer, params: t.DidOpenTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, 0)


@server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(ls: GclServer, params: t.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE_S)


@server.feature(t.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: GclServer, params: t.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, 0)


@server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: GclServer, params: t.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.analyses.pop(uri, None)
    ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(t.TEXT_DOCUMENT_HOVER)
def hover(ls: GclServer, params: t.HoverParams) -> t.Hover | None:
    doc = ls.document(params.text_document.uri)
    analysis = ls.analysis(params.text_document.uri)
    if analysis.text != doc.source:
        return None  # the text does not parse now: positions in the old text would mislead
    text = hover_text(analysis, doc.offset_at_position(params.position))
    if text is None:
        return None
    return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=text))


@server.feature(t.TEXT_DOCUMENT_DEFINITION)
def goto_definition(ls: GclServer, params: t.DefinitionParams) -> t.Location | None:
    doc = ls.document(params.text_document.uri)
    analysis = ls.analysis(params.text_document.uri)
    if analysis.text != doc.source:
        return None
    target = definition(analysis, doc.offset_at_position(params.position))
    if target is None:
        return None
    if isinstance(target, Path):
        return t.Location(uri=from_fs_path(str(target.resolve())), range=t.Range(t.Position(0, 0), t.Position(0, 0)))
    return t.Location(uri=from_fs_path(str(real_path(target.path).resolve())), range=lsp_range(target, analysis))


@server.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions(trigger_characters=[" ", ".", "=", '"']))
def completion(ls: GclServer, params: t.CompletionParams) -> t.CompletionList:
    doc = ls.document(params.text_document.uri)
    analysis = ls.analysis(params.text_document.uri)
    found = complete(analysis, doc.source, doc.offset_at_position(params.position))
    return t.CompletionList(is_incomplete=False, items=[_item(s, doc.source) for s in found])


def _item(s: Suggestion, text: str) -> t.CompletionItem:
    edits = None
    if s.needs_import:
        line = _import_line(text)
        edits = [t.TextEdit(range=t.Range(t.Position(line, 0), t.Position(line, 0)),
                            new_text=f'import "{s.needs_import}"\n')]
    docs = t.MarkupContent(kind=t.MarkupKind.Markdown, value=s.documentation) if s.documentation else None
    return t.CompletionItem(label=s.label, kind=_KINDS.get(s.kind), detail=s.detail or None, documentation=docs,
                            insert_text=s.insert, additional_text_edits=edits)


def _import_line(text: str) -> int:
    """The line after the last import (or the first line), where a new import goes."""
    last = -1
    for number, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("import "):
            last = number
    return last + 1


def main(stdin=None) -> int:
    server.start_io(stdin)
    return 0
