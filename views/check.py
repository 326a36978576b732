"""`gclc check`'s report of one or more files: diagnostics as text or JSON."""

from __future__ import annotations

from ..dsl import codes
from ..dsl.diagnostics import render_all, to_json


def check_report(results, paths: list[str], fmt: str, interactive: bool) -> str | None:
    """The report of `results` (one per path), or None when there is nothing to print."""
    reports = []
    for path, result in zip(paths, results):
        if fmt == "json":
            reports.append(to_json(result.diagnostics))
        elif result.diagnostics:
            reports.append(render_all(result.diagnostics, result.sources))
        elif len(paths) > 1 or interactive:
            reports.append(f"{path}: ok")
    if fmt == "json":
        return reports[0] if len(paths) == 1 else "[" + ",\n".join(reports) + "]"
    return "\n\n".join(reports) if reports else None


def codes_listing() -> str:
    """`gclc --list-codes`: every diagnostic code with its severity and description."""
    return "\n".join(f"{code.name:22} {code.severity.value:8} {code.description}" for code in codes.REGISTRY.values())
