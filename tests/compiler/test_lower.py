"""Lowering: the hierarchical graph, tiers and counts of hand-checkable designs."""

import json
from pathlib import Path

import jsonschema
import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.ir_json import SCHEMA_PATH, from_json, graph_json, json_schema, value_count
from gclc.compiler.flatten import to_networkx
from gclc.compiler.lower import lower
from gclc.compiler.metrics import bisection, power_breakdown, totals

DATA = Path(__file__).parent.parent / "data"


def graph_of(name, **settings):
    result = check_file(str(DATA / name), {k: str(v) for k, v in settings.items()})
    assert result.design is not None, [d.summary for d in result.diagnostics]
    return lower(result.design)


def metric(rows, key):
    return next(m.value for m in rows if m.key == key)


def test_pod_tiers():
    graph = graph_of("pod.gcl")
    (partition,) = graph.partitions
    assert partition.gpus == 1024 and partition.nodes == 128
    nvlink, leaf, spine = partition.tiers
    assert (nvlink.group_gpus, nvlink.bandwidth) == (8, 450e9)
    # rail-optimized: a leaf group holds 32 nodes (one SU) on all 8 rails
    assert leaf.group_gpus == 256 and leaf.bandwidth == pytest.approx(50e9)
    assert spine.group_gpus == 1024 and spine.latency == pytest.approx(3 * 0.6e-6)
    layers = {layer.name: layer.switches for layer in graph.switch_layers}
    assert layers == {"NDR leaf": 32, "NDR spine": 16}


def test_ir_size_does_not_grow_with_gpus():
    small, large = graph_of("pod.gcl", nodes=64), graph_of("pod.gcl", nodes=256)
    assert large.gpus == 4 * small.gpus
    assert value_count(json.loads(graph_json(small))) == value_count(json.loads(graph_json(large)))


def test_nvl72_domain_and_aggregate_nvlink():
    graph = graph_of("nvl72.gcl")
    (partition,) = graph.partitions
    domain = partition.tiers[0]
    assert domain.scope == "supernode" and domain.group_gpus == 72
    # 72 GPUs x 1.8 TB/s bidirectional = 129.6 TB/s, NVIDIA's "130 TB/s"
    assert 72 * domain.bandwidth * 2 == pytest.approx(129.6e12)
    assert partition.gpus == 144 and partition.tiers[-1].group_gpus == 144


def test_power_breakdown_sums_to_facility():
    graph = graph_of("pod.gcl")
    rows = power_breakdown(graph)
    it = metric(rows, "power.it")
    parts = sum(r.value for r in rows if r.key not in ("power.it", "power.cooling", "power.facility"))
    assert parts == pytest.approx(it)
    assert metric(rows, "power.facility") == pytest.approx(it * 1.3)
    assert metric(rows, "power.accelerators") == 1024 * 700


def test_totals_and_bisection():
    graph = graph_of("pod.gcl")
    rows = totals(graph)
    assert metric(rows, "peak.bf16") == pytest.approx(1024 * 989e12)
    assert metric(rows, "hbm.capacity") == 1024 * 80e9
    assert bisection(graph).value == pytest.approx(512 * 50e9)


def test_json_is_stable_valid_and_round_trips():
    graph = graph_of("nvl72.gcl")
    text = graph_json(graph)
    assert text == graph_json(graph_of("nvl72.gcl"))
    jsonschema.validate(json.loads(text), json_schema())
    assert from_json(text) == graph


def test_schema_file_is_current():
    assert json.loads(SCHEMA_PATH.read_text()) == json_schema()


def test_flatten_counts():
    flat = to_networkx(graph_of("pod.gcl", nodes=16))
    kinds = [data["kind"] for _, data in flat.nodes(data=True)]
    assert kinds.count("gpu") == 128 and kinds.count("node") == 16
    assert all(flat.degree(v) == 1 for v, d in flat.nodes(data=True) if d["kind"] == "gpu")


def test_a_budget_below_full_load_is_a_warning_with_breakdown(tmp_path):
    """Issue 28: a budget below full-load draw is a constraint to plan under, not an error."""
    text = (DATA / "pod.gcl").read_text().replace("power { pue = 1.3 }", "power { pue = 1.3  budget = 1 MW }")
    path = tmp_path / "pod.gcl"
    path.write_text(text)
    result = check_file(str(path))
    (warning,) = [d for d in result.diagnostics if d.code == "power-budget"]
    assert not warning.is_error and result.design is not None
    assert "1 MW" in warning.summary and any(n.startswith("accelerators:") for n in warning.notes)
    assert any("runs under the budget" in n for n in warning.notes)
    assert warning.subject.line == text.splitlines().index("  power { pue = 1.3  budget = 1 MW }") + 1


def test_radix_too_small(tmp_path):
    result = check_file(str(DATA / "pod.gcl"), {"nodes": "512"})
    assert [d.code for d in result.diagnostics if d.is_error] == ["radix-too-small"]


def test_a_fabric_without_latency_takes_its_switchs(tmp_path):
    """`latency` on a switch was accepted and ignored: a fabric that states none had 0 s hops."""
    pod = (DATA / "pod.gcl").read_text()
    assert "  latency    = 0.6 us\n" in pod and "switch QM9700 {\n" in pod
    text = pod.replace("  latency    = 0.6 us\n", "").replace("switch QM9700 {\n", "switch QM9700 {\n  latency = 0.4 us\n")
    (tmp_path / "pod.gcl").write_text(text)
    result = check_file(str(tmp_path / "pod.gcl"))
    assert result.design is not None, [d.summary for d in result.diagnostics]
    stated = {t.name: t.latency for t in graph_of("pod.gcl").partitions[0].tiers if t.scope == "scaleout"}
    derived = {t.name: t.latency for t in lower(result.design).partitions[0].tiers if t.scope == "scaleout"}
    assert stated.keys() == derived.keys() and stated
    for name, seconds in stated.items():
        assert derived[name] == pytest.approx(seconds * 0.4 / 0.6) and derived[name] > 0


def test_a_node_without_dram_has_its_cpus_memory():
    """`memory` on a CPU was accepted and read only by references: a node that states no `dram`
    now has its CPUs' (Grace's LPDDR5X is on the package); a stated `dram` wins."""
    design = """
chip G { peak { bf16 = 1000 TFLOPS } hbm { capacity = 80 GB  bandwidth = 3 TB/s } power { tdp = 700 W } }
cpu Host { cores = 72  memory = 480 GB  power = 250 W }
node Tray { gpus = 4 x G  cpus = 2 x Host %s }
cluster C { units = 1 x Tray }
"""
    for extra, dram in (("", 960e9), ("dram = 1 TB", 1e12)):
        result = check_file("mem.gcl", None, design % extra)
        assert result.ok, [str(d) for d in result.diagnostics]
        assert lower(result.design).partitions[0].node.dram == dram
    no_memory = check_file("mem.gcl", None, (design % "").replace("memory = 480 GB  ", ""))
    assert lower(no_memory.design).partitions[0].node.dram == 0.0
