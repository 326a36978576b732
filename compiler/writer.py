"""The one output writer (every `-o`, `fmt --write`, an export's files, a sweep's table and
charts): a reader never sees half a file, a failure leaves the old one, and nothing a run read
is ever changed.

- A regular file is replaced atomically (a temporary file beside it, then a rename) keeping
  its mode, owner and group; a symlink is followed to the file it names.
- A file this run read (a design, an import, a trace: by device and inode, not by name, so a
  hard link or symlink to an input is caught too) is refused, unless it is the one file the
  command rewrites on purpose (`fmt --write`).
- A file with several hard links is refused: replacing it would leave the other names on the
  old contents, and rewriting it in place could leave it torn by a kill or a full disk.
- A character device or FIFO (`-o /dev/null`, `-o /dev/stdout`, a named pipe) is a stream, not
  stored contents to tear: it is written through, never replaced (as root that would swap the
  machine's /dev/null for a plain file); a FIFO nobody reads is refused, not waited on. A
  block device, socket or directory is refused, and so is a read-only file.
- The temporary file is named `.NAME.gclc-PID-XXXX.tmp`: removed on any error or Ctrl-C, and a
  stale one (its process gone: killed with SIGKILL, the machine reset) is removed by the next
  write beside it, when it is this user's.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .files import was_read

_TEMP_SUFFIX = ".tmp"


class OutputRefused(OSError):
    """A target gclc will not write; the message says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.strerror = reason


def write_atomic(path: str | Path, data: str | bytes, replaces: str | Path | None = None) -> None:
    """Write `data` to `path` as the module says. `replaces`: the input this write may
    rewrite (`fmt --write` of that file); every other file the run read is refused."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(os.path.realpath(path))  # through any symlinks to what they name
    info = _stat(target)
    if info is not None:
        _check_target(target, info, replaces)
        if not stat.S_ISREG(info.st_mode):
            _write_through(target, payload)  # a character device or a FIFO: a stream
            return
    with AtomicFile(target, replaces) as handle:
        handle.write(payload)


def check_writable(path: str | Path, replaces: str | Path | None = None) -> None:
    """Raise OutputRefused now when `write_atomic(path, ...)` would refuse: for a writer that
    streams (a sweep's table) before it starts."""
    target = Path(os.path.realpath(path))
    info = _stat(target)
    if info is not None:
        _check_target(target, info, replaces)


class AtomicFile:
    """A new file at `target` written through a temporary file beside it: `begin()` makes
    the temporary file (`temp`), `commit()` puts it in place whole, `discard()` removes it.
    As a context manager it yields the open file and commits when the block ends without an
    error (else discards). `replaces`: the input it may rewrite, as for `write_atomic`."""

    def __init__(self, target: str | Path, replaces: str | Path | None = None):
        self.target, self.replaces = Path(target), replaces
        self.temp: Path | None = None

    def begin(self) -> Path:
        remove_stale(self.target)
        import tempfile  # here: a command that prints to stdout does not load it (start-up time)

        fd, temp = tempfile.mkstemp(prefix=f".{self.target.name}.gclc-{os.getpid()}-", suffix=_TEMP_SUFFIX,
                                    dir=self.target.parent)
        os.close(fd)
        self.temp = Path(temp)
        return self.temp

    def commit(self) -> None:
        try:
            info = _stat(self.target)  # again: it may have appeared or changed while we wrote
            if info is not None:
                _check_target(self.target, info, self.replaces)
                os.chmod(self.temp, info.st_mode & 0o7777)
                _keep_owner(self.temp, info)
            else:  # mkstemp creates 0600; a new output gets the usual mode under the umask
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self.temp, 0o666 & ~umask)
            os.replace(self.temp, self.target)
        finally:
            self.discard()  # nothing left when the rename failed

    def discard(self) -> None:
        if self.temp is not None:
            self.temp.unlink(missing_ok=True)

    def __enter__(self):
        self._handle = open(self.begin(), "wb")
        return self._handle

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                self._handle.flush()
                os.fsync(self._handle.fileno())
            self._handle.close()
            if kind is None:
                self.commit()
        finally:
            self.discard()


def remove_stale(target: Path) -> list[Path]:
    """Remove this user's temporary files of `target` whose writing process is gone."""
    removed = []
    try:
        candidates = list(target.parent.glob(f".{_glob_escape(target.name)}.gclc-*{_TEMP_SUFFIX}"))
    except OSError:
        return removed
    for temp in candidates:
        pid = _pid_of(temp.name, target.name)
        try:
            if pid is None or _alive(pid) or temp.lstat().st_uid != os.getuid() or not temp.is_file():
                continue
            temp.unlink()
            removed.append(temp)
        except OSError:
            continue
    return removed


def _check_target(target: Path, info: os.stat_result, replaces) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise OutputRefused("it is a directory")
    if was_read(info) and not _same(info, replaces):
        raise OutputRefused("this run read it (a design, an import or a trace, perhaps under another name): "
                            "writing the output there would change an input; write elsewhere")
    if stat.S_ISBLK(info.st_mode):
        raise OutputRefused("it is a block device (a disk): gclc writes files and streams only")
    if stat.S_ISSOCK(info.st_mode):
        raise OutputRefused("it is a socket: write to a file, or to a named pipe or stdout")
    if not stat.S_ISREG(info.st_mode):
        return  # a character device or FIFO: written through
    if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise OutputRefused("it is read-only (make it writable first)")
    if info.st_nlink > 1:
        raise OutputRefused(f"it has {info.st_nlink} names (hard links): replacing it would leave the others on "
                            "the old contents, and rewriting it in place could tear it; write to a new name, or "
                            "remove the other links first")


def _same(info: os.stat_result, path: str | Path | None) -> bool:
    if path is None:
        return False
    other = _stat(Path(path))
    return other is not None and (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _write_through(target: Path, payload: bytes) -> None:
    try:  # non-blocking open: a FIFO nobody reads is an error (ENXIO), not a hang
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OutputRefused("it is a named pipe that no process is reading") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as handle:
        handle.write(payload)


def _keep_owner(temp: Path, info: os.stat_result) -> None:
    """The replacement keeps the old file's owner and group where we may set them."""
    current = os.stat(temp)
    if (current.st_uid, current.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.chown(temp, info.st_uid, info.st_gid)
    except PermissionError:  # not root: the group alone may still be ours to keep
        try:
            os.chown(temp, -1, info.st_gid)
        except PermissionError:
            pass


def _pid_of(name: str, target: str) -> int | None:
    rest = name[len(f".{target}.gclc-"):]
    pid = rest.split("-", 1)[0]
    return int(pid) if pid.isascii() and pid.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
