"""`gclc render --view placement` for a job on several partitions: one rank grid per
partition under the chosen split (views/placement_hetero.py), checked on the DOT source
of the small H100 + A100 design that the split tests use."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.dsl.numbers import duration
from gclc.model.train.step import estimate
from gclc.model.job import hetero_entity
from gclc.solver.split.plan import plan_hetero
from gclc.views.placement import coordinate
from gclc.views.placement_hetero import hetero_placement

DATA = Path(__file__).parent.parent / "data"
CELL = re.compile(r'<TD BORDER="2" COLOR="#\w+" BGCOLOR="#\w+"[^>]*><FONT [^>]*>([\d,]+)')


@pytest.fixture(scope="module")
def result():
    return plan_hetero(hetero_entity(check_file(str(DATA / "hetero.gcl"), {}).design))


def _clusters(source: str) -> dict[str, str]:
    """Each partition frame's DOT body, by its label's partition name."""
    out = {}
    for body in re.split(r"\n\tsubgraph ", source)[1:]:
        name = re.search(r'label="(\w+)[: ]', body)[1]
        out[name] = body
    return out


def test_every_partition_of_the_data_split_gets_its_own_grid(result):
    split = result.best
    assert split.mode == "data" and all(s.items for s in split.shares)
    source = hetero_placement(result).source
    frames = _clusters(source)
    assert sorted(frames) == sorted(s.partition for s in split.shares)
    for share in split.shares:
        body, c = frames[share.partition], share.config
        assert (f"{share.partition}: {share.gpus:,} × {share.chip} · {share.items:,} sequences of each step · "
                f"tp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp}") in body
        ranks = sorted(int(r.replace(",", "")) for r in CELL.findall(body))
        assert ranks == list(range(c.gpus))              # every rank of the partition's configuration, once
        for dim in ("tp", "dp"):
            if getattr(c, dim) > 1:
                assert f"{dim} = {getattr(c, dim)} (" in body
    assert f"gradient all-reduce: {duration(split.exchange)} per step" in source
    assert "data split over 2 of 2 partitions" in source


def test_a_pipeline_split_numbers_the_layers_each_partition_holds(result):
    split = result.pipeline
    assert split.status == "optimal"
    source = hetero_placement(attrs.evolve(result, best=split)).source
    frames = _clusters(source)
    first = 0
    for share in split.shares:
        c, body = share.config, frames[share.partition]
        assert f"layers {first}–{first + share.items - 1}" in body
        if c.pp == 1:
            assert f"layers {first}–{first + share.items - 1}<BR/>" in body    # the band's own label
        else:
            per = share.items / c.pp
            assert f"layers {first}–{first + round(per) - 1}<BR/>" in body
        # Its communication is its configuration's, scaled to the layers it holds.
        job = next(p.job for p in result.plans if p.job.partition.name == share.partition)
        e = estimate(job.shape, c, job.partition)
        if e.breakdown.dp:
            spent = re.search(r"dp = \d+ \(data\)</TD><TD[^>]*>[^<]*</TD><TD[^>]*>([^<]*)</TD>", body)[1]
            # each tier's seconds as the one duration formatter writes them (3 significant digits)
            scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": 60.0}
            total = sum(float(x.replace(",", "")) * scale[u] for x, u in re.findall(r"\(([\d.,]+) (s|ms|us|ns|min)\)", spent))
            assert total == pytest.approx(e.breakdown.dp * share.items / job.shape.layers, rel=0.01)
        first += share.items
    assert first == result.plans[0].job.shape.layers
    assert "activations and their gradients" in source


def test_a_partition_the_split_leaves_out_is_a_note_not_a_grid(result):
    split = result.best
    shares = (attrs.evolve(split.shares[0], items=0, gpus=0, config=None),) + split.shares[1:]
    source = hetero_placement(attrs.evolve(result, best=attrs.evolve(split, shares=shares))).source
    frames = _clusters(source)
    left_out = frames[split.shares[0].partition]
    assert "unused: the data split gives" in left_out and not CELL.search(left_out)
    assert CELL.search(frames[split.shares[1].partition])


def test_render_draws_a_heterogeneous_job(tmp_path):
    out = tmp_path / "mixed.dot"
    assert main(["render", str(DATA / "hetero.gcl"), "-o", str(out), "--view", "placement"]) == 0
    source = out.read_text()
    assert source.count("subgraph cluster_") == 2 and "h100:" in source and "a100:" in source
    # The same ranks as the library call draws, byte for byte (deterministic output).
    assert main(["render", str(DATA / "hetero.gcl"), "-o", str(tmp_path / "again.dot"), "--view", "placement"]) == 0
    assert (tmp_path / "again.dot").read_text() == source


def test_a_grid_band_holds_its_stage_only(result):
    # The per-partition grids follow the same rank layout as a single plan's.
    split = result.pipeline
    source = hetero_placement(attrs.evolve(result, best=split)).source
    for i, share in enumerate(split.shares):
        c = share.config
        for stage in range(min(c.pp, 2)):
            band = re.search(rf"\tp{i}_stage_{stage} \[label=<(.*)>\]", source)[1]
            for rank in (int(r.replace(",", "")) for r in CELL.findall(band)):
                assert c.pp == 1 or coordinate(c, rank, "pp") == stage


def test_the_heterogeneous_example_draws_every_partition_it_uses(tmp_path):
    root = Path(__file__).resolve().parents[2]
    design = check_file(str(root / "examples" / "hetero_h100_a100.gcl")).design
    result = plan_hetero(hetero_entity(design))
    out = tmp_path / "example.dot"
    assert main(["render", str(root / "examples" / "hetero_h100_a100.gcl"), "-o", str(out), "--view",
                 "placement"]) == 0
    frames = _clusters(out.read_text())
    assert sorted(frames) == sorted(s.partition for s in result.best.shares)
    for share in result.best.shares:
        assert share.items == 0 or f"{share.gpus:,} × {share.chip}" in frames[share.partition]
