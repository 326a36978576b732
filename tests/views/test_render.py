"""Diagrams: DOT structure (clusters, labels, counts) of every example in every view,
`dot` renders them without warnings, DOT output is byte-identical across runs, and the
`gclc render` command's formats and errors."""

from __future__ import annotations

import json
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
from gclc.solver.train.plan import plan

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
        out[name, "topology"] = render.topology(graph, fabrics, design).source
        out[name, "power"] = render.power(graph).source
        if plans[name] is not None:
            out[name, "placement"] = render.placement(plans[name], fabrics).source
            if plans[name].job.graph.name == graph.name:
                out[name, "power at plan"] = render.power(graph, plans[name]).source
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
            noun = "switch" if layer.switches == 1 else "switches"
            assert f"{layer.switches:,} {noun} · radix {layer.radix}" in labels
        if layer.level > 1:
            assert f"{layer.links_below:,} links" in labels
    scale_up = source.count('color="#2e7d32" fontcolor="#2e7d32" penwidth=2.5 style=solid')
    scale_out = source.count("style=dashed]")
    assert scale_up >= 2 and scale_out >= 2   # the legend has one of each, the design the rest


def test_a_hundred_thousand_gpus_stay_a_small_picture(sources):
    source = sources["gb200_nvl72_100k.gcl", "topology"]
    assert "100,800 accelerators" in source and "× 1,399 more" in source and "× 17 more" in source
    assert "100,800 links" in source and "1,400 switches" in source
    nodes = re.findall(r"^\s*(\w+) \[", source, re.MULTILINE)
    assert len(nodes) < 30


_CELL = re.compile(r'<TD BORDER="(\d)" COLOR="(#\w+)" BGCOLOR="(#\w+)"[^>]*><FONT [^>]*>([\d,]+)')


def _bands(source: str) -> dict[str, list[tuple[int, str, str, bool]]]:
    """Per band node: (rank, frame colour, fill colour, whether it belongs to the band) of each cell."""
    out = {}
    for node, body in re.findall(r"^\t(stage_\d+) \[label=<(.*)>\]$", source, re.MULTILINE):
        out[node] = [(int(rank.replace(",", "")), frame, fill, border == "2")
                     for border, frame, fill, rank in _CELL.findall(body)]
    return out


@pytest.mark.parametrize("name", EXAMPLES)
def test_placement_draws_the_rank_grid(name, plans, sources):
    from gclc.views.diagram import PALETTE
    from gclc.views.placement import MAX_BANDS, coordinate, domain_size, ranks_view

    chosen = plans[name]
    if chosen is None:
        pytest.skip(f"{name} has no plannable train job")
    source, cfg = sources[name, "placement"], chosen.best.config
    assert f"plan {chosen.job.name}: tp={cfg.tp} pp={cfg.pp} dp={cfg.dp} cp={cfg.cp} ep={cfg.ep}" in source
    bands = _bands(source)
    stages = sorted(int(k.split("_")[1]) for k in bands)
    assert stages == (list(range(cfg.pp)) if cfg.pp <= MAX_BANDS else list(range(MAX_BANDS - 1)) + [cfg.pp - 1])
    if cfg.pp > MAX_BANDS:
        assert f"{cfg.pp - len(stages)} more pipeline stages" in source
    size = min(domain_size(ranks_view(chosen)), cfg.gpus)
    for key, cells in bands.items():
        stage = int(key.split("_")[1])
        assert cells, key
        for rank, frame, fill, mine in cells:
            assert mine == (cfg.pp == 1 or coordinate(cfg, rank, "pp") == stage)  # a band holds its stage's GPUs
            if mine:
                assert frame == PALETTE[coordinate(cfg, rank, "dp") % len(PALETTE)]  # framed by DP replica
        ranks = [rank for rank, *_ in cells]
        assert ranks == sorted(ranks) and all(rank < cfg.gpus for rank in ranks)
        assert f"ranks {ranks[0]:,}–{min(cfg.gpus, (ranks[0] // size + 1) * size) - 1:,}" in source
    for dim, n, stride, stages_ in render.dimension_stages(cfg, ranks_view(chosen).tiers):
        row = re.search(rf"<TD ALIGN=\"LEFT\">{dim} = {n} \(\w+\)</TD><TD[^>]*>{cfg.gpus // n:,} groups?, "
                        rf"ranks {stride:,} apart</TD><TD[^>]*>([^<]*)</TD>", source)
        assert row is not None, dim
        assert [t.rsplit(" (", 1)[0] for t in row[1].split(" → ")] == [s.tier.name for s in stages_]


def test_tensor_groups_share_a_fill_and_expert_groups_are_outlined(plans, sources):
    from gclc.views.placement import coordinate

    chosen = plans["dgx_h100_superpod.gcl"]
    cfg = chosen.best.config
    cells = [c for band in _bands(sources["dgx_h100_superpod.gcl", "placement"]).values() for c in band if c[3]]
    fills: dict[int, set[str]] = {}
    for rank, _, fill, _ in cells:
        fills.setdefault(rank - coordinate(cfg, rank, "tp") * cfg.stride("tp"), set()).add(fill)
    assert cfg.tp > 1 and all(len(f) == 1 for f in fills.values())
    firsts = sorted(fills)
    assert any(fills[a] != fills[b] for a, b in zip(firsts, firsts[1:]))  # neighbouring groups told apart
    # the MoE-on-NVL72 fixture (the GB200 campus's DeepSeek-V3 job before issue 27)
    moe_design = check_file(str(ROOT / "tests" / "data" / "gb200_moe.gcl")).design
    moe = plan(train_job(moe_design))
    source = render.placement(moe, render.fabric_entities(moe_design)).source
    assert moe.best.config.ep > 1 and "outlined: expert group" in source
    for band in re.findall(r"^\t(stage_\w+) \[label=<(.*)>\]$", source, re.MULTILINE):
        outlined = re.findall(r'<TABLE BORDER="2" COLOR="#212121" STYLE="ROUNDED"[^>]*>(.*?)</TABLE>', band[1])
        for group in outlined:
            ranks = [int(r.replace(",", "")) for r in re.findall(r">([\d,]+)</FONT>", group)]
            assert len({r // moe.best.config.ep for r in ranks}) == 1  # one expert group per outline


def test_rail_optimized_fabrics_are_drawn_as_rails(sources, designs):
    source = sources["dgx_h100_superpod.gcl", "topology"]
    graph = lower(designs["dgx_h100_superpod.gcl"])
    leaf = next(layer for layer in graph.switch_layers if layer.level == 1)
    for k in range(8):
        assert f"p_0_part_nic_ConnectX7:r{k}:n -> sw_SuperPOD_NDR_1_r_{k}" in source  # NIC port k to rail k
        assert f"sw_SuperPOD_NDR_1_r_{k} -> sw_SuperPOD_NDR_2" in source
        assert f'label="rail {k}\\n{leaf.switches // 8} × QM9700' in source
    assert "SuperPOD_NDR leaf: 8 rails" in source and "1:1 non-blocking" in source
    assert "127 links per rail × 400 Gb/s" in source  # the design writes 400 Gb/s, not 50 GB/s
    assert not re.search(r"(?<![\d.])50 GB/s", source)
    plain = sources["a100_cluster.gcl", "topology"]
    assert " rails" not in plain and "200 Gb/s" in plain  # a fat tree stays a fat tree


def test_oversubscription_and_plurals_are_written_out(tmp_path):
    path = tmp_path / "small.gcl"
    path.write_text(TORUS.split("fabric ICI")[0] + """
fabric Thin { kind = ethernet  topology = fat_tree(tiers = 2, radix = 8, oversubscription = 3:1)  bandwidth = 100 Gb/s }
nic N { bandwidth = 100 Gb/s }
node Box { gpus = 4 x T1  nics = 1 x N }
cluster Small { units = 9 x Box  scaleout = Thin }
""")   # 9 ports: more than one radix-8 switch holds, so two tiers (a tree no taller than its ports need)
    design = check_file(str(path)).design
    assert design is not None
    source = render.topology(lower(design), render.fabric_entities(design), design).source
    assert "oversubscribed 3:1" in source and "1 switch ·" in source and "1 switches" not in source


def test_power_view_at_the_plans_operating_point(plans, designs, sources):
    from gclc.compiler.metrics import power_breakdown
    from gclc.views.power_view import operating_point

    chosen = plans["dgx_h100_superpod.gcl"]
    graph = lower(designs["dgx_h100_superpod.gcl"])
    source = sources["dgx_h100_superpod.gcl", "power at plan"]
    point = operating_point(graph, chosen)
    p, used = chosen.job.partition, chosen.best.config.gpus
    expected = used * chosen.power.per_gpu + (p.gpus - used) * p.node.accelerator.idle
    assert point[p.name] * p.gpus == pytest.approx(expected)
    rows = {m.key: m.value for m in power_breakdown(graph, point)}
    full = {m.key: m.value for m in power_breakdown(graph)}
    assert rows["power.accelerators"] < full["power.accelerators"]
    assert render.fmt(rows["power.accelerators"], "W") in source
    assert f"at TDP: {render.fmt(full['power.accelerators'], 'W')}" in source
    assert "operating point" in source and f"{used:,} GPUs at {render.fmt(chosen.power.per_gpu, 'W')} each" in source


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
    torus = render.topology(lower(design, "Pod"), render.fabric_entities(design), design).source
    # drawn as a torus (issue 27: it was one hexagon, a switch it does not have): a 4 x 4 corner of
    # chips with its 2 x 4 x 3 neighbour links, each row going on to its wraparound
    assert "4 × 4 × 4 torus, wraparound" in torus and "hexagon" not in torus.split("legend")[0]
    chips = re.findall(r"^\t+(p_0_torus_chip_\d_\d) \[", torus, re.MULTILINE)
    links = re.findall(r"^\t+p_0_torus_chip_(\d)_(\d) -> p_0_torus_chip_(\d)_(\d)", torus, re.MULTILINE)
    assert len(set(chips)) == 16 and len(links) == 24
    assert all(abs(int(a) - int(c)) + abs(int(b) - int(d)) == 1 for a, b, c, d in links)   # neighbours only
    assert len(re.findall(r"-> p_0_torus_wrap_", torus)) == 4 and "wraps to the first" in torus
    assert all(f"ICI dim {i}: ring of 4 chips" in torus for i in (1, 2, 3))
    tpu = check_file("tpu.gcl", text='import "std/google"\ncluster S { units = 1 x TPU_v5p_Pod }\n').design
    pod = render.topology(lower(tpu), render.fabric_entities(tpu), tpu).source
    assert "16 × 16 × 24 torus, wraparound" in pod and "+12 chips, wraps to the first" in pod
    mesh = render.topology(lower(design, "Mini"), render.fabric_entities(design), design).source
    assert "no switches (direct links)" in mesh and "4 links × 25 GB/s" in mesh


@NEEDS_DOT
def test_dot_renders_every_view_without_warnings(sources):
    for (name, view), source in sorted(sources.items()):
        done = subprocess.run([DOT, "-Tsvg", "-o", os.devnull], input=source.encode(), capture_output=True,
                              timeout=60)
        assert done.returncode == 0 and done.stderr == b"", (name, view, done.stderr.decode())


def _bezier(pos: str, steps: int = 12) -> list[tuple[float, float]]:
    """Points along an edge's spline as `dot -Tjson` gives it (`e,x,y` / `s,x,y` are arrowheads)."""
    pts = [tuple(map(float, tok.split(",")[:2])) for tok in pos.split() if not tok.startswith(("e,", "s,"))]
    out = []
    for i in range(0, len(pts) - 3, 3):
        p0, p1, p2, p3 = pts[i:i + 4]
        for k in range(steps + 1):
            t = k / steps
            w = ((1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t * t, t ** 3)
            out.append((sum(a * p[0] for a, p in zip(w, (p0, p1, p2, p3))),
                        sum(a * p[1] for a, p in zip(w, (p0, p1, p2, p3)))))
    return out


@NEEDS_DOT
@pytest.mark.parametrize("name", EXAMPLES)
def test_no_cable_crosses_a_box_or_a_label_in_the_topology(name, sources):
    """Laid out by dot: no drawn edge passes through a box other than its two ends, nor through
    the label of a group (a rail group's title is a box beside its rails; a node's, a
    partition's and a unit's labels sit below them, away from the cables that leave upwards)."""
    done = subprocess.run([DOT, "-Tjson"], input=sources[name, "topology"].encode(), capture_output=True, timeout=60)
    laid = json.loads(done.stdout)
    boxes = []    # (what, gvid, (x0, y0, x1, y1)) in points, 2 pt inside the drawn box
    for o in laid.get("objects", []):
        if "pos" in o and "width" in o:
            x, y = map(float, o["pos"].split(",")[:2])
            w, h = float(o["width"]) * 36, float(o["height"]) * 36
            boxes.append((o["name"], o["_gvid"], (x - w + 2, y - h + 2, x + w - 2, y + h - 2)))
        elif o.get("label") and "lp" in o:
            x, y = map(float, o["lp"].split(","))
            w, h = float(o["lwidth"]) * 36, float(o["lheight"]) * 36
            boxes.append((f"label {o['label']!r}", None, (x - w + 2, y - h + 2, x + w - 2, y + h - 2)))
    crossed = [(what, edge["tail"], edge["head"]) for edge in laid.get("edges", []) if edge.get("style") != "invis"
               for what, gvid, (x0, y0, x1, y1) in boxes if gvid not in (edge["tail"], edge["head"])
               and any(x0 < x < x1 and y0 < y < y1 for x, y in _bezier(edge["pos"]))]
    assert crossed == []


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
    jobless = tmp_path / "jobless.gcl"  # a cluster without a job has no placement to draw
    jobless.write_text(TORUS)
    assert main(["render", example, "-o", str(tmp_path / "x.jpg")]) == 2
    assert main(["render", str(jobless), "-o", str(tmp_path / "x.svg"), "--view", "placement"]) == 1
    assert main(["render", example, "-o", str(tmp_path / "x.svg"), "--cluster", "Nope"]) == 2
    err = capsys.readouterr().err
    assert "use .svg, .png, .pdf or .dot" in err and "no job to plan" in err and "no cluster `Nope`" in err
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
