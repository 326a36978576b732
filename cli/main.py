"""The `gclc` command line: argument parsing and exit codes only; each command is a small
module of its own that calls the stages. Exit codes: 0 clean, 1 errors (also: the output could
not be written, stdout closed early as by `| head`, so a pipeline sees it), 2 usage, 3
infeasible, 130 interrupted (Ctrl-C), 70 an internal error (a bug: please report it)."""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..compiler.driver import EXIT_ERRORS, EXIT_OK, EXIT_USAGE
from ..compiler.files import forget_reads
from . import calibrate, check, compile, diff, explain, export, fmt, plan, probe, render, report, schedule, std, sweep
from .common import set_color

EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
COMMANDS = (check, compile, explain, plan, calibrate, probe, schedule, export, render, report, sweep, diff, fmt, std)


def main(argv: list[str] | None = None) -> int:
    forget_reads()  # a new run: no output may be written onto a file it reads (cli/output.py)
    _escape_unencodable()
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser(_named(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, a usage error: what argparse printed must arrive
        raise SystemExit(done.code if _flushed() else EXIT_ERRORS) from None
    except OSError as error:  # --help into a full disk (`/dev/full`): argparse would have said nothing
        _silence_stdout()
        print(f"gclc: cannot write the output: {error.strerror or error}", file=sys.stderr)
        raise SystemExit(EXIT_ERRORS) from None
    set_color(getattr(args, "color", None) or "auto", bool(getattr(args, "quiet", False)))
    if not getattr(args, "command", None) and not getattr(args, "list_codes", False):
        parser.print_help()
        return EXIT_USAGE
    try:
        status = _list_codes() if args.list_codes else args.run(args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
        return status
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): not a success a CI pipeline may trust
        _silence_stdout()
        return EXIT_ERRORS
    except OSError as error:  # the environment, not a bug: stdout on a full disk, an unreadable std file
        _silence_stdout()
        where = f" `{error.filename}`" if error.filename else ""
        print(f"gclc: cannot {'write the output' if where == '' else 'use'}{where}: {error.strerror or error}",
              file=sys.stderr)
        return EXIT_ERRORS
    except Exception as error:  # a bug: say so in one line rather than print a traceback
        print(f"gclc: internal error: {type(error).__name__}: {error} (please report this with the input file)",
              file=sys.stderr)
        return EXIT_INTERNAL


def _flushed() -> bool:
    """Whether stdout took what was printed (not a full disk, not `/dev/full`)."""
    try:
        sys.stdout.flush()
        return True
    except OSError as error:
        _silence_stdout()
        print(f"gclc: cannot write the output: {error.strerror or error}", file=sys.stderr)
        return False
    except ValueError:  # stdout closed
        return False


def _list_codes() -> int:
    from ..views.check import codes_listing

    print(codes_listing())
    return EXIT_OK


def _escape_unencodable() -> None:
    """A lone surrogate (from a file name or an argument) or a character the terminal's
    encoding lacks is written escaped (`\\udc80`), never a UnicodeEncodeError mid-output."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a text stream we may change
            pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (captured in tests)
        pass


def _named(argv: list[str]):
    """The built-in command `argv` names (its first word that is one), else None. Only its
    parser is built then: the others' choices import stages (numpy, the exporters) and the
    plug-ins' entry points cost start-up time that a `gclc check` should not pay."""
    by_name = {command.__name__.rsplit(".", 1)[-1]: command for command in COMMANDS}
    return next((by_name[word] for word in argv if word in by_name), None)


def _parser(only=None) -> argparse.ArgumentParser:
    """The argument parser: every command's, or only the command module `only`'s."""
    parser = _Parser(
        prog="gclc", description="gclc — a compiler for GPU clusters: check, compile, plan and draw .gcl designs.",
        epilog="Run `gclc COMMAND --help` for a command's options. Exit codes: 0 clean, 1 errors (or output "
               "not written, stdout closed early), 2 usage, 3 infeasible, 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"gclc {__version__}")
    parser.add_argument("--list-codes", action="store_true", help="list every diagnostic code and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (only,) if only is not None else COMMANDS + _plugins():
        command.add(commands)
    for sub in [parser, *commands.choices.values()]:  # before or after the command: `gclc check --color never`
        sub.add_argument("--color", choices=("auto", "always", "never"),
                         default=None if sub is parser else argparse.SUPPRESS,  # a command's default keeps the top's
                         help="colour diagnostics and GCL text: auto (a terminal, unless NO_COLOR is set), "
                              "always or never")
        sub.add_argument("-q", "--quiet", action="store_true", default=False if sub is parser else argparse.SUPPRESS,
                         help="print errors only: no warnings, no `ok` lines, no progress")
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that help and usage text that cannot be written (stdout on a
    full disk) is an error: argparse ignores it and exits 0."""

    def _print_message(self, message: str, file=None) -> None:
        if message:
            file = file or sys.stderr
            file.write(message)
            file.flush()


def _plugins() -> tuple:
    """Commands of packages beside the CLI (`gclc lsp`), found through the `gclc.commands`
    entry-point group, so that the CLI names no layer of its own rank."""
    from importlib.metadata import entry_points  # 0.1 s of start-up: only when every command is listed

    return tuple(point.load() for point in sorted(entry_points(group="gclc.commands"), key=lambda p: p.name))


if __name__ == "__main__":
    sys.exit(main())
