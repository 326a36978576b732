"""`gclc check`'s report of one or more files: diagnostics as text or JSON."""

from __future__ import annotations

import json

from ..dsl import codes
from ..dsl.diagnostics import render_all, to_json


def check_report(results, paths: list[str], fmt: str) -> str | None:
    """The diagnostics of `results` (one per path), or None when there are none to print
    (the CLI says `FILE: ok` for those, on stdout)."""
    reports = []
    for path, result in zip(paths, results):
        if fmt == "json":
            reports.append(to_json(result.diagnostics))
        elif result.diagnostics:
            reports.append(render_all(result.diagnostics, result.sources))
    if fmt == "json":  # one file: its list; several: an object keyed by file, in the order given
        if len(paths) == 1:
            return reports[0]
        return "{\n" + ",\n".join(f"{json.dumps(path)}: {report}" for path, report in zip(paths, reports)) + "\n}"
    return "\n\n".join(reports) if reports else None


def codes_listing() -> str:
    """`gclc --list-codes`: every diagnostic code with its severity and description."""
    return "\n".join(f"{code.name:22} {code.severity.value:8} {code.description}" for code in codes.REGISTRY.values())
