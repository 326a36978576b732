"""One-line helpers for properties: compile, lower, find the job of and plan a design
given as a generated design, a spec, a path or GCL text."""

from __future__ import annotations

import os
from typing import Any, Mapping


from ..compiler.design import Design
from ..compiler.driver import Result
from ..compiler.ir import ClusterGraph
from .gcl_tree import _Renders
from .generated import GeneratedDesign, _require, _settings




def _source(source: Any, settings: Mapping[str, Any]) -> GeneratedDesign:
    """A generated design, spec, path or GCL text, with extra `--set` settings."""
    if isinstance(source, GeneratedDesign):
        base = source
    elif isinstance(source, _Renders):
        base = GeneratedDesign.from_spec(source)
    elif isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and "{" not in source
                                              and source.strip().endswith(".gcl")):
        base = GeneratedDesign.from_file(source)
    elif isinstance(source, str):
        base = GeneratedDesign(source)
    else:
        raise TypeError(f"expected a generated design, a spec, a path or GCL text, not {type(source).__name__}")
    if not settings:
        return base
    return GeneratedDesign(base.text, base.path, {**base.settings, **_settings(settings)}, base.spec)


def check(source: Any, **settings: Any) -> Result:
    """Check without raising: the `Result` with `.design` (None on errors) and `.diagnostics`."""
    return _source(source, settings).result




def compile_design(source: Any, *, strict: bool = False, **settings: Any) -> Design:
    """The checked `Design` of a generated design, spec, path or text (`**settings` are
    `--set` overrides). Raises `AssertionError` showing every diagnostic and the text when
    there are errors (with `strict=True`, also on warnings)."""
    d = _source(source, settings)
    return _require(d.result, d.text, d.settings, strict)


def graph_of(source: Any, *, cluster: str | None = None, **settings: Any) -> ClusterGraph:
    """The lowered `ClusterGraph` (of `cluster`, else the design's first)."""
    from ..compiler.lower import lower

    return lower(compile_design(source, **settings), cluster)


def job_of(source: Any, *, job: str | None = None, **settings: Any):
    """The training `Job` (the named one, else the design's first)."""
    from ..model.job import train_job

    return train_job(compile_design(source, **settings), job)


def plan_of(source: Any, objective: str = "throughput", *, job: str | None = None, **settings: Any):
    """The `Plan` of the design's training job under `objective`."""
    from ..solver.train.plan import plan

    return plan(job_of(source, job=job, **settings), objective)
