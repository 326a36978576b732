"""What a newcomer met sweeping a design (issue 27), each fixed and held here:

- `--pareto throughput,capex` on a design without costs said "0 points" with feasible
  points and no reason: it now says which objective they lack and why;
- the sweep and Pareto tables left out cp and ep, and `gpus` was the cluster's: tp x pp x
  dp x cp now gives the GPU count shown (the plan's; `cluster_gpus` beside it);
- `--sensitivity` dropped `--vary` axes silently: it refuses them (exit 2, nothing written);
  whole-number params moved by up to +-20 % under a +-10 % label: they round half away from
  zero and the tornado states how far they moved;
- a partition and `dpus = n x ...` could not be swept to zero;
- a `param` could not hold a list of keywords."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.solver.sweep import study
from gclc.views.sweep.table import read_rows

ROOT = Path(__file__).resolve().parents[2]
DESIGN = """\
import "std/nvidia"

param nodes = 4
param dpu_count = 2
param mods = [core_attention, mlp]

node Box extends DGX_H100 { dpus = dpu_count x BlueField3 }

cluster C {
  units    = nodes x Box
  scaleout = NDR_FatTree
}

model M {
  arch = dense  layers = 8  hidden = 2048  heads = 16  ffn = 8192  vocab = 32000  seq = 2048
}

train t {
  model     = M
  on        = C
  batch     = 10
  tokens    = 1 T
  parallelism { tp = 8  pp = 1  cp = 1  microbatch = 1  recompute = selective  recompute_modules = mods  zero = 1 }
}
"""


@pytest.fixture
def design(tmp_path: Path) -> Path:
    path = tmp_path / "design.gcl"
    path.write_text(DESIGN)
    return path


def test_a_front_without_points_says_why_and_the_table_multiplies_to_its_gpus(design, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--vary", "nodes=2,4", "--pareto", "throughput,capex", "--in-process",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Pareto front over throughput, capex: 0 points" in text
    assert "2 feasible points without capex: its cluster has no `economics" in text
    header = next(line for line in text.splitlines() if line.strip().startswith("nodes"))
    assert header.split()[:7] == ["nodes", "gpus", "tp", "pp", "dp", "cp", "ep"]
    for row in read_rows(out):   # batch 10 on tp 8: dp 2 replicas, 16 of 4 nodes' 32 GPUs
        assert row["gpus"] == row["tp"] * row["pp"] * row["dp"] * row["cp"] <= row["cluster_gpus"]
    assert {r["set_nodes"]: (r["gpus"], r["cluster_gpus"]) for r in read_rows(out)} == {"2": (16, 16), "4": (16, 32)}
    assert main(["sweep", str(design), "--vary", "nodes=4", "--in-process", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["off_front"] == ["1 feasible point without tco: its cluster has no `economics { years  "
                                    "energy_price }` block, which prices the parts (their `price`) into capex, "
                                    "TCO and cost per token"]


def test_sensitivity_refuses_vary_axes_and_writes_nothing(design, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--sensitivity", "--vary", "nodes=2,4", "--in-process", "-o", str(out)]) == 2
    assert "takes no --vary (nodes=2,4)" in capsys.readouterr().err and not out.exists()


def test_whole_numbers_move_by_the_share_said_rounded_half_up_and_stated(design, tmp_path, capsys):
    plan = study.sensitivity_points(str(design), {"nodes": "25"}, 0.1)
    moves = {(param, sign): (settings[param], move) for _, settings, param, sign, move in plan[1:]}
    assert moves["dpu_count", -1] == ("1", -0.5) and moves["dpu_count", 1] == ("3", 0.5)   # 1.8, 2.2: moved by one
    assert study._half_up(Fraction(45, 2)) == 23 and round(Fraction(45, 2)) == 22   # Python rounds 22.5 to even
    plan = study.sensitivity_points(str(design), {}, 0.1)
    assert {(p, s): st[p] for _, st, p, s, _ in plan[1:] if p == "nodes"} == {("nodes", -1): "3", ("nodes", 1): "5"}
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--sensitivity", "--in-process", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.strip().startswith("nodes"))
    assert "(rounded: moved -25% / +25%)" in line   # 4 nodes cannot move by 10 %: the chart says how far


def test_a_partition_swept_to_zero_drops_out_and_all_zero_is_located(capsys):
    hetero = str(ROOT / "tests" / "data" / "hetero.gcl")
    assert main(["plan", hetero, "--set", "a100_nodes=0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["partition"] == "h100" and data["status"] == "optimal" and data["gpus"] <= 8
    result = check_file(hetero, ["a100_nodes=0", "h100_nodes=0"])
    errors = [d for d in result.diagnostics if d.is_error]
    assert [d.summary for d in errors] == ["every partition of cluster `Mixed` holds 0 units"]
    assert errors[0].subject.path.endswith("hetero.gcl")


def test_dpus_and_a_list_of_keywords_sweep(design, tmp_path, capsys):
    assert check_file(str(design), ["dpu_count=0"]).ok
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--vary", "dpu_count=0,2", "--vary", "mods=[mlp],[core_attention]",
                 "--in-process", "-o", str(out)]) == 0
    capsys.readouterr()
    rows = read_rows(out)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    bad = check_file(str(design), ["mods=[core_attention, bogus]"])
    assert [d.code for d in bad.diagnostics if d.is_error] == ["bad-choice"]
