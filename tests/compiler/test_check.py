"""The checker through its API: `check_text` / `check_file` -> `Result` with a typed
`Design`, values in exact base units, `extends` and `--set` overrides, and every error
of a file reported at once."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gclc.dsl import units as u
from gclc.compiler.design import Construct, Entity, Partition, Record, Repeat, Symbol
from gclc.compiler.driver import check_file, check_text
from gclc.dsl.units import Quantity

DESIGN = """\
param racks = 128
param clock = 1.98 GHz
param nodes_per_rack = 4

chip H100 {
  vendor = "NVIDIA"
  clock = clock
  cores = 132
  hbm { capacity = 80 GB  bandwidth = 3.35 TB/s }
  peak { bf16 = 989 TFLOPS  fp8 = 3958 TFLOPS sparse }
  power { tdp = 700 W  idle = 100 W }
  efficiency { bf16 = 70%  hbm = 0.9 }
}

chip H200 extends H100 {
  hbm.capacity = 141 GB
  power { idle = 90 W }
}

cpu Grace { cores = 72  memory = 480 GB }
nic CX7 { bandwidth = 400 Gb/s  protocol = infiniband  ports = 1 }

fabric NVL { kind = nvlink  topology = switched  bandwidth = 900 GB/s bidir }
fabric IB {
  kind = infiniband
  topology = fat_tree(tiers = 3, radix = 64, oversubscription = 1:1)
  bandwidth = 400 Gb/s
}

node DGX {
  gpus = 8 x H100
  cpus = 2 x Grace { cores = 64 }
  nics = 8 x CX7
  scaleup = NVL
}

cluster C {
  units = racks * nodes_per_rack x DGX
  scaleout = IB
}

cluster P {
  scaleout = IB
  partition h100 { units = 16 x DGX }
  partition h200 { units = 8 x DGX { gpus = 8 x H200 } }
}

model Llama3_8B {
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
  ffn = 14336  vocab = 128256  seq = 8192  params = 8.03 B
}

train T {
  model = Llama3_8B
  on = [P.h100, P.h200]
  batch = 1024
  maximize = throughput  # a split is planned for throughput: `maximize = mfu` here is an error
  subject to { power <= 2 MW  memory <= 90% }
}
"""


@pytest.fixture(scope="module")
def design():
    result = check_text(DESIGN, "design.gcl")
    assert result.ok, [d.summary for d in result.diagnostics]
    assert result.exit_code == 0
    return result.design


def codes_of(result) -> list[str]:
    return [d.code for d in result.diagnostics]


# ----------------------------------------------------------------- values


def test_clean_design_has_entities(design):
    names = [e.name for e in design.entities]
    assert names[:4] == ["H100", "H200", "Grace", "CX7"]
    assert [e.name for e in design.of_kind("cluster")] == ["C", "P"]
    assert isinstance(design["H100"], Entity) and design["H100"].kind == "chip"
    with pytest.raises(KeyError):
        design["nothing"]


def test_quantities_are_exact_base_units(design):
    chip = design["H100"]
    assert chip.get("hbm.capacity") == Quantity(Fraction(80 * 10**9), u.BYTES)
    assert chip.get("hbm.capacity") == Quantity.of(80, "GB")
    assert chip.get("hbm.bandwidth") == Quantity(Fraction(335 * 10**10), u.BANDWIDTH)
    assert chip.get("power.tdp") == Quantity(Fraction(700), u.POWER)
    assert chip.get("clock") == Quantity(Fraction(198 * 10**7), u.RATE)
    assert chip.get("cores") == 132 and isinstance(chip.get("cores"), int)
    assert chip.get("vendor") == "NVIDIA"
    assert chip.get("efficiency.bf16") == Quantity(Fraction(7, 10))
    assert chip.get("efficiency.hbm") == Quantity(Fraction(9, 10))
    assert design["CX7"].get("bandwidth") == Quantity(Fraction(50 * 10**9), u.BANDWIDTH)  # 400 Gb/s
    assert design["CX7"].get("protocol") == Symbol("infiniband")


def test_bidir_halves(design):
    assert design["NVL"].get("bandwidth") == Quantity.of(450, "GB/s")


def test_sparse_halves(design):
    assert design["H100"].get("peak.fp8") == Quantity.of(1979, "TFLOPS")
    assert design["H100"].get("peak.bf16") == Quantity.of(989, "TFLOPS")


def test_constructor_values(design):
    topology = design["IB"].get("topology")
    assert isinstance(topology, Construct) and topology.name == "fat_tree"
    assert topology.args.get("tiers") == 3 and topology.args.get("radix") == 64
    assert topology.args.get("oversubscription") == Quantity(Fraction(1))
    assert design["NVL"].get("topology") == Construct("switched")


def test_multiplicity_and_params(design):
    units = design["C"].get("units")
    assert isinstance(units, Repeat) and units.count == 512 and units.part.name == "DGX"
    gpus = design["DGX"].get("gpus")
    assert gpus.count == 8 and gpus.part == design["H100"]
    assert dict((i.name, i.value) for i in design.params)["racks"] == Quantity(Fraction(128))


def test_multiplicity_overrides_make_a_variant(design):
    cpus = design["DGX"].get("cpus")
    assert cpus.count == 2 and cpus.part.name == "Grace"
    assert cpus.part.get("cores") == 64 and cpus.part.get("memory") == Quantity.of(480, "GB")
    assert design["Grace"].get("cores") == 72  # the declaration itself is unchanged


def test_partitions_and_targets(design):
    partitions = design["P"].get("partition")
    assert isinstance(partitions, Record) and partitions.names() == ("h100", "h200")
    assert partitions.get("h200").get("units").part.get("gpus").part.name == "H200"
    on = design["T"].get("on")
    assert [(p.cluster.name, p.name) for p in on] == [("P", "h100"), ("P", "h200")]
    assert all(isinstance(p, Partition) for p in on)


def test_constraints(design):
    limits = design["T"].get("subject to")
    bounds = {item.value.target: item.value for item in limits.items}
    assert bounds["power"].op == "<=" and bounds["power"].value == Quantity.of(2, "MW")
    assert bounds["memory"].value == Quantity(Fraction(9, 10))


# ----------------------------------------------------------------- extends


def test_extends_overrides_and_inherits(design):
    h200 = design["H200"]
    assert h200.parent == "H100"
    assert h200.get("hbm.capacity") == Quantity.of(141, "GB")
    assert h200.get("hbm.bandwidth") == Quantity.of("3.35", "TB/s")  # inherited from the same block
    assert h200.get("power.idle") == Quantity.of(90, "W")
    assert h200.get("power.tdp") == Quantity.of(700, "W")  # blocks merge member by member
    assert h200.get("vendor") == "NVIDIA"


def test_extends_chain():
    text = """
nic A { bandwidth = 400 Gb/s  ports = 1  vendor = "x" }
nic B extends A { ports = 2 }
nic C extends B { bandwidth = 800 Gb/s }
"""
    result = check_text(text, "e.gcl")
    assert result.ok
    c = result.design["C"]
    assert (c.get("ports"), c.get("vendor"), c.get("bandwidth")) == (2, "x", Quantity.of(800, "Gb/s"))


def test_extends_errors():
    assert codes_of(check_text("nic A extends A { bandwidth = 1 GB/s }")) == ["extends-cycle"]
    assert codes_of(check_text("nic A { bandwidth = 1 GB/s }\ndpu B extends A { }")) == ["extends-kind"]
    assert codes_of(check_text("nic B extends Nope { bandwidth = 1 GB/s }")) == ["unknown-name"]


# ----------------------------------------------------------------- --set


def test_set_overrides_a_count():
    result = check_text(DESIGN, "design.gcl", ["racks=256"])
    assert result.ok
    assert result.design["C"].get("units").count == 1024


def test_set_overrides_a_quantity_with_quotes():
    result = check_text(DESIGN, "design.gcl", ['clock="1.5 GHz"'])
    assert result.ok
    assert result.design["H100"].get("clock") == Quantity.of("1.5", "GHz")
    assert result.design["H200"].get("clock") == Quantity.of("1.5", "GHz")


def test_set_accepts_a_mapping():
    result = check_text(DESIGN, "design.gcl", {"racks": "2", "clock": "2 GHz"})
    assert result.ok and result.design["C"].get("units").count == 8


def test_set_wrong_type():
    result = check_text(DESIGN, "design.gcl", ["clock=1 GB"])
    assert codes_of(result) == ["setting-type"]  # reported once, not again where `clock` is used
    (d,) = result.diagnostics
    assert "frequency" in d.summary and "data size" in d.summary
    assert d.subject.path == "<--set clock>"
    assert d.labels[0].span.path == "design.gcl" and d.labels[0].span.line == 2
    assert result.design is None and result.exit_code == 1


def test_set_unknown_param():
    result = check_text(DESIGN, "design.gcl", ["rackz=3"])
    assert codes_of(result) == ["unknown-param"]
    assert "did you mean `racks`" in result.diagnostics[0].notes[0]


@pytest.mark.parametrize("setting", ["racks", "=3", "racks=", "2racks=3"])
def test_set_malformed(setting):
    assert codes_of(check_text(DESIGN, "design.gcl", [setting])) == ["bad-setting"]


def test_set_unparsable_value():
    result = check_text(DESIGN, "design.gcl", ["racks=1 +"])
    assert codes_of(result) == ["syntax"]
    assert result.diagnostics[0].subject.path == "<--set racks>"


def test_set_value_out_of_range_is_reported_where_used():
    result = check_text(DESIGN, "design.gcl", ["racks=0"])
    assert codes_of(result) == ["out-of-range"]


# ----------------------------------------------------------------- all errors of a file


def test_all_errors_are_reported():
    text = """\
param racks = 128
nic CX7 { bandwidth = 400 GBs }
nic CX8 { bandwidth = 800 Gb/s  ports = 0 }
switch Q { radix = 144  port_speed = 800 Gb/s  latency = 2 GB }
node DGX { gpus = 8 x H200 }
cluster C { units = rakcs x DGX }
chp X { }
"""
    result = check_text(text, "many.gcl")
    assert codes_of(result) == ["unknown-unit", "out-of-range", "wrong-dimension", "unknown-name",
                                "unknown-name", "unknown-kind"]
    assert [d.subject.line for d in result.diagnostics] == [2, 3, 4, 5, 6, 7]
    assert result.design is None


def test_errors_in_several_files_are_reported(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "nics.gcl").write_text("nic CX7 { bandwidth = 400 Gbs }\n", encoding="utf-8")
    main = tmp_path / "main.gcl"
    main.write_text('import "parts/nics"\nnic CX8 extends CX7 { ports = -1 }\n', encoding="utf-8")
    result = check_file(str(main))
    assert codes_of(result) == ["out-of-range", "unknown-unit"]
    assert {d.subject.path for d in result.diagnostics} == {str(main), str(tmp_path / "parts" / "nics.gcl")}
    assert set(result.sources) == {str(main), str(tmp_path / "parts" / "nics.gcl")}


def test_relative_import_and_reference(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "nics.gcl").write_text("nic CX7 { bandwidth = 400 Gb/s }\n", encoding="utf-8")
    main = tmp_path / "main.gcl"
    main.write_text('import "lib/nics.gcl"\nparam bw = CX7.bandwidth * 8\n', encoding="utf-8")
    result = check_file(str(main))
    assert result.ok
    assert dict((i.name, i.value) for i in result.design.params)["bw"] == Quantity.of(400, "GB/s")
    assert [e.name for e in result.design.local()] == []


def test_warnings_do_not_block_the_design():
    text = DESIGN.replace("params = 8.03 B", "params = 9 B")
    result = check_text(text, "design.gcl")
    assert codes_of(result) == ["params-mismatch"]
    assert result.ok and result.exit_code == 0 and result.design is not None


def test_one_mistake_is_reported_once():
    """An invalid value is not reported again by the rules or by its users."""
    text = DESIGN.replace("units = racks * nodes_per_rack x DGX", "units = racks * 4 GB x DGX")
    assert codes_of(check_text(text, "design.gcl")) == ["wrong-dimension"]
    text = DESIGN.replace("bf16 = 989 TFLOPS  fp8", "bf16 = 989 TFLOPs  fp8")
    assert codes_of(check_text(text, "design.gcl")) == ["unknown-unit"]


def test_missing_file():
    result = check_file("/nonexistent/design.gcl")
    assert codes_of(result) == ["io-error"] and result.exit_code == 1


def test_empty_text_is_clean():
    result = check_text("", "empty.gcl")
    assert result.ok and result.diagnostics == () and result.design.entities == ()
