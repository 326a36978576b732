"""HBM reads as the part's data sheet states it (issue 27): an H100 is an `80 GB` part in
every plan, picture, report and hover, although std stores the 81,559 MiB its driver
exposes (what plans fit in); a TPU v5p, specified in GiB, reads `95 GiB`; the JSON carries
both figures as exact byte counts. A variant that restates the capacity drops the parent's
data-sheet figure (the figure named another memory)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.dsl.numbers import binary_bytes, datasheet_memory, hbm, memory
from gclc.lsp.analysis import analyse
from gclc.lsp.hover import hover_text
from gclc.testing import load_profile

load_profile()

H100_SMI = 81559 * 2**20   # nvidia-smi's total for an H100 SXM ([smi] in dsl/std/nvidia.gcl)
DESIGN = """import "std/nvidia"
import "std/network"
import "std/google"
cluster Pod { units = 2 x DGX_H100  scaleout = NDR_FatTree }
cluster Slice { units = 1 x TPU_v5p_Pod }
model M {
  arch = dense  layers = 8  hidden = 2048  heads = 16  ffn = 8192  vocab = 32000  seq = 2048
}
train h100 { model = M  on = Pod  batch = 64 }
train tpu { model = M  on = Slice  gpus = 64  batch = 64 }
"""


def _write(tmp_path: Path, text: str = DESIGN) -> str:
    path = tmp_path / "design.gcl"
    path.write_text(text)
    return str(path)


@given(st.integers(1, 1023), st.sampled_from([(2**20, "MiB"), (2**30, "GiB"), (2**40, "TiB")]))
def test_a_figure_written_in_binary_units_reads_in_them(n, unit):
    factor, name = unit
    assert binary_bytes(n * factor) and datasheet_memory(n * factor) == f"{n:,} {name}"


@given(st.integers(1, 999), st.sampled_from([(10**6, "MB"), (10**9, "GB"), (10**12, "TB")]))
def test_a_figure_written_in_decimal_units_reads_in_them(n, unit):
    factor, name = unit
    assert not binary_bytes(n * factor) and datasheet_memory(n * factor) == f"{n:,} {name}"


def test_the_h100_reads_80_gb_with_its_usable_figure_beside():
    assert hbm(80e9, H100_SMI) == "80 GB (79.6 GiB usable)"
    assert hbm(95 * 2**30, 95 * 2**30) == "95 GiB"
    assert memory(H100_SMI, binary=False) == "85.5 GB"  # what the issue saw: MiB printed in decimal GB


def test_the_plan_names_the_80_gb_part_and_its_json_both_exact_figures(tmp_path, capsys):
    path = _write(tmp_path)
    assert main(["plan", path, "--job", "h100"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("memory"))
    assert " of 80 GB (79.6 GiB usable) per GPU" in line and "85.5" not in line
    assert main(["plan", path, "--job", "h100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["hbm_datasheet_bytes"] == 80_000_000_000 and data["hbm_bytes"] == H100_SMI
    assert isinstance(data["hbm_bytes"], int)


def test_the_limits_line_names_the_data_sheet_figure_a_rejected_layout_needs_more_than(capsys):
    """The plan's `limits` line, where memory rejected a faster layout, states the limit as the
    memory line does (it read `limit 85.5 GB`)."""
    design = Path(__file__).resolve().parents[1] / "data" / "power_limit.gcl"
    assert main(["plan", str(design), "--set", "limit=250kW"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("limits"))
    assert "per GPU, over its limit of 80 GB (79.6 GiB usable)" in line and "85.5 GB" not in line


def test_a_part_specified_in_gib_reads_in_gib(tmp_path, capsys):
    path = _write(tmp_path)
    assert main(["plan", path, "--job", "tpu"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("memory"))
    assert " of 95 GiB per GPU" in line and "usable" not in line
    assert " GB" not in line  # its breakdown too, in the same family of units


def test_report_and_topology_name_the_data_sheet_figure(tmp_path, capsys):
    path = _write(tmp_path)
    report, svg = tmp_path / "r.html", tmp_path / "t.svg"
    assert main(["report", path, "--job", "h100", "-o", str(report)]) == 0
    html = report.read_text()
    assert "80 GB (79.6 GiB usable)" in html and "85.5 GB" not in html
    assert main(["render", path, "-o", str(svg)]) == 0
    assert "80 GB HBM" in svg.read_text() and "85.5 GB" not in svg.read_text()


def test_explain_and_hover_show_both_figures(tmp_path, capsys):
    path = _write(tmp_path)
    assert main(["explain", path]) == 0
    out = capsys.readouterr().out
    assert "HBM (data sheet)" in out and "= 16 x 80 GB" in out and "= 16 x 79.6 GiB" in out
    analysis = analyse(path, DESIGN)
    text = hover_text(analysis, DESIGN.index("DGX_H100") + 2)
    assert text is not None
    parts = analyse(path, 'import "std/nvidia"\nchip C extends H100_SXM { mtbf = 1000 h }\n')
    chip = hover_text(parts, len('import "std/nvidia"\nchip C'))
    assert "- hbm.nominal: 80 GB" in chip and "- hbm.capacity: 79.6475 GiB" in chip


def test_a_variant_that_restates_the_capacity_drops_the_data_sheet_figure():
    text = ('import "std/nvidia"\nchip Big extends H100_SXM { hbm.capacity = 96 GB }\n'
            'node N { gpus = 8 x H100_SXM { hbm.capacity = 94 GB } }\n'
            'chip Same extends H100_SXM { mtbf = 1000 h }\n')
    result = check_text(text, path="variants.gcl")
    assert result.ok
    design = result.design
    assert design["Big"].get("hbm.nominal") is None and design["Same"].get("hbm.nominal") is not None
    node = design["N"].get("gpus").part
    assert node.get("hbm.nominal") is None
    cluster = check_text(text + "cluster C { units = 1 x N }\n", path="c.gcl").design
    chip = lower(cluster, "C").partitions[0].node.accelerator
    assert chip.hbm_datasheet == chip.hbm_capacity == 94e9
