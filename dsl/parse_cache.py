"""A per-user disk cache of the parsed standard library, so that every `gclc` process does
not parse `std/` again: lark takes most of a `gclc check` of a small design doing so.

Entries are keyed by a hash of the gclc version, the dsl package's code, the grammar, the
file's path and its text, so an edited file, grammar or parser is parsed afresh. Only `std/`
files are cached (they change with gclc, not with the user's work, so the cache stays small). The folder is the user's
own (`$GCLC_CACHE_DIR`, else `$XDG_CACHE_HOME/gclc`, else `~/.cache/gclc`), created with
mode 0700 and used only while no one else can write to it, because entries are pickles.
Anything unexpected (no home, a read-only disk, a damaged entry) parses as if there were
no cache; writes are atomic.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import stat
from pathlib import Path
from typing import Callable

from .. import __version__

CACHED_PREFIX = "std/"


def cache_dir() -> Path | None:
    override = os.environ.get("GCLC_CACHE_DIR")
    if override is not None:
        return Path(override) if override else None      # GCLC_CACHE_DIR= (empty): no cache
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gclc"


def _private(folder: Path) -> bool:
    """The folder exists (made if need be), is ours and no one else may write to it."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError:
        return False
    owner_ok = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return owner_ok and stat.S_ISDIR(info.st_mode) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@functools.cache
def _code() -> str:
    """A hash of the dsl package's source: an edited AST or transformer (a development
    install between versions) must not unpickle into objects of an older shape."""
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _key(text: str, path: str, grammar: str) -> str:
    digest = hashlib.sha256()
    for part in (__version__, _code(), grammar, path, text):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def cached_parse(text: str, path: str, grammar: str, parse: Callable[[], object]) -> object:
    """`parse()`'s module for `path` with `text`, from the cache when it holds one."""
    folder = cache_dir() if path.startswith(CACHED_PREFIX) else None
    if folder is None or not _private(folder):
        return parse()
    entry = folder / f"{_key(text, path, grammar)}.ast"
    try:
        with entry.open("rb") as handle:
            return pickle.load(handle)
    except FileNotFoundError:
        pass
    except Exception:  # a damaged or foreign entry: parse again and replace it  # noqa: BLE001
        pass
    module = parse()
    import tempfile  # here: a process that finds the entry does not load it (start-up time)

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tmp-", delete=False) as handle:
            pickle.dump(module, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(handle.name, entry)
    except OSError:
        try:
            os.unlink(handle.name)
        except (OSError, UnboundLocalError):
            pass
    return module
