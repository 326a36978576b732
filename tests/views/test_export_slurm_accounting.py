"""`gclc export --to slurm` on a shared cluster with tenants and a `scheduler slurm` block,
run by the real Slurm with accounting: a MariaDB of its own, Debian's `slurmdbd`, the
exported `qos.sh` and `accounts.sh` through the real `sacctmgr`, and `slurmctld` with the
exported slurm.conf lines (tests/views/slurm_real.py names the stubs).

- slurmctld parses every scheduling setting the `slurm` schedule policy simulates and
  `scontrol show config` gives back the design's values (the weights, PriorityMaxAge,
  PriorityDecayHalfLife, PreemptType/Mode, bf_interval/bf_window/bf_resolution/bf_max_job_test,
  max_switch_wait), with no error in its log (age and fair-share weights need slurmdbd);
- slurmdbd holds each QOS with the simulation's weight as its Priority and, under
  `preempt_type = qos`, the lower QOS it may preempt, and the design's QOS limits
  (GrpTRES, MaxTRESPerUser, MaxJobsPerUser on gres/gpu); each tenant an account with its
  shares as Fairshare;
- with associations and QOS enforced, `sbatch --test-only` places the exported job under
  its tenant's account and QOS, and refuses (negative controls) an account or a QOS the
  scripts did not create.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gclc.compiler.driver import check_text
from gclc.solver.schedule.settings import settings_of
from gclc.views.export import export

from .slurm_real import Slurmctld, accounting_daemons, have_accounting, wait_for_gpu_tres

pytestmark = pytest.mark.skipif(not have_accounting(), reason="Debian's slurmdbd and mariadb-server are not installed "
                                                                "(apt-get install slurmdbd mariadb-server)")
SHARED = Path(__file__).resolve().parents[2] / "examples" / "shared_cluster.gcl"
SLURM = """
scheduler slurm {
  on                       = Shared
  preempt_type             = qos
  preempt_mode             = cancel
  bf_interval              = 45 s
  bf_window                = 2 d
  bf_resolution            = 2 min
  bf_max_job_test          = 100
  max_switch_wait          = 20 min
  priority_max_age         = 3 d
  priority_decay_half_life = 36 h
  priority_weight { age = 10  fairshare = 20  job_size = 30  partition = 40  qos = 50 }
  qos_grp_gpus          { low = 64 }
  qos_max_gpus_per_user { low = 16  high = 128 }
  qos_max_jobs_per_user { normal = 3 }
}
"""


def shared_design():
    """The shared example (tenants `production`, shares 2, and `research`, shares 1) with a
    `scheduler slurm` block stating every setting away from Slurm's defaults."""
    result = check_text(SHARED.read_text() + SLURM, str(SHARED))
    assert result.design is not None, result.diagnostics
    return result.design


def sacctmgr(env: dict, *args: str) -> str:
    done = subprocess.run(["sacctmgr", "-i", *args], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def accounting(tmp_path):
    """MariaDB and slurmdbd up, the cluster registered; stopped (all of it) at the end."""
    with accounting_daemons(tmp_path) as up:
        yield up


def test_slurm_runs_the_simulated_policy_with_the_tenants_accounts_and_qos(accounting, tmp_path):
    dbd, started = accounting
    design = shared_design()
    cluster = design.of_kind("cluster")[0]
    files = export("slurm", design, "finetune_8b", None, "shared.gcl")
    assert "#SBATCH --account=production" in files["job.sbatch"] and "#SBATCH --qos=critical" in files["job.sbatch"]
    nodes = _nodes(files["slurm.conf"])
    env = dict(dbd.env, SLURM_CONF=str(tmp_path / "dbd" / "slurm.conf"))   # sacctmgr talks to slurmdbd alone
    (tmp_path / "dbd" / "slurm.conf").write_text("ClusterName=gclctest\nAuthType=auth/none\nSlurmctldHost=localhost\n"
                                                 + "\n".join(dbd.slurm_lines()) + "\n")
    sacctmgr(env, "add", "cluster", "gclctest")
    # slurmctld first: started with the exported AccountingStorageTRES=gres/gpu, it registers
    # the GPU TRES with slurmdbd, which the QOS limits of qos.sh name
    ctld = Slurmctld(tmp_path, files, nodes, dbd.slurm_lines())
    started.append(ctld)
    assert ctld.ready(), ctld.log()[-2000:]
    wait_for_gpu_tres(env)
    for script in ("qos.sh", "accounts.sh"):
        (tmp_path / script).write_text(files[script])
        done = subprocess.run(["sh", str(tmp_path / script)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    sacctmgr(env, "add", "user", "root", "Account=production")

    # the settings slurmctld runs are the ones the schedule simulates
    s = settings_of(design, cluster, "slurm")
    config = dict(re.findall(r"^(\w+)[ \t]*=[ \t]*(.*?)[ \t]*$", ctld.scontrol("show", "config"), re.M))
    weights = {"Age": s.weights.age, "FairShare": s.weights.fairshare, "JobSize": s.weights.job_size,
               "Partition": s.weights.partition, "QOS": s.weights.qos}
    assert {k: int(config[f"PriorityWeight{k}"]) for k in weights} == weights == {
        "Age": 10, "FairShare": 20, "JobSize": 30, "Partition": 40, "QOS": 50}
    assert config["PriorityMaxAge"] == "3-00:00:00" and config["PriorityDecayHalfLife"] == "1-12:00:00"
    assert config["PreemptType"] == "preempt/qos" and config["PreemptMode"] == "CANCEL"
    params = dict(p.split("=") for p in config["SchedulerParameters"].split(","))
    assert params == {"bf_interval": "45", "bf_window": "2880", "bf_resolution": "120", "bf_max_job_test": "100", "max_switch_wait": "1200"}
    assert s.backfill.window == 2880 * 60 and s.max_switch_wait == 1200 and s.backfill.interval == 45
    # (the daemon's clock check on a loaded machine says nothing of the files, as test_export_slurm.py notes)
    errors = [line for line in ctld.log().splitlines() if "error" in line.lower()
              and not re.search(r"pmix|MPI:|state file|backup state save|High latency for \d+ calls to gettimeofday", line)]
    assert errors == []

    # slurmdbd holds the simulation's QOS weights, preemption and fair shares
    qos = {row.split("|")[0]: row.split("|")[1:] for row in
           sacctmgr(env, "-nP", "show", "qos", "format=Name,Priority,Preempt").split()}
    assert {name: int(v[0]) for name, v in qos.items()} == {"low": 1, "normal": 2, "high": 4, "critical": 8}
    assert set(qos["critical"][1].split(",")) == {"low", "normal", "high"} and qos["low"][1] == ""
    limits = {row.split("|")[0]: row.split("|")[1:] for row in
              sacctmgr(env, "-nP", "show", "qos", "format=Name,GrpTRES,MaxTRESPU,MaxJobsPU").split()}
    assert limits == {"low": ["gres/gpu=64", "gres/gpu=16", ""], "normal": ["", "", "3"],
                      "high": ["", "gres/gpu=128", ""], "critical": ["", "", ""]}, limits
    shares = dict(row.split("|") for row in sacctmgr(env, "-nP", "show", "assoc", "where", "user=",
                                                     "format=Account,Fairshare").split() if not row.startswith("root"))
    assert shares == {"production": "2", "research": "1"}

    # the job is placed under its account and QOS; what the scripts did not create is refused
    script = files["job.sbatch"]
    placed = ctld.sbatch_test_only(script)
    assert placed.returncode == 0 and "to start at" in placed.stderr, placed.stderr
    other = ctld.sbatch_test_only(script.replace("--account=production", "--account=research"))
    assert other.returncode != 0 and "account" in other.stderr.lower(), other.stderr   # root is not in research
    bogus = ctld.sbatch_test_only(script.replace("--qos=critical", "--qos=urgent"))
    assert bogus.returncode != 0 and "qos" in bogus.stderr.lower(), bogus.stderr


def _nodes(conf: str) -> list[str]:
    from gclc.compiler.hostlist import expand

    return [n for hosts in re.findall(r"^NodeName=(\S+)", conf, re.M) for n in expand(hosts)]
