"""`gclc std`: the standard library listed and shown with its sources, read from std/ itself."""

from __future__ import annotations

import re

from gclc.cli.main import main
from gclc.dsl.library import STD_ROOT, std_parts

DECLARATION = re.compile(r"^(chip|cpu|nic|dpu|switch|node|supernode|fabric|cluster|model|train|serve)\s+(\w+)", re.M)


def test_list_names_every_part_of_every_file(capsys):
    assert main(["std", "list"]) == 0
    out = capsys.readouterr().out
    declared = {m[2] for f in STD_ROOT.glob("*.gcl") for m in DECLARATION.finditer(f.read_text(encoding="utf-8"))}
    listed = {line.split()[1] for line in out.splitlines() if line.startswith("  ")}
    assert declared and listed == declared
    for f in STD_ROOT.glob("*.gcl"):
        assert f'(import "std/{f.stem}")' in out


def test_list_by_kind(capsys):
    assert main(["std", "list", "--kind", "switch"]) == 0
    kinds = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert kinds == {"switch"}
    assert main(["std", "list", "--kind", "gpu"]) == 2
    assert "chip" in capsys.readouterr().err


def test_show_prints_the_part_with_its_source_and_parent(capsys):
    assert main(["std", "show", "A100_SXM_40GB"]) == 0
    out = capsys.readouterr().out
    part = next(p for p in std_parts() if p.name == "A100_SXM_40GB")
    assert out.startswith(f"chip A100_SXM_40GB — std/nvidia.gcl:{part.span.line}")
    assert f"source: {part.source}" in out
    assert "extends A100_SXM_80GB (std/nvidia.gcl:" in out
    assert "chip A100_SXM_40GB extends A100_SXM_80GB {" in out and "capacity  = 40960 MiB" in out
    assert out.rstrip().endswith("}")


def test_show_an_unknown_part_suggests_one(capsys):
    assert main(["std", "show", "H200"]) == 1
    assert "did you mean `H200_SXM`?" in capsys.readouterr().err
    assert main(["std", "show"]) == 2


def test_json_lists_and_shows_parts_with_their_place(capsys):
    import json

    assert main(["std", "list", "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in parts} == {p.name for p in std_parts()}
    h100 = next(p for p in parts if p["name"] == "H100_SXM")
    line = (STD_ROOT / "nvidia.gcl").read_text(encoding="utf-8").splitlines()[h100["line"] - 1]
    assert line.startswith("chip H100_SXM") and h100["import"] == "std/nvidia" and h100["kind"] == "chip"
    assert main(["std", "show", "A100_SXM_40GB", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["extends"] == "A100_SXM_80GB" and shown["text"].startswith("chip A100_SXM_40GB extends")
    assert main(["std", "show", "std/amd", "--json"]) == 0
    assert {p["import"] for p in json.loads(capsys.readouterr().out)} == {"std/amd"}
