"""`check_file(..., again=True)`, the sweep's check of the next point: the same answer as a
full check for what the root file declares and uses, and never a stale load."""

from __future__ import annotations

from gclc.compiler.driver import check_file

DESIGN = """\
import "std/nvidia"

param nodes  = 4
param server = DGX_H100

cluster C {
  units    = nodes x server
  scaleout = NDR_FatTree
}
"""


def _summary(result):
    return [(d.code, str(d.subject), d.summary) for d in result.diagnostics]


def test_again_agrees_with_a_full_check(tmp_path):
    path = tmp_path / "d.gcl"
    path.write_text(DESIGN)
    for settings in ({}, {"nodes": "16"}, {"server": "DGX_B200"}, {"nodes": "abc"}, {"server": "H100_SXM"}):
        full, again = check_file(str(path), settings), check_file(str(path), settings, again=True)
        assert _summary(full) == _summary(again)
        if full.design is not None:
            used = {e.name for e in again.design.entities}
            assert {"C", settings.get("server", "DGX_H100"), "NDR_FatTree"} <= used
            assert [e for e in full.design.entities if e.name in used] == list(again.design.entities)


def test_again_reads_a_changed_file(tmp_path):
    path = tmp_path / "d.gcl"
    path.write_text(DESIGN)
    assert check_file(str(path), {}, again=True).design is not None
    path.write_text(DESIGN.replace("scaleout = NDR_FatTree", "scaleout = NDR_FatTre"))
    broken = check_file(str(path), {}, again=True)
    assert broken.design is None and any(d.code == "unknown-name" for d in broken.diagnostics)
    path.write_text(DESIGN.replace("param nodes  = 4", "param nodes  = 8"))
    assert check_file(str(path), {}, again=True).design["C"].get("units").count == 8


def test_settings_of_one_point_do_not_leak_into_the_next(tmp_path):
    path = tmp_path / "d.gcl"
    path.write_text(DESIGN)
    assert check_file(str(path), {"nodes": "32"}, again=True).design["C"].get("units").count == 32
    assert check_file(str(path), {}, again=True).design["C"].get("units").count == 4
