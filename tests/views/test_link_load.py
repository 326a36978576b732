"""The topology coloured by link load at a plan (issue 27, `gclc render --view topology
--job NAME`): each tier's busy share spreads every communicator's time over the tiers its
group crosses as the comms model times them, the shares add up to that time; each drawn
link's own load (issue 33) runs the same communicators on the flow simulator's links, and the
drawing labels and colours every link by it."""

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
from gclc.dsl.numbers import percent
from gclc.views.link_load import _weights, colour, link_loads, tier_loads
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
    busy = set(re.findall(r'tooltip="busy ([\d.]+%) of the step"', source))
    loads = link_loads(moe, {"NDR": 8})   # tests/data/pod.gcl: 8 rails
    assert busy == {percent(x) for x in loads.values() if x}
    assert "links busy over 70%: near saturated" in source
    hetero = str(ROOT / "examples" / "hetero_h100_a100.gcl")
    assert main(["render", hetero, "--job", "llama3_70b_hetero", "-o", str(tmp_path / "x.dot")]) == 2
    assert "link loads are drawn for a train plan" in capsys.readouterr().err


# ---------------------------------------------------------------- per link: a pipeline boundary on two rails

RAILS = """
import "std/nvidia"
fabric SlowRails {  # ASSUMPTION: a test fabric, slow enough that the pipeline's sends fill its ports
  kind = infiniband  topology = rail_optimized(tiers = 2, radix = 64, oversubscription = 1:1)  rails = 8
  bandwidth = 10 Gb/s  latency = 1 us  switch = QM9700
}
cluster Pod { units = 2 x DGX_H100  scaleout = SlowRails }
model M { arch = dense  layers = 16  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 128000  seq = 4096 }
train job {
  model = M  on = Pod  batch = 64  precision = bf16
  parallelism { tp = 2 pp = 8 dp = 1 microbatch = 1 zero = 1 recompute = none }
}
"""


def test_each_rail_is_coloured_by_its_own_links_load(tmp_path):
    # 16 ranks, tp 2 then pp 8 (stride 2): stage 3 holds ranks 6 and 7 of node 0, stage 4
    # ranks 8 and 9 of node 1, so the only sends that leave node 0 leave from its GPUs 6 and 7,
    # on rails 6 and 7, and fill their ports for the whole pipeline-send time; every other
    # rail of node 0 carries nothing (tp and the other stages' sends stay on NVLink)
    design = tmp_path / "rails.gcl"
    design.write_text(RAILS)
    found = plan(train_job(check_file(str(design)).design))
    c, e = found.best.config, found.best
    assert (c.tp, c.pp, c.dp, c.stride("pp")) == (2, 8, 1, 2)
    node = 8
    leaving = {r % node for r in range(c.gpus - c.stride("pp")) if r // node != (r + c.stride("pp")) // node}
    assert leaving == {6, 7}
    loads = link_loads(found, {"SlowRails": 8})
    for k in range(8):
        expected = e.breakdown.pp / e.step_time if k in leaving else 0.0
        assert math.isclose(loads[("SlowRails leaf", k)], expected, rel_tol=1e-9, abs_tol=1e-12)
    out = tmp_path / "rails.dot"
    assert main(["render", str(design), "--job", "job", "-o", str(out)]) == 0
    edges = {int(k): (colour_, float(busy) if busy else 0.0) for k, colour_, busy in re.findall(
        r':r(\d):n -> \S+ \[.*?color="(#\w+)".*?tooltip="(?:busy ([\d.]+)% of the step|idle at this plan)"', out.read_text())}
    assert set(edges) == set(range(8))
    assert {edges[k][0] for k in leaving} == {colour(e.breakdown.pp / e.step_time)} != {edges[0][0]}
    assert edges[0][0] == colour(0.0)
    # the most loaded link drawn is a rail the pipeline's boundary leaves by
    boundary = {("SlowRails leaf", k) for k in leaving}
    others = [v for key, v in loads.items() if key not in boundary and key != "SlowRails leaf"]
    assert max(others) < min(loads[key] for key in boundary)
    drawn = [float(x) for x in re.findall(r'tooltip="busy ([\d.]+)% of the step"', out.read_text())]
    assert max(drawn) == max(edges[k][1] for k in leaving)
