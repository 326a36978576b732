"""Reading a design file: its bytes within bounds, decoded as UTF-8, or a located error
that says how to fix it (a missing file with the nearest name, a directory, a FIFO or device
that would block or never end, a file too large, a byte that is not UTF-8)."""

from __future__ import annotations

import difflib
import errno
import os
import stat
from pathlib import Path

import attrs

from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from ..dsl.source import SourceFile, Span, source_text


def read_text(display: str, real: Path, at: Span | None, diagnostics: list[Diagnostic],
              sources: dict[str, SourceFile] | None = None) -> str | None:
    """The text of the file at `real` (named `display` in messages), or None after adding the
    located error (at the import `at`, else on the file) to `diagnostics`; a file that is not
    UTF-8 is added to `sources` with the bad byte replaced, so that the error can quote it."""
    try:
        data = _read_bounded(real)
    except OSError as error:
        found = codes.IO_ERROR.make(at, path=display, reason=error.strerror or str(error),
                                    notes=unreadable_help(display, real, error))
        diagnostics.append(found if at is not None else attrs.evolve(found, file=display))
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        source = SourceFile(display, source_text(data[: error.start].decode("utf-8")))
        if sources is not None:  # to quote the line; the bad byte shows as U+FFFD
            sources[display] = SourceFile(display, source_text(data.decode("utf-8", errors="replace")))
        diagnostics.append(codes.ENCODING.make(source.span(len(source.text), len(source.text)),
                                               byte=f"0x{data[error.start]:02x}", offset=error.start))
        return None


def unreadable_help(display: str, real: Path, error: OSError) -> list[str]:
    """How to fix a file that cannot be read, by what went wrong."""
    if isinstance(error, _Refused):
        return []  # the reason says it
    if error.errno == errno.ENAMETOOLONG:
        longest = max((len(part.encode("utf-8", "surrogateescape")) for part in real.parts), default=0)
        return [f"help: a file name may have at most 255 bytes and a path 4,096 (the longest name here has "
                f"{longest:,}); rename the file or shorten the path"]
    if error.errno == errno.ENOENT:
        folder = real.parent if str(real.parent) not in ("", ".") else Path(".")
        try:
            nearby = sorted(p.name for p in folder.iterdir() if p.suffix == ".gcl")
        except OSError:
            return [f"help: the folder `{folder}` does not exist either; check the path"]
        stems = {Path(name).stem: name for name in nearby}  # compare names, not the `.gcl` they share
        close = [stems[c] for c in difflib.get_close_matches(real.stem, list(stems), n=1)]
        hint = f"; did you mean `{folder / close[0] if str(folder) != '.' else close[0]}`?" if close else ""
        where = "the current folder" if str(folder) == "." else f"`{folder}`"
        return [f"help: there is no `{real.name}` in {where}{hint}"]
    if error.errno in (errno.EACCES, errno.EPERM):
        return ["help: this user may not read the file; check its permissions (`ls -l`)"]
    return []


# A design is text a person writes: 16 MiB is ~100x the largest real one, and reading no
# more keeps `/dev/zero` or a runaway generator from eating the machine's memory.
MAX_SOURCE_BYTES = 16 * 2**20


class _Refused(OSError):
    """An input gclc will not read; the message is the reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.strerror = reason


def _read_bounded(real: Path) -> bytes:
    """The file's bytes; a FIFO, device or directory (which would block or never end) and a
    file over MAX_SOURCE_BYTES are refused with the reason."""
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _Refused("it is a directory, not a .gcl file")
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("it is not a regular file (a pipe, device or socket); save the design to a file")
        if info.st_size > MAX_SOURCE_BYTES:
            raise _Refused(f"it is {info.st_size:,} bytes; a design may be at most {MAX_SOURCE_BYTES:,}")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:  # it grew while we read
            raise _Refused(f"it is over {MAX_SOURCE_BYTES:,} bytes, the most a design may be")
        return data
    finally:
        os.close(fd)
