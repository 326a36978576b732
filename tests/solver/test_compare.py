"""`gclc diff`: what changes between two designs, in text and JSON; identical designs have
no differences; a design that does not check is an error."""

from __future__ import annotations

import json
import re

from gclc.cli.main import main

DESIGN = """\
import "std/nvidia"

param nodes  = {nodes}
param server = {server}

cluster C {{
  units    = nodes x server
  scaleout = NDR_FatTree
  economics {{
    years        = 4
    energy_price = 0.1 USD/kWh
  }}
}}

model M {{
  arch   = dense
  layers = 32
  hidden = 4096
  heads  = 32
  ffn    = 14336
  vocab  = 128256
  seq    = 8192
}}

train t {{
  model     = M
  on        = C
  batch     = 64
  precision = bf16
  tokens    = 1 T
  parallelism {{ tp = 8  pp = 1  microbatch = 1  recompute = none  zero = 1 }}
}}
"""


def _write(tmp_path, name, **values):
    path = tmp_path / name
    path.write_text(DESIGN.format(**({"nodes": 4, "server": "DGX_H100"} | values)))
    return str(path)


def test_diff_json_names_each_change(tmp_path, capsys):
    a, b = _write(tmp_path, "a.gcl"), _write(tmp_path, "b.gcl", nodes=8, server="DGX_B200")
    assert main(["diff", a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    changes = {(c["section"], c["key"]): (c["a"], c["b"]) for c in data["changes"]}
    assert changes[("params", "nodes")] == ("4", "8")
    assert changes[("parts", "node DGX_B200")] == (None, "used")
    assert changes[("plan", "gpus")] == (32, 64)
    assert changes[("bom", "DGX_B200 (nodes): cost")] == (None, 8 * 470e3)
    a_tco, b_tco = changes[("plan", "tco_usd")]
    assert b_tco > a_tco > 0
    assert data["status"] == {"a": "ok", "b": "ok"}


def test_diff_text_and_identical_designs(tmp_path, capsys):
    a, b = _write(tmp_path, "a.gcl"), _write(tmp_path, "b.gcl", nodes=8)
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    assert "plan, power and cost:" in out and "(+100%)" in out
    # each metric in its unit by the one formatter: a rate as a number, watts, money, a time
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert re.search(r"tokens_per_s +[\d,]+ -> [\d,]+ ", rows["tokens_per_s"]), rows["tokens_per_s"]
    assert re.search(r" [\d.]+ kW -> [\d.]+ kW", rows["job_power_w"]) and " USD -> " in rows["capex_usd"]
    assert re.search(r" [\d.]+ (days|years) -> [\d.]+ (days|years)", rows["time_to_train_s"])
    assert main(["diff", a, _write(tmp_path, "c.gcl")]) == 0
    assert "no differences" in capsys.readouterr().out


def test_diff_of_a_broken_design_is_an_error(tmp_path, capsys):
    a = _write(tmp_path, "a.gcl")
    broken = tmp_path / "broken.gcl"
    broken.write_text("cluster C { units = 4 x Nothing }\n")
    assert main(["diff", a, str(broken)]) == 1
    assert "broken.gcl:1:" in capsys.readouterr().err
