"""Stage sequencing: read -> parse -> resolve -> check. The only place that turns
diagnostics into exit codes."""

from __future__ import annotations

import attrs

from ..dsl.source import SourceFile
from .check import check_program
from .design import Design
from ..dsl.diagnostics import Diagnostic, has_errors, sort_unique
from .lower import lower_cluster
from .resolve import load
from .sanity import sanity
from .limits import job_limit_problems
from .settings import SETTINGS_SOURCE, parse_settings, settings_source

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INFEASIBLE = 0, 1, 2, 3


@attrs.frozen
class Result:
    """A checked design (None on errors), every diagnostic, and the sources to quote them."""

    design: Design | None
    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, SourceFile] = attrs.field(eq=False, repr=False)

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_ERRORS


def check_file(path: str, settings: list[str] | dict[str, str] | None = None, text: str | None = None) -> Result:
    """Parse, resolve and check `path` (or `text` standing for it) with `--set` overrides."""
    parsed, problems = _settings(settings)
    program = load(path, text)
    if problems:
        program.sources[SETTINGS_SOURCE] = settings_source(list(settings or []))
        design, diagnostics = None, sort_unique(program.diagnostics + problems)
    else:
        design, diagnostics = check_program(program, parsed)
    if design is not None:
        diagnostics = sort_unique(diagnostics + tuple(_cluster_checks(design)) + tuple(job_limit_problems(design)))
        design = None if has_errors(diagnostics) else design
    return Result(design, diagnostics, dict(program.sources))


def _cluster_checks(design: Design) -> list[Diagnostic]:
    """Lower each cluster of the root file and run the design-level checks on it."""
    found: list[Diagnostic] = []
    for cluster in design.local():
        if cluster.kind == "cluster":
            found += sanity(cluster, lower_cluster(cluster))
    return found


def check_text(text: str, path: str = "<string>", settings: list[str] | dict[str, str] | None = None) -> Result:
    return check_file(path, settings, text)


def _settings(settings: list[str] | dict[str, str] | None) -> tuple[dict[str, str], list[Diagnostic]]:
    if settings is None:
        return {}, []
    if isinstance(settings, dict):
        return dict(settings), []
    return parse_settings(list(settings))
