"""The formatter's laws over generated syntax trees: printing keeps the tree, and
formatting is a fixed point (also with comments put in at random lines)."""

from __future__ import annotations

from hypothesis import given

from gclc.dsl import ast, parse
from gclc.dsl.format import format_module, format_text
from gclc.testing.strategies import commented_sources, expressions, members, modules


def _lines_are_clean(text: str) -> bool:
    return (text == "" or text.endswith("\n") and not text.endswith("\n\n")) and all(
        line == line.rstrip() for line in text.split("\n"))


@given(modules())
def test_printing_a_module_keeps_the_tree(module):
    text = format_module(module)
    assert parse(text) == module, text
    assert _lines_are_clean(text)


@given(modules())
def test_formatting_is_idempotent(module):
    text = format_module(module)
    assert format_text(text) == text


@given(expressions())
def test_printing_an_expression_keeps_it(expr):
    module = ast.Module((ast.Param(ast.Identifier("p"), expr),))
    assert parse(format_module(module)) == module


@given(members())
def test_printing_a_member_keeps_it(member):
    module = ast.Module((ast.Declaration(ast.Identifier("chip"), ast.Identifier("A"), None, (member,)),))
    assert parse(format_module(module)) == module


@given(commented_sources())
def test_comments_survive_formatting_in_order(source):
    original = parse(source)
    text = format_text(source)
    assert parse(text) == original, text  # the tree, and every comment's text in order
    assert format_text(text) == text
    assert _lines_are_clean(text)
