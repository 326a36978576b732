"""PFC's pauses behind an expert all-to-all, priced by the plan (model/train/incast.py): a
`congestion = pfc` RoCE fabric whose hashed spine paths collide holds the data-parallel rings
beside the all-to-all to its slowest flow; with adaptive routing, or under ECN, it costs
nothing beyond each communicator's own price. The plan's text and JSON say so."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.ir import Tier
from gclc.compiler.lower import lower
from gclc.compiler.routing import ecmp_share
from gclc.dsl.source import no_span
from gclc.model import comms
from gclc.model.job import pinned_config, train_job
from gclc.model.network import flows
from gclc.model.network.pfc import Incast, beside_incast
from gclc.model.network.placement import stage_rate
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()

DESIGN = """
import "std/nvidia"
fabric Roce {{ kind = {kind}  topology = fat_tree(tiers = 2, radix = 16)  bandwidth = 400 Gb/s  latency = 1 us  {extra} }}
cluster C {{ units = 4 x DGX_H100  scaleout = Roce }}
model M {{
  arch = moe  layers = 8  hidden = 7168  heads = 128  head_dim = 128  ffn = 18432  vocab = 129280  seq = 4096
  experts {{ routed = 256  shared = 1  top_k = 8  ffn = 2048  dense_layers = 1 }}
}}
train job {{ model = M  on = C  gpus = 32  batch = 64  precision = bf16
  parallelism {{ tp = 1  pp = 1  ep = 16  microbatch = 1 }} }}
"""


def _check(extra: str, kind: str = "ethernet"):
    return check_text(DESIGN.format(extra=extra, kind=kind), "pfc.gcl")


def _estimate(extra: str):
    result = _check(extra)
    assert result.ok, [str(d) for d in result.diagnostics]
    job = train_job(result.design)
    return estimate(job.shape, pinned_config(job), job.partition)


def test_congestion_is_an_ethernet_field_and_lowers_onto_the_fabrics_tiers():
    result = _check("congestion = pfc")
    assert result.ok
    assert {t.congestion for t in lower(result.design).partitions[0].tiers if t.fabric == "Roce"} == {"pfc"}
    text = DESIGN.format(extra="congestion = pfc", kind="infiniband")
    [error] = [d for d in check_text(text, "pfc.gcl").diagnostics if d.code == "congestion-kind"]
    line = text.splitlines()[2]
    assert (error.subject.line, error.subject.column) == (3, line.index("congestion") + 1)
    assert "kind = ethernet" in error.notes[-1]


def test_hashed_collisions_under_pfc_slow_the_data_parallel_rings_and_the_plan_says_so():
    from gclc.solver.train.plan import plan
    from gclc.views.plan_json import plan_json
    from gclc.views.plan_text import plan_text

    ecn, pfc, adaptive = _estimate(""), _estimate("congestion = pfc"), _estimate("congestion = pfc  routing = adaptive")
    assert ecn.paused is None and adaptive.paused.seconds == 0 and adaptive.paused.slowdown == pytest.approx(1.0)
    held = pfc.paused
    # every GPU's NIC sends to and takes from the 8 expert peers of the other node; the spine
    # hashes them: PFC holds the rings to the slowest collided flow while the all-to-all runs
    assert held.senders == 8 and 0 < held.duty < 1 and held.slowdown > 1.5
    assert pfc.step_time == pytest.approx(ecn.step_time + held.seconds, rel=1e-9)
    assert pfc.breakdown.dp == pytest.approx(ecn.breakdown.dp + held.seconds, rel=1e-9)
    result = _check("congestion = pfc")
    p = plan(train_job(result.design), top=0)
    found = plan_json(p)["pfc_pause"]
    assert found["seconds"] == pytest.approx(p.best.paused.seconds) and found["fabric"] == "Roce"
    assert "PFC pause  Roce: the expert all-to-all's incast (8 flows into each NIC)" in plan_text(p)


def _switch(gpus: int, port: float) -> Tier:
    return Tier(1, "leaf", "Net", "ethernet", "scaleout", gpus, port, 1e-6, 1.0, False, 1.0, span=no_span())


@given(st.sampled_from([(4, 2), (4, 4), (6, 3), (6, 6), (8, 2), (8, 4), (8, 8), (9, 3), (10, 5), (12, 4), (12, 6),
                        (12, 12)]), st.sampled_from([12.5e9, 50e9]), st.sampled_from(["ecn", "pfc"]))
def test_a_ring_beside_an_all_to_all_on_one_switch_runs_at_the_simulated_rate(shape, port, congestion):
    """An all-to-all over every GPU of a switch beside a ring over some of them: each ring
    member's port carries gpus - 1 of the all-to-all's flows. Analytic (model/network/pfc.py)
    and simulated, both congestion modes: the same rate (no hashing: PFC adds nothing)."""
    gpus, ring = shape
    tier = _switch(gpus, port)
    f = flows.fabric((tier,), gpus)
    both = [flows.Communicator("ring", ring, 1), flows.Communicator("a2a", gpus, 1, pattern="all")]
    simulated = flows.ring_rates(f, both, congestion)["ring"]
    stages = tuple(comms.place(ring, 1, (tier,)))
    incast = Incast("Net", gpus - 1, port, flows=gpus - 1)
    assert stage_rate(beside_incast(stages, incast, congestion)[0]) == pytest.approx(simulated, rel=1e-9)


def test_the_held_rate_under_ecmp_lies_within_the_simulated_hashes():
    """The flow simulator's own scene (tests/model/test_flows.py): all-to-alls of 4 GPUs one a
    leaf, 48 flows a leaf over 16 spine paths, beside rings inside each leaf. The analytic ring
    rate under PFC over ECN (the slowest flow at the hashed share of its fair rate,
    compiler/routing.py) falls within what 16 hashes simulate."""
    node = Tier(0, "t0", "nv", "nvlink", "node", 8, 400e9, 1e-6, 1.0, False, 1.0, span=no_span())
    leaf = Tier(1, "t1", "ib", "ethernet", "scaleout", 16, 50e9, 1e-6, 1.0, False, 1.0, span=no_span())
    spine = Tier(2, "t2", "ib", "ethernet", "scaleout", 64, 50e9, 1e-6, 1.0, False, 1.0, span=no_span())
    both = [flows.Communicator("ep", 4, 16, pattern="all"), flows.Communicator("dp", 2, 8)]
    simulated = []
    for seed in range(16):
        f = flows.fabric((node, leaf, spine), 64, {2: 16}, seed)
        ecn, pfc = (flows.ring_rates(f, both, c)["dp"] for c in ("ecn", "pfc"))
        simulated.append(pfc / ecn)
    k, port = 3, 50e9
    incast = Incast("ib", k, port, flows=k, path=ecmp_share(48, 16) * port / k)
    ring = tuple(comms.place(2, 8, (node, leaf, spine)))
    analytic = stage_rate(beside_incast(ring, incast, "pfc")[0]) / stage_rate(beside_incast(ring, incast, "ecn")[0])
    assert min(simulated) <= analytic <= max(simulated)
    assert abs(analytic - statistics.mean(simulated)) < 0.15


def test_an_overlapped_all_to_all_pauses_the_rings_as_long_as_it_is_on_the_wire():
    """Overlapping the all-to-all with another micro-batch's compute hides it from the step,
    not from the NICs: PFC holds the rings while it is on the wire. The layer pass shortens by
    what the overlap hides, the wire time does not, so the paused share grows (it shrank when
    the share read the exposed time)."""
    plain = _estimate("congestion = pfc")
    text = DESIGN.replace("microbatch = 1 }", "microbatch = 1  ep_overlap = true }").format(
        extra="congestion = pfc", kind="ethernet")
    result = check_text(text, "pfc.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    job = train_job(result.design)
    overlapped = estimate(job.shape, pinned_config(job), job.partition)
    assert overlapped.breakdown.ep < plain.breakdown.ep   # the overlap hides some of it from the step
    assert overlapped.paused.duty > plain.paused.duty
