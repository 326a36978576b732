"""Stage sequencing: read -> parse -> resolve -> check. The only place that turns
diagnostics into exit codes."""

from __future__ import annotations

import attrs

from ..dsl.source import SourceFile
from .check import check_program
from .files import data_sources
from .design import Design
from ..dsl.diagnostics import Diagnostic, has_errors, sort_unique
from .groups import group_checks
from .lower import lower_cluster
from .resolve import load, load_again
from .rules.job import job_precision
from .rules.rl import rl_precision
from .sanity import sanity
from .limits import job_limit_problems
from .rules.train import train_pin_problems
from .settings import SETTINGS_SOURCE, parse_settings, settings_source
from ..dsl.records import frozen

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INFEASIBLE = 0, 1, 2, 3


@frozen
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


def check_file(path: str, settings: list[str] | dict[str, str] | None = None, text: str | None = None,
               again: bool = False) -> Result:
    """Parse, resolve and check `path` (or `text` standing for it) with `--set` overrides.
    `again`: the design was checked whole before (a sweep's next point): reuse its load
    when no file changed and check only what the root file declares and uses."""
    parsed, problems = _settings(settings)
    program = load_again(path) if again and text is None else load(path, text)
    if problems:
        program.sources[SETTINGS_SOURCE] = settings_source(list(settings or []))
        design, diagnostics = None, sort_unique(program.diagnostics + problems)
    else:
        design, diagnostics = check_program(program, parsed, reachable=again)
    if design is not None and not has_errors(diagnostics):
        diagnostics = sort_unique(diagnostics + tuple(d for job in design.entities if job.kind in ("train", "serve")
                                                      for d in job_precision(job))
                                   + tuple(d for job in design.entities if job.kind == "rl" for d in rl_precision(job)))
    if design is not None:
        diagnostics = sort_unique(diagnostics + tuple(_cluster_checks(design)) + tuple(job_limit_problems(design))
                                   + tuple(train_pin_problems(design)))
        design = None if has_errors(diagnostics) else design
    return Result(design, diagnostics, dict(program.sources) | data_sources())  # a trace's rows are quoted too


def _cluster_checks(design: Design) -> list[Diagnostic]:
    """Lower each cluster of the root file and run the design-level checks on it."""
    found: list[Diagnostic] = []
    graphs: dict[int, object] = {}

    def lowered(cluster):
        if id(cluster) not in graphs:
            graphs[id(cluster)] = lower_cluster(cluster)
        return graphs[id(cluster)]
    for cluster in design.local():
        if cluster.kind == "cluster":
            found += sanity(cluster, lowered(cluster))
    found += group_checks(design, lowered)
    return found


def check_text(text: str, path: str = "<string>", settings: list[str] | dict[str, str] | None = None) -> Result:
    return check_file(path, settings, text)


def _settings(settings: list[str] | dict[str, str] | None) -> tuple[dict[str, str], list[Diagnostic]]:
    if settings is None:
        return {}, []
    if isinstance(settings, dict):
        return dict(settings), []
    return parse_settings(list(settings))
