"""`-o` and `fmt --write` targets (issue 12, class 1; issue 30, item 4): a device, FIFO or
symlink is never replaced; a regular file is replaced atomically keeping mode and owner; a
hard-linked, read-only or input file is refused. Real files, FIFOs and /dev/null: nothing
here is mocked."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from gclc.cli.main import main
from gclc.cli.output import OutputRefused, write_atomic
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "a100_cluster.gcl"


def test_dev_null_is_written_through_not_replaced():
    before = os.stat(os.devnull)
    write_atomic(os.devnull, "x" * 100)
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_compile_to_dev_null_keeps_the_device(capsys):
    before = os.stat(os.devnull)
    assert main(["compile", str(EXAMPLE), "-o", os.devnull]) == 0
    assert os.stat(os.devnull).st_ino == before.st_ino and stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_fifo_with_a_reader_receives_the_bytes(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    for _ in range(200):  # wait until the reader has opened its end
        try:
            write_atomic(fifo, "hello")
            break
        except OutputRefused:
            threading.Event().wait(0.01)
    reader.join(5)
    assert got == [b"hello"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_fifo_without_a_reader_is_refused_not_a_hang(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["compile", str(EXAMPLE), "-o", str(fifo)]) == 1
    assert "no process is reading" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_symlink_is_followed_to_its_target(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to("made.json")
    write_atomic(link, "new")
    assert link.is_symlink() and (tmp_path / "made.json").read_text() == "new"


@given(st.sampled_from([0o600, 0o640, 0o644, 0o664, 0o755, 0o700]))
def test_replacement_keeps_the_mode(mode):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.json"
        path.write_text("old")
        os.chmod(path, mode)
        write_atomic(path, "new")
        assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == mode


def test_a_hard_linked_target_is_refused_and_left_whole(tmp_path):
    """Rewritten in place it was torn by a kill or a full disk; replaced, the other name would
    keep the old contents: refused, with the reason."""
    first = tmp_path / "a.json"
    first.write_text("old contents\n")
    second = tmp_path / "b.json"
    os.link(first, second)
    with pytest.raises(OutputRefused, match="2 names"):
        write_atomic(first, "new\n")
    assert second.read_text() == first.read_text() == "old contents\n" and os.stat(first).st_nlink == 2


def test_read_only_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "ro.json"
    path.write_text("old")
    os.chmod(path, 0o444)
    with pytest.raises(OutputRefused, match="read-only"):
        write_atomic(path, "new")
    assert path.read_text() == "old"


def test_fmt_write_keeps_mode_and_refuses_read_only_and_hard_linked(tmp_path, capsys):
    source = tmp_path / "f.gcl"
    source.write_text("param   racks =  4\n")
    os.chmod(source, 0o640)
    assert main(["fmt", "--write", str(source)]) == 0
    assert source.read_text() == "param racks = 4\n" and stat.S_IMODE(os.stat(source).st_mode) == 0o640
    locked = tmp_path / "locked.gcl"
    locked.write_text("param   racks =  4\n")
    os.chmod(locked, 0o444)
    assert main(["fmt", "--write", str(locked)]) == 1
    assert "read-only" in capsys.readouterr().err and locked.read_text() == "param   racks =  4\n"
    twin = tmp_path / "twin.gcl"
    source.write_text("param   racks =  4\n")
    os.link(source, twin)
    assert main(["fmt", "--write", str(source)]) == 1
    assert "hard links" in capsys.readouterr().err and twin.read_text() == "param   racks =  4\n"


def test_no_temporary_file_is_left_behind(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(path, "x")
    write_atomic(path, "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


# ----------------------------------------------------------------- issue 30: nothing a run read is written

SERVE_TRACE = "arrival_s,prompt,output\n0,100,10\n"


@pytest.fixture
def imported(tmp_path):
    """A design that imports `part.gcl` and reads the trace `t.csv`."""
    (tmp_path / "part.gcl").write_text("param racks = 4\n")
    (tmp_path / "t.csv").write_text(SERVE_TRACE)
    text = (ROOT / "tests" / "cli" / "test_hostile_round3.py").read_text()
    serve = text[text.index('SERVE = """\\\n') + 13:text.index('"""\nSHARED')]
    (tmp_path / "d.gcl").write_text('import "part.gcl"\n' + serve)
    return tmp_path


@pytest.mark.parametrize("name", ["part.gcl", "t.csv", "link-to-part.gcl"])
def test_an_output_onto_a_file_the_run_read_is_refused(imported, capsys, name):
    """`-o` naming a file the design imports (or its trace, or a symlink to one) overwrote it."""
    (imported / "link-to-part.gcl").symlink_to("part.gcl")
    before = {p.name: p.read_bytes() for p in imported.iterdir() if p.is_file()}
    assert main(["compile", str(imported / "d.gcl"), "-o", str(imported / name)]) == 1
    assert "this run read it" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in imported.iterdir() if p.is_file()} == before
    assert not [p for p in imported.iterdir() if p.name.endswith(".tmp")]


def test_a_temporary_file_left_by_a_kill_is_removed_by_the_next_write(tmp_path):
    out = tmp_path / "out.json"
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal
from gclc.compiler.writer import AtomicFile
with AtomicFile({str(out)!r}) as handle:
    handle.write(b"half")
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""], timeout=60)
    assert killed.returncode == -signal.SIGKILL
    [stale] = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert stale.name.startswith(".out.json.gclc-") and not out.exists()
    write_atomic(out, "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"] and out.read_text() == "whole"


def test_a_live_writers_temporary_file_is_left_alone(tmp_path):
    out = tmp_path / "out.json"
    mine = tmp_path / f".out.json.gclc-{os.getpid()}-abc.tmp"   # this process is alive
    mine.write_text("in progress")
    write_atomic(out, "x")
    assert mine.exists() and out.read_text() == "x"


def test_sigterm_mid_write_removes_the_temporary_file(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, "-c", f"""
import os, signal, sys
from gclc.cli import entry
from gclc.compiler.writer import AtomicFile
signal.signal(signal.SIGTERM, entry._terminated)
with AtomicFile({str(out)!r}) as handle:
    handle.write(b"half")
    os.kill(os.getpid(), signal.SIGTERM)
"""], timeout=60)
    assert done.returncode == 143 and list(tmp_path.iterdir()) == []


def test_a_full_disk_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    """A stub for a full disk (`FullDisk`): the temporary file's write fails with ENOSPC."""
    import errno

    from gclc.compiler import writer

    out = tmp_path / "out.json"
    out.write_text("old")

    class FullDisk:
        def __init__(self, path, mode):
            self.file = open(path, mode)

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.file, name)
    monkeypatch.setattr(writer, "open", FullDisk, raising=False)
    with pytest.raises(OSError, match="No space"):
        write_atomic(out, "new")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"] and out.read_text() == "old"


def test_a_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(OutputRefused, match="socket"):
            write_atomic(path, "x")
    finally:
        server.close()


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["check", "--help"]])
def test_help_and_version_into_a_full_device_exit_non_zero(argv):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gclc", *argv], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    assert done.returncode == 1 and "No space" in done.stderr and "Traceback" not in done.stderr
