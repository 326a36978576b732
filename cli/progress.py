"""A progress line on stderr for work that takes more than a second (planning, drawing,
the report): the step's name and the seconds so far, redrawn in place and erased at the
end. Only on a terminal and without `--quiet`, so pipes, logs and tests see nothing."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from ..dsl.numbers import duration

DELAY_S = 1.0   # quicker work shows nothing
TICK_S = 0.25


@contextlib.contextmanager
def progress(what: str, enabled: bool | None = None):
    stream = sys.stderr
    if enabled is None:
        from .common import quiet

        enabled = not quiet() and bool(getattr(stream, "isatty", None) and stream.isatty())
    if not enabled:
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def show() -> None:
        if done.wait(DELAY_S):
            return
        while not done.is_set():
            stream.write(f"\r\x1b[K{what}… {duration(round(time.monotonic() - start))}")
            stream.flush()
            done.wait(TICK_S)
        stream.write("\r\x1b[K")
        stream.flush()

    thread = threading.Thread(target=show, name="gclc-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
