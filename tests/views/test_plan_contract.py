"""One plan contract for every job kind: `gclc plan --json` validates against
views/plan.schema.json for every example and kind, its status agrees with the exit code,
and the default output is byte-for-byte repeatable (timings only with --timings)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from gclc.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "views" / "plan.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXAMPLES = sorted((ROOT / "examples").glob("*.gcl"))
EXIT = {"optimal": 0, "infeasible": 3, "undecided": 3}


def plan_json(capsys, *args) -> tuple[int, dict, str]:
    code = main(["plan", *map(str, args), "--json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "internal error" not in captured.err, captured.err
    return code, json.loads(captured.out), captured.err


def valid(data: dict) -> None:
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(data)]
    assert not errors, errors


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def planned(cli_once, example: Path) -> tuple[int, dict, str]:
    """Each example's `plan --json`, made once per test run (tests/conftest.py: other files
    check the same output; the serve example simulates for seconds)."""
    code, out, err = cli_once("plan", example, "--json")
    assert "Traceback" not in err and "internal error" not in err, err
    return code, json.loads(out), err


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_plans_to_the_contract(example, cli_once):
    code, data, _ = planned(cli_once, example)
    valid(data)
    assert code == EXIT[data["status"]] and data["solver"]["status"] == data["status"]
    assert "seconds" not in data["solver"]


def test_each_job_kind_is_covered_by_the_examples(cli_once):
    kinds = {planned(cli_once, example)[1]["kind"] for example in EXAMPLES}
    assert kinds == {"train", "serve", "hetero", "rl"}


def _copy(tmp_path, name: str, edit=None) -> Path:
    for support in ("pod.gcl", "train.gcl"):
        shutil.copy(ROOT / "tests" / "data" / support, tmp_path / support)
    path = tmp_path / name
    if edit is not None:
        path.write_text(edit((tmp_path / "train.gcl").read_text(encoding="utf-8")), encoding="utf-8")
    return path


def test_an_infeasible_train_plan_keeps_the_contract_and_exits_3(tmp_path, capsys):
    path = _copy(tmp_path, "tiny.gcl", lambda t: t.replace("batch     = 256", "batch     = 256\n  gpus      = 1"))
    code, data, err = plan_json(capsys, path)
    valid(data)
    assert (code, data["status"], data["tokens_per_s"]) == (3, "infeasible", None) and "infeasible" in err


def _power_only(text: str) -> str:
    """Replicas of 8 GPUs (tp = 8 pinned) under 8 kW: even one replica needs more at full clock
    (the search covers every GPU count); the planner runs it at a lower clock."""
    return text.replace("precision = bf16\n}", "precision = bf16\n  parallelism { tp = 8  pp = 1 }\n"
                        "  subject to { power <= 8 kW }\n}")


def test_a_power_bound_met_by_a_lower_clock_is_a_plan_with_its_parallelism(tmp_path, capsys):
    """Regression: the JSON said `infeasible` while the GP planned within the bound, then the
    parallelism was null; now the plan is the operating point, its layout included."""
    path = _copy(tmp_path, "capped.gcl", _power_only)
    code, data, _ = plan_json(capsys, path)
    valid(data)
    assert code == 0 and data["status"] == "optimal" and "power" in data["power_budget"]["binds"]
    assert data["power_w"] <= 8e3 and data["tokens_per_s"] > 0 and data["clock"] < 1
    par, budget = data["parallelism"], data["power_budget"]
    assert data["gpus"] == par["tp"] * par["pp"] * par["cp"] * par["dp"] == budget["gpus"]
    assert par["power_cap_w"] == budget["power_cap_w"] is not None
    assert 256 % (par["dp"] * par["microbatch"]) == 0          # the batch splits over the replicas it runs
    assert 0 < data["memory_per_gpu_bytes"] <= data["hbm_bytes"]
    assert data["placement"]["dp"]["size"] == par["dp"] and data["placement"]["tp"]["size"] == par["tp"]


def test_plan_json_is_repeatable_and_timings_are_opt_in(capsys, cli_once):
    example = ROOT / "examples" / "a100_cluster.gcl"
    first = cli_once("plan", example, "--json")[:2]   # the run made before in this test run, if any
    second = main(["plan", str(example), "--json"]), capsys.readouterr().out
    assert first == second
    code, timed, _ = plan_json(capsys, example, "--timings")
    assert code == 0 and timed["solver"]["seconds"] >= 0


def test_a_serve_search_out_of_budget_is_undecided_not_infeasible(capsys, monkeypatch):
    """A demand search that stops at its simulation budget before any simulated candidate
    meets the SLOs has not proven that none does: it says undecided (text, JSON and stderr),
    with the count left unsimulated, never "no configuration meets". The budget is set to
    nothing here so that the first candidate to be simulated ends the search."""
    from gclc.solver.serve import demand_search as serve_demand_search

    monkeypatch.setattr(serve_demand_search, "MAX_SIMULATIONS", 0)
    example = ROOT / "examples" / "deepseek_v3_serve.gcl"   # a demand: the search that has a budget
    code, data, err = plan_json(capsys, example)
    valid(data)
    assert code == 3 and data["status"] == "undecided" and data["solver"]["status"] == "undecided"
    assert data["solver"]["simulated"] == 0
    assert any("not proven infeasible" in reason and "left unsimulated" in reason for reason in data["binding"])
    assert not any("no configuration meets" in reason for reason in data["binding"])
    assert err.startswith("gclc: undecided:")
    assert main(["plan", str(example)]) == 3
    text = capsys.readouterr().out
    assert "\n  undecided:" in text and "infeasible:" not in text
