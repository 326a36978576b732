"""`gclc lsp`: the language server on stdin/stdout, for editors. Registered with the CLI
through the `gclc.commands` entry point (pyproject.toml)."""

from __future__ import annotations

import argparse
import os
import sys


def add(commands) -> None:
    lsp = commands.add_parser("lsp", help="run the GCL language server on stdin/stdout (for editors)")
    lsp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .server import main  # pygls loads only for this command

    status = main()
    if sys.stdout.closed:  # the server closes its channel on `exit`; the CLI's final flush must not fail
        sys.stdout = open(os.devnull, "w", encoding="utf-8")
    return status
