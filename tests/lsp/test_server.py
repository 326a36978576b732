"""The language server driven by a real LSP client (pytest-lsp) over stdio: `gclc lsp`
runs in a subprocess, as an editor would start it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "a100_cluster.gcl"
URI = EXAMPLE.as_uri()
TEXT = EXAMPLE.read_text(encoding="utf-8")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[sys.executable, "-m", "gclc", "lsp"]))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(t.InitializeParams(capabilities=t.ClientCapabilities()))
    yield
    await lsp_client.shutdown_session()


def _position(text: str, needle: str, into: int = 1) -> t.Position:
    offset = text.index(needle) + into
    line = text.count("\n", 0, offset)
    return t.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


async def _open(client: LanguageClient, text: str, version: int = 1) -> None:
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri=URI, language_id="gcl", version=version, text=text)))
    await client.wait_for_notification(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)


async def _close(client: LanguageClient) -> None:
    client.text_document_did_close(t.DidCloseTextDocumentParams(t.TextDocumentIdentifier(uri=URI)))
    await client.wait_for_notification(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)


@pytest.mark.asyncio(loop_scope="module")
async def test_an_error_typed_into_an_example_is_reported_where_it_is(client: LanguageClient):
    await _open(client, TEXT)
    assert list(client.diagnostics[URI]) == []  # the example is clean
    broken = TEXT.replace("budget   = 1.5 MW", "budget   = 1.5 GB")
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=broken)]))
    await client.wait_for_notification(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    (diagnostic,) = client.diagnostics[URI]
    assert diagnostic.code == "wrong-dimension"
    assert diagnostic.severity == t.DiagnosticSeverity.Error
    assert "`budget` must be a power" in diagnostic.message
    start = _position(broken, "1.5 GB", 0)
    assert diagnostic.range.start == start and diagnostic.range.end.character == start.character + len("1.5 GB")
    await _close(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_syntax_error_is_located_while_typing(client: LanguageClient):
    await _open(client, TEXT.replace("batch     = 1536", "batch     = 1536 +"))
    diagnostics = client.diagnostics[URI]
    assert diagnostics and diagnostics[0].code == "syntax"
    assert diagnostics[0].range.start.line == _position(TEXT, "batch     = 1536").line
    await _close(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_shows_a_fields_unit_value_and_source(client: LanguageClient):
    await _open(client, TEXT)
    hover = await client.text_document_hover_async(t.HoverParams(
        t.TextDocumentIdentifier(uri=URI), _position(TEXT, "budget   = 1.5 MW")))
    text = hover.contents.value
    assert "a power" in text and "`W`" in text  # what the field must be, and its unit
    assert "value: `1.5 MW`" in text
    assert f"a100_cluster.gcl:{_position(TEXT, 'budget   = 1.5 MW').line + 1}" in text  # where it is set
    # An inherited std value: its data-sheet source comes from the comment on its line.
    hover = await client.text_document_hover_async(t.HoverParams(
        t.TextDocumentIdentifier(uri=URI), _position(TEXT, "x DGX_A100\n", 3)))
    assert "node DGX_A100" in hover.contents.value and "std/nvidia.gcl" in hover.contents.value
    assert "source:" in hover.contents.value
    await _close(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_definition_goes_into_std(client: LanguageClient):
    await _open(client, TEXT)
    location = await client.text_document_definition_async(t.DefinitionParams(
        t.TextDocumentIdentifier(uri=URI), _position(TEXT, "extends HDR_FatTree", 10)))
    assert location.uri.endswith("/std/network.gcl")
    std_text = (ROOT / "dsl" / "std" / "network.gcl").read_text(encoding="utf-8")
    assert location.range.start == _position(std_text, "fabric HDR_FatTree", len("fabric "))
    await _close(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_offers_std_parts_with_their_import(client: LanguageClient):
    typed = TEXT + "\nnode Mine {\n  gpus = 8 x MI3"
    await _open(client, typed)
    end = t.Position(line=typed.count("\n"), character=len(typed.rsplit("\n", 1)[1]))
    result = await client.text_document_completion_async(t.CompletionParams(t.TextDocumentIdentifier(uri=URI), end))
    items = {item.label: item for item in result.items}
    assert "MI300X" in items and "DGX_A100" not in items  # chips only: `gpus` counts chips
    edit = items["MI300X"].additional_text_edits[0]
    assert edit.new_text == 'import "std/amd"\n'
    assert edit.range.start.line == _position(typed, 'import "std/nvidia"').line + 1
    # Units of the field's dimension after a number.
    typed = TEXT.replace("overhead = 60 kW", "overhead = 60 k")
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=typed)]))
    result = await client.text_document_completion_async(t.CompletionParams(
        t.TextDocumentIdentifier(uri=URI), _position(typed, "overhead = 60 k", len("overhead = 60 k"))))
    labels = {item.label for item in result.items}
    assert {"W", "kW", "MW"} <= labels and "GB" not in labels
    await _close(client)
