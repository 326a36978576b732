"""Writing outputs: the one writer is `compiler/writer.py` (atomic replacement, no input
overwritten, hard links and special files handled); the CLI names it from here."""

from __future__ import annotations

from ..compiler.writer import AtomicFile, OutputRefused, check_writable, write_atomic

__all__ = ["AtomicFile", "OutputRefused", "check_writable", "write_atomic"]
