"""`gclc lsp`: the language server on stdin/stdout, for editors. Registered with the CLI
through the `gclc.commands` entry point (pyproject.toml)."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def add(commands) -> None:
    lsp = commands.add_parser("lsp", help="run the GCL language server on stdin/stdout (for editors)")
    lsp.set_defaults(run=run)


# The largest message an editor sends is a whole file (design files are capped at 16 MiB,
# compiler/resolve.py) in JSON: a Content-Length beyond this is garbage or an attack.
MAX_MESSAGE_BYTES = 64 * 2**20
MAX_HEADER_BYTES = 64 * 2**10


class BoundedInput:
    """stdin for the server: a header line or a body over the limits ends the session with
    one line on stderr (exit 1) instead of reading until memory runs out."""

    def __init__(self, raw):
        self.raw, self.refused = raw, False

    def readline(self, limit: int = -1) -> bytes:
        line = self.raw.readline(MAX_HEADER_BYTES + 1)
        if len(line) > MAX_HEADER_BYTES:
            return self._refuse(f"a header line over {MAX_HEADER_BYTES:,} bytes")
        return line

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > MAX_MESSAGE_BYTES:
            return self._refuse(f"a message of {size:,} bytes (the most is {MAX_MESSAGE_BYTES:,})")
        return self.raw.read(size)

    def _refuse(self, what: str) -> bytes:
        self.refused = True
        print(f"gclc lsp: the client sent {what}; stopping", file=sys.stderr, flush=True)
        return b""


class _OneLine(logging.Filter):
    """pygls logs a client's malformed message with its traceback: keep the one line that
    says what was wrong (the editor's log is read by people, not debuggers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {error}"
            record.args, record.exc_info, record.exc_text = (), None, None
        return True


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
