"""CLI fuzz of the `rl` job main gained (issue 30, item 8): its step shape (prompts, samples,
lengths, mini-batches, staleness, steps, the engine's batch) and its `submit` at hostile
magnitudes, through `gclc check`, `gclc plan --json` and `gclc schedule`. The contract is the
round-3 fuzz's (tests/cli/test_fuzz_readers.py `run_case`); every quantity the planner steps
through is bounded before use: a step of more samples than the planner simulates is a located
error (it was a plan that ran for minutes), and so is a `submit` past the schedule's horizon."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from .test_fuzz_readers import EXAMPLES, FUZZ, run_case, run_once
from gclc.testing.profiles import scaled_examples

DATA = Path(__file__).resolve().parents[1] / "data"
# values chosen so that an accepted step stays small (a plan in about a second): the
# products of prompts and samples are either tiny or past the limit
FIELDS = {
    "prompts      = 16": st.sampled_from(["1", "16", "0", "2.5", "-1", "1e30", "1e400"]),
    "samples      = 8": st.sampled_from(["1", "2", "8", "1e12", "0"]),
    "prompt       = 256": st.sampled_from(["1", "256", "1e30", "0", "lognormal(mean = 1e29, sigma = 100)"]),
    "response     = lognormal(mean = 300, sigma = 0.8)": st.sampled_from(
        ["1", "300", "1e30", "lognormal(mean = 1e-30, sigma = 1e30)", "lognormal(mean = 300, sigma = 0)"]),
    "max_response = 1024": st.sampled_from(["1", "1024", "1e30", "0"]),
    "minibatches  = 2": st.sampled_from(["1", "2", "3", "1e30"]),
    "staleness    = 1": st.sampled_from(["0", "1", "1e30"]),
    "max_batch = 64": st.sampled_from(["1", "64", "1e30"]),
}


@pytest.fixture
def rl_folder(tmp_path):
    shutil.copy(DATA / "rl_small.gcl", tmp_path / "rl.gcl")
    return tmp_path


@settings(FUZZ, max_examples=scaled_examples(2) if EXAMPLES < 10 else EXAMPLES)
@given(st.fixed_dictionaries({}, optional=FIELDS), st.sampled_from([["check"], ["plan", "--json"]]))
def test_rl_step_shapes(rl_folder, capsys, values, command):
    text = (DATA / "rl_small.gcl").read_text()
    for written, value in values.items():
        text = text.replace(written, written.split("=")[0] + "= " + value, 1)
    (rl_folder / "rl.gcl").write_text(text)
    run_case(rl_folder, [command[0], "rl.gcl", *command[1:]], capsys)


@pytest.mark.parametrize("prompts, samples", [("1e30", "16"), ("64", "1e12"), ("2048", "16")])
def test_a_step_past_what_the_planner_simulates_is_located(rl_folder, capsys, prompts, samples):
    """prompts x samples over 16,384: the error at the job's `samples`, found by `check` in
    milliseconds (1e30 prompts ran a plan for minutes)."""
    text = (DATA / "rl_small.gcl").read_text().replace("prompts      = 16", f"prompts      = {prompts}")
    (rl_folder / "rl.gcl").write_text(text.replace("samples      = 8", f"samples      = {samples}"))
    for command in (["check"], ["plan"]):
        code, _, err, _ = run_once(rl_folder, [command[0], "rl.gcl"], capsys)
        line = text.split("\n").index("  samples      = 8") + 1
        assert code == 1 and f"rl.gcl:{line}:" in err and "gclc plans at most 16,384" in err, err[-2000:]


def test_an_rl_submit_past_the_horizon_is_located(tmp_path, capsys):
    """An rl job submitted after 10 years: the schedule's located `out-of-range` error, as a
    train job's (it was accepted, and the job sat past the simulated horizon)."""
    text = (DATA / "rl_shared.gcl").read_text().replace("submit = 10 min", "submit = 1e6 h")
    (tmp_path / "shared.gcl").write_text(text)
    code, _, err, _ = run_once(tmp_path, ["schedule", "shared.gcl", "--epochs", "0", "--no-failures"], capsys)
    line = next(i for i, row in enumerate(text.split("\n"), 1) if "submit = 1e6 h" in row)
    assert code == 1 and f"shared.gcl:{line}:" in err and "error[out-of-range]" in err and "10 years" in err
