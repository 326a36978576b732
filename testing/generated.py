"""A generated design: a `.gcl` text with the path it stands for and its `--set` settings,
checked, lowered and planned on demand."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Mapping


from ..compiler.design import Design
from ..dsl.diagnostics import render_all
from ..compiler.driver import Result, check_file
from ..compiler.ir import ClusterGraph
from .edit import _value_text, edit_source
from .gcl_tree import GclText, _Renders
from .profiles import GENERATED_PATH


class GeneratedDesign:
    """A `.gcl` text (with the path it stands for and `--set` settings) and, computed on
    first use, its check `result`, `design`, `graph`, `job` and `plan()`. Its repr is the
    text itself, so a hypothesis failure prints the minimal file."""

    def __init__(self, text: str, path: str = GENERATED_PATH, settings: Mapping[str, str] | None = None,
                 spec: Any = None):
        self.text = GclText(text)
        self.path = str(path)
        self.settings = dict(settings or {})
        self.spec = spec
        self._plans: dict[tuple, Any] = {}

    @classmethod
    def from_spec(cls, spec: _Renders) -> GeneratedDesign:
        return cls(spec.text, GENERATED_PATH, None, spec)

    @classmethod
    def from_file(cls, path: str | os.PathLike, settings: Mapping[str, Any] | None = None) -> GeneratedDesign:
        return cls(Path(path).read_text(encoding="utf-8"), str(path), _settings(settings or {}))

    # ------------------------------------------------------------ compiled, lazily
    @functools.cached_property
    def result(self) -> Result:
        return check_file(self.path, self.settings, self.text)

    @property
    def diagnostics(self):
        return self.result.diagnostics

    @functools.cached_property
    def design(self) -> Design:
        return _require(self.result, self.text, self.settings)

    @functools.cached_property
    def graph(self) -> ClusterGraph:
        from ..compiler.lower import lower

        return lower(self.design)

    @property
    def job_entity(self):
        """The checked `train` declaration (the root file's first)."""
        jobs = [e for e in self.design.entities if e.kind == "train"]
        local = [j for j in jobs if j.span.path == self.design.root] or jobs
        if not local:
            raise LookupError("the design has no `train` job")
        return local[0]

    @functools.cached_property
    def job(self):
        from ..model.job import train_job

        return train_job(self.design)

    def plan(self, objective: str = "throughput", **options: Any):
        key = (objective, tuple(sorted(options.items())))
        if key not in self._plans:
            from ..solver.train.plan import plan

            self._plans[key] = plan(self.job, objective, **options)
        return self._plans[key]

    def hetero_plan(self):
        """The `solver.split.plan` plan of the job over the partitions it names (`on = [C.a, C.b]`)."""
        if "hetero" not in self._plans:
            from ..solver.split.plan import plan_hetero

            self._plans["hetero"] = plan_hetero(self.job_entity)
        return self._plans["hetero"]

    # ------------------------------------------------------------ variations
    def with_params(self, values: Mapping[str, Any]) -> GeneratedDesign:
        """The design with params set: substituted in the text, or `--set` when imported."""
        return self._edited(values, {})

    def with_fields(self, values: Mapping[str, Any]) -> GeneratedDesign:
        """The design with fields set (`{"Chip0.power.tdp": "800 W"}`). A value is GCL text,
        a number (in the unit the field is written in), a bool, or a function of the old
        expression's text (`lambda old: f"({old}) * 2"`)."""
        return self._edited({}, values)

    def _edited(self, params: Mapping[str, Any], fields: Mapping[str, Any]) -> GeneratedDesign:
        text, settings = edit_source(self.text, self.path, params, fields)
        kept = {k: v for k, v in self.settings.items() if k not in params}  # set in the text now
        return GeneratedDesign(text, self.path, {**kept, **settings}, None)

    # ------------------------------------------------------------ printing
    def __repr__(self) -> str:
        head = f"# {self.path}" + "".join(f" --set {k}={v}" for k, v in self.settings.items())
        return f"GeneratedDesign('''\n{head}\n{self.text}''')"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


def _settings(values: Mapping[str, Any]) -> dict[str, str]:
    return {k: _value_text(v, None, None) for k, v in values.items()}


def _require(result: Result, text: str, settings: Mapping[str, str], strict: bool = False) -> Design:
    if result.design is not None and not (strict and result.diagnostics):
        return result.design
    problems = render_all(result.diagnostics, result.sources)
    where = "".join(f" --set {k}={v}" for k, v in settings.items())
    raise AssertionError(f"the design does not check clean{where}:\n{problems}\n--- source ---\n{text}")
