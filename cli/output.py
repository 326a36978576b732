"""Writing outputs: a reader never sees half a file, a failure leaves the old one, and a target
that is not a plain file is never replaced.

A regular file is replaced atomically (temporary file + rename) keeping its mode, owner and
group; a symlink is followed to the file it names; a device, FIFO or socket (`-o /dev/null`,
`-o /dev/stdout`, a named pipe) is written through, never replaced, which as root would swap
the machine's /dev/null for a plain file. A file with several hard links is rewritten in
place so every name keeps seeing it, and a read-only file is refused.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class OutputRefused(OSError):
    """A target gclc will not write (read-only, a directory); the message says why."""


def write_atomic(path: str | Path, data: str | bytes) -> None:
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(os.path.realpath(path))  # through any symlinks to what they name
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputRefused("it is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_through(target, payload)  # a device, FIFO or socket: never replace it
        return
    if info is not None and (not info.st_mode & 0o222 or not os.access(target, os.W_OK)):
        raise OutputRefused("it is read-only (make it writable first)")
    if info is not None and info.st_nlink > 1:
        _write_through(target, payload, truncate=True)  # keep the other names on the same file
        return
    _replace(target, payload, info)


def _write_through(target: Path, payload: bytes, truncate: bool = False) -> None:
    flags = os.O_WRONLY | (os.O_TRUNC if truncate else os.O_NONBLOCK)
    try:  # non-blocking open: a FIFO nobody reads is an error (ENXIO), not a hang
        fd = os.open(target, flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OutputRefused("it is a named pipe that no process is reading") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as handle:
        handle.write(payload)


def _replace(target: Path, payload: bytes, info: os.stat_result | None) -> None:
    import tempfile  # here: a command that prints to stdout does not load it (start-up time)

    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if info is not None:
            os.chmod(temp, info.st_mode & 0o7777)
            _keep_owner(temp, info)
        else:  # mkstemp creates 0600; a new output gets the usual mode under the umask
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _keep_owner(temp: str, info: os.stat_result) -> None:
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
