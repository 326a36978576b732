"""The Pygments lexer: found through its entry point, and it tokenises every shipped
design without error tokens, with numbers and their units told apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygments import lex
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, Operator

ROOT = Path(__file__).resolve().parents[2]
DESIGNS = sorted((ROOT / "examples").glob("*.gcl")) + sorted((ROOT / "dsl" / "std").glob("*.gcl"))


def test_the_entry_point_registers_the_lexer():
    assert type(get_lexer_by_name("gcl")).__name__ == "GclLexer"
    assert type(get_lexer_for_filename("pod.gcl")).__name__ == "GclLexer"


@pytest.mark.parametrize("path", DESIGNS, ids=lambda p: p.name)
def test_every_shipped_design_lexes_cleanly(path: Path):
    tokens = list(lex(path.read_text(encoding="utf-8"), get_lexer_by_name("gcl")))
    assert not [value for kind, value in tokens if kind in Error]
    assert "".join(value for _, value in tokens) == path.read_text(encoding="utf-8")


def test_tokens_of_a_field_line():
    text = 'chip H extends H100_SXM {\n  hbm { bandwidth = 3.35 TB/s  capacity = 80 GB }  # [sheet]\n  units = 8 x DGX\n}\n'
    kinds = {value: kind for kind, value in lex(text, get_lexer_by_name("gcl")) if value.strip()}
    assert kinds["chip"] in Keyword.Declaration and kinds["H"] in Name.Class and kinds["H100_SXM"] in Name.Class
    assert kinds["3.35"] in Number and kinds["TB/s"] in Keyword.Type and kinds["GB"] in Keyword.Type
    assert kinds["bandwidth"] in Name.Attribute and kinds["hbm"] in Name.Tag
    assert kinds["x"] in Operator.Word
    assert kinds["DGX"] in Name and kinds["# [sheet]"] in Comment
