"""gclc — a compiler for GPU clusters."""

__version__ = "0.1.0"


def _quiet_interrupt_at_startup() -> None:
    """When this process is the `gclc` command (the console script, or `python -m gclc`),
    Ctrl-C before the command line has loaded exits 130 without a traceback: the window
    between the interpreter's start and `cli/entry.py` is this package's import. A library
    import (Jupyter, tests) leaves the signal alone."""
    import sys

    first = sys.argv[0] if sys.argv else ""
    if first.rsplit("/", 1)[-1] not in ("gclc", "-m"):
        return
    import _signal  # the C module (`signal` imports enum: slow enough to be interrupted itself)
    import os

    _signal.signal(_signal.SIGINT, lambda signum, frame: os._exit(130))


_quiet_interrupt_at_startup()
