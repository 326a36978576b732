"""The same chips, the same MoE training job: a non-blocking switch against a torus of the
same links (model/comms.py). The law is written from the physics, not from the model:

- a torus routes an all-to-all dimension by dimension, and under uniform traffic each axis of
  p chips carries floor(p^2/4)/p bytes per byte a chip sends, over its two directed links per
  chip on a ring, or its middle link alone on an open line (Dally & Towles, "Principles and
  Practices of Interconnection Networks", 2004, Sec. 3.3: channel load k/8 on a k-ary
  n-cube under uniform traffic). No schedule moves the exchange faster than its busiest axis;
- a non-blocking switch into which every one of the chip's links runs moves the same exchange
  at the chip's injection rate: (N-1)/N of the bytes leave the chip over all its links at once.
  The torus's bisection is what holds its all-to-all back; the TPU v4 paper (Jouppi et al.,
  ISCA 2023, arXiv:2304.01433) offers a twisted 3D torus to raise it.

So a torus never beats that switch on an all-to-all-heavy step but by what the libraries'
per-call floors differ (NCCL's on the switch, the torus runtime's: model/collectives.py).
The model's torus all-to-all had taken min(1, 4/d) of the ring rate over (d-1)/d of the
bytes, i.e. d/4 hops where the mean to the *other* chips is floor(d^2/4)/(d-1): 4 chips on a
ring got the switch's speed where the links carry a third more; and only traffic to members
reached at an axis was charged to it, where dimension-order routing sends every destination
whose coordinate differs along it (16 x 2 chips: half the inner axis's load).
"""

from __future__ import annotations

import math

from hypothesis import example, given, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import collectives, comms
from gclc.model.job import pinned_config, train_job
from gclc.model.train import moe as routed
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()

DESIGN = """
chip G {{ peak {{ bf16 = 400 TFLOPS }} hbm {{ capacity = 96 GB  bandwidth = 2 TB/s }} power {{ tdp = 500 W }} }}
fabric Up {{ kind = ici  topology = {topology}  bandwidth = {bandwidth} GB/s  latency = {latency} us }}
node Box {{ gpus = {chips} x G  scaleup = Up }}
cluster C {{ units = 1 x Box }}
model M {{
  arch = moe  layers = {layers}  hidden = {hidden}  heads = 16  ffn = 4096  vocab = 32000  seq = {seq}
  experts {{ routed = {experts}  shared = 0  top_k = {top_k}  ffn = 1024 }}
}}
train job {{
  model = M  on = C  batch = {batch}  precision = bf16
  parallelism {{ tp = 1 pp = 1 dp = {chips} ep = {chips} microbatch = 1 zero = 1 recompute = none }}
}}
"""


def job_on(topology: str, per_chip: float, hop_us: float, chips: int, **model):
    result = check_text(DESIGN.format(topology=topology, bandwidth=per_chip, latency=hop_us, chips=chips, **model),
                        "torus.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def channel_load_bound(dims, link, wrap) -> float:
    """Seconds per byte a chip sends uniformly, on the torus's busiest axis (Dally & Towles)."""
    per_axis = []
    for p in dims:
        if p > 1:
            hop_bytes = (p * p // 4) / p            # per byte sent: what crosses the axis's links
            per_axis.append(hop_bytes / (2 * link if wrap else link))
    return max(per_axis, default=0.0)


@given(st.lists(st.integers(1, 8), min_size=1, max_size=3).filter(lambda d: 2 <= math.prod(d) <= 64),
       st.integers(10, 200), st.integers(0, 3), st.booleans(), st.sampled_from([512, 1024, 2048]),
       st.sampled_from([512, 2048]), st.sampled_from([1, 2, 4]))
# the law's first counterexample: an open 3 x 2 torus whose 3-chip axis was charged only the
# traffic to the members it reaches first (2 of 6), not all that differ along it (4 of 6)
@example(dims=[3, 2], link_gb=10, hop_us=0, wrap=False, hidden=512, seq=512, top_k=1)
def test_a_torus_never_beats_a_non_blocking_switch_on_an_all_to_all_heavy_step(dims, link_gb, hop_us, wrap, hidden,
                                                                                 seq, top_k):
    chips, links = math.prod(dims), 2 * sum(1 for d in dims if d > 1)
    per_chip = links * link_gb
    model = dict(layers=2, hidden=hidden, seq=seq, experts=2 * chips, top_k=top_k, batch=2 * chips)
    dims_text = ", ".join(map(str, dims))
    torus = job_on(f"torus(dims = [{dims_text}], wraparound = {str(wrap).lower()})", per_chip, hop_us, chips, **model)
    switch = job_on("switched", per_chip, hop_us, chips, **model)
    cfg = pinned_config(torus)
    assert not cfg.overlaps_ep
    on_torus = estimate(torus.shape, cfg, torus.partition)
    on_switch = estimate(switch.shape, cfg, switch.partition)

    calls = 4 * torus.shape.moe_layers * cfg.microbatches          # dispatch, combine; forward, backward
    sent = routed.dispatch_bytes(torus.shape, cfg, 2)               # bf16 each way
    host = torus.shape.moe_layers * cfg.microbatches * routed.host_exposed(torus.shape, cfg)
    link = link_gb * 1e9
    # the torus: never faster than its busiest axis's links allow
    assert on_torus.breakdown.ep >= host + calls * sent * channel_load_bound(dims, link, wrap) * (1 - 1e-9)
    # the switch: the chip's injection rate over all its links, plus NCCL's per-call floor
    floor = collectives.all_to_all(1.0, comms.place(chips, 1, switch.partition.tiers))
    injection = (chips - 1) / chips / (links * link)
    assert on_switch.breakdown.ep <= host + calls * (sent * injection + floor) * (1 + 1e-9)
    # so the torus wins at most what NCCL's floor costs beyond the torus runtime's
    excess = max(0.0, floor - collectives.TORUS_CALL_S)
    assert on_switch.breakdown.ep <= on_torus.breakdown.ep + calls * excess * (1 + 1e-9)


def test_four_chips_on_a_ring_carry_a_third_more_than_through_a_switch():
    # the regression the law found: 4 chips, one ring with wraparound (two 50 GB/s links each
    # way); a uniform exchange's shortest ways sum to 1 + 1 + 2 hops from each chip, against a
    # switch's 3 single crossings at the same 100 GB/s: the old price charged both 3/4 of the bytes
    axis = (Tier(0, "ring", "Up", "ici", "node", 4, 100e9, 0.0, 1.0, False, 1.0, ring=4, span=no_span()),)
    switch = (Tier(0, "switch", "Up", "ici", "node", 4, 100e9, 0.0, 1.0, False, 1.0, span=no_span()),)
    on_ring = comms.all_to_all(4e9, comms.place(4, 1, axis), latency=False)
    assert on_ring == 4e9 * 4 / 4 / 100e9
    assert on_ring == comms.all_to_all(4e9, comms.place(4, 1, switch), latency=False) * 4 / 3


# ---------------------------------------------------------------- ring collectives: a torus axis against a tapered tree

SCALE_OUT = """
chip G {{ peak {{ bf16 = 400 TFLOPS }} hbm {{ capacity = 96 GB  bandwidth = 2 TB/s }} power {{ tdp = 500 W }} }}
nic N {{ bandwidth = {nic} GB/s  power = 20 W }}
switch S {{ radix = {radix}  port_speed = {link} GB/s  power = 1 kW }}
fabric Out {{ kind = infiniband  topology = {topology}  bandwidth = {bandwidth} GB/s  latency = 0 us {switch} }}
node Box {{ gpus = 1 x G  nics = 1 x N }}
cluster C {{ units = {nodes} x Box  scaleout = Out }}
"""


def scale_out_tiers(topology: str, bandwidth: float, nodes: int, radix: int = 64, switch: str = ""):
    from gclc.compiler.lower import lower_cluster

    result = check_text(SCALE_OUT.format(topology=topology, bandwidth=bandwidth, nic=bandwidth, radix=radix,
                                         link=bandwidth, switch=switch, nodes=nodes), "tree.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return lower_cluster(result.design["C"]).partitions[0].tiers


@given(st.sampled_from([2, 3, 4, 8]), st.sampled_from([2, 4, 8, 16]), st.booleans(), st.sampled_from([8, 16, 32]),
       st.sampled_from([1, 2, 3, 4]), st.integers(10, 200), st.sampled_from(["axis 2", "axis 1", "all"]))
def test_a_ring_along_a_torus_axis_is_never_slower_than_across_a_tapered_tree(d1, d2, wrap, radix, taper, link, group):
    # the same chips: each has one link of `link` into a fat tree (any taper, adaptive routing),
    # or 2 per axis of the same rate in a torus. A ring collective's chip sends and receives
    # through its one tree port at best, whatever the taper (which only slows it); along a torus
    # axis the ring has one link each way (an open line, folded) or two (a ring with wraparound),
    # and a group over both axes runs both at once. So the torus's bytes never take longer.
    # Latency aside (0 us): the libraries' floors differ, as above.
    nodes = d1 * d2
    if radix * radix // 2 < nodes or taper >= radix - 1:
        return
    links = 2 * sum(1 for d in (d1, d2) if d > 1)
    torus = scale_out_tiers(f"torus(dims = [{d1}, {d2}], wraparound = {str(wrap).lower()})", links * link, nodes)
    tree = scale_out_tiers(f"fat_tree(tiers = 2, radix = {radix}, oversubscription = {taper}:1)", link, nodes,
                           radix, "switch = S")
    size, stride = {"axis 2": (d2, d1), "axis 1": (d1, 1), "all": (nodes, 1)}[group]
    for collective in (comms.all_reduce, comms.reduce_scatter):
        on_torus = collective(1e9, comms.place(size, stride, torus))
        on_tree = collective(1e9, comms.place(size, stride, tree))
        assert on_torus <= on_tree * (1 + 1e-9)
        # and the tree never beats its port: (n-1)/n of the share each way through one link
        assert on_tree >= (size - 1) / size * 1e9 / (link * 1e9) * (1 - 1e-9)
