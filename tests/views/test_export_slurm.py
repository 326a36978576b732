"""`gclc export --to slurm`, read by Debian's real `slurmctld` (22.05).

The daemon runs in the foreground on loopback with the generated slurm.conf lines,
gres.conf and tree topology.conf, inside a private mount namespace whose /etc/hosts names
the generated nodes (slurmctld resolves every node at start); `scontrol` then reads back
the topology and the nodes, and `sbatch --test-only` asks the controller to place the
exported job. STUB, named: no slurmd runs here to register the nodes, so the test declares
them `State=CLOUD` (powered down, started on demand by a ResumeProgram of /bin/true), which
the controller schedules onto as idle nodes; `PrivateData=cloud` shows them to scontrol. The block topology is newer than Debian's Slurm (23.11), so
it is checked against the documented syntax (topology.conf(5), "topology/block") by the
parser below.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gclc.compiler.hostlist import expand
from gclc.views.export import slurm

DAEMON_START_S = 30
pytestmark = pytest.mark.skipif(shutil.which("slurmctld") is None or shutil.which("scontrol") is None,
                                reason="Debian's slurmctld and scontrol are not installed (apt-get install slurm-wlm)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurmctld:
    """A slurmctld in the foreground, bounded in time, and scontrol against it."""

    def __init__(self, directory: Path, files: dict[str, str], nodes: list[str]):
        self.directory = directory
        for name, text in files.items():
            (directory / name).write_text(text)
        # STUB: powered-down cloud nodes stand for nodes whose slurmd registered idle
        (directory / "slurm.nodes.conf").write_text(files["slurm.conf"].replace("State=UNKNOWN", "State=CLOUD"))
        port = _free_port()
        host = socket.gethostname().split(".")[0]
        (directory / "slurm.conf").write_text("\n".join([
            "ClusterName=gclctest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={port}",
            f"SlurmdPort={_free_port()}", "AuthType=auth/none", "CredType=cred/none", "SlurmUser=root",
            f"StateSaveLocation={directory / 'state'}", f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
            f"SlurmctldLogFile={directory / 'slurmctld.log'}", "SlurmctldDebug=info", "MailProg=/bin/true",
            "MpiDefault=none", "PrivateData=cloud", "ResumeProgram=/bin/true", "SuspendProgram=/bin/true",
            "SuspendTime=3600", "ResumeTimeout=600",
            f"Include {directory / 'slurm.nodes.conf'}", ""]))
        (directory / "state").mkdir()
        hosts = Path("/etc/hosts").read_text() + "".join(f"127.0.0.1 {n}\n" for n in nodes)
        (directory / "hosts").write_text(hosts)
        self.env = dict(os.environ, SLURM_CONF=str(directory / "slurm.conf"))
        script = f"mount --bind {directory / 'hosts'} /etc/hosts && exec slurmctld -D -c -i -f {directory / 'slurm.conf'}"
        self.process = subprocess.Popen(["timeout", "-s", "KILL", "120", "unshare", "--mount", "--", "sh", "-c", script],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env)

    def ready(self) -> bool:
        deadline = time.monotonic() + DAEMON_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True, timeout=10).returncode == 0:
                return True
            time.sleep(0.3)
        return False

    def scontrol(self, *args: str) -> str:
        done = subprocess.run(["scontrol", *args], env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def sbatch_test_only(self, script: str) -> subprocess.CompletedProcess:
        (self.directory / "job.sbatch").write_text(script)
        return subprocess.run(["sbatch", "--test-only", str(self.directory / "job.sbatch")], env=self.env,
                              capture_output=True, text=True, timeout=30)

    def log(self) -> str:
        path = self.directory / "slurmctld.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> str:
        self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate(timeout=10)
        return out.decode(errors="replace")


@pytest.fixture
def slurmctld(tmp_path):
    started = []

    def start(files: dict[str, str], nodes: list[str]) -> Slurmctld:
        daemon = Slurmctld(tmp_path, files, nodes)
        started.append(daemon)
        if not daemon.ready():
            output = daemon.stop()
            if "unshare" in output or "mount" in output:
                pytest.skip(f"slurmctld cannot start here (no private mount namespace): {output.strip()[-300:]}")
            pytest.fail(f"slurmctld did not start:\n{output[-2000:]}\n{daemon.log()[-2000:]}")
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


def _records(text: str) -> list[dict[str, str]]:
    """scontrol's `Key=Value Key=Value` records, one per line or block."""
    out = []
    for block in re.split(r"\n(?=\S)", text.strip()):
        out.append(dict(re.findall(r"(\w+)=(\S*)", block)))
    return out


def test_slurmctld_reads_the_cluster_and_scontrol_gives_back_its_tiers(example, slurmctld, ir_levels):
    nodes = example.layout
    files = slurm.export(nodes, example.design, example.job, example.name)
    names = [n for group in nodes.groups for n in group.nodes]
    daemon = slurmctld(files, names)

    switches = _records(daemon.scontrol("show", "topology"))
    by_level: dict[int, list[dict]] = {}
    for switch in switches:
        by_level.setdefault(int(switch["Level"]), []).append(switch)
    for group in nodes.groups:  # round trip: per partition, the levels' domain sizes are the IR's tiers
        mine, sizes = set(group.nodes), []
        for level in sorted(by_level):
            widths = [len(set(expand(s["Nodes"])) & mine) for s in by_level[level]]
            if max(widths) and (not sizes or max(widths) > sizes[-1]):
                sizes.append(max(widths))
        assert sizes == (ir_levels(group.partition) or [len(mine)]), group.partition.name
        assert mine <= set(expand(by_level[max(by_level)][0]["Nodes"]))  # one root over every node

    records = _records(daemon.scontrol("show", "nodes"))
    assert len(records) == len(names)
    for group in nodes.groups:
        node = group.partition.node
        record = next(r for r in records if r["NodeName"] == group.nodes[-1])
        assert record["Gres"] == f"gpu:{slurm.gres_type(group)}:{node.gpus}"
        assert int(record["RealMemory"]) == int(node.dram // 2**20)
        assert record["Partitions"] == group.slug
    assert _errors(daemon) == []  # gres.conf and topology.conf parse errors land here
    config = daemon.scontrol("show", "config")
    assert re.search(rf"SchedulerParameters\s*=\s*max_switch_wait={slurm.SWITCH_WAIT_S}\b", config)
    assert re.search(r"PriorityType\s*=\s*priority/multifactor", config)
    if "job.sbatch" in files:   # the controller places the job on the exported cluster
        placed = daemon.sbatch_test_only(files["job.sbatch"])
        assert placed.returncode == 0 and "to start at" in placed.stderr, placed.stderr


# What a fresh daemon without state or PMIx always logs; anything else is about our files.
STARTUP_NOISE = re.compile(r"pmix|MPI:|state file|backup state save")


def _errors(daemon: Slurmctld) -> list[str]:
    return [line for line in daemon.log().splitlines() if "error" in line.lower() and not STARTUP_NOISE.search(line)]


def test_a_broken_gres_line_is_reported_by_slurmctld(tmp_path, named):
    """The log check above can fail: slurmctld parses gres.conf, reports the bad line and stops."""
    example = named("dgx_h100_superpod")
    files = slurm.export(example.layout, example.design, None, example.name)
    files["gres.conf"] += "NodeName=dgx-h100-001 Name=gpu Type=h100_sxm Bogus=1\n"
    daemon = Slurmctld(tmp_path, files, list(example.layout.groups[0].nodes))
    try:
        assert not daemon.ready()
    finally:
        output = daemon.stop()
    if "unshare" in output or "mount" in output:
        pytest.skip(f"slurmctld cannot start here (no private mount namespace): {output.strip()[-300:]}")
    assert re.search(r"Parse error in file \S*gres\.conf", daemon.log() + output), daemon.log()


def test_sbatch_refuses_a_job_the_cluster_cannot_hold(slurmctld, named):
    """Negative controls for --test-only: one node more than the partition has, or more GPUs
    per node than its nodes hold, is refused by the controller."""
    example = named("dgx_h100_superpod")
    files = slurm.export(example.layout, example.design, example.job, example.name)
    nodes = list(example.layout.groups[0].nodes)
    daemon = slurmctld(files, nodes)
    script = files["job.sbatch"]
    gpus = daemon.sbatch_test_only(script.replace("--gpus-per-node=h100_sxm:8", "--gpus-per-node=h100_sxm:9"))
    assert gpus.returncode != 0 and "not available" in gpus.stderr, gpus.stderr
    too_many = re.sub(r"^#SBATCH --nodes=\d+", f"#SBATCH --nodes={len(nodes) + 1}", script, flags=re.M)
    refused = daemon.sbatch_test_only(too_many)
    assert refused.returncode != 0 and "not available" in refused.stderr, refused.stderr


def test_sbatch_states_time_qos_requeue_and_every_het_group(named):
    from gclc.views.export.slurm import slurm_time

    assert slurm_time(3600 * 24 * 3 + 61) == "3-00:02:00"
    example = named("dgx_h100_superpod")
    script = slurm.sbatch(example.layout, example.job, example.name)
    run = example.job.run
    assert run.time_source == "time to train at the plan's goodput" and run.restarts >= 1
    assert f"#SBATCH --time={slurm_time(run.time_limit)}" in script
    assert "#SBATCH --qos=normal" in script and "#SBATCH --requeue" in script
    hetero = named("hetero_h100_a100")
    script = slurm.sbatch(hetero.layout, hetero.job, hetero.name)
    assert script.count("#SBATCH hetjob") == 1
    assert re.search(r"^srun --het-group=0-1 ", script, re.M)   # one step over both components


def parse_block_topology(text: str) -> tuple[list[tuple[str, list[str]]], list[int]]:
    """topology.conf(5), topology/block: `BlockName=<name> Nodes=<host list>` lines and one
    `BlockSizes=<n>[,<n>...]` line; names are case-insensitive keys, `#` starts a comment."""
    blocks, sizes = [], []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(item.split("=", 1) for item in line.split())
        keys = {k.lower() for k in fields}
        if keys == {"blockname", "nodes"}:
            values = {k.lower(): v for k, v in fields.items()}
            blocks.append((values["blockname"], expand(values["nodes"])))
        elif keys == {"blocksizes"}:
            sizes = [int(v) for v in next(iter(fields.values())).split(",")]
        else:
            raise ValueError(f"not block topology syntax: {raw!r}")
    return blocks, sizes


def test_block_topology_follows_the_documented_syntax(example, ir_levels):
    nodes = example.layout
    blocks, sizes = parse_block_topology(slurm.topology_block(nodes, example.name))
    listed = [n for _, members in blocks for n in members]
    everything = [n for group in nodes.groups for n in group.nodes]
    assert sorted(listed) == sorted(everything) and len(set(listed)) == len(listed)  # each node in one block
    assert len({name for name, _ in blocks}) == len(blocks)
    assert sizes and min(sizes) == sizes[0]
    for group in nodes.groups:
        expected = ir_levels(group.partition)
        scaleup = [lv for lv in group.levels if lv.tier.scope != "scaleout"]
        block = (scaleup[-1] if scaleup else group.levels[0]).nodes_per_domain if group.levels else len(group.nodes)
        assert block in expected or not expected
        mine = [len(m) for _, m in blocks if set(m) <= set(group.nodes)]
        assert max(mine) == block and all(size == block for size in mine[:-1])


def test_sbatch_asks_for_the_plans_nodes_and_switches(example):
    if example.job is None:
        pytest.skip(f"{example.name} has no train job")
    script = slurm.sbatch(example.layout, example.job, example.name)
    components = [dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", part, re.M)) for part in script.split("#SBATCH hetjob")]
    assert len(components) == len(example.job.shares)
    for options, share in zip(components, example.job.shares):
        group = example.layout.group(share.partition)
        assert options["partition"] == group.slug
        assert int(options["nodes"]) * group.gpus_per_node == share.gpus
        assert options["gpus-per-node"] == f"{slurm.gres_type(group)}:{group.gpus_per_node}"
        if "switches" in options:  # enough lowest-level switches for whole groups of what the plan keeps together
            per_switch = group.levels[0].nodes_per_domain
            segment = -(-share.together // group.gpus_per_node)
            usable = per_switch // segment * segment if 1 < segment <= per_switch else per_switch
            assert int(options["switches"].split("@")[0]) * usable >= int(options["nodes"])
