"""Plan text under a power bound: when only fewer GPUs or a lower clock meet the bound,
the text says what was planned first and then what the bound removed (never a leading
"infeasible" line for a plan that exits 0); when the search's full-clock plan is slower
than the power plan under the same bound, a note says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gclc.cli.main import main

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
    """8 kW for replicas of 8 H100s (tp = 8 pinned): every layout at full clock, even one
    replica, needs more (the GPU count is searched, so a looser bound has a full-clock plan)."""
    return tmp_path_factory.mktemp("tight")


def test_a_plan_only_the_power_plan_meets_says_what_runs_first(tight, capsys):
    code, text = _plan(tight, capsys, "8 kW", pins=TIGHT_PINS)
    assert code == 0
    lines = text.splitlines()
    assert not any(line.lstrip().startswith("infeasible") for line in lines)
    assert "optimal under the power bound" in lines[1]
    planned = next(i for i, line in enumerate(lines) if line.startswith("  planned"))
    removed = next(i for i, line in enumerate(lines) if line.startswith("  removed"))
    budget = next(i for i, line in enumerate(lines) if line.startswith("power budget"))
    assert planned < removed < budget
    assert "cannot meet `power <= 8 kW`" in lines[removed] and "at full clock" in lines[removed]
    code, out = _plan(tight, capsys, "8 kW", "--json", pins=TIGHT_PINS)
    data = json.loads(out)
    assert code == 0 and data["status"] == "optimal"
    # The first line states the JSON's operating point: GPUs, clock and tokens/s.
    gpus, clock = data["gpus"], data["power_budget"]["clock"]
    assert f"{gpus:,} of 32 GPUs at {clock:.1%} clock" in lines[planned]
    assert f"{data['tokens_per_s']:,.0f} tokens/s" in lines[planned]
    assert gpus < 32 and clock < 1


def test_a_full_clock_plan_slower_than_the_power_plan_points_to_it(tmp_path, capsys):
    code, text = _plan(tmp_path, capsys, "40 kW")
    assert code == 0
    lines = text.splitlines()
    assert "(optimal," in lines[1]                       # the search's plan, as before
    note = next(line for line in lines if line.startswith("  note"))
    code, out = _plan(tmp_path, capsys, "40 kW", "--json")
    data = json.loads(out)
    faster = data["power_budget"]["tokens_per_s"]
    assert faster > data["tokens_per_s"] and f"{faster:,.0f} tokens/s" in note
