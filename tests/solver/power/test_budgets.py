"""Budgets are constraints (issue 28): a cluster's or a partition's `power { budget }` below
full-load draw is a limit to plan under (fewer GPUs, power caps, lower clocks), with what it
gives up; an error only when nothing runs, naming the least power that runs the job."""

from __future__ import annotations

import json

from gclc.cli.main import main

DESIGN = """\
import "std/nvidia"

param budget = 200 kW
param part_budget = 1 MW

cluster Pod {{
  scaleout = NDR_FatTree
  power {{ budget = budget }}
{partitions}}}

# Llama 3.1 8B's shape (arXiv:2407.21783, Table 3), as tests/data/power_limit.gcl
model Llama8B {{
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
  ffn = 14336  vocab = 128256  seq = 8192  mlp = swiglu  params = 8.03 B
}}

train job {{
  model     = Llama8B
  on        = {on}
  batch     = 512
  precision = bf16
}}
"""
WHOLE = "  units = 32 x DGX_H100\n"
SPLIT = ("  partition a { units = 16 x DGX_H100  power { budget = part_budget } }\n"
         "  partition b { units = 16 x DGX_H100 }\n")


def _plan(tmp_path, capsys, *settings: str, partitions: str = WHOLE, on: str = "Pod") -> tuple[int, dict | str, str]:
    path = tmp_path / "budget.gcl"
    path.write_text(DESIGN.format(partitions=partitions, on=on))
    args = ["plan", str(path), "--json"] + [x for s in settings for x in ("--set", s)]
    code = main(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else out), err


def test_a_cluster_budget_below_full_load_plans_under_it_and_says_what_it_gives_up(tmp_path, capsys):
    code, data, err = _plan(tmp_path, capsys, "budget=200 kW")
    assert code == 0 and "warning[power-budget]" in err          # a warning at check, not an error
    section = data["power_budget"]
    assert data["power_w"] <= 200e3 and section["limit_w"] == 200e3
    assert "cluster `Pod` `power.budget`" in section["source"]
    assert "power" in section["binds"] and section["without_limit"]["tokens_per_s"] > data["tokens_per_s"]
    assert section["without_limit"]["facility_power_w"] > 200e3   # the unlimited plan would break it


def test_a_partition_budget_is_the_tighter_limit(tmp_path, capsys):
    code, data, _ = _plan(tmp_path, capsys, "budget=1 MW", "part_budget=60 kW", partitions=SPLIT, on="Pod.a")
    assert code == 0 and data["power_w"] <= 60e3
    assert "partition `a` `power.budget`" in data["power_budget"]["source"]
    code, data, _ = _plan(tmp_path, capsys, "budget=50 kW", "part_budget=60 kW", partitions=SPLIT, on="Pod.a")
    assert code == 0 and data["power_w"] <= 50e3 and "cluster `Pod`" in data["power_budget"]["source"]


def test_a_budget_nothing_runs_within_names_the_least_power_that_runs(tmp_path, capsys):
    code, out, err = _plan(tmp_path, capsys, "budget=300 W")   # two GPUs and their host share draw more
    assert code == 3
    assert "the least power that runs it is at least" in err and "budget.gcl:" in err and "Traceback" not in err
    # above that least power, a plan runs
    least = float(err.split("at most ")[1].split(" W")[0])
    code, data, _ = _plan(tmp_path, capsys, f"budget={least * 1.01:.0f} W")
    assert code == 0 and data["power_w"] <= least * 1.01


def test_the_help_names_the_power_limit(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    assert "subject to { power" in " ".join(capsys.readouterr().out.split())   # as argparse wraps it
