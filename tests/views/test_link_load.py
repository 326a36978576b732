"""The topology coloured by link load at a plan (issue 27, `gclc render --view topology
--job NAME`): each tier's busy share spreads every communicator's time over the tiers its
group crosses as the comms model times them, the shares add up to that time, and the
drawing labels and colours the links by them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.model.ranks import rank_partition
from gclc.solver.train.plan import plan
from gclc.views.link_load import _weights, colour, tier_loads
from gclc.views.report.timeline import hidden_sync

ROOT = Path(__file__).resolve().parents[2]
MOE = ROOT / "tests" / "data" / "moe.gcl"   # ep 16 over two 8-GPU nodes: the all-to-all crosses the fabric


@pytest.fixture(scope="module")
def moe():
    return plan(train_job(check_file(str(MOE)).design))


def test_the_loads_add_up_to_the_plans_communication(moe):
    e = moe.best
    b = e.breakdown
    loads = tier_loads(moe)
    names = {t.name for t in rank_partition(moe.job.partition, e.config.gpus).tiers}
    assert set(loads) <= names and all(0 <= x <= 1 for x in loads.values())
    communicated = b.tp + b.cp + b.ep + b.pp + b.dp + hidden_sync(moe)
    assert math.isclose(sum(loads.values()) * e.step_time, communicated, rel_tol=1e-9)
    assert loads["NDR leaf"] > 0 and loads["NVLink4 (node)"] > 0   # the expert all-to-all crosses both


def test_a_ring_spends_each_tier_what_the_comms_model_does():
    class Tier:
        def __init__(self, name, bandwidth):
            self.name, self.bandwidth = name, bandwidth

    class Stage:
        def __init__(self, tier, peers):
            self.tier, self.peers = tier, peers

    stages = (Stage(Tier("inner", 100.0), 8), Stage(Tier("outer", 10.0), 16))
    ring = _weights(stages, ring=True)
    assert math.isclose(ring["outer"] / ring["inner"], (15 / 16 / 8 / 10) / (7 / 8 / 100))
    a2a = _weights(stages, ring=False)   # peers first reached on each tier: 7 of 128, then 120
    assert math.isclose(a2a["outer"] / a2a["inner"], (120 / 10) / (7 / 100))
    assert [colour(x) for x in (0.1, 0.5, 0.9)] == ["#2e7d32", "#ef6c00", "#c62828"]


def test_render_draws_the_topology_coloured_by_load(moe, tmp_path, capsys):
    out = tmp_path / "load.dot"
    assert main(["render", str(MOE), "--job", "job", "-o", str(out)]) == 0
    source = out.read_text()
    busy = re.findall(r"busy ([\d.]+)% of the step", source)
    loads = tier_loads(moe)
    assert sorted(float(x) for x in busy) == sorted(round(100 * x, 1) for x in loads.values() if x)
    assert "links busy over 70%: near saturated" in source
    hetero = str(ROOT / "examples" / "hetero_h100_a100.gcl")
    assert main(["render", hetero, "--job", "llama3_70b_hetero", "-o", str(tmp_path / "x.dot")]) == 2
    assert "link loads are drawn for a train plan" in capsys.readouterr().err
