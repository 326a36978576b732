"""`-o` and `fmt --write` targets (issue 12, class 1): a device, FIFO or symlink is never
replaced; a regular file is replaced atomically keeping mode, owner and hard links; a
read-only file is refused. Real files, FIFOs and /dev/null: nothing here is mocked."""

from __future__ import annotations

import os
import stat
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


def test_hard_links_keep_sharing_the_file(tmp_path):
    first = tmp_path / "a.gcl"
    first.write_text("old contents\n")
    second = tmp_path / "b.gcl"
    os.link(first, second)
    write_atomic(first, "new\n")
    assert second.read_text() == "new\n" and os.stat(first).st_ino == os.stat(second).st_ino


def test_read_only_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "ro.json"
    path.write_text("old")
    os.chmod(path, 0o444)
    with pytest.raises(OutputRefused, match="read-only"):
        write_atomic(path, "new")
    assert path.read_text() == "old"


def test_fmt_write_keeps_mode_and_links_and_refuses_read_only(tmp_path, capsys):
    source = tmp_path / "f.gcl"
    source.write_text("param   racks =  4\n")
    os.chmod(source, 0o640)
    twin = tmp_path / "twin.gcl"
    os.link(source, twin)
    assert main(["fmt", "--write", str(source)]) == 0
    assert twin.read_text() == source.read_text() == "param racks = 4\n"
    assert stat.S_IMODE(os.stat(source).st_mode) == 0o640
    locked = tmp_path / "locked.gcl"
    locked.write_text("param   racks =  4\n")
    os.chmod(locked, 0o444)
    assert main(["fmt", "--write", str(locked)]) == 1
    assert "read-only" in capsys.readouterr().err and locked.read_text() == "param   racks =  4\n"


def test_no_temporary_file_is_left_behind(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(path, "x")
    write_atomic(path, "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
