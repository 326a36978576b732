"""NIC and DPU ports, switch capacity and in-network reduction: fields that were accepted and
then ignored, now read (compiler/lower.py, compiler/rules/switch.py), on hand-checkable designs."""

from __future__ import annotations

import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model.train import dpu
from gclc.model.job import pinned_config, train_job
from gclc.model.train.step import estimate

DESIGN = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
nic Card {{ bandwidth = {card} Gb/s  ports = {ports}  power = 30 W }}
dpu Dpu {{ bandwidth = 400 Gb/s  ports = 2  cores = 16 {offload} }}
switch Sw {{ radix = 64  port_speed = 400 Gb/s  capacity = 51.2 Tb/s bidir  power = 1 kW {switch_inr} }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
fabric Out {{
  kind      = infiniband
  topology  = {topology}(tiers = 2, radix = 64)
  bandwidth = 400 Gb/s
  latency   = 1 us
  switch    = Sw
  {fabric_extra}
}}
node Box {{ gpus = 8 x G  scaleup = Up  {cards} }}
cluster C {{ units = 64 x Box  scaleout = Out }}
model M {{ arch = dense  layers = 16  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 32000  seq = 2048 }}
train t {{ model = M  on = C  batch = 512  parallelism {{ tp = 8  pp = 1  dp = 64 }} }}
"""


def text(card=400, ports=1, cards="nics = 4 x Card", offload="", switch_inr="", topology="rail_optimized",
         fabric_extra=""):
    return DESIGN.format(card=card, ports=ports, cards=cards, offload=offload, switch_inr=switch_inr,
                         topology=topology, fabric_extra=fabric_extra)


def checked(**fields):
    result = check_text(text(**fields), "net.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return result


def scaleout(graph):
    (partition,) = graph.partitions
    return [t for t in partition.tiers if t.scope == "scaleout"]


def leaf_links(graph) -> int:
    return next(layer.links_below for layer in graph.switch_layers if layer.level == 1)


# ----------------------------------------------------------------- ports


def test_a_cards_bandwidth_is_split_over_its_ports():
    """4 cards of 400 Gb/s give a node 1.6 Tb/s whether each has one port or two (2 x 200 Gb/s);
    the dual-port cards cable twice the links into the fabric."""
    single, dual = lower(checked().design), lower(checked(ports=2).design)
    assert single.partitions[0].node.nic_ports == 4 and dual.partitions[0].node.nic_ports == 8
    assert dual.partitions[0].node.port_bandwidth == pytest.approx(200e9 / 8)
    for graph in (single, dual):
        assert scaleout(graph)[0].bandwidth == pytest.approx(4 * 400e9 / 8 / 8)  # 25 GB/s per GPU
    assert (leaf_links(single), leaf_links(dual)) == (64 * 4, 64 * 8)
    assert sum(layer.switches for layer in dual.switch_layers) > sum(layer.switches for layer in single.switch_layers)


def test_more_ports_at_the_same_speed_make_a_data_parallel_step_faster():
    """4 dual-port cards at 2 x 400 Gb/s double each GPU's scale-out bandwidth over 4 single-port
    ones: the gradient all-reduce across 64 nodes takes less time."""
    one, two = checked(), checked(card=800, ports=2)
    assert scaleout(lower(two.design))[0].bandwidth == pytest.approx(2 * scaleout(lower(one.design))[0].bandwidth)
    slow, fast = train_job(one.design), train_job(two.design)
    slow_step = estimate(slow.shape, pinned_config(slow), slow.partition)
    fast_step = estimate(fast.shape, pinned_config(fast), fast.partition)
    assert fast_step.step_time < slow_step.step_time


def test_rails_count_ports_not_cards():
    rails = "rails = 8"
    dual = check_text(text(ports=2, fabric_extra=rails), "net.gcl")
    assert not [d for d in dual.diagnostics if d.code == "rails-mismatch"]
    single = check_text(text(fabric_extra=rails), "net.gcl")
    (warning,) = [d for d in single.diagnostics if d.code == "rails-mismatch"]
    assert "8 rails" in warning.summary and "4 NIC ports" in warning.summary


def test_network_dpu_ports_are_scaleout_links_and_storage_dpus_use_the_whole_card():
    network = lower(checked(cards="dpus = 2 x Dpu", offload="offload = [network]").design)
    node = network.partitions[0].node
    assert node.nic_ports == 4  # 2 DPUs x 2 ports of 200 Gb/s
    assert scaleout(network)[0].bandwidth == pytest.approx(4 * 200e9 / 8 / 8)
    storage = lower(checked(cards="dpus = 2 x Dpu").design).partitions[0].node
    assert storage.nic_ports == 0  # on another network: the fabric takes one port per node
    assert dpu.storage_rate(storage) == pytest.approx(2 * 400e9 / 8)  # each card's line rate, not a port's


# ----------------------------------------------------------------- switch capacity


def test_a_switch_whose_ports_exceed_its_capacity_is_a_located_warning():
    source = text().replace("capacity = 51.2 Tb/s bidir", "capacity = 25.6 Tb/s bidir")
    (warning,) = [d for d in check_text(source, "net.gcl").diagnostics if d.code == "switch-capacity"]
    assert not warning.is_error
    assert warning.summary == ("`Sw` has 64 ports x 400 Gb/s = 25.6 Tb/s per direction, above its capacity "
                               "12.8 Tb/s")
    assert warning.subject.line == source.splitlines().index(next(line for line in source.splitlines()
                                                                   if line.startswith("switch Sw"))) + 1
    # the same figure per direction (no `bidir`) is what 64 x 400 Gb/s need: no warning
    fine = text().replace("capacity = 51.2 Tb/s bidir", "capacity = 25.6 Tb/s")
    assert not [d for d in check_text(fine, "net.gcl").diagnostics if d.code == "switch-capacity"]


def test_a_fat_tree_beyond_its_switchs_capacity_is_an_error():
    source = text().replace("bandwidth = 400 Gb/s\n", "bandwidth = 800 Gb/s\n")
    (error,) = [d for d in check_text(source, "net.gcl").diagnostics if d.code == "fabric-capacity"]
    assert error.is_error and error.subject.line == source.splitlines().index("  topology  = rail_optimized(tiers = 2, radix = 64)") + 1
    assert "64 ports x 800 Gb/s = 51.2 Tb/s" in error.summary and "switches 25.6 Tb/s" in error.summary
    assert any("radix = 32" in note for note in error.notes)


@pytest.mark.parametrize("fabric", ["HDR_FatTree", "NDR_FatTree", "XDR_FatTree", "SpectrumX_RoCE"])
def test_std_switches_carry_their_fabrics(fabric):
    result = check_text(f'import "std/network"\nfabric F extends {fabric} {{ source = "test" }}\n', "std.gcl")
    assert not [d for d in result.diagnostics if d.code in ("switch-capacity", "fabric-capacity")]


# ----------------------------------------------------------------- in-network reduction


def reduces(**fields) -> bool:
    return scaleout(lower(checked(**fields).design))[0].in_network_reduction


def test_a_fabric_reduces_in_the_network_as_it_says_else_as_its_switch_can():
    assert reduces(switch_inr="in_network_reduction = true")
    assert not reduces(switch_inr="in_network_reduction = false")
    assert not reduces()  # neither says
    assert not reduces(switch_inr="in_network_reduction = true", fabric_extra="in_network_reduction = false")
    assert reduces(fabric_extra="in_network_reduction = true")  # a switch that does not say may


def test_a_fabric_cannot_reduce_on_a_switch_that_cannot():
    source = text(switch_inr="in_network_reduction = false", fabric_extra="in_network_reduction = true")
    (error,) = [d for d in check_text(source, "net.gcl").diagnostics if d.code == "in-network-reduction"]
    lines = source.splitlines()
    assert error.is_error and error.subject.line == lines.index("  in_network_reduction = true") + 1
    assert error.summary == "`Out` reduces in the network, but its switch `Sw` cannot"
    assert error.labels[0].span.line == next(i for i, line in enumerate(lines) if line.startswith("switch Sw")) + 1


def test_a_torus_has_no_switch_to_reduce_in():
    source = text() + ("fabric Ring { kind = ethernet  topology = torus(dims = [4, 4])  bandwidth = 100 GB/s\n"
                       "              in_network_reduction = true }\n")
    (error,) = [d for d in check_text(source, "net.gcl").diagnostics if d.code == "in-network-reduction"]
    assert "torus has no switch" in error.summary and error.subject.line == len(source.splitlines())
