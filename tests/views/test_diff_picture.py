"""`gclc diff A B -o diff.svg` draws the two designs side by side (issue 27): one SVG
document holding both topologies as `gclc render` draws them, each titled, under the
changes `gclc diff` prints; the nested drawings' ids are prefixed so none collides."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from gclc.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's `dot` is not installed")


def test_two_designs_side_by_side_under_their_changes(tmp_path, capsys):
    shutil.copy(ROOT / "tests" / "data" / "pod.gcl", tmp_path / "pod.gcl")
    text = (ROOT / "tests" / "data" / "train.gcl").read_text()
    (tmp_path / "a.gcl").write_text(text)
    (tmp_path / "b.gcl").write_text(text.replace("batch     = 256", "batch     = 512"))
    out = tmp_path / "diff.svg"
    assert main(["diff", str(tmp_path / "a.gcl"), str(tmp_path / "b.gcl"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "train job.batch" in printed and printed.rstrip().splitlines()[-1].startswith(f"wrote {out}")
    root = ET.parse(out).getroot()
    nested = root.findall(f"{SVG}svg")
    assert root.tag == f"{SVG}svg" and len(nested) == 2
    assert float(nested[1].get("x")) > float(nested[0].get("x")) + float(nested[0].get("width"))   # side by side
    titles = [t.text for t in root.iter(f"{SVG}text") if t.text and re.match(r"[AB]: ", t.text)]
    assert any(str(tmp_path / "a.gcl") in t for t in titles) and any(str(tmp_path / "b.gcl") in t for t in titles)
    panel = " ".join(t.text or "" for t in root.findall(f"{SVG}text"))
    assert "train job.batch  256 -> 512" in panel and "step_time_s" in panel
    ids = Counter(e.get("id") for e in root.iter() if e.get("id"))
    assert ids and max(ids.values()) == 1


def test_a_picture_is_an_svg(tmp_path, capsys):
    path = str(ROOT / "tests" / "data" / "train.gcl")
    assert main(["diff", path, path, "-o", str(tmp_path / "diff.png")]) == 2
    assert ".svg" in capsys.readouterr().err and not (tmp_path / "diff.png").exists()
