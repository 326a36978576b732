"""CLI fuzz of the declarations main gained with shared-cluster scheduling (issue 30, item 8):
`tenant` (quota, borrowing and lending limits, shares) and `scheduler slurm` / `scheduler
kueue` settings at hostile magnitudes, through `gclc schedule` and its `--export slurm DIR`
(the replay's files through the one writer). The contract is the round-3 fuzz's
(tests/cli/test_fuzz_readers.py `run_case`); a setting Slurm cannot state is an error that
says so (it was exit 70)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from .test_fuzz_readers import EXAMPLES, FUZZ, run_case, run_once, shared_folder  # noqa: F401 (a fixture)
from .test_hostile_round3 import SHARED

TIMES = st.sampled_from(["0 s", "1e-30 s", "0.5 s", "1 s", "59 s", "1 min", "1 d", "10 y", "1e30 s"])
COUNTS = st.sampled_from(["0", "1", "500", "1e6", "1e30", "2.5"])
SLURM = st.fixed_dictionaries({}, optional={
    "bf_interval": TIMES, "bf_window": TIMES, "bf_resolution": TIMES, "bf_max_job_test": COUNTS, "max_switch_wait": TIMES,
    "priority_max_age": TIMES, "priority_decay_half_life": TIMES,
    "preempt_type": st.sampled_from(["none", "qos"])})
TENANT = st.fixed_dictionaries({}, optional={"shares": COUNTS, "h100": COUNTS, "a100": COUNTS})


def design(slurm: dict[str, str], tenant: dict[str, str]) -> str:
    """The shared-cluster example with a `scheduler slurm` block and the production tenant's
    values replaced."""
    fields = "  ".join(f"{k} = {v}" for k, v in slurm.items())
    text = SHARED.replace("scheduler kueue {", f"scheduler slurm {{ on = Shared  {fields} }}\n\nscheduler kueue {{", 1)
    quota = f"quota {{ h100 = {tenant.get('h100', '192')}  a100 = {tenant.get('a100', '64')} }}"
    text = text.replace("quota { h100 = 192  a100 = 64 }", quota, 1)
    return text.replace("  shares = 2\n", f"  shares = {tenant.get('shares', '2')}\n", 1)


@settings(FUZZ, max_examples=1 if EXAMPLES < 10 else EXAMPLES)  # a schedule is ~2 s of CPU a run
@given(SLURM, TENANT, st.sampled_from(["slurm", "kueue"]))
def test_scheduler_and_tenant_settings(shared_folder, capsys, slurm, tenant, policy):
    (shared_folder / "w.csv").write_text("submit,duration,gpus\n0,60,8\n")
    (shared_folder / "shared.gcl").write_text(design(slurm, tenant))
    argv = ["schedule", "shared.gcl", "--policy", policy, "--epochs", "0", "--no-failures", "--json"]
    code = run_case(shared_folder, [*argv, "--export", "slurm", "replay"], capsys)
    if code == 0:
        assert (shared_folder / "replay" / "slurm.conf").is_file()


def test_a_setting_slurm_cannot_state_is_an_error_that_says_so(shared_folder, capsys):
    """`bf_resolution = 0.5 s` under `--export slurm`: exit 1 saying why (it was exit 70), no replay written."""
    (shared_folder / "w.csv").write_text("submit,duration,gpus\n0,60,8\n")
    (shared_folder / "shared.gcl").write_text(design({"bf_resolution": "0.5 s"}, {}))
    code, _, err, _ = run_once(shared_folder, ["schedule", "shared.gcl", "--policy", "slurm", "--epochs", "0",
                                               "--no-failures", "--export", "slurm", "replay"], capsys)
    assert code == 1 and "cannot export to slurm" in err and "bf_resolution" in err and "whole seconds" in err
    assert not (shared_folder / "replay").exists()


@pytest.mark.parametrize("target", ["shared.gcl", "w.csv", "fifo", "/dev/null", ""])
def test_the_replay_folder_is_a_folder(shared_folder, capsys, target):
    """`--export slurm DIR` onto the design, its trace, a FIFO, a device or nothing: a usage
    error before any simulation, and nothing read is changed."""
    (shared_folder / "w.csv").write_text("submit,duration,gpus\n0,60,8\n")
    os.mkfifo(shared_folder / "fifo")
    code, _, err, _ = run_once(shared_folder, ["schedule", "shared.gcl", "--export", "slurm", target], capsys)
    assert code == 2 and "DIR names a folder" in err
