"""`gclc schedule --export slurm DIR` replayed by real Slurm (Debian's slurmctld and four
slurmd, 22.05, with accounting: slurmdbd on a MariaDB of its own, tests/views/slurm_real.py):
the exported cluster files, QOS (qos.sh, with the design's QOS limits) and per-run sbatch
scripts, submitted by the exported submit.sh, start in the order and on the nodes the
simulation chose, a backfilled job included, and a job the simulation held for its QOS's
GrpTRES is held by slurmctld for the same limit (AccountingStorageEnforce=limits,qos) until
the job it waited for ended, though its node had room before.

The harness (not the checked files) runs Slurm on this machine: every node's slurmd on
127.0.0.1 with its own port, no authentication (auth/none), process tracking by process
group, the main loop every second (sched_interval; the design asks backfill's bf_interval =
1 s itself, and the export writes it) and `config_overrides`
so the nodes keep their configured cores and memory; the submitting user's account (root's)
allowed the exported QOS, as qos.sh says to do for an account. Stub: the GPUs are eight files per
node in the test's folder (this machine has no GPU devices; slurmd logs that they are not
devices and counts them). The runs sleep their simulated seconds.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.compiler.hostlist import compress, expand
from tests.views.slurm_real import accounting_daemons, have_accounting, wait_for_gpu_tres

pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in ("slurmctld", "slurmd", "sbatch", "scontrol"))
                                or not have_accounting(),
                                reason="Debian's slurm-wlm (slurmctld, slurmd), slurmdbd and mariadb-server are not "
                                       "installed (bash .ci/setup installs them)")

# A 32-GPU cluster; `big1` holds three nodes and, by its 2-minute limit, keeps `wide` (all four)
# waiting; `small` (1-minute limit) ends before that reservation and is backfilled on half of
# the fourth node; `queued` would fit beside it at 3 s, but the low QOS may hold 4 GPUs
# (GrpTRES), so it waits for `small` to end; `long` (3-minute limit) would delay `wide`, so it
# waits for it. The other QOS limits are stated for slurmctld to hold as well, and never bind.
DESIGN = """\
chip C {
  hbm   { capacity = 80 GB  bandwidth = 2 TB/s }
  peak  { bf16 = 400 TFLOPS }
  power { tdp = 500 W  idle = 60 W }
}
cpu Host { cores = 4  clock = 2 GHz  power = 200 W }
switch Sw { radix = 8  port_speed = 200 Gb/s  power = 1 kW }
fabric Up { kind = nvlink  topology = switched  bandwidth = 400 GB/s  latency = 1 us }
fabric Out {
  kind      = infiniband
  topology  = fat_tree(tiers = 1, radix = 8)
  bandwidth = 200 Gb/s
  latency   = 1 us
  switch    = Sw
}
node Box { gpus = 8 x C  cpus = 2 x Host  dram = 64 GB  scaleup = Up }
cluster K { units = 4 x Box  scaleout = Out }
scheduler slurm {
  on          = K
  bf_interval = 1 s  # a pass every second, as the replayed slurmctld runs it
  qos_grp_gpus          { low = 4 }
  qos_max_gpus_per_user { high = 64 }
  qos_max_jobs_per_user { normal = 1 }
}
workload w {
  on = K
  job big1  { submit = 0 s  duration = 6 s  gpus = 24  priority = high  time_limit = 2 min }
  job wide  { submit = 1 s  duration = 2 s  gpus = 32  priority = high  time_limit = 1 min }
  job small  { submit = 2 s  duration = 3 s  gpus = 4  priority = low     time_limit = 1 min }
  job queued { submit = 3 s  duration = 1 s  gpus = 4  priority = low     time_limit = 1 min }
  job long   { submit = 4 s  duration = 2 s  gpus = 8  priority = normal  time_limit = 3 min }
}
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _harness(out: Path, accounting: tuple[str, ...]) -> tuple[dict, list[str]]:
    """Point the exported slurm.conf and gres.conf at this machine, its accounting at the
    `accounting` lines (slurmdbd's); the nodes it names."""
    conf, gres = (out / "slurm.conf").read_text(), (out / "gres.conf").read_text()
    nodes, lines = [], []
    for line in conf.splitlines():
        m = re.match(r"NodeName=(\S+) (.*)", line)
        if not m:
            lines.append(line)
            continue
        hosts = expand(m[1])
        for host in hosts:
            nodes.append(host)
            lines.append(f"NodeName={host} NodeAddr=127.0.0.1 Port={_port()} {m[2]}")
    (out / "gpus").mkdir()
    for i in range(8):
        (out / "gpus" / f"gpu{i}").touch()
    gres = re.sub(r"Count=\d+", f"File={out / 'gpus'}/gpu[0-7]", gres)
    (out / "gres.conf").write_text(gres)
    lines += ["ClusterName=replay", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={_port()}",
              "AuthType=auth/none", "CredType=cred/none", "SlurmUser=root", "SlurmdUser=root",
              f"StateSaveLocation={out / 'state'}", f"SlurmdSpoolDir={out / 'spool'}/%n",
              f"SlurmctldPidFile={out / 'ctld.pid'}", f"SlurmdPidFile={out / 'd'}-%n.pid",
              f"SlurmctldLogFile={out / 'ctld.log'}", f"SlurmdLogFile={out / 'd'}-%n.log",
              "ProctrackType=proctrack/pgid", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
              *accounting, "MpiDefault=none", "ReturnToService=2",
              "MailProg=/bin/true", "SlurmdParameters=config_overrides", "MinJobAge=600", "MessageTimeout=3"]
    text = "\n".join(lines) + "\n"
    text = re.sub(r"SchedulerParameters=(\S+)", r"SchedulerParameters=\1,sched_interval=1", text)
    (out / "slurm.conf").write_text(text)
    (out / "state").mkdir()
    for node in nodes:
        (out / "spool" / node).mkdir(parents=True)
    return {**os.environ, "SLURM_CONF": str(out / "slurm.conf")}, nodes


def _jobs(env: dict) -> dict[str, dict]:
    """Each job's start and end (epoch seconds, None before), nodes, state and pending reason
    as slurmctld records them."""
    shown = subprocess.run(["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True,
                           timeout=20).stdout
    out = {}
    for line in shown.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        out[fields["JobName"]] = {"start": _epoch(fields.get("StartTime")), "end": _epoch(fields.get("EndTime")),
                                  "nodes": fields.get("NodeList"), "state": fields.get("JobState"),
                                  "reason": fields.get("Reason")}
    return out


def _epoch(stamp: str | None) -> int | None:
    if stamp in (None, "Unknown", "None"):
        return None
    return int(time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")))


def _sacctmgr(env: dict, *args: str) -> None:
    done = subprocess.run(["sacctmgr", "-i", *args], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def test_real_slurm_starts_the_runs_in_the_simulated_order_on_the_simulated_nodes(tmp_path, capsys):
    design = tmp_path / "tiny.gcl"
    design.write_text(DESIGN)
    out = tmp_path / "replay"
    assert main(["schedule", str(design), "--policy", "slurm", "--epochs", "0", "--no-failures", "--json",
                 "--export", "slurm", str(out)]) == 0
    import json
    data = json.loads(capsys.readouterr().out)
    runs = {j["name"]: j["segments"][0] for j in data["jobs"]}
    assert runs["w.small"]["rule"] == "backfill"          # the case worth replaying: backfill started it early
    expected = sorted(runs, key=lambda n: runs[n]["start_s"])
    assert "bf_interval=1," in (out / "slurm.conf").read_text()
    assert runs["w.queued"]["start_s"] == runs["w.small"]["end_s"]    # the QOS held it while there was room
    with accounting_daemons(tmp_path) as (dbd, _):
        env, nodes = _harness(out, dbd.slurm_lines())
        _sacctmgr(env, "add", "cluster", "replay")
        jobs, reasons = _replay(out, env, nodes, len(runs))
    started = sorted(jobs, key=lambda n: jobs[n]["start"])
    assert [n.replace("w-", "w.") for n in started] == expected, (jobs, runs)
    for name, seg in runs.items():
        assert jobs[name.replace(".", "-")]["nodes"] == _hosts(seg, nodes)
    # slurmctld held `queued` for the low QOS's GrpTRES until `small` ended, as the simulation did
    assert jobs["w-queued"]["start"] >= jobs["w-small"]["end"], jobs
    assert "QOSGrpGRES" in reasons["w-queued"], reasons


def _replay(out: Path, env: dict, nodes: list[str], count: int) -> tuple[dict[str, dict], dict[str, set[str]]]:
    """Start slurmctld (registering the GPU TRES with slurmdbd), the QOS and account, the
    slurmds; submit; poll until every job completed: each job's record and the reasons it
    was seen pending for. The daemons are killed at the end."""
    # each daemon in a session of its own, so that stopping it stops `timeout` and the daemon
    daemons = [subprocess.Popen(["timeout", "-s", "KILL", "90", "slurmctld", "-D", "-c", "-i"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)]
    reasons: dict[str, set[str]] = {}
    try:
        for _ in range(50):
            if subprocess.run(["scontrol", "ping"], env=env, capture_output=True, timeout=20).returncode == 0:
                break
            if daemons[0].poll() is not None:
                pytest.fail(f"slurmctld stopped:\n{(out / 'ctld.log').read_text()[-2000:]}")
            time.sleep(0.2)
        wait_for_gpu_tres(env)
        done = subprocess.run(["sh", str(out / "qos.sh")], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        # the submitting user's account (a design without tenants names none) allowed the exported QOS
        _sacctmgr(env, "modify", "account", "where", "name=root", "set", "QOS+=low,normal,high")
        daemons += [subprocess.Popen(["timeout", "-s", "KILL", "90", "slurmd", "-D", "-N", n], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
                    for n in nodes]
        for _ in range(100):
            idle = subprocess.run(["sinfo", "-h", "-o", "%D %t"], env=env, capture_output=True, text=True,
                                  timeout=20).stdout
            if idle.strip() == f"{len(nodes)} idle":
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the nodes did not come up: {idle!r}\n{(out / 'ctld.log').read_text()[-2000:]}")
        submitted = subprocess.run(["bash", str(out / "submit.sh")], env=env, capture_output=True, text=True)
        assert submitted.returncode == 0, submitted.stderr
        deadline = time.monotonic() + 75     # the daemons are killed at 90 s: never poll a dead one
        while True:
            jobs = _jobs(env)
            for name, job in jobs.items():
                if job["state"] == "PENDING":
                    reasons.setdefault(name, set()).add(job["reason"])
            if len(jobs) == count and all(job["state"] == "COMPLETED" for job in jobs.values()):
                break
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                pytest.fail(f"the replay did not complete: {jobs}\n{(out / 'ctld.log').read_text()[-3000:]}")
            time.sleep(0.2)
        # negative control: a run placed on a node the cluster lacks is refused by sbatch itself
        broken = out / "broken.sbatch"
        script = next((out / "jobs").glob("*small*")).read_text()
        broken.write_text(re.sub(r"--nodelist=\S+", f"--nodelist={nodes[-1][:-1]}9", script))
        refused = subprocess.run(["sbatch", str(broken)], env=env, capture_output=True, text=True, timeout=20)
        assert refused.returncode != 0 and "node" in refused.stderr.lower(), refused
    finally:
        for d in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(d.pid, signal.SIGKILL)
            d.wait()
    return jobs, reasons


def _hosts(seg: dict, nodes: list[str]) -> str:
    return compress(nodes[d] for d, _ in seg["domain_gpus"])
