"""A collective call priced as NCCL runs it on gclc's tiers (model/collectives.py): the
tiers say how fast the bytes move, NCCL's tables which algorithm and protocol a call of this
size takes and the latency it pays. The training step's collectives go through it."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import example, given, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import collectives, comms
from gclc.model.job import pinned_config, train_job
from gclc.model.network import nccl
from gclc.model.train.step import estimate
from gclc.testing import load_profile

load_profile()

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def tier(level, group, bandwidth, scope="scaleout", oversubscription=1.0, latency=1e-6, reduces=False, kind="infiniband",
         ring=0, generation=None):
    return Tier(level, f"t{level}", f"f{level}", kind, scope, group, bandwidth, latency, oversubscription,
                reduces, 1.0, ring=ring, generation=generation, span=no_span())


def hierarchy(up, out, leaf, oversubscription, nvls, sharp, generation=None):
    """8-GPU nodes (of a GPU `generation`, compiler/formats.py; None: not stated, Hopper's tables) on `leaf`-GPU
    leaves under a spine at `oversubscription`."""
    return (tier(0, 8, up, "node", latency=0.5e-6, reduces=nvls, kind="nvlink", generation=generation),
            tier(1, leaf, out, reduces=sharp),
            tier(2, 4096, out / oversubscription, oversubscription=oversubscription, reduces=sharp))


tiers_strategy = st.builds(hierarchy, st.sampled_from([150e9, 450e9, 900e9]), st.sampled_from([12.5e9, 50e9, 100e9]),
                           st.sampled_from([24, 64, 256]), st.sampled_from([1.0, 2.0, 4.0]), st.booleans(),
                           st.booleans(), st.sampled_from([None, "ampere", "ada", "hopper", "blackwell"]))
groups = st.tuples(st.sampled_from([2, 4, 8, 16, 32, 64, 256]), st.sampled_from([1, 2, 8]))
sizes = st.floats(1.0, 2.0**34)


def wire(collective, nbytes, stages):
    """The tiers' bytes alone over the fastest placement, the switches reducing (NVLS at its
    share of the port) or not, whichever is faster, or NCCL's NVLS tree's bytes at its own
    rate where it runs (its halves pipelined, each byte leaving a node once): what no
    protocol beats."""
    # NVLS at its generation's share of the port (none on Ampere and Ada: collectives._nvls_capable)
    tiers = [collectives._wire(collective, nbytes, path)
             for o in map(collectives._nvls_capable, map(tuple, stages.options))
             for path in (o, collectives._plain(o))]
    trees = [nbytes / nccl._bandwidth(collective, "nvls_tree", "Simple", c)
             for c in map(collectives.communicator, map(tuple, stages.options))
             if c is not None and "nvls_tree" in nccl._algorithms(collective, c)]
    return min(tiers + trees)


def ceiling(collective, nbytes, stages):
    """The most a call may take: on each placement, on the path NCCL runs it on (the switches
    reducing, by NVLS or SHARP; or not, by ring, tree or PAT: the one NCCL's own table predicts
    faster, nccl.predicted), the tiers' bytes plus the latency (and a tree's fill) of the
    option NCCL's tables make fastest on that path, or an in-domain NVLS all-reduce's loops
    where their head steps outlast the bytes; the least of them."""
    found = []
    for o in map(collectives._nvls_capable, map(tuple, stages.options)):
        c = collectives.communicator(o)
        plain, reducing = collectives._plain(o), o
        wires = {p: collectives._wire(collective, nbytes, p) for p in (plain, reducing)}
        ran = collectives._priced(collective, nbytes, o)
        for path, in_network in ((reducing, True), (plain, False)):
            if ran is not None and ran.algorithm != "nvls_tree" and (ran.algorithm in nccl.IN_NETWORK) != in_network:
                continue
            # NCCL's NVLS tree runs at its own rate (collectives._priced: nccl.nvls_tree), never on the
            # tiers' plain bytes: not an option of either path here
            options = [x for x in nccl._options(collective, c)
                       if (x[0] in nccl.IN_NETWORK) == in_network and x[0] != "nvls_tree"]
            if not options or (in_network and wires[reducing] >= wires[plain]):
                continue
            algorithm, protocol, latency, _ = max(options, key=lambda x: (x[3], -x[2]))
            latency += nccl._fill(algorithm, protocol, nbytes, c)
            # an NVLS all-reduce inside one domain pays its loops' head steps where they outlast the
            # bytes (model/network/nccl.py nvls_loop_seconds), not one flat latency
            found.append(nccl._seconds(collective, algorithm, latency, nbytes, wires[path], c))
    return min(found)


@given(tiers_strategy, groups, st.sampled_from(COLLECTIVES), sizes, sizes)
# std GB300_NVL72's and GB200_NVL72's NVLink (900 GB/s, Blackwell), 4 GPUs: NCCL's table (its 0.6 us NVLink LL
# step) runs ring LL at 4.99 MB, which the model prices at NVLink 5's 1.44 us step, 41.8 us; at 5.44 MB it runs
# ring LL128, 38.4 us
@example(hierarchy(900e9, 50e9, 64, 1.0, True, False, "blackwell"), (4, 1), "all_reduce", 4.99e6, 5.44e6)
def test_a_larger_call_takes_less_time_only_where_nccl_leaves_an_option_its_table_mis_ranks(tiers, group, collective,
                                                                                            a, b):
    # NCCL runs the option its own table predicts fastest (nccl.predicted), and each option's price never falls
    # with the size (tests/model/test_nccl_model.py): the call is the picked option's price, and it falls only
    # where the pick changes away from an option the table under-prices (Blackwell's NVLink LL ring, 0.6 us a
    # step in NCCL's table, 1.44 us priced)
    stages = comms.place(*group, tiers)
    small, large = sorted((a, b))
    call = getattr(collectives, collective)
    if call(small, stages) <= call(large, stages) * (1 + 1e-12):
        return
    x, y = collectives.choice(collective, small, stages), collectives.choice(collective, large, stages)
    assert call(small, stages) == x.seconds and call(large, stages) == y.seconds
    assert (x.algorithm, x.protocol) != (y.algorithm, y.protocol)
    assert x.predicted < x.seconds and x.predicted <= y.predicted


def test_on_4_blackwell_gpus_a_5_44_mb_all_reduce_takes_less_time_than_a_4_99_mb_one():
    # the counterexample above on the std racks: NCCL's pick by its own table is what it runs (benchmarks/
    # nccl_curves.py: the gb300_4 4 MiB row, 16.1 -> 9.5 % with it)
    for node in ("GB300_NVL72", "GB200_NVL72"):
        design = check_text(f'import "std/nvidia"\ncluster C {{ units = 1 x {node} }}\n', "blackwell_4.gcl").design
        stages = comms.place(4, 1, lower(design).partitions[0].tiers)
        x, y = collectives.choice("all_reduce", 4.99e6, stages), collectives.choice("all_reduce", 5.44e6, stages)
        assert (x.algorithm, x.protocol, y.algorithm, y.protocol) == ("ring", "LL", "ring", "LL128")
        assert collectives.all_reduce(4.99e6, stages) == pytest.approx(41.78e-6, abs=0.01e-6)
        assert collectives.all_reduce(5.44e6, stages) == pytest.approx(38.40e-6, abs=0.01e-6)


@given(tiers_strategy, groups, st.sampled_from(COLLECTIVES), sizes)
# the deep profile's counterexamples (2026-12-07): four GPUs of one node, 1.3 MB, where NVLS's loops'
# head steps outlast the bytes; 16 GPUs of 2 nodes, where the ceiling had run the NVLS tree on the
# tiers' plain bytes
@example(hierarchy(150e9, 12.5e9, 24, 1.0, True, False), (4, 1), "all_reduce", 1341759.0)
@example(hierarchy(150e9, 12.5e9, 24, 2.0, True, False), (16, 2), "all_reduce", 6210001.0)
# ... and (2026-12-07) four GPUs of a 450 GB/s node: NCCL's own table rates NVLS at 4 heads x 60 GB/s (204 GB/s
# against a ring's 300) and runs the ring, which the switches' price would beat (NVIDIA/nccl#1455: NVLS no faster
# than rings on 2-4 H100s)
@example(hierarchy(450e9, 12.5e9, 24, 1.0, True, False), (4, 1), "all_reduce", 44556001.0)
@example(hierarchy(450e9, 12.5e9, 24, 1.0, True, False), (4, 1), "all_reduce", 4e9)
def test_a_call_moves_its_bytes_no_faster_than_the_tiers_and_pays_at_most_one_latency(tiers, group, collective, n):
    # below: the tiers' rate (no protocol moves bytes faster than the links); above: the
    # fastest option's latency on top of it, so a large call runs at the tiers' rate
    stages = comms.place(*group, tiers)
    seconds = getattr(collectives, collective)(n, stages)
    bytes_only = wire(collective, n, stages)
    assert bytes_only * (1 - 1e-12) <= seconds <= ceiling(collective, n, stages) * (1 + 1e-12) + 1e-15


@given(tiers_strategy, groups, st.sampled_from(COLLECTIVES), sizes, st.sampled_from([2.0, 4.0]))
def test_faster_links_never_slow_a_call(tiers, group, collective, n, factor):
    faster = tuple(attrs.evolve(t, bandwidth=t.bandwidth * factor) for t in tiers)
    call = getattr(collectives, collective)
    assert call(n, comms.place(*group, faster)) <= call(n, comms.place(*group, tiers)) * (1 + 1e-12)


def test_a_4_kb_all_reduce_is_latency_bound_and_a_4_gb_one_runs_at_the_tiers_rate():
    tiers = hierarchy(450e9, 50e9, 64, 1.0, False, False)
    stages = comms.place(128, 1, tiers)    # 16 nodes
    small, large = collectives.choice("all_reduce", 4e3, stages), collectives.choice("all_reduce", 4e9, stages)
    assert small.protocol == "LL" and large.protocol == "Simple"
    # the tiers alone charge both sizes the same rate; NCCL's latency leaves a 4 KB call
    # at a small share of it (the old model's latency: a few microseconds of tier hops)
    share = lambda n: wire("all_reduce", n, stages) / collectives.all_reduce(n, stages)  # noqa: E731
    # a 128-rank ring's 254 steps pay NCCL's per-step latencies (tuning.cc: ~1.2 ms), 6 % of a
    # 4 GB call moved at the node's 8 NICs at once; the share grows toward 1 with the size
    assert share(4e9) > 0.9 and share(16e9) > 0.98
    assert share(4e3) < 0.05


def test_a_torus_axis_keeps_the_tiers_own_ring():
    axis = (tier(0, 8, 100e9, "node", ring=8, kind="ici"),)
    stages = comms.place(8, 1, axis)
    assert collectives.communicator(tuple(stages)) is None
    # its own runtime's per-call floor on top (TPU: ~5 us beyond the hops, model/collectives.py)
    assert collectives.all_reduce(1e6, stages) == comms.all_reduce(1e6, stages) + collectives.TORUS_CALL_S
    assert collectives.all_reduce(1e6, comms.place(1, 1, axis)) == 0.0


DESIGN = """
chip G { peak { bf16 = 1000 TFLOPS } hbm { capacity = 80 GB  bandwidth = 3 TB/s } power { tdp = 700 W } }
fabric Up { kind = nvlink  topology = switched  bandwidth = 450 GB/s  latency = 0.5 us }
node Box { gpus = 8 x G  scaleup = Up }
cluster C { units = 1 x Box }
model M { arch = dense  layers = 8  hidden = 1024  heads = 16  kv_heads = 16  ffn = 4096  vocab = 32000  seq = 1024 }
train t { model = M  on = C  batch = 8  parallelism { tp = 8  pp = 1  dp = 1 } }
"""


def test_the_training_steps_tensor_parallel_all_reduces_pay_nccls_latency():
    # 8 layers x 4 all-reduces of a 2 MB activation, 8 micro-batches: each call pays at
    # least the latency of NCCL's quickest option on one NVLink node (LL ring: 6.6 us base +
    # 7 steps of 0.6 us), where the tiers alone charged 3 x 2 x 0.5 us of hops
    result = check_text(DESIGN, "tp.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    job = train_job(result.design)
    cfg = pinned_config(job)
    e = estimate(job.shape, cfg, job.partition)
    calls = 8 * 4 * cfg.microbatches
    assert e.breakdown.tp >= calls * (6.6 + 7 * 0.6) * 1e-6
    stages = comms.place(8, 1, job.partition.tiers)
    one = 1024 * 1024 * cfg.microbatch * 2
    assert collectives.all_reduce(one, stages) > comms.all_reduce(one, stages)
    assert math.isfinite(e.step_time)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_one_rank_costs_nothing(collective):
    tiers = hierarchy(450e9, 50e9, 64, 1.0, True, True)
    assert getattr(collectives, collective)(1e9, comms.place(1, 1, tiers)) == 0.0



# ---------------------------------------------------------------- a torus against a full switch

SCALEUP = """
chip G {{ peak {{ bf16 = 400 TFLOPS }} hbm {{ capacity = 96 GB  bandwidth = 2 TB/s }} power {{ tdp = 500 W }} }}
fabric Up {{ kind = ici  topology = {topology}  bandwidth = {bandwidth} GB/s  latency = {latency} us }}
node Box {{ gpus = {gpus} x G  scaleup = Up }}
cluster C {{ units = 1 x Box }}
"""


def scale_up_tiers(topology: str, bandwidth: float, latency: float, gpus: int):
    from gclc.compiler.lower import lower_cluster

    result = check_text(SCALEUP.format(topology=topology, bandwidth=bandwidth, latency=latency, gpus=gpus), "up.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return lower_cluster(result.design["C"]).partitions[0].tiers


@given(st.lists(st.integers(2, 6), min_size=1, max_size=3), st.integers(10, 200), st.integers(0, 5), st.booleans(),
       st.sampled_from(COLLECTIVES), sizes)
def test_a_full_switch_never_moves_bytes_slower_than_a_torus_and_loses_at_most_its_floor(dims, link, hop, wrap,
                                                                                         collective, n):
    # a switch with all the chip's links into it: its bytes never take longer than the
    # torus's (the network law); a call pays its library's floor on top, NCCL's on the switch
    # (tuning.cc, linear in the ranks on one node) and the torus runtime's (TORUS_CALL_S and a
    # hop latency a ring step), so the switch loses at most the excess of NCCL's floor
    chips, links = math.prod(dims), 2 * len(dims)
    torus = scale_up_tiers(f"torus(dims = [{', '.join(map(str, dims))}], wraparound = {str(wrap).lower()})",
                           links * link, hop, chips)
    switch = scale_up_tiers("switched", links * link, 0, chips)
    on_torus, on_switch = comms.place(chips, 1, torus), comms.place(chips, 1, switch)
    assert wire(collective, n, on_switch) <= wire(collective, n, on_torus) * (1 + 1e-12)
    call = getattr(collectives, collective)
    torus_call = call(n, on_torus)
    assert torus_call >= wire(collective, n, on_torus) + collectives.TORUS_CALL_S
    latency = ceiling(collective, n, on_switch) - wire(collective, n, on_switch)
    assert call(n, on_switch) <= torus_call + latency - collectives.TORUS_CALL_S + 1e-15


# ---------------------------------------------------------------- point-to-point: all-to-all and sends

def test_a_small_all_to_all_pays_nccls_p2p_latency_as_measured():
    # nccl-tests all-to-all at 128 B: 8 x H20 on one NVLink node, 10.6 us (deepseek-ai/DeepEP#303);
    # 2 DGX-H100 over 400G with NVLink disabled (16 ranks, each alone on the network), "30
    # microseconds small message latency" (deepseek-ai/DeepEP#3). Within the issue's 25 % below 1 MB.
    node = (tier(0, 8, 450e9, "node", latency=0.5e-6, kind="nvlink"), tier(1, 4096, 50e9))
    one_node = collectives.all_to_all(128 / 8, comms.place(8, 1, node))
    assert abs(one_node / 10.6e-6 - 1) < 0.25
    alone = (tier(0, 1, 450e9, "node", latency=0.5e-6, kind="nvlink"), tier(1, 4096, 50e9, latency=1e-6))
    network = collectives.all_to_all(128 / 16, comms.place(16, 1, alone))
    assert abs(network / 30e-6 - 1) < 0.25


@given(tiers_strategy, groups, sizes, sizes)
def test_an_all_to_all_is_the_tiers_bytes_and_one_p2p_latency(tiers, group, a, b):
    stages = comms.place(*group, tiers)
    small, large = sorted((a, b))
    assert collectives.all_to_all(small, stages) <= collectives.all_to_all(large, stages) * (1 + 1e-12)
    c = collectives.communicator(tuple(stages))
    bytes_only = comms.all_to_all(large, stages, latency=False)
    if c is None:   # one rank
        assert collectives.all_to_all(large, stages) == 0.0
    else:
        assert collectives.all_to_all(large, stages) == pytest.approx(bytes_only + nccl.p2p_latency(c), rel=1e-12)
        assert nccl.p2p_latency(c) >= (8.4 + 3.4) * 1e-6   # tuning.cc: a Simple ring's base and one NVLink step


@given(tiers_strategy, st.sampled_from([2, 4, 8, 16]), st.sampled_from([1, 8, 64]), sizes)
def test_a_send_costs_its_bytes_at_the_tiers_rate_and_nccls_latency_crossing_more_tiers(tiers, size, stride, n):
    # pipeline and ring-attention sends: never cheaper than the tiers' bytes, and a send that
    # leaves the node pays NCCL's network step on top of the one inside it
    for ours, theirs in ((collectives.pipeline_send, comms.pipeline_send), (collectives.ring_send, comms.ring_send)):
        price, tiers_only = ours(n, size, stride, tiers), theirs(n, size, stride, tiers)
        outer = comms.send_rate(size, stride, tiers)[0] if ours is collectives.pipeline_send else \
            comms.hop_rate(size, stride, tiers)[0]
        assert price >= tiers_only - outer.latency
        assert price - (tiers_only - outer.latency) >= (8.4 + (3.4 if outer.scope == "node" else 14.0)) * 1e-6 * (1 - 1e-9)


# ---------------------------------------------------------------- NCCL's NVLS generation

GENERATIONS = """import "std/nvidia"
node Box {{ gpus = 8 x {chip}  scaleup = {fabric} }}
cluster C {{ units = 2 x Box }}
"""


@pytest.mark.parametrize("chip, fabric, generation", [("B200", "NVLink4", "blackwell"), ("B200", "NVLink5", "blackwell"),
                                                       ("H100_SXM", "NVLink5", "hopper"), ("H100_SXM", "NVLink4", "hopper"),
                                                       ("A100_SXM_80GB", "NVLink3", "ampere"), ("A100_SXM_80GB", "NVLink4", "ampere")])
def test_nvls_constants_go_by_the_partitions_accelerator_not_its_link_rate(chip, fabric, generation):
    # a Blackwell part on a derated NVLink keeps Blackwell's 24 NVLS channels and NCCL's 0.74 table
    # share; a Hopper part on a fast link keeps Hopper's (the MX fp8 recipe reads the same test)
    from gclc.compiler import formats
    from gclc.compiler.lower import lower_cluster

    result = check_text(GENERATIONS.format(chip=chip, fabric=fabric), "gen.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    tiers = lower_cluster(result.design["C"]).partitions[0].tiers
    up = next(t for t in tiers if t.kind == "nvlink")
    assert collectives.generation(up) == generation == formats.generation(lower_cluster(result.design["C"]).partitions[0].node.accelerator)
    c = collectives.communicator(comms.place(8, 1, tiers))
    assert c.nvls_channels == nccl.NVLS_CHANNELS[generation]
    assert c.nvls_share == pytest.approx(nccl.nvls_share(generation))


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather"])
def test_an_ampere_box_runs_no_nvls_even_on_switches_that_reduce(collective):
    # tuning.cc nvlsEfficiency: Ampere 0 (NVLink 3 has no multicast): A100s on a fabric whose switches
    # reduce are priced as NCCL runs them there, rings and trees on the switches not reducing
    from gclc.compiler.lower import lower_cluster

    def tiers(chip):
        result = check_text(GENERATIONS.format(chip=chip, fabric="NVLink4"), "gen.gcl")
        assert result.ok, [str(d) for d in result.diagnostics]
        return lower_cluster(result.design["C"]).partitions[0].tiers

    ampere, hopper = comms.place(8, 1, tiers("A100_SXM_80GB")), comms.place(8, 1, tiers("H100_SXM"))
    for nbytes in (2**12, 2**24, 2**32):
        call = getattr(collectives, collective)
        assert collectives.choice(collective, nbytes, ampere).algorithm != "nvls"
        assert collectives.choice("all_reduce", 2**32, hopper).algorithm == "nvls"   # the same fabric, Hopper's
        if collective == "all_reduce":
            assert call(nbytes, ampere) == collectives.all_reduce(nbytes, ampere, nvls=False)
