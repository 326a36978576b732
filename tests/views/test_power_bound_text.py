"""Plan text under a power bound (issue 28): the plan IS the operating point. A bound that
only a lower clock meets is planned like any other (no "infeasible" line, no second answer),
the plan's own lines name its clock and power cap, and the power section below repeats the
same GPUs, clock, tokens/s and watts; a full-clock plan never sits beside a faster "power
plan" note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.dsl.numbers import percent

DATA = Path(__file__).parent.parent / "data"

DESIGN = """\
import "pod.gcl"

model Llama7B {{
  arch   = dense
  layers = 32
  hidden = 4096
  heads  = 32
  ffn    = 11008
  vocab  = 32000
  seq    = 4096
  params = 6.74 B
}}

train job {{
  model     = Llama7B
  on        = Pod
  batch     = 256
  precision = bf16
{pins}  subject to {{ power <= {limit} }}
}}
"""


def _plan(tmp_path, capsys, limit: str, *flags: str, pins: str = "") -> tuple[int, str]:
    shutil.copy(DATA / "pod.gcl", tmp_path / "pod.gcl")
    path = tmp_path / "bound.gcl"
    path.write_text(DESIGN.format(limit=limit, pins=f"  parallelism {{ {pins} }}\n" if pins else ""))
    code = main(["plan", str(path), "--set", "nodes=4", *flags])
    return code, capsys.readouterr().out


TIGHT_PINS = "tp = 8  pp = 1"


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """7 kW for replicas of 8 H100s (tp = 8 pinned): even one replica needs more at full clock."""
    return tmp_path_factory.mktemp("tight")


def test_a_bound_only_a_lower_clock_meets_is_a_plan_at_that_clock(tight, capsys):
    code, text = _plan(tight, capsys, "7 kW", pins=TIGHT_PINS)
    assert code == 0
    lines = text.splitlines()
    assert not any(line.lstrip().startswith(("infeasible", "note", "removed")) for line in lines)
    assert "(optimal," in lines[1]
    code, out = _plan(tight, capsys, "7 kW", "--json", pins=TIGHT_PINS)
    data = json.loads(out)
    assert code == 0 and data["status"] == "optimal" and data["power_w"] <= 7e3
    gpus, clock, cap = data["gpus"], data["clock"], data["parallelism"]["power_cap_w"]
    assert gpus == 8 and clock < 1 and cap is not None
    power = next(line for line in lines if line.startswith("  power "))
    assert f"at {percent(clock)} clock under a power cap" in power
    section = next(line for line in lines if line.startswith("power limit"))
    assert f"{gpus} of 32 GPUs at {percent(clock)} clock" in section
    assert f"{data['tokens_per_s']:,.0f} tokens/s" in section and "power" in data["power_budget"]["binds"]


def test_no_second_answer_beside_the_plan(tmp_path, capsys):
    code, text = _plan(tmp_path, capsys, "40 kW")
    assert code == 0 and not any(line.startswith("  note") for line in text.splitlines())
    code, out = _plan(tmp_path, capsys, "40 kW", "--json")
    data = json.loads(out)
    section = data["power_budget"]
    assert (section["tokens_per_s"], section["facility_power_w"], section["gpus"]) == (
        data["tokens_per_s"], data["power_w"], data["gpus"])
