"""The real Slurm daemons the Slurm export tests run, each in the foreground, bounded in
time and stopped by its test: `slurmctld` (Debian's 22.05) and, for accounts and QOS,
`slurmdbd` on a throwaway MariaDB (Debian's) in the test's directory.

STUBS, named: no slurmd runs here to register the nodes, so they are declared
`State=CLOUD` (powered down, started on demand by a ResumeProgram of /bin/true), which the
controller schedules onto as idle nodes; `PrivateData=cloud` shows them to scontrol.
Authentication is `auth/none` (no munge daemon)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

# The longest wait for a daemon to answer: it returns as soon as it does (about a second on
# an idle machine); a loaded CI machine once took longer than 30 s.
DAEMON_START_S = 90
# A throwaway database need not reach the disk: Debian's eatmydata turns fsync into a no-op
# (a fresh MariaDB then starts in about a second instead of eight).
NO_SYNC = ["eatmydata"] if shutil.which("eatmydata") else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurmctld:
    """A slurmctld in the foreground, bounded in time, and scontrol against it."""

    def __init__(self, directory: Path, files: dict[str, str], nodes: list[str], extra: tuple[str, ...] = ()):
        self.directory = directory
        for name, text in files.items():
            (directory / name).write_text(text)
        # STUB: powered-down cloud nodes stand for nodes whose slurmd registered idle
        (directory / "slurm.nodes.conf").write_text(files["slurm.conf"].replace("State=UNKNOWN", "State=CLOUD"))
        port = free_port()
        host = socket.gethostname().split(".")[0]
        (directory / "slurm.conf").write_text("\n".join([
            "ClusterName=gclctest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={port}",
            f"SlurmdPort={free_port()}", "AuthType=auth/none", "CredType=cred/none", "SlurmUser=root",
            f"StateSaveLocation={directory / 'state'}", f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
            f"SlurmctldLogFile={directory / 'slurmctld.log'}", "SlurmctldDebug=info", "MailProg=/bin/true",
            "MpiDefault=none", "PrivateData=cloud", "ResumeProgram=/bin/true", "SuspendProgram=/bin/true",
            "SuspendTime=3600", "ResumeTimeout=600", *extra,
            f"Include {directory / 'slurm.nodes.conf'}", ""]))
        (directory / "state").mkdir()
        hosts = Path("/etc/hosts").read_text() + "".join(f"127.0.0.1 {n}\n" for n in nodes)
        (directory / "hosts").write_text(hosts)
        self.env = dict(os.environ, SLURM_CONF=str(directory / "slurm.conf"))
        script = f"mount --bind {directory / 'hosts'} /etc/hosts && exec slurmctld -D -c -i -f {directory / 'slurm.conf'}"
        self.process = subprocess.Popen(["timeout", "-s", "KILL", "300", "unshare", "--mount", "--", "sh", "-c", script],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env)

    def ready(self) -> bool:
        return wait_for(lambda: subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True,
                                               timeout=10).returncode == 0, self.process)

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
        return stop(self.process)


def wait_for(check, process: subprocess.Popen, seconds: float = DAEMON_START_S) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if check():
            return True
        time.sleep(0.2)
    return False


def stop(process: subprocess.Popen) -> str:
    process.terminate()
    try:
        out, _ = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate(timeout=10)
    return (out or b"").decode(errors="replace")


class MariaDB:
    """A MariaDB server of its own in `directory`: a fresh data directory, a Unix socket, no
    network; root by socket authentication (the tests run as root)."""

    def __init__(self, directory: Path):
        self.data, self.socket = directory / "mysql", directory / "mysql.sock"
        subprocess.run([*NO_SYNC, "mariadb-install-db", "--no-defaults", f"--datadir={self.data}", "--user=root",
                        "--auth-root-authentication-method=socket", "--skip-test-db", "--innodb-log-file-size=4M"],
                       check=True, capture_output=True, timeout=120)
        self.process = subprocess.Popen(
            ["timeout", "-s", "KILL", "300", *NO_SYNC, "mariadbd", "--no-defaults", f"--datadir={self.data}",
             f"--socket={self.socket}", "--skip-networking", "--user=root", "--innodb-buffer-pool-size=16M",
             "--innodb-log-file-size=4M",
             f"--pid-file={directory / 'mysql.pid'}", f"--log-error={directory / 'mysql.err'}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def ready(self) -> bool:
        return wait_for(lambda: subprocess.run(["mariadb", "--no-defaults", "-S", str(self.socket), "-e", "select 1"],
                                               capture_output=True, timeout=10).returncode == 0, self.process)

    def stop(self) -> str:
        return stop(self.process)


class Slurmdbd:
    """slurmdbd on loopback, storing into `db` (the client library finds its socket through
    MYSQL_UNIX_PORT)."""

    def __init__(self, directory: Path, db: MariaDB):
        self.port = free_port()
        (directory / "dbd").mkdir()
        conf = directory / "dbd" / "slurmdbd.conf"   # slurmdbd reads it beside $SLURM_CONF
        conf.write_text("\n".join([
            "AuthType=auth/none", "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={self.port}", "SlurmUser=root",
            f"LogFile={directory / 'slurmdbd.log'}", f"PidFile={directory / 'slurmdbd.pid'}", "DebugLevel=info",
            "StorageType=accounting_storage/mysql", "StorageHost=localhost", "StorageUser=root",
            "StorageLoc=slurm_acct_db", ""]))
        conf.chmod(0o600)
        self.env = dict(os.environ, MYSQL_UNIX_PORT=str(db.socket))
        self.process = subprocess.Popen(["timeout", "-s", "KILL", "300", "slurmdbd", "-D"], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT,
                                        env=dict(self.env, SLURM_CONF=str(directory / "dbd" / "slurm.conf")))
        self.log = directory / "slurmdbd.log"

    def ready(self) -> bool:
        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0
        return wait_for(listening, self.process)

    def stop(self) -> str:
        return stop(self.process)

    def slurm_lines(self) -> tuple[str, ...]:
        """slurm.conf lines that send the controller's accounting to this daemon and enforce it."""
        return ("AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
                f"AccountingStoragePort={self.port}", "AccountingStorageEnforce=associations,limits,qos")


@contextlib.contextmanager
def accounting_daemons(directory: Path):
    """MariaDB and slurmdbd up in `directory`: yields (the slurmdbd, the list of daemons
    started, to which a test appends its own); stops every one of them at the end, last first."""
    started: list = []
    try:
        db = MariaDB(directory)
        started.append(db)
        assert db.ready(), (directory / "mysql.err").read_text()[-2000:]
        dbd = Slurmdbd(directory, db)
        started.append(dbd)
        assert dbd.ready(), dbd.log.read_text()[-2000:] if dbd.log.exists() else dbd.stop()
        yield dbd, started
    finally:
        for daemon in reversed(started):
            daemon.stop()


def wait_for_gpu_tres(env: dict) -> None:
    """Until slurmdbd lists the gres/gpu TRES, which slurmctld registers as it starts with
    AccountingStorageTRES=gres/gpu (the QOS limits of qos.sh name it)."""
    for _ in range(50):
        shown = subprocess.run(["sacctmgr", "-nP", "show", "tres", "format=Type,Name"], env=env,
                               capture_output=True, text=True, timeout=30).stdout
        if "gres|gpu" in shown.split():
            return
        time.sleep(0.2)


def have_accounting() -> bool:
    return all(shutil.which(tool) for tool in ("slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db"))
