"""Node and domain names for the exports: stable, derived from the design, one domain per
node on each level, the IR's group sizes, and real host names from `hostnames`."""

from __future__ import annotations

from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower
from gclc.views.export.layout import layout


def test_every_node_is_in_one_domain_per_level_of_the_irs_size(example, ir_levels):
    for group in example.layout.groups:
        assert len(set(group.nodes)) == len(group.nodes) == group.partition.nodes
        assert [level.nodes_per_domain for level in group.levels] == ir_levels(group.partition)
        for below, level in zip(group.levels, group.levels[1:]):
            assert sorted(c for d in level.domains for c in d.children) == sorted(d.name for d in below.domains)
        for level in group.levels:
            assert sum(d.count for d in level.domains) == len(group.nodes)


def test_names_come_from_the_design(named):
    gb200 = named("gb200_nvl72_100k").layout.groups[0]
    assert gb200.nodes[0] == "gb200-nvl72-001-node01" and gb200.nodes[18 * 6 + 2] == "gb200-nvl72-007-node03"
    assert gb200.levels[0].key == "nvlink-domain" and gb200.levels[0].domains[6].name == "gb200-nvl72-007"
    hetero = named("hetero_h100_a100").layout
    assert [g.nodes[0] for g in hetero.groups] == ["h100-001", "a100-001"]
    assert named("dgx_h100_superpod").layout.groups[0].levels[0].domains[0].name == "superpod-ndr-leaf-01"


def test_names_are_stable_across_runs_and_sizes(named):
    example = named("dgx_h100_superpod")
    assert layout(example.graph, example.design) == example.layout
    smaller = check_file(example.path, ["sus=2"]).design
    assert layout(lower(smaller), smaller).groups[0].nodes[:40] == example.layout.groups[0].nodes[:40]


def test_hostnames_replace_the_generated_names(tmp_path):
    path = tmp_path / "lab.gcl"
    path.write_text('import "std/nvidia"\n'
                    'fabric F extends NDR_FatTree { topology = fat_tree(tiers = 2, radix = 64) }\n'
                    'cluster Lab {\n  scaleout = F\n'
                    '  partition h100 { units = 3 x DGX_H100  hostnames = ["gpu-a[07-08]", "gpu-b01"] }\n'
                    '  partition a100 { units = 2 x DGX_A100 }\n}\n')
    result = check_file(str(path))
    assert result.design is not None, result.diagnostics
    groups = layout(lower(result.design), result.design).groups
    assert groups[0].nodes == ("gpu-a07", "gpu-a08", "gpu-b01") and groups[1].nodes == ("a100-001", "a100-002")
