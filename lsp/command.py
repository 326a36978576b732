"""`gclc lsp`: the language server on stdin/stdout, for editors. Registered with the CLI
through the `gclc.commands` entry point (pyproject.toml)."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys


def add(commands) -> None:
    lsp = commands.add_parser("lsp", help="run the GCL language server on stdin/stdout (for editors)")
    lsp.set_defaults(run=run)


# The largest message an editor sends is a whole file (a design and its imports hold at most
# 1 MiB, compiler/files.py) in JSON, escapes included: a Content-Length beyond this is garbage
# or an attack.
MAX_MESSAGE_BYTES = 16 * 2**20
MAX_HEADER_BYTES = 64 * 2**10
# A Content-Length header anywhere at the end of a line, in any case: pygls takes only an exact
# `Content-Length: N\r\n` line, and after one it cannot read, it takes the next message's body
# for a header and its header for part of that line, so it never answers again.
_LENGTH = re.compile(rb"content-length:[ \t]*([0-9]{1,12})[ \t]*\r?\n?\Z", re.IGNORECASE)


class BoundedInput:
    """stdin for the server: a header line or a body over the limits ends the session with
    one line on stderr (exit 1) instead of reading until memory runs out; a header the
    server would not read is mended, so that it finds the next message (resynchronizes)."""

    def __init__(self, raw):
        self.raw, self.refused = raw, False

    def readline(self, limit: int = -1) -> bytes:
        line = self.raw.readline(MAX_HEADER_BYTES + 1)
        if len(line) > MAX_HEADER_BYTES:
            return self._refuse(f"a header line over {MAX_HEADER_BYTES:,} bytes")
        found = _LENGTH.search(line)
        mended = b"Content-Length: " + found[1] + b"\r\n" if found is not None else line
        if mended != line:
            skipped = found.start()
            if skipped:
                print(f"gclc lsp: skipped {skipped:,} bytes that were not a message (after a header without "
                      "a valid Content-Length)", file=sys.stderr, flush=True)
        return mended

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > MAX_MESSAGE_BYTES:
            return self._refuse(f"a message of {size:,} bytes (the most is {MAX_MESSAGE_BYTES:,})")
        return self.raw.read(size)

    def _refuse(self, what: str) -> bytes:
        self.refused = True
        print(f"gclc lsp: the client sent {what}; stopping", file=sys.stderr, flush=True)
        return b""


class _OneLine(logging.Filter):
    """pygls logs a client's malformed message with its traceback (as the record's exception,
    or formatted into its text): keep the line that says what was wrong and the exception's
    own line (the editor's log is read by people, not debuggers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text = f"{text}: {type(error).__name__}: {error}"
        if "\n" in text:
            first, *rest = text.splitlines()
            errors = [m[1] for m in map(_EXCEPTION_LINE.match, rest) if m]
            text = f"{first.rstrip(': ')}: {errors[-1]}" if errors else first
        record.msg, record.args, record.exc_info, record.exc_text = text, (), None, None
        return True


_EXCEPTION_LINE = re.compile(r"^[\s|+-]*((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Group)\b.*)$")


def run(args: argparse.Namespace) -> int:
    from .server import main

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_OneLine())
    handler.setLevel(logging.WARNING)
    logging.getLogger("pygls").addHandler(handler)
    stdin = BoundedInput(sys.stdin.buffer)
    status = main(stdin)
    if stdin.refused:
        status = 1
    if sys.stdout.closed:  # the server closes its channel on `exit`; the CLI's final flush must not fail
        sys.stdout = open(os.devnull, "w", encoding="utf-8")
    return status
