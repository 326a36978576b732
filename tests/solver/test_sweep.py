"""`gclc sweep`: axes, located errors for bad axes (exit 2, nothing written), the same table
from a real 2-worker Dask LocalCluster and from this process, infeasible points kept with
their reason, `--resume`, Ctrl-C keeping finished points, sensitivity, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.solver.sweep import engine
from gclc.solver.sweep.axes import AxisError, count, parse_axis, points
from gclc.solver.sweep.pareto import dominates
from gclc.testing.model_texts import llama3_8b
from gclc.views.sweep.table import TableWriter, read_rows

DESIGN = """\
import "std/nvidia"

param nodes  = 4
param server = DGX_H100
param budget = 300 kW

cluster C {
  units    = nodes x server
  scaleout = NDR_FatTree
  power { budget = budget  pue = 1.2 }
  economics {
    years        = 4
    energy_price = 0.1 USD/kWh
  }
}

""" + llama3_8b() + """
train t {
  model     = M
  on        = C
  batch     = 64
  precision = bf16
  tokens    = 1 T
  parallelism { tp = 8  pp = 1  microbatch = 1  recompute = none  zero = 1 }
}
"""


@pytest.fixture
def design(tmp_path: Path) -> Path:
    path = tmp_path / "small.gcl"
    path.write_text(DESIGN)
    return path


# ----------------------------------------------------------------- axes


@pytest.mark.parametrize("text, values", [
    ("nodes=16,32,64", ("16", "32", "64")),
    ("nodes=1..4", ("1", "2", "3", "4")),
    ("nodes=16..1024*2", ("16", "32", "64", "128", "256", "512", "1024")),
    ("nodes=8..32+8", ("8", "16", "24", "32")),
    ("pue=1.1..1.3+0.1", ("1.1", "1.2", "1.3")),
    ('budget="2 MW","3 MW"', ("2 MW", "3 MW")),
    ("server=DGX_H100,DGX_B200", ("DGX_H100", "DGX_B200")),
])
def test_axis_values(text, values):
    assert parse_axis(text).values == values


@pytest.mark.parametrize("text, column, why", [
    ("nodes=64..16", 7, "empty"),
    ("nodes=", 7, "no values"),
    ("nodes=1,,2", 9, "empty value"),
    ("nodes=1..8*1", 12, "factor > 1"),
    ("=4", 1, "name=values"),
    ("nodes=a..b", 7, "range is"),
])
def test_bad_axes_are_located(text, column, why):
    with pytest.raises(AxisError) as error:
        parse_axis(text)
    d = error.value.diagnostic
    assert d.code == "bad-axis" and d.subject.column == column and why in d.summary


def test_points_are_the_product_in_order():
    axes = (parse_axis("a=1,2"), parse_axis("b=x,y,z"))
    got = list(points(axes))
    assert len(got) == count(axes) == 6
    assert got[0] == {"a": "1", "b": "x"} and got[1] == {"a": "1", "b": "y"} and got[-1] == {"a": "2", "b": "z"}


# ----------------------------------------------------------------- usage errors


@pytest.mark.parametrize("vary, expect", [
    ("nodes=abc", "<--set nodes>:1:15"),          # the value is typed like the param
    ("nodez=1,2", "did you mean `nodes`"),         # an unknown param
    ("nodes=64..16", "<--vary 1>:1:7"),            # an empty range
    ("server=H100_SXM", "must be the node"),       # a part swap of the wrong kind
])
def test_bad_axes_exit_2_and_write_nothing(design, tmp_path, capsys, vary, expect):
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--vary", vary, "--in-process", "-o", str(out)]) == 2
    assert expect in capsys.readouterr().err
    assert not out.exists()


def test_unknown_objective_is_usage(design, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--vary", "nodes=1,2", "--pareto", "time,cost", "-o", str(out)]) == 2
    assert "unknown objective" in capsys.readouterr().err and not out.exists()


# ----------------------------------------------------------------- runs


def test_sweep_writes_table_front_and_keeps_infeasible_points(design, tmp_path, capsys):
    out = tmp_path / "out"
    status = main(["sweep", str(design), "--vary", "nodes=1..32*2", "--vary", "server=DGX_H100,DGX_B200",
                   "--in-process", "-o", str(out)])
    assert status == 0
    for name in ("sweep.parquet", "sweep.csv", "pareto.svg", "pareto.png", "report.html"):
        assert (out / name).stat().st_size > 0
    rows = read_rows(out)
    assert len(rows) == 12 and sorted(r["point"] for r in rows) == list(range(12))
    # points that draw more than the 300 kW budget at full load plan under it (issue 28: a budget
    # is a constraint, not an error): fewer GPUs, lower clocks
    over = [r for r in rows if r["facility_power_w"] > 300e3]
    assert over and all(r["status"] == "ok" and r["job_power_w"] <= 300e3 for r in over)
    assert any(r["gpus"] < r["cluster_gpus"] or r["power_cap_w"] is not None for r in over)
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(r["tco_usd"] > r["capex_usd"] > 0 and r["time_to_train_s"] > 0 for r in ok)
    # the printed front is exactly the non-dominated feasible points
    signed = {r["point"]: (r["time_to_train_s"], r["tco_usd"]) for r in ok}
    expected = {p for p, v in signed.items() if not any(dominates(w, v) for w in signed.values())}
    text = capsys.readouterr().out
    assert f"Pareto front over time_to_train, tco: {len(expected)} points" in text
    assert "<svg" in (out / "report.html").read_text()


def test_goodput_column_is_the_plans_goodput(design, tmp_path, capsys):
    """The table's goodput is the job's goodput at the planned GPU count (failures of GPUs,
    nodes and switches, Young/Daly checkpoints), recomputed here from each point's job."""
    from gclc.compiler.driver import check_file
    from gclc.model.job import train_job
    from gclc.solver.schedule.failures import job_goodput

    out = tmp_path / "out"
    assert main(["sweep", str(design), "--vary", "nodes=2,4,8", "--in-process", "-o", str(out)]) == 0
    rows = sorted(read_rows(out), key=lambda r: r["point"])
    assert [r["status"] for r in rows] == ["ok"] * 3
    for r in rows:
        job = train_job(check_file(str(design), {"nodes": r["set_nodes"]}).design)
        share = job_goodput(job, r["gpus"]).efficiency
        assert 0 < r["goodput_share"] < 1 and r["goodput_share"] == pytest.approx(share, rel=1e-12)
        assert r["goodput_tokens_per_s"] == pytest.approx(r["tokens_per_s"] * share, rel=1e-12)
    assert "goodput_share" in capsys.readouterr().out      # a column of the printed front


@pytest.fixture(scope="module")
def dask_client():
    """A real 2-process LocalCluster, bounded in time and always closed (one for the module)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    client = distributed.Client(cluster, timeout="30s")
    try:
        yield client
    finally:
        client.close(timeout=10)
        cluster.close(timeout=10)


def _table(executor, design: Path, directory: Path) -> bytes:
    axes = (parse_axis("nodes=1..16*2"), parse_axis("server=DGX_H100,DGX_B200"))
    directory.mkdir()
    writer = TableWriter(directory, ("nodes", "server"))
    todo = list(enumerate(points(axes)))
    engine.run(engine.Task(str(design)), todo, len(todo), writer.write, executor, size=3)
    writer.close()
    return (directory / "sweep.csv").read_bytes()


def test_local_cluster_and_in_process_give_identical_tables(design, tmp_path, dask_client):
    here = _table(engine.InProcess(), design, tmp_path / "here")
    there = _table(engine.Distributed(dask_client), design, tmp_path / "there")
    assert here == there
    assert read_rows(tmp_path / "here") == read_rows(tmp_path / "there")


def test_resume_skips_the_points_already_in_the_table(design, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--vary", "nodes=1,2", "--in-process", "-o", str(out)]) == 0
    first = {r["set_nodes"]: r for r in read_rows(out)}
    capsys.readouterr()
    assert main(["sweep", str(design), "--vary", "nodes=1,2,4", "--in-process", "--resume", "-o", str(out)]) == 0
    assert "(2 resumed" in capsys.readouterr().out
    rows = read_rows(out)
    assert sorted(r["set_nodes"] for r in rows) == ["1", "2", "4"]
    assert {r["set_nodes"]: r for r in rows if r["set_nodes"] in first} == first


def test_ctrl_c_keeps_the_finished_points(design):
    def interrupted():
        for index, settings in enumerate(points((parse_axis("nodes=1..5"),))):
            if index == 3:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C while the fourth point was read
            yield index, settings

    seen: list[dict] = []
    with pytest.raises(KeyboardInterrupt):
        engine.run(engine.Task(str(design)), interrupted(), 5, seen.extend, engine.InProcess(), size=1)
    assert [r["point"] for r in seen] == [0, 1, 2]


def test_sensitivity_draws_a_tornado(design, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--sensitivity", "--delta", "20%", "--in-process", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sensitivity of time to train" in text and "nodes" in text
    assert (out / "tornado_time_to_train.svg").exists() and (out / "tornado_tco.svg").exists()
    rows = {r["point"]: r for r in read_rows(out)}
    assert rows[0]["status"] == "ok" and len(rows) == 1 + 2 * 2  # nodes and budget, each -20 % and +20 %


def test_other_commands_do_not_import_the_sweep_stack(design):
    code = ("import sys; from gclc.cli.main import main; main(['check', sys.argv[1]]); "
            "heavy = [m for m in ('distributed', 'dask', 'pyarrow', 'matplotlib') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code, str(design)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


# ----------------------------------------------------------------- the sweep block

BLOCK = """
sweep space {
  nodes  = range(low = 1, high = 4, times = 2)
  server = [DGX_H100, DGX_B200]
  pareto = [time_to_train, capex]
}
"""


def test_a_sweep_block_gives_axes_and_objectives_and_vary_overrides_it(design, tmp_path, capsys):
    design.write_text(DESIGN + BLOCK)
    out = tmp_path / "out"
    assert main(["sweep", str(design), "--in-process", "-o", str(out)]) == 0
    assert "Pareto front over time_to_train, capex" in capsys.readouterr().out
    rows = read_rows(out)
    assert sorted((r["set_nodes"], r["set_server"]) for r in rows) == sorted(
        (n, s) for n in ("1", "2", "4") for s in ("DGX_H100", "DGX_B200"))
    out2 = tmp_path / "out2"
    assert main(["sweep", str(design), "--in-process", "-o", str(out2), "--vary", "server=DGX_B200"]) == 0
    assert {r["set_server"] for r in read_rows(out2)} == {"DGX_B200"}


def test_a_sweep_block_is_checked_like_any_block(design, tmp_path, capsys):
    design.write_text(DESIGN + "\nsweep s {\n  nodez = [1, 2]\n  nodes = []\n}\n")
    assert main(["check", str(design)]) == 1
    out = capsys.readouterr().err  # diagnostics go to stderr
    assert "small.gcl:39:3: error[unknown-axis]" in out and "did you mean `nodes`" in out
    assert "small.gcl:40:11: error[wrong-type]" in out and "an empty list" in out
    assert main(["sweep", str(design), "--in-process", "-o", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()


def test_nothing_to_sweep_is_usage(design, tmp_path, capsys):
    assert main(["sweep", str(design), "--in-process", "-o", str(tmp_path / "out")]) == 2
    assert "nothing to sweep" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_objective_names_match_the_schema():
    from gclc.compiler.schema import SWEEP_OBJECTIVES
    from gclc.solver.sweep.pareto import OBJECTIVES

    assert tuple(OBJECTIVES) == SWEEP_OBJECTIVES


def test_scheduler_address_runs_the_same_sweep(design, tmp_path, dask_client, capsys):
    """`--scheduler` on the LocalCluster's scheduler: the CLI's remote path, same table."""
    here, there = tmp_path / "here", tmp_path / "there"
    vary = ["--vary", "nodes=1,2", "--vary", "server=DGX_H100,DGX_B200"]
    assert main(["sweep", str(design), *vary, "--in-process", "-o", str(here)]) == 0
    assert main(["sweep", str(design), *vary, "--scheduler", dask_client.scheduler.address, "-o", str(there)]) == 0
    assert (here / "sweep.csv").read_bytes() == (there / "sweep.csv").read_bytes()


SERVE = DESIGN.split("train t {")[0] + """
serve s {
  model     = M
  on        = C
  prompt    = 1024
  output    = 256
  precision = bf16
  slo { ttft <= 2 s  tpot <= 50 ms }
}
"""


def test_a_serve_job_gets_a_cost_per_served_token(tmp_path):
    from gclc.solver.sweep.point import evaluate

    path = tmp_path / "serve.gcl"
    path.write_text(SERVE)
    row = evaluate(str(path), 0, {"nodes": "2"})
    assert row["status"] == "ok" and row["job"] == "s" and row["tokens_per_s"] > 0
    lifetime = 4 * 8766 * 3600  # years x hours x seconds, utilization 100 %
    assert abs(row["cost_per_token_usd"] * row["tokens_per_s"] * lifetime - row["tco_usd"]) < 1e-6 * row["tco_usd"]
