"""Laws of the cluster exports over generated clusters (one partition or several, with and
without scale-out fabrics): names are unique host names, each fabric tier's domains
partition the nodes at the IR's group size, the Slurm tree is a tree over every node, and
the Kueue topology passes Kueue's rules and reads back the same tiers."""

from __future__ import annotations

from collections import Counter

from hypothesis import given

from gclc.compiler.hostlist import HOSTNAME, expand
from gclc.testing import designs
from gclc.views.export import kubernetes, slurm
from gclc.views.export.layout import layout

HOSTNAME_LABEL = "kubernetes.io/hostname"


def _ir_sizes(partition) -> list[int]:
    sizes: list[int] = []
    for tier in partition.tiers:
        size = min(partition.nodes, tier.group_gpus // partition.node.gpus)
        if size > 1 and (not sizes or size > sizes[-1]):
            sizes.append(size)
    return sizes


@given(designs(job=False))
def test_domains_partition_the_nodes_at_the_irs_sizes(d):
    nodes = layout(d.graph, d.design)
    names = [n for g in nodes.groups for n in g.nodes]
    assert len(set(names)) == len(names) and all(HOSTNAME.match(n) for n in names)
    for group in nodes.groups:
        assert [lv.nodes_per_domain for lv in group.levels] == _ir_sizes(group.partition)
        for level in group.levels:
            covered = [i for d_ in level.domains for i in range(d_.first, d_.first + d_.count)]
            assert covered == list(range(len(group.nodes)))


@given(designs(job=False))
def test_the_slurm_tree_holds_every_node_once_under_one_root(d):
    nodes = layout(d.graph, d.design)
    parents: Counter[str] = Counter()
    leaves: list[str] = []
    switches = []
    for line in slurm.topology_tree(nodes, "x").splitlines():
        if line.startswith("SwitchName="):
            fields = dict(part.split("=", 1) for part in line.split())
            switches.append(fields["SwitchName"])
            if "Nodes" in fields:
                leaves += expand(fields["Nodes"])
            for child in expand(fields.get("Switches", "")) if "Switches" in fields else []:
                parents[child] += 1
    assert sorted(leaves) == sorted(n for g in nodes.groups for n in g.nodes)  # each node under one leaf
    assert all(parents[s] == 1 for s in switches if s in parents) and set(parents) <= set(switches)
    assert len([s for s in switches if s not in parents]) == 1  # one root


@given(designs(job=False))
def test_kueue_levels_are_valid_and_read_back_the_tiers(d):
    nodes = layout(d.graph, d.design)
    objects = kubernetes.kueue_objects(nodes)
    labels = [node["metadata"]["labels"] for node in kubernetes.node_objects(nodes)]
    for group in nodes.groups:
        topology = next(o for o in objects if o["kind"] == "Topology"
                        and o["metadata"]["name"] == kubernetes.topology_name(nodes, group))
        levels = [lv["nodeLabel"] for lv in topology["spec"]["levels"]]
        assert len(set(levels)) == len(levels) and levels[-1] == HOSTNAME_LABEL and 1 <= len(levels) <= 16
        mine = [lb for lb in labels if lb[kubernetes.PARTITION_LABEL] == group.slug]
        sizes = [max(Counter(lb[level] for lb in mine).values()) for level in reversed(levels[:-1])]
        assert sizes == _ir_sizes(group.partition)
