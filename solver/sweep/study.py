"""A sweep study before and after the engine runs: axes checked against the design (every
problem a located diagnostic, before anything is written), the points to run (skipping
those an earlier table holds), sensitivity points, and what is collected while rows
stream past (the Pareto front, the points to plot, the reasons for infeasibility).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from fractions import Fraction
from typing import Iterable, Iterator

import attrs

from ...compiler.design import Entity
from ...compiler.driver import check_file
from ...compiler.resolve import load
from ...dsl import codes
from ...dsl.diagnostics import Diagnostic, has_errors
from ...dsl.source import SourceFile
from ...dsl.units import EXAMPLE_UNITS, NONE, Quantity
from .axes import Axis, AxisError, points
from .pareto import OBJECTIVES, Front
from .point import column
from ...dsl.records import define

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
PLOT_POINTS = 100_000  # feasible points kept for the scatter plot; the front is kept whole


class UsageError(Exception):
    """Bad axes or settings: diagnostics to print (exit 2), nothing written."""

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, SourceFile]):
        super().__init__("; ".join(d.summary for d in diagnostics))
        self.diagnostics, self.sources = diagnostics, sources


class DesignError(Exception):
    """The file itself does not parse or resolve (exit 1)."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...], sources: dict[str, SourceFile]):
        super().__init__("; ".join(d.summary for d in diagnostics))
        self.diagnostics, self.sources = diagnostics, sources


def check_axes(path: str, axes: tuple[Axis, ...], sources: dict[str, SourceFile], base: dict[str, str]) -> None:
    """Every axis names a param of the design, once, and every value has the param's type."""
    program = load(path)
    if has_errors(program.diagnostics):
        raise DesignError(tuple(program.diagnostics), dict(program.sources))
    problems: list[Diagnostic] = []
    seen: set[str] = set()
    for axis, source in zip(axes, sources.values()):
        name_span = source.span(0, len(axis.name))
        if axis.name not in program.params:
            problems.append(codes.BAD_AXIS.make(name_span, text=source.text, why=f"no param `{axis.name}` in {path}",
                                                notes=[codes.suggest(axis.name, program.params) or
                                                       f"the design's params: {', '.join(program.params) or 'none'}"]))
        elif axis.name in seen or axis.name in base:
            problems.append(codes.BAD_AXIS.make(name_span, text=source.text,
                                                why=f"`{axis.name}` is already varied or set"))
        seen.add(axis.name)
    if problems:
        raise UsageError(problems, sources)
    for axis in axes:
        _check_values(path, axis, base)


def block_axes(path: str, base: dict[str, str]) -> tuple[tuple[Axis, ...], tuple[str, ...] | None]:
    """The axes (and Pareto objectives) of the root file's first `sweep { }` block; each
    value keeps its source text, so that it is set exactly as written."""
    program = load(path)
    if not any(d.kind.text == "sweep" and d.span.path == path for d in program.declarations.values()):
        return (), None  # the points alone must check: a design may fail at its defaults
    result = check_file(path, base)
    if result.design is None:
        raise DesignError(result.diagnostics, dict(result.sources))
    sweep = next((e for e in result.design.local() if e.kind == "sweep"), None)
    if sweep is None:
        return (), None
    source = result.sources[sweep.span.path]
    body = program.bodies[sweep.name]
    params = {i.name for i in result.design.params}
    axes, objectives, problems = [], None, []
    for item in sweep.record.items:
        if item.name == "pareto":
            objectives = tuple(str(v) for v in item.value)
            continue
        if item.name not in params:
            problems.append(codes.UNKNOWN_AXIS.make(item.span, sweep=sweep.name, name=item.name,
                                                    notes=[codes.suggest(item.name, params)]))
            continue
        expr = body[item.name].expr
        if isinstance(item.value, tuple):
            texts = tuple(source.text[e.span.start:e.span.end] for e in expr.items)
        else:
            texts = _range_texts(item.value, expr.span, problems)
        if texts:
            axes.append(Axis(item.name, texts))
    if problems:
        raise UsageError(problems, dict(result.sources))
    for axis in axes:
        _check_values(path, axis, base)
    return tuple(axes), objectives


def _range_texts(value, span, problems: list[Diagnostic]) -> tuple[str, ...]:
    from .axes import range_values

    args = value.args
    low, high = (Fraction(args.get(k).value) for k in ("low", "high"))
    step, times = args.get("step"), args.get("times")
    try:
        if step is not None and times is not None:
            raise ValueError("give `step` or `times`, not both")
        if times is not None:
            return range_values(low, high, "*", Fraction(times.value))
        return range_values(low, high, "+", Fraction(step.value) if step is not None else Fraction(1))
    except ValueError as error:
        problems.append(codes.SHAPE.make(span, what=f"`range(...)`: {error}"))
        return ()


def _check_values(path: str, axis: Axis, base: dict[str, str]) -> None:
    """Type-check the values of an axis the way `--set` is checked (numbers of a generated
    range all share one type, so the first stands for them)."""
    values = list(dict.fromkeys(axis.values))
    numbers = [v for v in values if _NUMBER.fullmatch(v)]
    for value in [v for v in values if v not in numbers] + numbers[:1]:
        result = check_file(path, base | {axis.name: value})
        bad = [d for d in result.diagnostics if d.is_error and _about_setting(d, axis.name)]
        if bad:
            raise UsageError(bad, dict(result.sources))


def _about_setting(d: Diagnostic, name: str) -> bool:
    return d.code in ("setting-type", "bad-setting", "unknown-param") or (
        d.subject is not None and d.subject.path == f"<--set {name}>")


def axis_sources(texts: list[str]) -> dict[str, SourceFile]:
    return {f"<--vary {i + 1}>": SourceFile(f"<--vary {i + 1}>", t) for i, t in enumerate(texts)}


def parse_axes(texts: list[str]) -> tuple[tuple[Axis, ...], dict[str, SourceFile]]:
    from .axes import parse_axis

    sources = axis_sources(texts)
    axes = []
    for i, text in enumerate(texts):
        try:
            axes.append(parse_axis(text, i))
        except AxisError as error:
            raise UsageError([error.diagnostic], sources) from None
    return tuple(axes), sources


def todo(axes: tuple[Axis, ...], base: dict[str, str], done: set[tuple[str, ...]]) -> Iterator[tuple[int, dict[str, str]]]:
    """(index, settings) of each point not already in `done` (the swept values of an earlier table)."""
    names = tuple(a.name for a in axes)
    for index, settings in enumerate(points(axes)):
        if tuple(settings[n] for n in names) not in done:
            yield index, base | settings


# ----------------------------------------------------------------- sensitivity


def sensitivity_points(path: str, base: dict[str, str], delta: float,
                       only: tuple[str, ...] = ()) -> list[tuple[int, dict[str, str], str, int, float]]:
    """(index, settings, param, -1/0/+1, move): the base point, then each numeric param of the
    root file at (1 - delta) and (1 + delta) times its value, `move` the share it actually moved
    by (a whole number is rounded half away from zero and moved by at least one: 5 moves by
    20 %, and the tornado says so)."""
    result = check_file(path, base)
    if result.design is None:
        raise DesignError(result.diagnostics, dict(result.sources))
    root = {e.name for e in result.design.local()}
    out: list[tuple[int, dict[str, str], str, int, float]] = [(0, dict(base), "", 0, 0.0)]
    for item in result.design.params:
        if item.span.path != result.design.root or item.name in base or (only and item.name not in only):
            continue
        if isinstance(item.value, Entity) or item.name in root:
            continue
        for sign in (-1, 1):
            moved = _scaled(item.value, sign, delta)
            if moved is not None:
                out.append((len(out), base | {item.name: moved[0]}, item.name, sign, moved[1]))
    return out


def _scaled(value, sign: int, delta: float) -> tuple[str, float] | None:
    """(the value moved by `sign` x `delta` as `--set` text, the share it moved by)."""
    if isinstance(value, bool) or not isinstance(value, (Quantity, int)):
        return None
    q = value if isinstance(value, Quantity) else Quantity(Fraction(value))
    if q.value == 0:
        return None
    factor = Fraction(1) + sign * Fraction(delta).limit_denominator(10**6)
    if q.dim == NONE and q.value.denominator == 1:  # a count: rounded half away from zero, but moved
        moved = _half_up(q.value * factor)
        moved = moved if moved != q.value else q.value + sign
        return (str(moved), float(Fraction(moved) / q.value - 1)) if moved >= 1 else None
    scaled = q.value * factor
    unit = EXAMPLE_UNITS.get(q.dim)
    if q.dim == NONE:
        return f"{float(scaled):.12g}", float(factor - 1)
    if not unit:
        return None
    return f"{float(Quantity(scaled, q.dim).to(unit)):.12g} {unit}", float(factor - 1)


def _half_up(x: Fraction) -> int:
    """Round half away from zero (Python's `round` goes to even: 4.5 -> 4, a 10 % move of 5 to 4)."""
    whole = math.floor(abs(x) + Fraction(1, 2))
    return whole if x >= 0 else -whole


def tornado(rows: list[dict], plan: list[tuple[int, dict[str, str], str, int, float]],
            column: str) -> list[tuple[str, float, float, float, float]]:
    """(param, relative change of `column` at -delta, at +delta, the share the param moved
    down, up); params whose either side did not evaluate are left out."""
    by_point = {r["point"]: r for r in rows}
    base = by_point.get(0, {}).get(column)
    if not base:
        return []
    sides: dict[str, dict[int, tuple[float, float]]] = {}
    for index, _, param, sign, move in plan[1:]:
        value = by_point.get(index, {}).get(column)
        if value is not None and by_point[index]["status"] == "ok":
            sides.setdefault(param, {})[sign] = (value / base - 1, move)
    return [(p, s[-1][0], s[1][0], s[-1][1], s[1][1]) for p, s in sides.items() if -1 in s and 1 in s]


# ----------------------------------------------------------------- collecting


@define
class Collected:
    """What the sweep keeps while rows stream to the table."""

    objectives: tuple[str, ...]
    labels: tuple[str, ...]                  # the swept names, to label points
    front: Front = attrs.field(init=False)
    plotted: list[tuple[float, float, str]] = attrs.Factory(list)
    rows_on_front: dict[object, dict] = attrs.Factory(dict)
    reasons: Counter = attrs.Factory(Counter)
    statuses: Counter = attrs.Factory(Counter)
    missing: Counter = attrs.Factory(Counter)   # objective -> feasible points without a value for it
    resumed: int = 0                         # rows taken over from an earlier table

    def __attrs_post_init__(self) -> None:
        self.front = Front(self.objectives)

    def add(self, rows: Iterable[dict]) -> None:
        for row in rows:
            self.statuses[row["status"]] += 1
            if row["status"] != "ok":
                self.reasons[row["reason"]] += 1
            values = self.front.key_of(row)
            if values is None:
                if row["status"] == "ok":
                    self.missing.update(o for o in self.objectives if _raw_or_none(row, o) is None)
                continue
            label = " ".join(f"{n}={row.get(column(n))}" for n in self.labels)
            if len(self.plotted) < PLOT_POINTS and len(self.objectives) >= 2:
                self.plotted.append((_raw(row, self.objectives[0]), _raw(row, self.objectives[1]), label))
            if self.front.add(row["point"], values):
                self.rows_on_front[row["point"]] = row
                kept = set(self.front.keys())
                self.rows_on_front = {k: v for k, v in self.rows_on_front.items() if k in kept}

    def front_rows(self) -> list[dict]:
        """The front's rows, best first in the first objective."""
        order = sorted(self.front.members, key=lambda m: m[1])
        return [self.rows_on_front[k] for k, _ in order]


def _raw(row: dict, objective: str) -> float:
    return float(row[OBJECTIVES[objective][0]])


def _raw_or_none(row: dict, objective: str) -> float | None:
    value = row.get(OBJECTIVES[objective][0])
    return None if value is None or value != value else float(value)


# Why a feasible point has no value for an objective, by the column it reads.
_NO_ECONOMICS = ("its cluster has no `economics { years  energy_price }` block, which prices the parts "
                 "(their `price`) into capex, TCO and cost per token")
_WHY_MISSING = {
    "capex_usd": _NO_ECONOMICS, "tco_usd": _NO_ECONOMICS, "cost_per_token_usd": _NO_ECONOMICS,
    "cost_to_train_usd": "the job states no `tokens`, or " + _NO_ECONOMICS,
    "time_to_train_s": "the job states no `tokens` to train",
    "energy_to_train_j": "the job states no `tokens` to train",
    "goodput_tokens_per_s": "a serve job has no goodput",
}


def missing_reasons(collected: "Collected") -> list[str]:
    """Why feasible points are off the front: per objective, how many lack a value and why."""
    out = []
    for objective, n in collected.missing.most_common():
        column = OBJECTIVES[objective][0]
        out.append(f"{n} feasible point{'s' if n != 1 else ''} without {objective}: "
                   f"{_WHY_MISSING.get(column, f'no `{column}` in its row')}")
    return out
