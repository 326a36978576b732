"""The `gclc` console script. Ctrl-C while the heavy modules load (cvxpy, numpy: a second or
more) ends at once and quietly with 130: a KeyboardInterrupt raised inside the import machinery
can be swallowed ("Exception ignored in ...") and the command would run on and exit 0."""

from __future__ import annotations

import _signal  # the C module: `signal` imports enum, slow enough to be interrupted itself
import gc
import os
import sys

EXIT_INTERRUPTED = 130


def _interrupted_while_loading(signum, frame) -> None:
    """Ctrl-C while the command loads or after it ended: nothing to clean up, exit at once."""
    os._exit(EXIT_INTERRUPTED)


EXIT_TERMINATED = 143  # 128 + SIGTERM


def _terminated(signum, frame) -> None:
    """SIGTERM unwinds like an exception, so that a temporary output file is removed."""
    raise SystemExit(EXIT_TERMINATED)


def main() -> int:
    _signal.signal(_signal.SIGINT, _interrupted_while_loading)  # (gclc/__init__.py set it already as the command)
    # Loading makes tens of thousands of objects that live as long as the process and no
    # garbage, and a plan fills the model's memo tables with as many more: the collector
    # would scan them again and again (about a tenth of a plan's CPU). It is off while the
    # command loads, what loaded is frozen out of every later collection, and the youngest
    # generation is collected every 10,000 new objects rather than 700 (a plan makes few cycles).
    gc.disable()
    try:
        from .main import main as run
    finally:
        gc.freeze()
        gc.set_threshold(10_000)
        gc.enable()
    _signal.signal(_signal.SIGTERM, _terminated)  # `kill`, a CI timeout: clean up as for Ctrl-C
    try:  # from here KeyboardInterrupt: main cleans up (temporary files) and exits 130
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        return run()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:  # the command is over: a Ctrl-C now ends the process at once, quietly
        _signal.signal(_signal.SIGINT, _interrupted_while_loading)


def console() -> None:
    """`gclc` and `python -m gclc`: exit with main's status; a Ctrl-C as Python exits ends it
    with 130, quietly."""
    try:
        status = main()
    except KeyboardInterrupt:  # one that landed while the handlers changed hands
        status = EXIT_INTERRUPTED
    sys.exit(status)
