"""Bill of materials and cost of ownership: counts agree with the IR, rows add up to the
totals (conservation), money has units, `economics` is checked like any block, and a param
may name a part so that sweeps can swap it."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from gclc.compiler.cost.bom import bill
from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower, pick_cluster
from gclc.compiler.metrics import facility_power
from gclc.compiler.cost.tco import HOURS_PER_YEAR, cost_metrics, tco
from gclc.cli.main import main
from gclc.testing.profiles import scaled_examples

DESIGN = """\
import "std/nvidia"

param nodes  = {nodes}
param server = {server}

fabric F extends NDR_FatTree {{
  topology = {topology}
}}

cluster C {{
  units    = nodes x server
  scaleout = F
  power {{ pue = {pue} }}
  economics {{
    years         = {years}
    energy_price  = {price} USD/kWh
    discount_rate = {rate}%
    maintenance   = {maintenance}%
    utilization   = {utilization}%
    rack_price    = 20 kUSD
  }}
}}
"""
DEFAULTS = dict(nodes=16, server="DGX_H100", topology="rail_optimized(tiers = 2, radix = 64)", pue="1.3", years=5,
                price="0.08", rate=7, maintenance=10, utilization=90)


def design(**overrides):
    result = check_text(DESIGN.format(**(DEFAULTS | overrides)), "t.gcl")
    assert result.design is not None, [d.summary for d in result.diagnostics]
    cluster = pick_cluster(result.design)
    return cluster, lower(result.design)


economics = st.fixed_dictionaries({
    "nodes": st.integers(1, 250), "server": st.sampled_from(["DGX_H100", "HGX_H200", "DGX_B200", "DGX_A100"]),
    "topology": st.sampled_from(["rail_optimized(tiers = 2, radix = 64)", "fat_tree(tiers = 3, radix = 64)",
                                 "rail_optimized(tiers = 3, radix = 64, oversubscription = 2:1)"]),
    "pue": st.sampled_from(["1", "1.1", "1.45"]), "years": st.integers(1, 15), "price": st.sampled_from(["0.03", "0.12"]),
    "rate": st.integers(0, 25), "maintenance": st.integers(0, 30), "utilization": st.integers(1, 100),
})


@settings(max_examples=scaled_examples(30))
@given(economics)
def test_cost_rows_add_up_to_the_totals(values):
    cluster, graph = design(**values)
    t = tco(cluster, graph)
    assert math.isclose(t.capex, sum(line.cost for line in t.bom.lines), rel_tol=1e-12)
    assert math.isclose(t.total, t.capex + t.energy + t.maintenance, rel_tol=1e-12)
    # the explain rows carry the same numbers: capex rows sum to capex, the parts to the TCO
    rows = {m.key: m.value for m in cost_metrics(cluster, graph)}
    capex_rows = sum(v for k, v in rows.items() if k.startswith("capex."))
    assert math.isclose(capex_rows, rows["capex"], rel_tol=1e-9)
    assert math.isclose(rows["capex"] + rows["tco.energy"] + rows["tco.maintenance"], rows["tco"], rel_tol=1e-9)
    # energy is facility power x hours x price, discounted; undiscounted it is the plain product
    years, rate = values["years"], values["rate"] / 100
    annuity = sum((1 + rate) ** -y for y in range(1, years + 1))
    expected = facility_power(graph) * values["utilization"] / 100 * HOURS_PER_YEAR * float(values["price"]) / 1000
    assert math.isclose(t.energy, expected * annuity, rel_tol=1e-9)
    assert annuity <= years and (rate > 0 or math.isclose(annuity, years))


@settings(max_examples=scaled_examples(30))
@given(economics)
def test_bill_counts_match_the_graph(values):
    cluster, graph = design(**values)
    bom = bill(cluster, graph)
    assert bom.count("accelerators") == graph.gpus
    assert bom.count("nodes") == sum(p.nodes for p in graph.partitions)
    assert bom.count("switches") == sum(layer.switches for layer in graph.switch_layers)
    links = sum(layer.links_below for layer in graph.switch_layers)
    optical = bom.count("fibers")
    assert bom.count("transceivers") == 2 * optical
    assert optical + bom.count("copper") == links  # every link is either copper or optical
    assert bom.racks >= math.ceil(bom.count("nodes") * 10.2e3 / 41e3) if values["server"] != "DGX_A100" else True


def test_more_nodes_cost_more_and_a_priced_node_covers_its_chips():
    small, large = (tco(*design(nodes=n)) for n in (8, 64))
    assert large.capex > small.capex and large.energy > small.energy
    chips = next(line for line in small.bom.lines if line.key == "accelerators")
    assert chips.included and chips.cost == 0


def test_a_missing_price_makes_the_capex_a_lower_bound():
    cluster, graph = design(server="HGX_H800")  # std gives this server no price
    t = tco(cluster, graph)
    assert not t.complete and "HGX_H800" in t.bom.missing
    text = next(m.formula for m in cost_metrics(cluster, graph) if m.key == "capex")
    assert "lower bound" in text and "HGX_H800" in text


def test_energy_price_needs_money_per_energy(tmp_path, capsys):
    path = tmp_path / "bad.gcl"
    path.write_text(DESIGN.format(**DEFAULTS).replace("0.08 USD/kWh", "0.08 USD"))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err  # diagnostics go to stderr
    assert "bad.gcl:16:21:" in err and "energy_price" in err and "USD/kWh" in err


def test_unknown_economics_field_is_located(tmp_path, capsys):
    path = tmp_path / "bad.gcl"
    path.write_text(DESIGN.format(**DEFAULTS).replace("years ", "yeers "))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().err  # diagnostics go to stderr
    assert "unknown-field" in out and "did you mean `years`" in out


def test_explain_prints_the_bill_and_the_tco_with_formulas(tmp_path, capsys):
    path = tmp_path / "d.gcl"
    path.write_text(DESIGN.format(**DEFAULTS))
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "16 x 270 kUSD" in out  # DGX_H100 nodes at their std price (270,000 USD), by the one formatter
    assert "cost of ownership" in out and "capex + energy + maintenance" in out


def test_a_param_that_names_a_part_is_swapped_and_checked(tmp_path, capsys):
    h100 = design()
    b200 = design(server="DGX_B200")
    assert h100[1].partitions[0].node.accelerator.name == "H100_SXM"
    assert b200[1].partitions[0].node.accelerator.name == "B200"
    path = tmp_path / "d.gcl"
    path.write_text(DESIGN.format(**DEFAULTS))
    assert main(["check", str(path), "--set", "server=H100_SXM"]) == 1  # a chip where a node is named
    assert "must be the node `DGX_H100`" in capsys.readouterr().err


JOB = """
model M {
  arch   = dense
  layers = 32
  hidden = 4096
  heads  = 32
  ffn    = 14336
  vocab  = 128256
  seq    = 8192
}

train t {
  model     = M
  on        = C
  batch     = 64
  precision = bf16
  tokens    = 1 T
  parallelism { tp = 8  pp = 1  microbatch = 1  recompute = none  zero = 1 }
}
"""


def test_plan_reports_the_cost_of_its_tokens(tmp_path, capsys):
    import json

    path = tmp_path / "d.gcl"
    path.write_text(DESIGN.format(**DEFAULTS) + JOB)
    assert main(["plan", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    cost = data["cost"]
    lifetime = 5 * HOURS_PER_YEAR * 3600 * 0.9  # years x seconds x utilization
    assert math.isclose(cost["cost_per_token_usd"], cost["tco_usd"] / (data["tokens_per_s"] * lifetime), rel_tol=1e-9)
    assert math.isclose(cost["cost_to_train_usd"], cost["cost_per_token_usd"] * 1e12, rel_tol=1e-9)
    assert cost["tco_usd"] > cost["capex_usd"] > 0 and cost["complete"]
    assert main(["plan", str(path)]) == 0
    assert "USD per million tokens" in capsys.readouterr().out
