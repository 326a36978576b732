"""What the CLI tests share: `gclc` run in-process, as a user would run it."""

from __future__ import annotations

import pytest

from gclc.cli.main import main


@pytest.fixture
def cli(capsys):
    """`cli(argv)`: the exit code of `gclc argv` (an argparse exit included) and what it printed,
    stdout then stderr."""
    def run(argv: list[str]) -> tuple[int, str]:
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        captured = capsys.readouterr()
        return code, captured.out + captured.err
    return run
