"""The canonical formatter: each construct, alignment, one-line vs multi-line blocks,
comments in every position, parentheses, and idempotence of every case."""

from __future__ import annotations

import textwrap

import pytest

from gclc.dsl import ParseError, ast, parse
from gclc.dsl.format import format_module, format_text


def fmt(source: str) -> str:
    """Format `source`, checking that the result keeps the module and is a fixed point."""
    out = format_text(source)
    assert parse(out) == parse(source), out
    assert format_text(out) == out, out
    assert out == "" or out.endswith("\n") and not out.endswith("\n\n")
    assert all(line == line.rstrip() for line in out.split("\n")), out
    return out


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def value(expr: str) -> str:
    """How the expression prints as a param value."""
    out = fmt(f"param p = {expr}\n")
    assert out.startswith("param p = ") and out.count("\n") == 1, out
    return out[len("param p = "):-1]


# ----------------------------------------------------------------- top level


def test_empty_module_prints_nothing():
    assert fmt("") == ""
    assert fmt("\n\n   \n") == ""


def test_groups_imports_params_and_separates_declarations():
    # (a number followed by `param` on the same line would take it for a unit: keep newlines)
    source = 'import "a.gcl"  import "b.gcl" param n = 8\nparam m=2 chip A {} chip B extends base.A {} param k = 1'
    assert fmt(source) == dedent('''
        import "a.gcl"
        import "b.gcl"

        param n = 8
        param m = 2

        chip A {}

        chip B extends base.A {}

        param k = 1
    ''')


def test_collapses_blank_lines_between_top_level_items():
    assert fmt('\n\n\nimport "a"\n\n\n\nimport "b"\n\n\n\n\nchip A {}\n\n\n') == 'import "a"\nimport "b"\n\nchip A {}\n'


def test_declaration_members_one_per_line_with_two_space_indent():
    # (`700 W  hbm {` would read `W hbm` as a labelled block: a unit is never taken before
    # `name {`; the formatter only ever puts fields and constraints on one line)
    assert fmt("chip A { tdp = 700 W\nhbm { capacity = 80 GB } partition h100 { a = 1 } }") == dedent("""
        chip A {
          tdp = 700 W
          hbm { capacity = 80 GB }
          partition h100 { a = 1 }
        }
    """)


# ----------------------------------------------------------------- expressions


@pytest.mark.parametrize("source, expected", [
    ("8", "8"),
    ("1_000", "1_000"),
    ("3.35   TB/s", "3.35 TB/s"),
    ("1e9 GB", "1e9 GB"),
    (".5", ".5"),
    ("90 %", "90%"),
    ("90%", "90%"),
    ("1:1", "1:1"),
    ("3.5:1", "3.5:1"),
    ("true", "true"),
    ("false", "false"),
    ("B200 . hbm . capacity", "B200.hbm.capacity"),
    ("fat_tree( tiers=2 ,radix=64, )", "fat_tree(tiers = 2, radix = 64)"),
    ("f()", "f()"),
    ("[ a,b , ]", "[a, b]"),
    ("[]", "[]"),
    ("900 GB/s   bidir", "900 GB/s bidir"),
    ("4.5 PFLOPS sparse", "4.5 PFLOPS sparse"),
    ("8 x H100", "8 x H100"),
    ("8   x  nvidia.H100 {}", "8 x nvidia.H100 {}"),
    ("2 x Grace {cores=72}", "2 x Grace { cores = 72 }"),
    ("-  8", "-8"),
    ("- -a", "--a"),
    ("-.5", "-.5"),
])
def test_each_expression(source, expected):
    assert value(source) == expected


@pytest.mark.parametrize("source, expected", [
    ('"plain"', '"plain"'),
    ('"a\\"b"', '"a\\"b"'),
    ('"back\\\\slash"', '"back\\\\slash"'),
    ('"tab\\tnew\\nline"', '"tab\\tnew\\nline"'),
    ('"nul\\u0000 cr\\u000D"', '"nul\\u0000 cr\\u000d"'),
    ('"\\u00e9"', '"é"'),
    ('"名字 😀"', '"名字 😀"'),
    ('"\\u2028 nbsp\\u00a0"', '"\\u2028 nbsp\\u00a0"'),
])
def test_strings_escape_only_what_they_must(source, expected):
    assert value(source) == expected


@pytest.mark.parametrize("source, expected", [
    ("(a + b) + c", "a + b + c"),
    ("a + (b + c)", "a + (b + c)"),
    ("a - (b - c)", "a - (b - c)"),
    ("(a - b) - c", "a - b - c"),
    ("a - (b + c)", "a - (b + c)"),
    ("a * (b * c)", "a * (b * c)"),
    ("a / (b / c)", "a / (b / c)"),
    ("(a / b) / c", "a / b / c"),
    ("a * (b / c)", "a * (b / c)"),
    ("(a + b) * c", "(a + b) * c"),
    ("a + (b * c)", "a + b * c"),
    ("(a * b) + (c / d)", "a * b + c / d"),
    ("-(a + b)", "-(a + b)"),
    ("-(a * b)", "-(a * b)"),
    ("(-a) * b", "-a * b"),
    ("a - (-b)", "a - -b"),
    ("-(a bidir)", "-a bidir"),
    ("(-a) bidir", "(-a) bidir"),
    ("(a + b) bidir", "(a + b) bidir"),
    ("(a bidir) sparse", "a bidir sparse"),
    ("((a))", "a"),
    ("(a + b) x C", "a + b x C"),
    ("(a * 2) x C", "a * 2 x C"),
    ("(2 x A) x B", "(2 x A) x B"),
    ("(2 x A) + 1", "(2 x A) + 1"),
    ("1 * (2 x A)", "1 * (2 x A)"),
    ("-(2 x A)", "-(2 x A)"),
    ("(2 x A {}) bidir", "(2 x A {}) bidir"),
    ("[(2 x A), (a + b)]", "[2 x A, a + b]"),
    ("f(n = (2 x A))", "f(n = 2 x A)"),
    ("((8 GB) / (2 s)) * 3", "8 GB / 2 s * 3"),
])
def test_minimal_parentheses(source, expected):
    assert value(source) == expected


def test_parentheses_keep_the_tree_for_every_operator_pair():
    for outer in "+-*/":
        for inner in "+-*/":
            for text in (f"(a {inner} b) {outer} c", f"a {outer} (b {inner} c)"):
                assert parse(f"param p = {value(text)}") == parse(f"param p = {text}")


def test_number_text_is_kept_exactly():
    assert value("0001_0.50e+3 kWh") == "0001_0.50e+3 kWh"


# ----------------------------------------------------------------- alignment


def test_aligns_a_run_of_fields_and_constraints():
    source = "chip A {\na = 1\nlonger.name = 2\nb <= 3\nccc == 4\n}"
    assert fmt(source) == dedent("""
        chip A {
          a           = 1
          longer.name = 2
          b           <= 3
          ccc         == 4
        }
    """)


def test_alignment_run_breaks_at_blocks_comments_and_blank_lines():
    source = dedent("""
        chip A {
          a = 1
          bbbb = 2
          h { x1 = 1 }
          cc = 3
          d = 4
          # own line
          eeeeee = 5
          f = 6

          gg = 7
          h = 8  # trailing comments do not break a run
          iiiii = 9
        }
    """)
    assert fmt(source) == dedent("""
        chip A {
          a    = 1
          bbbb = 2
          h { x1 = 1 }
          cc = 3
          d  = 4
          # own line
          eeeeee = 5
          f      = 6

          gg    = 7
          h     = 8  # trailing comments do not break a run
          iiiii = 9
        }
    """)


def test_alignment_counts_wide_characters_as_two_columns():
    assert fmt("chip A {\n名字 = 1\nabcde = 2\n}") == "chip A {\n  名字  = 1\n  abcde = 2\n}\n"


def test_multi_line_field_breaks_the_run():
    members = "  ".join(f"m{i} = {i}" for i in range(6))
    out = fmt(f"chip A {{ a = 1  bb = 8 x H100 {{ {members} }}  ccc = 3  d = 4 }}")
    assert out == dedent("""
        chip A {
          a = 1
          bb = 8 x H100 {
            m0 = 0
            m1 = 1
            m2 = 2
            m3 = 3
            m4 = 4
            m5 = 5
          }
          ccc = 3
          d   = 4
        }
    """)


def test_params_are_not_aligned():
    assert fmt("param a = 1\nparam bbb = 2\n") == "param a = 1\nparam bbb = 2\n"


# ----------------------------------------------------------------- one line or several


def test_small_nested_block_goes_on_one_line_whatever_the_source_layout():
    one = "chip A { hbm { capacity = 80 GB  bandwidth = 3.35 TB/s } }"
    many = "chip A {\n  hbm {\n    capacity = 80 GB\n\n    bandwidth = 3.35 TB/s\n  }\n}"
    expected = "chip A {\n  hbm { capacity = 80 GB  bandwidth = 3.35 TB/s }\n}\n"
    assert fmt(one) == fmt(many) == expected


def test_five_members_fit_on_one_line_six_do_not():
    five = "  ".join(f"m{i} = {i}" for i in range(5))
    assert fmt(f"chip A {{ b {{ {five} }} }}") == f"chip A {{\n  b {{ {five} }}\n}}\n"
    six = "  ".join(f"m{i} = {i}" for i in range(6))
    lines = fmt(f"chip A {{ b {{ {six} }} }}").split("\n")
    assert lines[1] == "  b {" and lines[2] == "    m0 = 0" and lines[8] == "  }"


def test_block_containing_a_block_is_multi_line():
    assert fmt("chip A { b { c { d = 1 } } }") == dedent("""
        chip A {
          b {
            c { d = 1 }
          }
        }
    """)


def test_block_wider_than_100_columns_is_multi_line():
    fits = "chip A { b { name = \"" + "x" * 83 + "\" } }"  # `  b { name = "..." }` is 100 columns
    assert fmt(fits).split("\n")[1] == '  b { name = "' + "x" * 83 + '" }'
    assert len(fmt(fits).split("\n")[1]) == 100
    wide = fits.replace("x" * 83, "x" * 84)
    assert fmt(wide).split("\n")[1:4] == ["  b {", '    name = "' + "x" * 84 + '"', "  }"]


def test_empty_blocks():
    assert fmt("chip A {\n}\n") == "chip A {}\n"
    assert fmt("chip A { b {\n\n} c d { } }") == "chip A {\n  b {}\n  c d {}\n}\n"


def test_override_block_one_line_or_several():
    assert value("2 x Grace {\n cores = 72\n mem = 480 GB\n}") == "2 x Grace { cores = 72  mem = 480 GB }"
    six = "  ".join(f"m{i} = {i}" for i in range(6))
    assert fmt(f"param p = 2 x G {{ {six} }}") == dedent("""
        param p = 2 x G {
          m0 = 0
          m1 = 1
          m2 = 2
          m3 = 3
          m4 = 4
          m5 = 5
        }
    """)


def test_override_holding_a_block_is_multi_line():
    assert fmt("chip A { g = 2 x G { hbm { c = 1 } } }") == dedent("""
        chip A {
          g = 2 x G {
            hbm { c = 1 }
          }
        }
    """)


def test_override_breaks_when_its_line_is_too_long():
    long = "x" * 70
    out = fmt(f'chip A {{ gpus = 8 x H100 {{ note = "{long}"  tdp = 700 W }} }}')
    assert out == dedent(f"""
        chip A {{
          gpus = 8 x H100 {{
            note = "{long}"
            tdp  = 700 W
          }}
        }}
    """)


def test_nested_override_blocks_indent_with_their_member():
    source = "chip A { n = [2 x A { a = 1  b = 2  c = 3  d = 4  e = 5  f = 6 }, 3 x B { g = 1 }] }"
    assert fmt(source) == dedent("""
        chip A {
          n = [2 x A {
            a = 1
            b = 2
            c = 3
            d = 4
            e = 5
            f = 6
          }, 3 x B {
            g = 1
          }]
        }
    """)


def test_one_line_block_members_with_units_reparse():
    # `8  b = 9` must not read `b` as a unit, nor `GB  c.d` take `c`; `fmt` checks the reparse
    source = "chip A { h {\n a = 8\n b = 9\n w = 8 GB\n c.d <= 1\n e = 90%\n } }"
    assert fmt(source) == "chip A {\n  h { a = 8  b = 9  w = 8 GB  c.d <= 1  e = 90% }\n}\n"


# ----------------------------------------------------------------- comments


def test_comments_in_every_position():
    source = dedent("""
        # file header: 集群设计

        import "std"  # why we import
        # before the param
        param n = 8
        chip A extends B {  # after the brace
          # before a member
          tdp = 700 W  # after a member
          hbm {
            # alone in a block
          }
          nic { bw = 400 Gb/s }  # after a one-line block
          # 注释：块的结尾
        }
        # end of file
    """)
    assert fmt(source) == dedent("""
        # file header: 集群设计

        import "std"  # why we import

        # before the param
        param n = 8

        chip A extends B {  # after the brace
          # before a member
          tdp = 700 W  # after a member
          hbm {
            # alone in a block
          }
          nic { bw = 400 Gb/s }  # after a one-line block
          # 注释：块的结尾
        }
        # end of file
    """)


def test_a_comment_inside_a_small_block_keeps_it_multi_line():
    assert fmt("chip A {\n  h { a = 1  # 中文\n  b = 2 }\n}") == dedent("""
        chip A {
          h {
            a = 1  # 中文
            b = 2
          }
        }
    """)


def test_comment_after_an_opening_brace_of_a_nested_block_and_an_override():
    source = "chip A {\n  h {  # h\n    a = 1\n  }\n  g = 2 x G {  # g\n    c = 1\n  }\n}\n"
    assert fmt(source) == source


def test_comments_inside_an_expression_move_before_their_member():
    source = "chip A {\n  a = 1\n  b = # one\n    f(x1 = 1,  # two\n      y = 2)\n}"
    assert fmt(source) == "chip A {\n  a = 1\n  # one\n  # two\n  b = f(x1 = 1, y = 2)\n}\n"


def test_comments_inside_header_move_before_the_declaration():
    assert fmt("chip # a\n A extends # b\n B {}") == "# a\n# b\nchip A extends B {}\n"
    assert fmt("param # a\n p = # b\n 1") == "# a\n# b\nparam p = 1\n"


def test_comment_after_an_override_inside_an_expression_stays_in_order():
    source = "param p = [2 x A { a = 1 }\n  # after A\n  , 3 x B { b = 2 } # on B\n  , 4]  # end\n"
    out = fmt(source)
    assert [c.text for c in parse(out).comments] == ["# after A", "# on B", "# end"]
    assert out == dedent("""
        param p = [2 x A {
          a = 1
          # after A
        }, 3 x B {
          b = 2  # on B
        }, 4]  # end
    """)


def test_comments_at_the_end_of_the_file_stay_there():
    assert fmt("chip A {}\n\n\n# one\n\n# two\n") == "chip A {}\n\n# one\n\n# two\n"
    assert fmt("# only a comment") == "# only a comment\n"


def test_blank_lines_between_members_are_kept_once_but_not_after_the_brace():
    source = "chip A {\n\n\n  a = 1\n\n\n\n  b = 2\n  # foot\n\n}\n"
    assert fmt(source) == "chip A {\n  a = 1\n\n  b = 2\n  # foot\n}\n"


def test_comment_text_loses_trailing_whitespace_and_carriage_returns():
    out = format_text("chip A {\r\n  a = 1  # crlf   \r\n}\r\n")
    assert out == "chip A {\n  a = 1  # crlf\n}\n"
    assert format_text(out) == out


def test_all_comments_are_kept_in_order():
    source = dedent("""
        # 1
        chip A {  # 2
          # 3
          a = [2 x B {  # 4
            c = 1  # 5
            # 6
          },  # 7
          3]  # 8
          # 9
          h { # 10
          }
        }  # 11
        # 12
    """)
    out = fmt(source)
    assert [c.text for c in parse(out).comments] == [f"# {i}" for i in range(1, 13)]


# ----------------------------------------------------------------- the API


def test_format_module_prints_a_module_built_in_code():
    number = ast.Number("80", "GB")
    module = ast.Module((
        ast.Param(ast.Identifier("n"), ast.BinOp("-", ast.Ref(ast.Dotted((ast.Identifier("a"),))),
                                                 ast.BinOp("-", number, number))),
        ast.Declaration(ast.Identifier("chip"), ast.Identifier("A"), None, (
            ast.Block(ast.Identifier("hbm"), None, (ast.Field(ast.Dotted((ast.Identifier("c"),)), number),)),
        )),
    ))
    out = format_module(module)
    assert out == "param n = a - (80 GB - 80 GB)\n\nchip A {\n  hbm { c = 80 GB }\n}\n"
    assert parse(out) == module


def test_format_text_rejects_bad_input():
    with pytest.raises(ParseError):
        format_text("chip A {")


def test_deep_nesting_formats_without_trouble():
    depth = 30
    source = "chip A {" + " b {" * depth + " c = " + "-" * 25 + "1" + " }" * depth + " }"
    out = fmt(source)
    assert out.count("\n") == 2 * depth + 1


def test_example_design_is_a_fixed_point():
    source = dedent("""
        import "std/nvidia.gcl"

        param nodes = 18

        node GB200_NVL72 extends nvidia.GB200 {
          gpus   = 72 x B200 { tdp = 1200 W }
          cpus   = 36 x Grace
          nvlink = 1.8 TB/s bidir
          fabric = fat_tree(tiers = 2, radix = 64, oversubscription = 1:1)
          hbm { capacity = 192 GB  bandwidth = 8 TB/s }

          subject to { power <= 132 kW  efficiency >= 90% }
          slo {
            latency <= 10 us
            # 尾延迟
            p99 <= 20 us
          }
        }
    """)
    assert fmt(source) == source
