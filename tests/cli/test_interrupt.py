"""Ctrl-C (issue 12, class 4): a real SIGINT at start-up, inside the lazy imports a command
makes (cvxpy and the SciPy under it for the power-bound plan's program, pyarrow for a sweep
table) and in the middle of the work ends the command quietly with 130: no traceback, no
"KeyboardInterrupt", no "Exception ignored", no temporary file left behind.

Out of gclc's reach, and so not asserted: a SIGINT that lands while the interpreter is
still importing its own `site` module, before the first line of gclc runs. CPython then
prints "Fatal Python error: init_import_site" itself (exit 1 or -2); no Python code can
install a handler that early. test_sigint_at_any_moment_of_a_run_is_130_or_done counts
those landings apart (by that message) and requires most landings to be after start-up."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
QUIET = ("Traceback", "KeyboardInterrupt", "Exception ignored", "internal error")
CASE_SECONDS = 120

# A launcher that sends this process a real SIGINT the moment `module` starts to load,
# then runs the console script as the `gclc` command (argv[0] = gclc).
LAUNCHER = """
import os, signal, sys
module = sys.argv[1]
class Trigger:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Trigger())
sys.argv = ["gclc", *sys.argv[2:]]
from gclc.cli.entry import console
console()
"""


def _quiet(err: str) -> bool:
    return not any(word in err for word in QUIET)


@pytest.mark.parametrize("module, args", [
    ("cvxpy", ["plan", "power.gcl"]),                  # the power-bound plan's convex program
    ("scipy.stats", ["plan", "power.gcl"]),            # deep inside cvxpy's own imports
    ("gclc.solver.train.plan", ["plan", "hetero.gcl"]),      # the command's own layers
    ("gclc.solver.split.search", ["plan", "hetero.gcl"]),  # the heterogeneous split's search
])
def test_sigint_inside_a_lazy_import_exits_130_quietly(tmp_path, module, args):
    (tmp_path / "hetero.gcl").write_text((DATA / "hetero.gcl").read_text())
    (tmp_path / "power.gcl").write_text(POWER_BOUND)
    done = subprocess.run([sys.executable, "-c", LAUNCHER, module, *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=CASE_SECONDS)
    assert done.returncode == 130 and _quiet(done.stderr), (done.returncode, done.stderr[-2000:])
    assert done.stdout == ""


@pytest.mark.parametrize("module", ["pyarrow"])
def test_sigint_inside_a_sweeps_late_imports_leaves_no_partial_output(tmp_path, module):
    source = tmp_path / "in.gcl"
    source.write_text(SWEPT)
    done = subprocess.run([sys.executable, "-c", LAUNCHER, module, "sweep", str(source), "--in-process",
                           "--vary", "nodes=1,2", "-o", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=CASE_SECONDS)
    assert done.returncode == 130 and _quiet(done.stderr), (done.returncode, done.stderr[-2000:])
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob(".*.tmp*"))


# One DGX A100 under a 5 kW budget its 8 GPUs cannot meet: `plan` solves the power plan (cvxpy).
POWER_BOUND = """import "std/nvidia"
cluster C {
  units    = 1 x DGX_A100
  scaleout = HDR_FatTree
}
model M {
  arch = dense  layers = 8  hidden = 1024  heads = 8  ffn = 4096  vocab = 32000  seq = 1024
}
train t {
  model = M  on = C  tokens = 1 B  batch = 32  precision = bf16
  subject to { power <= 5 kW }
}
"""

SWEPT = """import "std/nvidia"
param nodes = 1
cluster C {
  units    = nodes x DGX_A100
  scaleout = HDR_FatTree
}
model M {
  arch = dense  layers = 8  hidden = 1024  heads = 8  ffn = 4096  vocab = 32000  seq = 1024
}
train t {
  model = M  on = C  tokens = 1 B  batch = 32  precision = bf16
}
"""


def _interpreter_start() -> float:
    """Seconds the interpreter takes to start (site included) on this machine right now."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return max(times)


def test_sigint_at_any_moment_of_a_run_is_130_or_done(tmp_path):
    """The console script itself, interrupted at spread-out moments from just after the
    interpreter's start to the end of the run (imports, planning, the split). A signal
    that lands while CPython still imports `site` (before any gclc code: see the module's
    note) is counted apart as out of our control, and at most two of the six may land there."""
    gclc = Path(sys.executable).with_name("gclc")
    if not gclc.exists():
        pytest.skip("the console script is not installed beside this Python")
    (tmp_path / "hetero.gcl").write_text((DATA / "hetero.gcl").read_text())
    start = _interpreter_start()
    delays = [start * 1.5, start * 2.5, 0.5, 1.0, 2.0, 3.5]
    landed, before_gclc = 0, []
    for delay in delays:
        process = subprocess.Popen([str(gclc), "plan", "hetero.gcl", "--json"], cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=CASE_SECONDS)
        # CPython's own start-up, out of gclc's control, not asserted: a signal inside its
        # `site` import, or one so early (the loaded machine's exec) that CPython had not yet
        # installed its SIGINT handler and the default action ended the process silently
        if "init_import_site" in err or (process.returncode == -signal.SIGINT and err == ""):
            before_gclc.append(delay)
            continue
        landed += 1
        assert process.returncode in (0, 130) and _quiet(err), (delay, process.returncode, err[-2000:])
        if process.returncode == 130:
            assert out == "", "an interrupted plan printed part of its JSON"
    assert landed >= len(delays) - 2, f"{len(before_gclc)} signals landed in CPython's `site` import: {before_gclc}"
