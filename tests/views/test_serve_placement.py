"""`gclc render --view placement` of serve plans: pools, replicas, their ranks and the tiers
their groups (and, disaggregated, the KV hand-off) cross; `dot` lays it out without warnings."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views import render
from gclc.views.serve_placement import group_tiers, kv_tier, pools

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "deepseek_v3_serve.gcl"
NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's `dot` is not installed")


@functools.cache
def _plan(mode: str, directory: str):
    text = EXAMPLE.read_text()
    # each mode pinned (the example's own `auto` plans a split since serving power follows the
    # requests held: docs/power.md)
    text = text.replace("kv_precision = fp8", f"kv_precision = fp8\n    mode = {mode}")
    path = Path(directory) / f"{mode}.gcl"
    path.write_text(text)
    return plan_serve(serve_entity(check_file(str(path)).design), requests=200)


@pytest.fixture(scope="module", params=["aggregated", "disaggregated"])
def plan(request, tmp_path_factory):
    chosen = _plan(request.param, str(tmp_path_factory.mktemp("serve")))
    assert chosen.mode == request.param and chosen.best is not None
    return chosen


def test_every_pool_and_replica_is_drawn_with_its_ranks(plan):
    source = render.serve_placement(plan).source
    roles = [role for role, _ in pools(plan)]
    assert roles == (["prefill", "decode"] if plan.prefill else ["serving"])
    first = 0
    for role, side in pools(plan):
        assert f"{role} pool · {side.count:,} × {side.replica.gpus:,} GPUs" in source
        assert f"replica 0</B> · ranks {first:,}–{first + side.replica.gpus - 1:,}" in source  # prefill ranks first
        first += side.gpus
    assert f"{plan.used_gpus:,} of {plan.gpus:,} GPUs" in source


def test_the_tier_table_names_the_tiers_each_group_crosses(plan):
    """DeepSeek-V3 fp8 needs 16 H100 per replica: two 8-GPU nodes joined by NDR."""
    source = render.serve_placement(plan).source
    for _, side in pools(plan):
        rows = group_tiers(side.replica)
        assert rows, "a replica spanning nodes has groups"
        for _, _, crossed in rows:
            assert crossed in source
        c = side.replica.config
        if c.pp > 1:  # the stage hop that leaves a node is charged to the fabric
            names = [t.name for t in side.replica.pp_hops]
            per_node = side.replica.partition.node.gpus
            leaves = [((s + 2) * c.tp * c.ep - 1) // per_node != (s * c.tp * c.ep) // per_node for s in range(c.pp - 1)]
            assert names == [side.replica.partition.tiers[1 if out else 0].name for out in leaves]


def test_the_kv_hand_off_is_labelled_with_its_tier(plan):
    source = render.serve_placement(plan).source
    if plan.prefill is None:
        assert kv_tier(plan) is None and "KV cache" not in source
    else:
        tier = kv_tier(plan)
        assert tier is not None and f"KV cache over {tier.name}" in source


@NEEDS_DOT
def test_dot_lays_it_out_without_warnings(plan):
    done = subprocess.run(["dot", "-Tsvg"], input=render.serve_placement(plan).source, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "<svg" in done.stdout


def test_gclc_render_draws_a_serve_job(tmp_path, capsys):
    path = tmp_path / "small.gcl"
    path.write_text(EXAMPLE.read_text().replace("param nodes = 32", "param nodes = 4")
                    .replace("param demand = 40", "param demand = 2"))
    out = tmp_path / "placement.dot"
    assert main(["render", str(path), "--view", "placement", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("digraph") and re.search(r"serve chat: (aggregated|disaggregated)", text)
