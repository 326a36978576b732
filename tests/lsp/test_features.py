"""The language server's answers, asked in-process (the pytest-lsp tests drive the same
code over the protocol): completion by context, hover and definition across a relative
import, and an edit that does not parse keeping the last good answers."""

from __future__ import annotations

from pathlib import Path

import re

import pytest

from gclc.dsl.library import std_parts
from gclc.dsl.units import UNITS, parse_unit
from gclc.lsp.analysis import analyse
from gclc.lsp.complete import complete
from gclc.lsp.definition import definition
from gclc.lsp.hover import hover_text

PARTS = 'import "std/nvidia"\nchip MyChip extends H100_SXM {\n  power.tdp = 600 W  # capped: our own measurement\n}\n'
MAIN = """import "sub/parts"
node N { gpus = 8 x MyChip }
cluster C {
  units    = 4 x N
  scaleout = NDR_FatTree
}
train t {
  model = M
  on    = C
  batch = 8
  subject to { memory <= 90% }
}
"""


@pytest.fixture
def design(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "parts.gcl").write_text(PARTS)
    main = tmp_path / "main.gcl"
    main.write_text(MAIN)
    return str(main), analyse(str(main), MAIN)


def labels(found) -> list[str]:
    return [s.label for s in found]


def test_definition_and_hover_across_a_relative_import(design):
    path, analysis = design
    at = MAIN.index("MyChip") + 2
    target = definition(analysis, at)
    assert target.path.endswith("sub/parts.gcl") and (target.line, target.column) == (2, 6)
    text = hover_text(analysis, at)
    assert "**chip MyChip** extends `H100_SXM`" in text and "- power.tdp: 600 W" in text
    assert "source (inherited from `H100_SXM`)" in text


def test_hover_on_an_override_names_where_it_is_set_and_its_comment(tmp_path):
    path = tmp_path / "parts.gcl"
    path.write_text(PARTS)
    analysis = analyse(str(path), PARTS)
    text = hover_text(analysis, PARTS.index("tdp") + 1)
    assert "a power" in text and "value: `600 W`" in text
    assert f"set at `{path}:3`" in text and "source: capped: our own measurement" in text
    parent = definition(analysis, PARTS.index("tdp") + 1)  # an override goes to what it overrides
    assert parent.path == "std/nvidia.gcl"
    assert re.match(r"tdp +=  *700 W", analysis.sources["std/nvidia.gcl"].line_text(parent.line).strip())


def test_hover_on_a_kind_gives_its_doc_and_on_a_train_field_its_meaning(design):
    path, analysis = design
    text = MAIN.replace("  batch = 8\n", "  batch = 8\n  optimizer_state = bf16\n")
    edited = analyse(path, text)
    assert "Adam's two moments" in hover_text(edited, text.index("optimizer_state") + 2)
    kind = hover_text(edited, text.index("train t") + 1)
    assert "`optimizer_state`: the format Adam's two moments" in kind and "`master_weights`" in kind
    assert "`main_grads`: the gradients Adam reads" in kind


@pytest.mark.parametrize("edit, after, expected, absent", [
    ("subject to { memory <= 90% }", "subject to { memory <= 90%\n    ", {"power", "time", "energy"}, {"model"}),
    ("  scaleout = NDR_FatTree\n", "  scaleout = NDR_FatTree\n  ", {"units", "scaleout", "power", "partition"}, {"tp"}),
    ("gpus = 8 x MyChip }", "gpus = 8 x MyChip { ", {"hbm", "peak", "power", "clock"}, {"gpus"}),
    ("  batch = 8\n", "  batch = 8\n  precision = ", {"bf16", "fp8"}, {"GB"}),
    ("  model = M\n", "  model = M\n  maximize = ", {"throughput", "mfu"}, {"time"}),
    ("  batch = 8\n", "  batch = 8\n  ", {"optimizer_state", "master_weights", "main_grads"}, {"tp"}),
    ("  batch = 8\n", "  batch = 8\n  optimizer_state = ", {"fp32", "bf16", "fp16", "fp8"}, {"none", "fp4"}),
    ("  batch = 8\n", "  batch = 8\n  master_weights = ", {"fp32", "bf16", "fp16", "none"}, {"fp8"}),
    ("  batch = 8\n", "  batch = 8\n  main_grads = ", {"fp32", "bf16"}, {"fp16", "none"}),
])
def test_completion_by_context(design, edit, after, expected, absent):
    path, analysis = design
    text = MAIN.replace(edit, after)
    found = set(labels(complete(analysis, text, text.index(after) + len(after))))
    assert expected <= found and not absent & found, found


def test_units_complete_by_the_fields_dimension(design):
    path, analysis = design
    text = MAIN.replace("  scaleout = NDR_FatTree\n", "  scaleout = NDR_FatTree\n  power { budget = 3 ")
    found = labels(complete(analysis, text, text.index("budget = 3 ") + len("budget = 3 ")))
    assert found and all(parse_unit(u)[1] == parse_unit("W")[1] for u in found)
    assert set(found) == {u for u, (_, dim) in UNITS.items() if dim == parse_unit("W")[1]}


def test_parts_complete_by_kind_with_the_import_they_need(design):
    path, analysis = design
    text = MAIN + "node Other { gpus = 4 x "
    found = complete(analysis, text, len(text))
    chips = {p.name: p.library for p in std_parts() if p.kind == "chip"}
    by_label = {s.label: s for s in found}
    assert set(by_label) == set(chips) | {"MyChip"}
    assert by_label["MyChip"].needs_import is None and by_label["H100_SXM"].needs_import is None  # loaded already
    assert by_label["MI300X"].needs_import == "std/amd"


def test_constructor_arguments_and_imports(design):
    path, analysis = design
    text = MAIN + 'fabric F {\n  topology = fat_tree(ti'
    assert labels(complete(analysis, text, len(text))) == ["tiers", "radix", "oversubscription"]
    text = 'import "std/'
    found = complete(analysis, text, len(text))
    assert {"std/nvidia", "std/amd", "std/network"} <= set(labels(found))
    assert all(s.insert == s.label.removeprefix("std/") for s in found)  # the editor replaces the word after `/`


def test_an_edit_that_does_not_parse_reports_and_keeps_no_stale_positions(design):
    path, analysis = design
    broken = analyse(path, MAIN.replace("model = M", "model = = M"))
    assert broken.module is None and broken.diagnostics[0].code == "syntax"
    assert broken.diagnostics[0].subject.line == 8
    assert hover_text(broken, 5) is None and definition(broken, 5) is None
