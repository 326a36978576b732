"""Diagrams: DOT structure (clusters, labels, counts) of every example in every view,
`dot` renders them without warnings, DOT output is byte-identical across runs, and the
`gclc render` command's formats and errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gclc.views import render
from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower
from gclc.model.job import JobError, train_job
from gclc.solver.plan import plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.gcl"))
DOT = shutil.which("dot")
NEEDS_DOT = pytest.mark.skipif(DOT is None, reason="graphviz's `dot` is not installed (apt-get install graphviz)")

TORUS = """\
chip T1 {
  vendor = "X"
  hbm { capacity = 32 GB  bandwidth = 1 TB/s }
  peak { bf16 = 200 TFLOPS }
  power { tdp = 300 W  idle = 50 W }
}
fabric ICI { kind = ici  topology = torus(dims = [4, 4, 4])  bandwidth = 100 GB/s  latency = 1 us }
fabric Mesh { kind = ethernet  topology = full_mesh  bandwidth = 25 GB/s  latency = 2 us }
node Host { gpus = 4 x T1 }
cluster Pod { units = 16 x Host  scaleout = ICI }
cluster Mini { units = 4 x Host  scaleout = Mesh }
"""


@pytest.fixture(scope="module")
def designs():
    out = {}
    for name in EXAMPLES:
        result = check_file(str(ROOT / "examples" / name))
        assert result.design is not None, name
        out[name] = result.design
    return out


@pytest.fixture(scope="module")
def plans(designs):
    """The plan of every example whose train job can be planned (None otherwise)."""
    out = {}
    for name, design in designs.items():
        try:
            chosen = plan(train_job(design))
        except JobError:
            chosen = None
        out[name] = chosen if chosen is not None and chosen.best is not None else None
    return out


@pytest.fixture(scope="module")
def sources(designs, plans):
    """(example, view) -> DOT source."""
    out = {}
    for name, design in designs.items():
        graph, fabrics = lower(design), render.fabric_entities(design)
        out[name, "topology"] = render.topology(graph, fabrics).source
        out[name, "power"] = render.power(graph).source
        if plans[name] is not None:
            out[name, "placement"] = render.placement(plans[name], fabrics).source
    return out


def _labels(source: str) -> list[str]:
    return re.findall(r'label="((?:[^"\\]|\\.)*)"', source)


def test_some_examples_are_plannable(plans):
    assert sum(p is not None for p in plans.values()) >= 3


@pytest.mark.parametrize("name", EXAMPLES)
def test_topology_structure(name, designs, sources):
    graph = lower(designs[name])
    source = sources[name, "topology"]
    labels = "\n".join(_labels(source))
    assert "subgraph cluster_cluster" in source and f"cluster {graph.name}" in labels
    assert f"{graph.gpus:,} accelerators" in labels
    for index, p in enumerate(graph.partitions):
        assert f"subgraph cluster_p_{index} " in source
        assert f"subgraph cluster_p_{index}_node " in source
        assert (f"subgraph cluster_p_{index}_unit " in source) == (p.nodes_per_unit > 1)
        assert f"{p.units:,} × {p.unit}" in labels
        assert f"{p.node.gpus} × {p.node.accelerator.name}" in labels
        if p.units > 1:
            assert f"× {p.units - 1:,} more" in labels
        if p.nodes_per_unit > 1:
            assert f"× {p.nodes_per_unit - 1:,} more" in labels
        for tier in p.tiers:
            assert tier.name in labels
    for layer in graph.switch_layers:
        assert layer.name in labels
        if layer.switches:
            assert f"{layer.switches:,} switches · radix {layer.radix}" in labels
        if layer.level > 1:
            assert f"{layer.links_below:,} links" in labels
    scale_up = source.count('color="#2e7d32" fontcolor="#2e7d32" penwidth=2.5 style=solid')
    scale_out = source.count("style=dashed]")
    assert scale_up >= 2 and scale_out >= 2   # the legend has one of each, the design the rest


def test_a_hundred_thousand_gpus_stay_a_small_picture(sources):
    source = sources["gb200_nvl72_100k.gcl", "topology"]
    assert "100,008 accelerators" in source and "× 1,388 more" in source and "× 17 more" in source
    assert "100,008 links" in source and "1,389 switches" in source
    nodes = re.findall(r"^\s*(\w+) \[", source, re.MULTILINE)
    assert len(nodes) < 30


@pytest.mark.parametrize("name", EXAMPLES)
def test_placement_structure(name, plans, sources):
    chosen = plans[name]
    if chosen is None:
        pytest.skip(f"{name} has no plannable train job")
    source, cfg = sources[name, "placement"], chosen.best.config
    labels = "\n".join(_labels(source))
    assert f"plan {chosen.job.name}: tp={cfg.tp} pp={cfg.pp} dp={cfg.dp} cp={cfg.cp} ep={cfg.ep}" in labels
    for dim in render.DIM_ORDER:
        size = getattr(cfg, dim)
        if size > 1:
            assert f"▶ {dim}: {size:,} of {size:,} ranks" in labels   # the group's outermost tier
    highlighted = source.count('color="#e65100"')
    assert highlighted >= 2 and "highlighted: one" in labels


def test_traffic_is_split_over_the_tiers_a_group_crosses(plans):
    chosen = plans["gb200_nvl72_100k.gcl"]
    seconds = dict(chosen.best.breakdown.rows())
    for dim, size, stride, stages in render.dimension_stages(chosen.best.config, chosen.job.partition.tiers):
        split = render.tier_traffic(dim, seconds.get(dim, 0.0), stages)
        assert [t for t, _ in split] == [s.tier for s in stages]
        assert sum(s for _, s in split) == pytest.approx(seconds.get(dim, 0.0))
        assert all(s >= 0 for _, s in split)


@pytest.mark.parametrize("name", EXAMPLES)
def test_power_structure(name, designs, sources):
    from gclc.compiler.metrics import power_breakdown

    graph = lower(designs[name])
    rows = {m.key: m for m in power_breakdown(graph)}
    labels = "\n".join(_labels(sources[name, "power"]))
    for key in ("power.facility", "power.it", "power.cooling", "power.accelerators"):
        assert render.fmt(rows[key].value, "W") in labels
    assert "IT load" in labels and "cooling and losses" in labels and "accelerators" in labels
    for layer in graph.switch_layers:
        if layer.switches and layer.switch_power:
            assert f"network: {layer.name}" in labels


def test_tori_and_full_meshes(tmp_path):
    path = tmp_path / "torus.gcl"
    path.write_text(TORUS)
    design = check_file(str(path)).design
    assert design is not None
    torus = render.topology(lower(design, "Pod")).source
    assert all(f"ICI dim {i}" in torus for i in (1, 2, 3)) and "p_0_tier_0 -> p_0_tier_1" in torus
    mesh = render.topology(lower(design, "Mini")).source
    assert "no switches (direct links)" in mesh and "4 links × 25 GB/s" in mesh


@NEEDS_DOT
def test_dot_renders_every_view_without_warnings(sources):
    for (name, view), source in sorted(sources.items()):
        done = subprocess.run([DOT, "-Tsvg", "-o", os.devnull], input=source.encode(), capture_output=True,
                              timeout=60)
        assert done.returncode == 0 and done.stderr == b"", (name, view, done.stderr.decode())


def test_dot_output_is_identical_across_runs(tmp_path):
    example = str(ROOT / "examples" / "dgx_h100_superpod.gcl")
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"p{seed}.dot"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "gclc.cli.main", "render", example, "--view", "placement",
                               "-o", str(out)], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0].startswith(b"digraph")


@NEEDS_DOT
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_render_formats_by_suffix(tmp_path, suffix, magic):
    out = tmp_path / f"t{suffix}"
    assert main(["render", str(ROOT / "examples" / "a100_cluster.gcl"), "-o", str(out), "--view", "power"]) == 0
    assert out.read_bytes().startswith(magic)


def test_render_errors(tmp_path, capsys):
    example = str(ROOT / "examples" / "custom_dsa.gcl")
    assert main(["render", example, "-o", str(tmp_path / "x.jpg")]) == 2
    assert main(["render", example, "-o", str(tmp_path / "x.svg"), "--view", "placement"]) == 1
    assert main(["render", example, "-o", str(tmp_path / "x.svg"), "--cluster", "Nope"]) == 2
    err = capsys.readouterr().err
    assert "use .svg, .png, .pdf or .dot" in err and "no `train` job" in err and "no cluster `Nope`" in err
    assert not (tmp_path / "x.svg").exists()


def test_a_missing_dot_is_one_line_and_dot_output_still_works(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    example = str(ROOT / "examples" / "custom_dsa.gcl")
    assert main(["render", example, "-o", str(tmp_path / "x.svg")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "`dot`" in err and "graphviz" in err
    assert main(["render", example, "-o", str(tmp_path / "x.dot")]) == 0
    assert (tmp_path / "x.dot").read_text().startswith("digraph")


@NEEDS_DOT
def test_designs_and_plans_show_themselves_in_jupyter(designs, plans):
    assert designs["mi300x_roce.gcl"]._repr_svg_().startswith("<?xml")
    chosen = plans["mi300x_roce.gcl"]
    assert "<svg" in chosen._repr_svg_()
    fragment = chosen._repr_html_()
    assert fragment.startswith("<div><pre>plan ") and "<svg" in fragment and "<?xml" not in fragment
