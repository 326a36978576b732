"""The disk cache of the parsed standard library (dsl/parse_cache.py): the same module as a
fresh parse, damaged entries replaced, a folder others may write to never used, user files
never cached."""

from __future__ import annotations

import os

import pytest

from gclc.dsl import SourceFile
from gclc.dsl.library import STD_ROOT
from gclc.dsl.parse_cache import cached_parse
from gclc.dsl.parser import grammar_text
from gclc.dsl.syntax import parse_source

TEXT = (STD_ROOT / "hosts.gcl").read_text(encoding="utf-8")
PATH = "std/hosts.gcl"


def _parse(text=TEXT, path=PATH, counter=None):
    def fresh():
        if counter is not None:
            counter.append(1)
        return parse_source(SourceFile(path, text))
    return cached_parse(text, path, grammar_text(), fresh)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("GCLC_CACHE_DIR", str(folder))
    return folder


def test_the_second_parse_comes_from_the_cache_and_is_the_same_module(cache):
    parses = []
    first = _parse(counter=parses)
    second = _parse(counter=parses)
    assert parses == [1]                                   # parsed once, then read back
    assert second == first == parse_source(SourceFile(PATH, TEXT))
    assert len(list(cache.glob("*.ast"))) == 1
    assert not os.stat(cache).st_mode & 0o077              # private to the user


def test_an_edited_file_is_parsed_afresh(cache):
    _parse()
    edited = TEXT + "\n# a comment added by the user\n"
    parses = []
    assert _parse(edited, counter=parses) == parse_source(SourceFile(PATH, edited))
    assert parses == [1] and len(list(cache.glob("*.ast"))) == 2


def test_a_damaged_entry_is_parsed_again_and_replaced(cache):
    _parse()
    (entry,) = cache.glob("*.ast")
    entry.write_bytes(b"not a pickle")
    parses = []
    assert _parse(counter=parses) == parse_source(SourceFile(PATH, TEXT))
    assert parses == [1] and entry.read_bytes() != b"not a pickle"


def test_a_folder_others_may_write_to_is_not_used(cache):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    parses = []
    _parse(counter=parses)
    _parse(counter=parses)
    assert parses == [1, 1] and not list(cache.glob("*.ast"))


def test_user_files_are_not_cached(cache):
    parses = []
    _parse(path="designs/mine.gcl", counter=parses)
    _parse(path="designs/mine.gcl", counter=parses)
    assert parses == [1, 1] and not cache.exists()


def test_an_empty_setting_turns_the_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv("GCLC_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parses = []
    _parse(counter=parses)
    _parse(counter=parses)
    assert parses == [1, 1] and not list(tmp_path.rglob("*.ast"))


def test_an_edited_parser_is_parsed_afresh(cache, monkeypatch):
    """Entries of an older dsl package (a development install between versions) are not
    unpickled into the new one: its code is part of the key."""
    from gclc.dsl import parse_cache

    _parse()
    monkeypatch.setattr(parse_cache, "_code", lambda: "another version of the dsl package")
    parses = []
    _parse(counter=parses)
    assert parses == [1] and len(list(cache.glob("*.ast"))) == 2
