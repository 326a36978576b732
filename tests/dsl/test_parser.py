"""The parser: one test per construct, checking the AST (spans do not take part in
equality) and, separately, the spans' lines and columns."""

from __future__ import annotations

import pytest

from gclc.dsl import ParseError, ast, parse
from gclc.dsl.source import Span


# ----------------------------------------------------------------- helpers


def ident(text: str) -> ast.Identifier:
    return ast.Identifier(text)


def dotted(text: str) -> ast.Dotted:
    return ast.Dotted(tuple(ident(part) for part in text.split(".")))


def ref(text: str) -> ast.Ref:
    return ast.Ref(dotted(text))


def num(text: str, unit: str | None = None) -> ast.Number:
    return ast.Number(text, unit)


def field(target: str, value) -> ast.Field:
    return ast.Field(dotted(target), value)


def members(text: str) -> tuple:
    """The members of the single declaration in `chip A { <text> }`."""
    module = parse("chip A {\n" + text + "\n}\n")
    (decl,) = module.items
    return decl.members


def value_of(expr_text: str):
    (item,) = parse(f"param p = {expr_text}\n").items
    return item.value


def at(span: Span) -> tuple[int, int, int, int]:
    return span.line, span.column, span.end_line, span.end_column


# ----------------------------------------------------------------- top level


def test_empty_module():
    module = parse("")
    assert module.items == () and module.comments == ()


def test_import():
    module = parse('import "std/nvidia"\nimport "parts/nics.gcl"\n', "d.gcl")
    assert module.items == (ast.Import("std/nvidia"), ast.Import("parts/nics.gcl"))
    assert at(module.items[1].span) == (2, 1, 2, 24)
    assert module.items[0].span.path == "d.gcl"


def test_param():
    (param,) = parse("param racks = 128\n").items
    assert param == ast.Param(ident("racks"), num("128"))
    assert at(param.span) == (1, 1, 1, 18)
    assert at(param.name.span) == (1, 7, 1, 12)
    assert at(param.value.span) == (1, 15, 1, 18)


def test_declaration_with_extends():
    (decl,) = parse("chip B200 extends H100 {\n  hbm.capacity = 192 GB\n}\n").items
    assert decl == ast.Declaration(ident("chip"), ident("B200"), dotted("H100"),
                                   (field("hbm.capacity", num("192", "GB")),))
    assert at(decl.kind.span) == (1, 1, 1, 5)
    assert at(decl.name.span) == (1, 6, 1, 10)
    assert at(decl.parent.span) == (1, 19, 1, 23)
    assert at(decl.span) == (1, 1, 3, 2)


def test_declaration_without_extends_and_empty_body():
    (decl,) = parse("nic CX7 {}").items
    assert decl == ast.Declaration(ident("nic"), ident("CX7"), None, ())


def test_unknown_kind_still_parses():
    """The kind is checked by the compiler (for a did-you-mean), not by the grammar."""
    (decl,) = parse("chp H100 { }").items
    assert decl.kind.text == "chp"


# ----------------------------------------------------------------- members


def test_nested_block():
    (block,) = members("  hbm { capacity = 80 GB  bandwidth = 3.35 TB/s }")
    assert block == ast.Block(ident("hbm"), None, (field("capacity", num("80", "GB")),
                                                   field("bandwidth", num("3.35", "TB/s"))))
    assert at(block.span) == (2, 3, 2, 50)
    assert at(block.members[1].span) == (2, 27, 2, 48)


def test_labelled_block():
    (block,) = members("  partition h100 {\n    units = 4 x DGX\n  }")
    assert block.name.text == "partition" and block.label == ident("h100")
    assert at(block.label.span) == (2, 13, 2, 17)
    assert block.members == (field("units", ast.Multiplicity(num("4"), dotted("DGX"))),)


def test_deeply_nested_blocks():
    (outer,) = members("  a { b { c { d = 1 } } }")
    inner = outer.members[0].members[0]
    assert inner.name.text == "c" and inner.members == (field("d", num("1")),)
    assert at(inner.members[0].span) == (2, 15, 2, 20)


def test_dotted_override():
    (member,) = members("  power.tdp = 1000 W")
    assert member == field("power.tdp", num("1000", "W"))
    assert [p.text for p in member.target.parts] == ["power", "tdp"]
    assert at(member.target.span) == (2, 3, 2, 12)
    assert at(member.target.parts[1].span) == (2, 9, 2, 12)


def test_constraint():
    comparisons = members("  power <= 100 MW  ttft < 200 ms  gpus == 8  mfu >= 40%  time > 1 h")
    assert [(c.target.text, c.op) for c in comparisons] == [
        ("power", "<="), ("ttft", "<"), ("gpus", "=="), ("mfu", ">="), ("time", ">")]
    assert all(isinstance(c, ast.Constraint) for c in comparisons)
    assert comparisons[0].value == num("100", "MW")
    assert at(comparisons[1].span) == (2, 20, 2, 33)


def test_whitespace_separated_members_on_one_line():
    fields = members("  capacity = 80 GB  bandwidth = 3.35 TB/s  stacks = 5  type = \"HBM3\"")
    assert [f.target.text for f in fields] == ["capacity", "bandwidth", "stacks", "type"]
    assert [f.span.column for f in fields] == [3, 21, 44, 56]


def test_number_followed_by_field_on_the_same_line():
    """`61` must not take `hidden` as its unit."""
    fields = members("  layers = 61  hidden = 7168  heads = 128  kv_heads = 128")
    assert fields == (field("layers", num("61")), field("hidden", num("7168")),
                      field("heads", num("128")), field("kv_heads", num("128")))
    assert at(fields[1].span) == (2, 16, 2, 29)


def test_number_followed_by_block_or_dotted_field_or_constraint():
    fields = members("  a = 5  hbm { b = 1 }\n  c = 6  d.e = 2\n  f = 7  power <= 3 W\n  g = 8  partition p { }")
    assert fields[0] == field("a", num("5"))
    assert isinstance(fields[1], ast.Block)
    assert fields[2] == field("c", num("6")) and fields[3] == field("d.e", num("2"))
    assert fields[4] == field("f", num("7")) and isinstance(fields[5], ast.Constraint)
    assert fields[6] == field("g", num("8")) and fields[7].label == ident("p")


# ----------------------------------------------------------------- expressions


def test_numbers_and_units():
    assert value_of("80 GB") == num("80", "GB")
    assert value_of("3.35 TB/s") == num("3.35", "TB/s")
    assert value_of("1_000") == num("1_000")
    assert value_of("1e9") == num("1e9")
    assert value_of(".5") == num(".5")
    assert value_of("15.6 T") == num("15.6", "T")
    assert value_of("2.5e-3 s") == num("2.5e-3", "s")
    assert value_of("80GB") == num("80", "GB")


def test_percentage():
    assert value_of("90%") == num("90", "%")
    assert value_of("12.5 %") == num("12.5", "%")
    assert at(value_of("90%").span) == (1, 11, 1, 14)


def test_ratio():
    assert value_of("3:1") == ast.Ratio("3", "1")
    assert value_of("1.5:1") == ast.Ratio("1.5", "1")
    assert at(value_of("3:1").span) == (1, 11, 1, 14)


def test_strings_and_booleans():
    assert value_of('"NVIDIA"') == ast.String("NVIDIA")
    assert value_of(r'"a \"quoted\" \\ word\n\t\u00e9"') == ast.String('a "quoted" \\ word\n\té')
    assert value_of("true") == ast.Bool(True) and value_of("false") == ast.Bool(False)


def test_references():
    assert value_of("racks") == ref("racks")
    assert value_of("H100.hbm.capacity") == ref("H100.hbm.capacity")
    assert at(value_of("H100.hbm.capacity").span) == (1, 11, 1, 28)


def test_markers():
    assert value_of("900 GB/s bidir") == ast.Marked(num("900", "GB/s"), "bidir")
    assert value_of("4.5 PFLOPS sparse") == ast.Marked(num("4.5", "PFLOPS"), "sparse")
    marked = value_of("(a + b) bidir")
    assert marked == ast.Marked(ast.BinOp("+", ref("a"), ref("b")), "bidir")
    assert at(value_of("900 GB/s bidir").span) == (1, 11, 1, 25)


def test_multiplicity():
    assert value_of("8 x H100") == ast.Multiplicity(num("8"), dotted("H100"))
    assert value_of("racks x DGX") == ast.Multiplicity(ref("racks"), dotted("DGX"))
    assert value_of("2 * n x std.H100") == ast.Multiplicity(ast.BinOp("*", num("2"), ref("n")), dotted("std.H100"))
    assert at(value_of("8 x H100").span) == (1, 11, 1, 19)


def test_multiplicity_with_overrides():
    value = value_of("2 x Grace {\n  cores = 72\n  power.tdp = 500 W\n}")
    assert value == ast.Multiplicity(num("2"), dotted("Grace"),
                                     (field("cores", num("72")), field("power.tdp", num("500", "W"))))
    assert at(value.span) == (1, 11, 4, 2)
    assert at(value.overrides[1].span) == (3, 3, 3, 20)


def test_multiplicity_with_empty_overrides():
    assert value_of("2 x Grace { }").overrides == ()
    assert value_of("2 x Grace").overrides is None


def test_call():
    value = value_of("fat_tree(tiers = 2, radix = 64, oversubscription = 3:1)")
    assert value == ast.Call(ident("fat_tree"), (
        ast.Arg(ident("tiers"), num("2")), ast.Arg(ident("radix"), num("64")),
        ast.Arg(ident("oversubscription"), ast.Ratio("3", "1"))))
    assert at(value.args[1].span) == (1, 31, 1, 41)
    assert value_of("switched()") == ast.Call(ident("switched"), ())
    assert value_of("f(a = 1,)") == ast.Call(ident("f"), (ast.Arg(ident("a"), num("1")),))


def test_list():
    assert value_of("[16, 16, 16]") == ast.ListExpr((num("16"), num("16"), num("16")))
    assert value_of("[]") == ast.ListExpr(())
    assert value_of("[Colossus.h100, Colossus.b200,]") == ast.ListExpr((ref("Colossus.h100"), ref("Colossus.b200")))
    assert at(value_of("[1, 2]").items[1].span) == (1, 15, 1, 16)


def test_arithmetic_precedence():
    # 1 + 2 * 3 - -4 / 5  ==  (1 + (2 * 3)) - ((-4) / 5)
    assert value_of("1 + 2 * 3 - -4 / 5") == ast.BinOp(
        "-",
        ast.BinOp("+", num("1"), ast.BinOp("*", num("2"), num("3"))),
        ast.BinOp("/", ast.Neg(num("4")), num("5")),
    )
    # left associativity
    assert value_of("8 / 4 / 2") == ast.BinOp("/", ast.BinOp("/", num("8"), num("4")), num("2"))
    assert value_of("8 - 4 - 2") == ast.BinOp("-", ast.BinOp("-", num("8"), num("4")), num("2"))
    # parentheses
    assert value_of("(1 + 2) * 3") == ast.BinOp("*", ast.BinOp("+", num("1"), num("2")), num("3"))
    # a marker binds tighter than arithmetic; multiplicity is loosest
    assert value_of("2 * 900 GB/s bidir") == ast.BinOp("*", num("2"), ast.Marked(num("900", "GB/s"), "bidir"))
    assert value_of("1 + 1 x A") == ast.Multiplicity(ast.BinOp("+", num("1"), num("1")), dotted("A"))


def test_binop_spans():
    value = value_of("1 + 2 * 3")
    assert at(value.span) == (1, 11, 1, 20)
    assert at(value.right.span) == (1, 15, 1, 20)
    assert at(value.right.left.span) == (1, 15, 1, 16)


# ----------------------------------------------------------------- text encodings and comments


def test_comments_are_kept_with_spans():
    module = parse("# head\nparam a = 1  # tail\n")
    assert [c.text for c in module.comments] == ["# head", "# tail"]
    assert at(module.comments[1].span) == (2, 14, 2, 20)
    assert module.items == (ast.Param(ident("a"), num("1")),)


def test_chinese_strings_comments_and_identifiers():
    text = '# 中文注释\nchip 芯片 {\n  vendor = "华为"  # 厂商\n  带宽 = 400 Gb/s\n}\n'
    module = parse(text)
    (decl,) = module.items
    assert decl.name == ident("芯片")
    assert decl.members == (field("vendor", ast.String("华为")), field("带宽", num("400", "Gb/s")))
    assert [c.text for c in module.comments] == ["# 中文注释", "# 厂商"]
    assert at(decl.name.span) == (2, 6, 2, 8)  # columns count characters, not bytes
    assert at(decl.members[1].span) == (4, 3, 4, 16)
    assert at(module.comments[1].span) == (3, 18, 3, 22)


def test_chinese_name_after_a_number_is_a_field_not_a_unit():
    assert members("  a = 5  带宽 = 3") == (field("a", num("5")), field("带宽", num("3")))


def test_byte_order_mark_is_ignored():
    with_bom = parse("\ufeffparam a = 1\n")
    assert with_bom == parse("param a = 1\n")
    assert at(with_bom.items[0].span) == (1, 1, 1, 12)


def test_crlf_line_endings():
    text = "chip A {\r\n  hbm { capacity = 80 GB }\r\n  layers = 61\r\n}\r\n"
    (decl,) = parse(text).items
    assert decl.members == (ast.Block(ident("hbm"), None, (field("capacity", num("80", "GB")),)),
                            field("layers", num("61")))
    assert at(decl.members[1].span) == (3, 3, 3, 14)
    assert decl == parse(text.replace("\r\n", "\n")).items[0]


def test_tabs_and_blank_lines():
    (decl,) = parse("\n\nchip A {\n\tclock = 2 GHz\n\n}\n").items
    assert decl.members == (field("clock", num("2", "GHz")),)
    assert at(decl.members[0].span) == (4, 2, 4, 15)


# ----------------------------------------------------------------- errors


@pytest.mark.parametrize("text, code, line, column", [
    ("chip A { x = = 1 }", "syntax", 1, 14),
    ("chip A {\n  b = 1\n", "unclosed", 1, 8),
    ("chip A { }\n}", "syntax", 2, 1),
    ("chip A { a: 1 }", "bad-character", 1, 11),
    ('chip A { a = "x\n}', "unterminated-string", 1, 14),
    ('chip A { a = "\\q" }', "bad-escape", 1, 15),
    ("chip A { a = 1; b = 2 }", "bad-character", 1, 15),
    ("param p = 1e309", "number-range", 1, 11),
    ("param p = " + "(" * 100 + "1" + ")" * 100, "too-deep", 1, 75),
    ("chip A {\x00}", "nul-byte", 1, 9),
])
def test_errors_are_located(text, code, line, column):
    with pytest.raises(ParseError) as info:
        parse(text, "e.gcl")
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.code == code
    assert (diagnostic.subject.path, diagnostic.subject.line, diagnostic.subject.column) == ("e.gcl", line, column)


# ----------------------------------------------------------------- recovery


@pytest.mark.parametrize("text, line, column, found", [
    ("fabric F {\n  latency = 0.6 us us\n  kind = infiniband\n}\n", 2, 20, "name `us`"),
    ("train j {\n  batch = 2048 +\n  tokens = 1 T\n}\n", 2, 16, "end of the line after `+`"),
    ("train j {\n  batch =\n  tokens = 1 T\n}\n", 2, 9, "end of the line after `=`"),
    ("nic N {\n  bandwidth = 400 Gb/s  ports\n  protocol = infiniband\n}\n", 2, 25, "name `ports`"),
    ("param a = 16 *\nparam b = 2\n", 1, 14, "end of the line after `*`"),
    ("param a = 16 *", 1, 14, "end of the line after `*`"),
])
def test_a_mistake_is_reported_on_its_own_line(text, line, column, found):
    with pytest.raises(ParseError) as info:
        parse(text, "e.gcl")
    (diagnostic,) = info.value.diagnostics
    assert (diagnostic.code, diagnostic.subject.line, diagnostic.subject.column) == ("syntax", line, column)
    assert diagnostic.summary == f"unexpected {found}"


def test_every_syntax_error_is_reported_in_one_run():
    lines = ["chip A {", "  clock = 2 GHz GHz", "  cores = = 132", "  l2 = 50 MB;", "}", "nic B {",
             "  bandwidth = 400 Gb/s  ports", "  protocol = infiniband", "}", "param racks = 16 *"]
    with pytest.raises(ParseError) as info:
        parse("\n".join(lines) + "\n", "e.gcl")
    assert [(d.code, d.subject.line) for d in info.value.diagnostics] == [
        ("syntax", 2), ("syntax", 3), ("bad-character", 4), ("syntax", 7), ("syntax", 10)]


def test_recovery_reports_no_consequence_of_its_own_blanking():
    # The blanked header leaves a bare `{`: what follows is not reported as a second error.
    with pytest.raises(ParseError) as info:
        parse("chip = A {\n  clock = 2 GHz\n}\nchip B { clock = 1 GHz }\n", "e.gcl")
    assert [d.subject.line for d in info.value.diagnostics] == [1]


@pytest.mark.parametrize("text, line, column, help_", [
    ("chip A {\n  power { us\n    tdp = 1 W\n  }\n}\n", 2, 11, "a field is written `us = value`"),
    ('import "std/hosts" foo\nimport "std/network"\n', 1, 20, "an import names one file"),
    ("chip A {\n  clock = 1 GHz\n} us\nchip B { clock = 1 GHz }\n", 3, 3, "write `us = ...`"),
])
def test_a_stray_word_is_reported_where_it_stands(text, line, column, help_):
    with pytest.raises(ParseError) as info:
        parse(text, "e.gcl")
    (diagnostic,) = info.value.diagnostics
    assert (diagnostic.subject.line, diagnostic.subject.column) == (line, column)
    assert any(help_ in note for note in diagnostic.notes), diagnostic.notes
