"""Group placement from the rank layout: a group is charged a tier only for the members that
always share one of its domains, whatever the group's offset in the rank order."""

from hypothesis import given, strategies as st

from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import comms
from gclc.model.ranks import rank_partition, segment
from gclc.testing import graph_of


def tier(level, group, bandwidth, scope="node"):
    return Tier(level, f"t{level}", "f", "nvlink", scope, group, bandwidth, 1e-6, 1.0, False, 1.0, span=no_span())


NVL72 = (tier(0, 4, 900e9), tier(1, 72, 900e9, "supernode"), tier(2, 72 * 32, 50e9, "scaleout"))


def groups(size: int, stride: int, ranks: int):
    """Every group of a dimension of `size` members `stride` ranks apart, over `ranks` ranks."""
    block = size * stride
    for start in range(0, ranks, block):
        for offset in range(stride):
            yield [start + offset + k * stride for k in range(size)]


def test_64_consecutive_ranks_on_72_gpu_racks_cross_the_scale_out_fabric():
    stages = comms.place(64, 1, NVL72)
    assert stages[-1].tier.level == 2, "groups 64..127 straddle racks 0 and 1"
    assert comms.outermost(64, 1, NVL72).level == 2
    assert comms.outermost(8, 1, NVL72).level == 1        # 8 divides 72: every group inside a rack
    assert comms.outermost(4, 1, NVL72).level == 0        # one tray


@given(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64]), st.sampled_from([1, 2, 3, 4, 8, 9, 16, 24]),
       st.sampled_from([(4, 72, 2304), (8, 64, 1024), (8, 256, 4096), (4, 36, 1152), (2, 6, 48)]))
def test_a_tier_is_charged_only_when_every_sub_group_shares_its_domain(size, stride, domains):
    tiers = tuple(tier(i, d, 1e9) for i, d in enumerate(domains))
    ranks = size * stride * 6
    inside = 1
    for stage in comms.place(size, stride, tiers):
        inside *= stage.peers
        if stage.tier is tiers[-1]:
            continue  # the outermost declared tier carries whatever is left
        for group in groups(size, stride, ranks):
            for first in range(0, size, inside):
                members = group[first:first + inside]
                assert len({r // stage.tier.group_gpus for r in members}) == 1, (members, stage.tier.group_gpus)
    assert inside >= size or not tiers


def test_a_gb200_rack_is_used_in_segments_of_64_when_the_job_fits():
    graph = graph_of("tests/data/nvl72.gcl")
    partition = graph.partitions[0]
    assert segment(partition) == 64
    seen = rank_partition(partition, 64)
    unit = next(t for t in seen.tiers if t.scope == "supernode")
    assert unit.group_gpus == 64
    assert comms.outermost(64, 1, seen.tiers).scope == "supernode"
    # a job that needs more than 64 GPUs per rack uses whole racks
    assert rank_partition(partition, partition.gpus) is partition or partition.gpus <= partition.units * 64
