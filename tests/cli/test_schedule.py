"""`gclc schedule` end to end on examples/shared_cluster.gcl: text, JSON against its
published schema, the plot; each policy's behaviour on the example; and bad input as a
located error with exit 1 and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.solver.schedule.jobs import build
from gclc.solver.schedule.catalog import POLICIES
from gclc.solver.schedule.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "shared_cluster.gcl"
SCHEMA = json.loads((ROOT / "views" / "schedule.schema.json").read_text())
LOCATED = re.compile(r"^\S+:\d+:\d+: error\[[a-z-]+\]: ", re.MULTILINE)


@pytest.fixture(scope="module")
def workload():
    return build(check_file(str(EXAMPLE)).design)


def test_json_follows_the_schema_and_the_plot_is_drawn(tmp_path, capsys):
    plot = tmp_path / "shared.svg"
    assert main(["schedule", str(EXAMPLE), "--json", "--no-failures", "--epochs", "3", "-o", str(plot)]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    assert plot.read_text().lstrip().startswith("<?xml") and "pretrain_70b" in plot.read_text()
    jobs = {j["name"]: j for j in data["jobs"] if not j["service"]}
    assert len(jobs) == 8 and all(j["state"] == "done" for j in jobs.values())
    assert jobs["ablation_b"]["preemptions"] >= 1           # evicted by the high-priority pre-training
    # the pre-training starts on arrival with what the chat service leaves of the H100s
    assert jobs["pretrain_70b"]["start_s"] == 2 * 3600 and 128 <= jobs["pretrain_70b"]["gpus"] <= 256 - 8
    chat = data["cluster_metrics"]["services"]["chat"]
    assert chat["on_time"] == chat["stretches"] and chat["attainment"] == pytest.approx(1.0)
    assert all(e["gap"] is None or e["gap"] >= 0 for e in data["optimum"]["epochs"])
    assert data["events"]["changes"] == data["events"]["delivered"]


def test_text_names_every_job_and_the_optimum(capsys):
    assert main(["schedule", str(EXAMPLE), "--policy", "slurm", "--epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("pretrain_70b", "finetune_8b", "eval_sweep", "notebooks.n3"))
    assert "optimum    MILP" in out and "utilization" in out


def test_policies_differ_on_the_example(workload):
    runs = {name: {r.job.name: r for r in simulate(workload, policy, failures=False, epochs=0).runs}
            for name, policy in POLICIES.items()}
    # slurm never preempts: the critical fine-tune and the pre-training start without evicting anyone
    assert sum(r.preemptions for r in runs["slurm"].values()) == 0
    assert sum(r.preemptions for r in runs["priority"].values()) >= 1
    # fifo lets nothing overtake: every job starts no earlier than one submitted before it that waits
    fifo = sorted(runs["fifo"].values(), key=lambda r: (r.job.submit, r.job.name))
    assert all(a.first_start <= b.first_start for a, b in zip(fifo, fifo[1:]))


def _gang_pretraining(text: str) -> str:
    """The example without its chat service and with the pre-training a gang of all 256 H100s."""
    text = text[:text.index("# Chat, critical, on the H100s")]
    assert "  min_gpus = 128\n" in text
    return text.replace("  min_gpus = 128\n", "", 1)


def test_slurm_starts_the_top_job_when_its_reservation_comes(tmp_path):
    """The high-priority pre-training (all 256 H100) waits only for the run that holds
    H100s when it arrives: backfill starts nothing on H100 that would end after that."""
    (tmp_path / "gang.gcl").write_text(_gang_pretraining(EXAMPLE.read_text()))
    runs = {r.job.name: r for r in simulate(build(check_file(str(tmp_path / "gang.gcl")).design), POLICIES["slurm"],
                                            failures=False, epochs=0).runs}
    top, holder = runs["pretrain_70b"], runs["ablation_b"]
    assert holder.segments[0][2] == "h100" and holder.first_start < top.job.submit
    assert top.first_start == holder.end
    assert all(s[2] != "h100" or s[1] <= top.first_start or s[0] >= top.segments[0][1]
               for r in runs.values() if r is not top and r is not holder for s in r.segments)


def test_a_scheduler_block_configures_slurm(tmp_path, capsys):
    """`scheduler slurm { preempt_type = qos }`: the critical fine-tune evicts lower QOS
    instead of waiting; without it Slurm's default (no preemption) holds."""
    plain = _gang_pretraining(EXAMPLE.read_text())
    (tmp_path / "plain.gcl").write_text(plain)
    text = plain + "\nscheduler slurm {\n  on           = Shared\n  preempt_type = qos\n}\n"
    (tmp_path / "shared.gcl").write_text(text)
    assert main(["schedule", str(tmp_path / "shared.gcl"), "--policy", "slurm", "--json", "--epochs", "0",
                 "--no-failures"]) == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert jobs["finetune_8b"]["wait_s"] == 0 and jobs["finetune_8b"]["segments"][0]["rule"] == "preempt"
    assert sum(j["preemptions"] for j in jobs.values()) >= 1
    assert main(["schedule", str(tmp_path / "plain.gcl"), "--policy", "slurm", "--json", "--epochs", "0",
                 "--no-failures"]) == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert jobs["finetune_8b"]["wait_s"] > 0 and sum(j["preemptions"] for j in jobs.values()) == 0


def test_tenants_must_be_named_where_a_cluster_has_them(tmp_path, capsys):
    text = EXAMPLE.read_text()
    assert text.count("  tenant   = research\n") == 3
    (tmp_path / "shared.gcl").write_text(text.replace("  tenant   = research\n", "", 1))   # from ablation_a
    assert main(["schedule", str(tmp_path / "shared.gcl"), "--epochs", "0"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"shared.gcl:\d+:1: error\[tenant\]: `ablation_a` names no tenant, and `Shared` is shared by "
                     r"tenants", err) and "`tenant = production`" in err
    assert "Traceback" not in err


def test_failures_cost_goodput(workload):
    jobs = {r.job.name: r for r in simulate(workload, POLICIES["priority"], seed=0, failures=True, epochs=0).runs}
    assert all(r.useful <= r.held + 1e-6 for r in jobs.values())


BAD = {
    "too large": ("shared_cluster.gcl", "  gpus     = 256\n  min_gpus = 128\n", "  gpus     = 4096\n  min_gpus = 2048\n",
                  "job-too-large"),
    "unknown partition": ("shared_cluster.gcl", "  on       = Shared.h100\n", "  on       = Shared.h200\n",
                          "unknown-name"),
    "unknown type": ("shared_cluster.gcl", 'type = "A100_Aged"', 'type = "V100"', "trace-row"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_a_located_error_and_nothing_is_written(case, tmp_path, capsys):
    name, old, new, code = BAD[case]
    text = EXAMPLE.read_text()
    assert old in text
    design = tmp_path / name
    design.write_text(text.replace(old, new, 1))
    plot = tmp_path / "out.svg"
    assert main(["schedule", str(design), "-o", str(plot)]) == 1
    err = capsys.readouterr().err
    assert LOCATED.search(err) and f"error[{code}]" in err
    assert not plot.exists() and list(tmp_path.iterdir()) == [design]


def test_negative_duration_in_a_csv_trace_points_at_the_cell(tmp_path, capsys):
    trace = tmp_path / "week.csv"
    trace.write_text("submit_time,duration,gpu_num,gpu_type\n0,3600,8,h100\n60,-5,4,a100\n")
    text = EXAMPLE.read_text().replace("workload notebooks {", 'workload notebooks {\n  trace    = "week.csv"')
    design = tmp_path / "shared.gcl"
    design.write_text(text)
    assert main(["schedule", str(design), "-o", str(tmp_path / "out.png")]) == 1
    err = capsys.readouterr().err
    assert f"{trace}:3:4: error[trace-row]: `-5` is out of range: `duration` must be above 0" in err
    assert not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("path, code", [("../week.csv", "trace-path"), ("missing.csv", "io-error")])
def test_a_trace_outside_the_folder_or_missing_is_located(path, code, tmp_path, capsys):
    text = EXAMPLE.read_text().replace("workload notebooks {", f'workload notebooks {{\n  trace    = "{path}"')
    (tmp_path / "shared.gcl").write_text(text)
    assert main(["check", str(tmp_path / "shared.gcl")]) == 1
    assert re.search(rf"shared.gcl:\d+:3: error\[{code}\]", capsys.readouterr().err)


def test_a_good_csv_trace_is_replayed(tmp_path, capsys):
    (tmp_path / "week.csv").write_text("submit_time,duration,gpu_num,gpu_type,priority\n0,3600,8,h100,high\n"
                                       "60,7200,4,A100_Aged,\n")
    text = EXAMPLE.read_text().replace("workload notebooks {", 'workload notebooks {\n  trace    = "week.csv"')
    (tmp_path / "shared.gcl").write_text(text)
    assert main(["schedule", str(tmp_path / "shared.gcl"), "--json", "--epochs", "0"]) == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert jobs["notebooks[1]"]["partition"] == "h100" and jobs["notebooks[1]"]["priority_label"] == "high"
    assert jobs["notebooks[2]"]["partition"] == "a100" and jobs["notebooks[2]"]["work"] == 7200 * 4
    # a row without its own time limit takes the workload's (8 h in the example)
    assert jobs["notebooks[1]"]["time_limit_s"] == jobs["notebooks[2]"]["time_limit_s"] == 8 * 3600


def test_a_csv_time_limit_column_ends_the_row_there(tmp_path, capsys):
    (tmp_path / "week.csv").write_text("submit,runtime,gpus,timelimit\n0,7200,8,3600\n0,600,8,\n0,60,4,-1\n")
    text = EXAMPLE.read_text().replace("workload notebooks {", 'workload notebooks {\n  trace    = "week.csv"')
    (tmp_path / "shared.gcl").write_text(text)
    assert main(["schedule", str(tmp_path / "shared.gcl"), "--json", "--epochs", "0"]) == 1
    assert "week.csv:4:8: error[trace-row]: `-1` is out of range: `time_limit` must be above 0" in \
        capsys.readouterr().err
    (tmp_path / "week.csv").write_text("submit,runtime,gpus,timelimit\n0,7200,8,3600\n0,600,8,\n")
    assert main(["schedule", str(tmp_path / "shared.gcl"), "--json", "--epochs", "0", "--no-failures"]) == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    cut, kept = jobs["notebooks[1]"], jobs["notebooks[2]"]
    assert cut["state"] == "timeout" and cut["end_s"] - cut["start_s"] == 3600 and cut["timeouts"] == 1
    assert kept["state"] == "done" and kept["time_limit_s"] == 8 * 3600


def test_an_unknown_plot_format_is_a_usage_error(tmp_path, capsys):
    assert main(["schedule", str(EXAMPLE), "-o", str(tmp_path / "out.txt")]) == 2
    assert not (tmp_path / "out.txt").exists()


def test_a_job_without_a_gpu_range_runs_on_what_its_plan_uses(capsys):
    """Found by the fuzz: the GB200 example was refused with "needs 100,008 GPUs; the largest
    partition has 100,008" because its plan leaves GPUs idle (81,920 used)."""
    example = ROOT / "examples" / "gb200_nvl72_100k.gcl"
    assert main(["schedule", str(example), "--json", "--no-failures", "--epochs", "1"]) == 0
    job, = json.loads(capsys.readouterr().out)["jobs"]
    assert job["state"] == "done" and 0 < job["gpus"] <= 100_800


def test_a_stated_size_the_plan_cannot_fill_is_located_with_the_fix(tmp_path, capsys):
    text = EXAMPLE.read_text()
    assert "  gpus     = 64\n" in text   # finetune_8b and eval_sweep: 63 GPUs leave one idle
    path = tmp_path / "odd.gcl"
    path.write_text(text.replace("  gpus     = 64\n", "  gpus     = 63\n"))
    assert main(["schedule", str(path), "--no-failures"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"odd\.gcl:\d+:\d+: error\[no-feasible-size\]: `finetune_8b` asks for 63 GPUs, but its "
                     r"best plan on them uses \d+", err), err
    assert "with `min_gpus = " in err



def test_one_decision_epoch_reads_in_the_singular():
    """`optimum    MILP at 1 epochs` read on the one-job a100 example's schedule."""
    from gclc.views.schedule import _closing_lines

    data = {"cluster_metrics": {"makespan_s": 3600.0, "gpu_energy_j": 3.6e9, "queueing_by_priority": {}},
            "optimum": {"epochs": [{"milp_value": 1.0}], "mean_gap": 0.0, "max_gap": 0.0},
            "events": {"changes": 2, "delivered": 2}}
    (line,) = [x for x in _closing_lines(data, []) if "MILP" in x]
    assert "MILP at 1 epoch (1 solved)" in line
