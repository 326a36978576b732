"""Reading every file gclc opens: a design and its imports, and the data files a design names
(CSV traces; calibration and measurement tables to come). One bounded reader for all of them:

- regular files only: a FIFO, device or socket is refused at once (it would block or never end);
- a size limit per file, and a total budget over a design and everything it imports;
- a line limit for data files, so that no cell can be longer than a line;
- UTF-8, a byte that is not is a located error;
- the path shown as the user gave it (a design-relative name joined to the design's name as
  written), never made absolute;
- every file read is remembered by identity (device and inode), so that no output of the run
  is written onto it (`cli/output.py`).
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from pathlib import Path, PurePath

import attrs

from ..dsl import codes
from ..dsl.diagnostics import Diagnostic
from ..dsl.source import SourceFile, Span, source_text
from ..dsl.records import define

# A design is text a person writes: the largest shipped example is 7 KB and the whole
# standard library 63 KB. 1 MiB for a design and all its imports together is 16x the
# library; checking 1 MiB of the slowest shapes measured (5,000 chips, 30,000 params, a list
# of 150,000 numbers, 40,000 unknown fields) takes about 10 s of CPU (docs/hostile-input.md),
# so no accepted design takes minutes. Reading no more keeps `/dev/zero` or a runaway
# generator from eating memory.
MAX_SOURCE_BYTES = 2**20
MAX_DESIGN_BYTES = 2**20
# A data file (a trace, a measurement log) is written by a program: 64 MiB bounds what is read
# into memory; a trace is held to 16 MiB (100,000 rows of a public cluster trace), and a line of
# one is under 200 characters, so 4,096 bounds every cell.
MAX_DATA_BYTES = 64 * 2**20
MAX_TRACE_BYTES = 16 * 2**20
MAX_LINE_CHARS = 4096

_READ: set[tuple[int, int]] = set()          # (device, inode) of every file this run read
_DATA: dict[str, SourceFile] = {}            # data files read, by the path shown: to quote them


def was_read(info: os.stat_result) -> bool:
    """Whether the file `info` describes is one this run read (by identity, not by name)."""
    return (info.st_dev, info.st_ino) in _READ


def forget_reads() -> None:
    """A new run (one CLI command) starts: nothing read yet."""
    _READ.clear()
    _DATA.clear()


def data_sources() -> dict[str, SourceFile]:
    """The data files read so far in this run, by the path shown, to quote in diagnostics."""
    return dict(_DATA)


@define
class Budget:
    """Bytes left for one design and everything it imports."""

    left: int = MAX_DESIGN_BYTES


def read_text(display: str, real: Path, at: Span | None, diagnostics: list[Diagnostic],
              sources: dict[str, SourceFile] | None = None, budget: Budget | None = None) -> str | None:
    """The text of the design file at `real` (named `display` in messages), or None after
    adding the located error (at the import `at`, else on the file) to `diagnostics`; a file
    that is not UTF-8 is added to `sources` with the bad byte replaced, so that the error can
    quote it. `budget`: what is left of the design's total, taken from."""
    limit = MAX_SOURCE_BYTES if budget is None else min(MAX_SOURCE_BYTES, budget.left)
    try:
        data = read_bounded(real, limit, _design_refusal(budget, limit))
    except OSError as error:
        found = codes.IO_ERROR.make(at, path=shown_path(display), reason=error.strerror or str(error),
                                    notes=unreadable_help(display, real, error))
        diagnostics.append(found if at is not None else attrs.evolve(found, file=display))
        return None
    if budget is not None:
        budget.left -= len(data)
    text, problem = _decoded(display, data, sources)
    if problem is not None:
        diagnostics.append(problem)
    return text


def _design_refusal(budget: Budget | None, limit: int) -> str:
    if budget is not None and limit < MAX_SOURCE_BYTES:
        return (f"the design and its imports may hold at most {MAX_DESIGN_BYTES:,} bytes together, and "
                f"{MAX_DESIGN_BYTES - budget.left:,} are read already")
    return f"a design file may be at most {MAX_SOURCE_BYTES:,} bytes"


def read_data(display: str, real: Path, at: Span | None, what: str = "trace", limit: int = MAX_DATA_BYTES,
              line_chars: int = MAX_LINE_CHARS) -> tuple[SourceFile | None, list[Diagnostic]]:
    """A data file a design names (at `at`): its text, or None and the located errors. A line
    over `line_chars` characters is an error at that line, so no cell of it can be longer."""
    try:
        data = read_bounded(real, limit, f"a {what} may be at most {limit:,} bytes")
    except OSError as error:
        found = codes.IO_ERROR.make(at, path=shown_path(display), reason=error.strerror or str(error),
                                    notes=unreadable_help(display, real, error, suffix=None))
        return None, [found if at is not None else attrs.evolve(found, file=display)]
    text, problem = _decoded(display, data, None)
    if problem is not None:
        return None, [problem]
    source = SourceFile(display, source_text(text))
    _DATA[display] = source
    long = next((n for n, line in enumerate(source.text.split("\n"), 1) if len(line) > line_chars), None)
    if long is not None:
        start = source.line_start(long) + line_chars
        return None, [codes.LONG_LINE.make(source.span(start, start + 1), what=what,
                                           length=len(source.line_text(long)), limit=line_chars,
                                           notes=[f"help: a {what} holds short rows of numbers and names; "
                                                  "is this the right file?"])]
    return source, []


def data_path(design: str, text: str) -> tuple[str, Path] | str:
    """(path shown, path to open) of the data file `text` named in the design file shown as
    `design`, or why it is refused: it must lie in the design's folder or below it, as
    imports do (a link that leads out counts as out)."""
    if not text or "\x00" in text:
        return "is not a file name"
    if PurePath(text).is_absolute():
        return "is an absolute path; name it relative to the design's folder"
    folder = Path(os.path.dirname(design) or ".")
    real = folder / text
    try:
        if not real.resolve().is_relative_to(folder.resolve()):
            return "leaves the design's folder"
    except (OSError, RuntimeError) as error:  # a name too long, a symlink loop
        return f"cannot be opened ({getattr(error, 'strerror', None) or error})"
    return os.path.normpath(os.path.join(os.path.dirname(design), text)), real


def shown_path(path: str) -> str:
    """A path as a message quotes it: a 4,000-character import is named by its ends."""
    return path if len(path) <= 120 else f"{path[:60]}…{path[-40:]} ({len(path):,} characters)"


def _decoded(display: str, data: bytes, sources: dict[str, SourceFile] | None) -> tuple[str | None, Diagnostic | None]:
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        source = SourceFile(display, source_text(data[: error.start].decode("utf-8")))
        if sources is not None:  # to quote the line; the bad byte shows as U+FFFD
            sources[display] = SourceFile(display, source_text(data.decode("utf-8", errors="replace")))
        return None, codes.ENCODING.make(source.span(len(source.text), len(source.text)),
                                         byte=f"0x{data[error.start]:02x}", offset=error.start)


def unreadable_help(display: str, real: Path, error: OSError, suffix: str | None = ".gcl") -> list[str]:
    """How to fix a file that cannot be read, by what went wrong."""
    if isinstance(error, Refused):
        return []  # the reason says it
    if error.errno == errno.ENAMETOOLONG:
        longest = max((len(part.encode("utf-8", "surrogateescape")) for part in real.parts), default=0)
        whole = len(str(real).encode("utf-8", "surrogateescape"))
        return [f"help: a file name may have at most 255 bytes and a path 4,096 (this path has {whole:,}, its "
                f"longest name {longest:,}); rename the file or shorten the path"]
    if error.errno == errno.ENOENT:
        folder = real.parent if str(real.parent) not in ("", ".") else Path(".")
        try:
            nearby = sorted(p.name for p in folder.iterdir() if suffix is None or p.suffix == suffix)
        except OSError:
            return [f"help: the folder `{folder}` does not exist either; check the path"]
        stems = {Path(name).stem if suffix else name: name for name in nearby}  # `.gcl` they all share
        close = [stems[c] for c in difflib.get_close_matches(real.stem if suffix else real.name, list(stems), n=1)]
        hint = f"; did you mean `{folder / close[0] if str(folder) != '.' else close[0]}`?" if close else ""
        where = "the current folder" if str(folder) == "." else f"`{folder}`"
        return [f"help: there is no `{real.name}` in {where}{hint}"]
    if error.errno in (errno.EACCES, errno.EPERM):
        return ["help: this user may not read the file; check its permissions (`ls -l`)"]
    return []


class Refused(OSError):
    """An input gclc will not read; the message is the reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.strerror = reason


def read_bounded(real: Path, limit: int, too_large: str) -> bytes:
    """The bytes of the regular file `real`; a FIFO, device, socket or directory (which would
    block or never end) and a file over `limit` bytes (`too_large` says why) are refused."""
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise Refused("it is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise Refused("it is not a regular file (a pipe, device or socket); save it to a file")
        if info.st_size > limit:
            raise Refused(f"it is {info.st_size:,} bytes; {too_large}")
        _READ.add((info.st_dev, info.st_ino))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:  # it grew while we read
            raise Refused(f"it is over {limit:,} bytes; {too_large}")
        return data
    finally:
        os.close(fd)
