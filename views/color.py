"""Colour for terminals: rendered diagnostics painted by their parts, GCL text highlighted
with the project's Pygments lexer, `gclc fmt --diff`'s unified diff. Callers decide whether
colour is wanted (`--color`, `NO_COLOR`, a terminal); these functions only paint."""

from __future__ import annotations

import re

RESET = "\x1b[0m"
BOLD, RED, YELLOW, BLUE, CYAN, GREEN = "\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[34m", "\x1b[36m", "\x1b[32m"
_SEVERITY = {"error": RED, "warning": YELLOW, "note": CYAN}
_HEADLINE = re.compile(r"^(?P<where>\S.*?: )?(?P<severity>error|warning|note)(?P<code>\[[a-z-]+\]): (?P<summary>.*)$")
_UNDERLINE = re.compile(r"^(?P<gutter>\s*\d*\s*\| )(?P<pad>\s*)(?P<mark>\^+|-+)(?P<rest>.*)$")
_NOTE = re.compile(r"^(?P<gutter>\s*= )(?P<kind>help|note)?(?P<rest>.*)$")
_TOTAL = re.compile(r"^\d+ errors?, \d+ warnings?$")


def paint_diagnostics(text: str) -> str:
    """`render_all`'s text with ANSI colours: severity and code, the marks, help notes."""
    return "\n".join(_paint_line(line) for line in text.split("\n"))


def _paint_line(line: str) -> str:
    head = _HEADLINE.match(line)
    if head:
        colour = _SEVERITY[head["severity"]]
        return (f"{BOLD}{head['where'] or ''}{RESET}{BOLD}{colour}{head['severity']}{head['code']}{RESET}"
                f"{BOLD}: {head['summary']}{RESET}")
    mark = _UNDERLINE.match(line)
    if mark:
        colour = RED if mark["mark"].startswith("^") else BLUE
        return f"{BLUE}{mark['gutter']}{RESET}{mark['pad']}{BOLD}{colour}{mark['mark']}{mark['rest']}{RESET}"
    note = _NOTE.match(line)
    if note and note["kind"]:
        return f"{BLUE}{note['gutter']}{RESET}{BOLD}{CYAN}{note['kind']}{RESET}{note['rest']}"
    if _TOTAL.match(line):
        return f"{BOLD}{line}{RESET}"
    if re.match(r"^\s*\d*\s*\|", line) or re.match(r"^\s*-->", line):
        gutter, _, rest = line.partition("|")
        return f"{BLUE}{gutter}|{RESET}{rest}" if "|" in line else f"{BLUE}{line}{RESET}"
    return line


def paint_gcl(text: str) -> str:
    """GCL text highlighted for a terminal by the `gcl` Pygments lexer."""
    from pygments import highlight
    from pygments.formatters import TerminalFormatter

    from ..dsl.highlight import GclLexer

    painted = highlight(text, GclLexer(), TerminalFormatter())
    return painted if text.endswith("\n") else painted.rstrip("\n")


def strip(text: str) -> str:
    """`text` without ANSI colour codes (what a test compares)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def unified_diff(path: str, before: str, after: str, colour: bool = False) -> str:
    """`diff -u` of a file and its canonical form, its added, removed and hunk lines coloured
    with `colour`."""
    import difflib

    lines = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                      f"{path}", f"{path} (formatted)"))
    lines = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]
    if not colour:
        return "".join(lines)
    paint = {"+": GREEN, "-": RED, "@": BLUE}
    return "".join(f"{paint[line[0]]}{line.rstrip(chr(10))}{RESET}\n" if line[:1] in paint and not line.startswith(("+++", "---"))
                   else line for line in lines)
