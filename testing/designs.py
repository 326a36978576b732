"""Generated designs: whole `.gcl` files from the part strategies, or variations of a file
of your own (params by substitution, fields in place or through a derived copy)."""

from __future__ import annotations

import os
import re
from fractions import Fraction
from typing import Any, Mapping

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..dsl.units import UNITS, parse_number
from ..dsl import ast, parse
from .edit import edit_source
from .gcl_tree import GclText, _decimal
from .generated import GeneratedDesign, _settings
from .parts import _strategy, clusters, train_jobs


def designs(*, like: str | os.PathLike | None = None, vary: Mapping[str, Any] | None = None,
            settings: Mapping[str, Any] | None = None, job: bool = True, params: bool = False,
            budget: bool = False, **options: Any) -> SearchStrategy[GeneratedDesign]:
    """Generated designs, or variations of your own.

    Generated (no `like`): a cluster, model and training job from `train_jobs(**options)`
    (`arch`, `heterogeneous`, `max_gpus`, `pins`, `batch`, `model`, ...; `cluster` is a
    strategy or a dict of `clusters()` options), or only a cluster from `clusters(**options)`
    with `job=False`. `params=True` writes unit counts (and the batch)
    as `param`s, so `with_params` and `--set` can change them; `budget=True` adds a power
    budget above the full-load facility power.

    `like="my.gcl"` with `vary={"racks": range(1, 100), "H100_SXM.power.tdp": (500, 700)}`:
    each key is a param or `Declaration.field.path`; each value a range, `(low, high)` pair
    (of numbers in the field's written unit, or of texts such as `("500 W", "700 W")`), a
    list of choices or a strategy. `settings` are `--set` overrides applied as well.
    """
    if like is not None:
        if options or params or budget or not job:
            raise TypeError("designs(like=...) takes only `vary` and `settings`")
        return _variations(str(like), dict(vary or {}), _settings(settings or {}))
    if vary:
        raise TypeError("`vary` needs `like=` (a design file to vary)")
    if job:
        cluster = options.pop("cluster", None)
        heterogeneous = options.pop("heterogeneous", None)
        if cluster is None or isinstance(cluster, Mapping):
            cluster = clusters(heterogeneous=heterogeneous, max_gpus=options.get("max_gpus", 16), units_param=params,
                               budget=budget, **(cluster or {}))
        built = train_jobs(cluster=cluster, batch_param=params, **options).map(GeneratedDesign.from_spec)
    else:
        built = clusters(units_param=params, budget=budget, **options).map(GeneratedDesign.from_spec)
    if settings:
        extra = _settings(settings)
        return built.map(lambda d: GeneratedDesign(d.text, d.path, extra, d.spec))
    return built


def sources(**options: Any) -> SearchStrategy[GclText]:
    """The `.gcl` text of generated designs (`designs(**options)`)."""
    return designs(**options).map(lambda d: d.text)


# ================================================================= helpers

# ------------------------------------------------------------ variations of a file


_QUANTITY = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(\S*)\s*$")


def _quantity_range(low: str, high: str) -> SearchStrategy[str]:
    """`("500 W", "700 W")` -> texts between, in the unit of `low` (integers when both are)."""
    a, b = _QUANTITY.match(low), _QUANTITY.match(high)
    if not (a and b):
        raise ValueError(f"cannot read ({low!r}, {high!r}) as a range of quantities such as ('500 W', '700 W')")
    unit = a.group(2)
    lo = parse_number(a.group(1))
    hi = parse_number(b.group(1))
    if b.group(2) != unit:
        scale_a = UNITS[unit][0] if unit else 1
        scale_b = UNITS[b.group(2)][0] if b.group(2) else 1
        hi = hi * scale_b / scale_a
    sep = "" if unit == "%" else " "
    tail = f"{sep}{unit}" if unit else ""
    if lo.denominator == 1 and hi.denominator == 1:
        return st.integers(int(lo), int(hi)).map(lambda n: f"{n}{tail}")
    return st.floats(float(lo), float(hi), allow_nan=False, allow_infinity=False).map(
        lambda x: f"{_decimal(Fraction(repr(x)))}{tail}")


def _variations(path: str, vary: dict[str, Any], settings: dict[str, str]) -> SearchStrategy[GeneratedDesign]:
    base = GeneratedDesign.from_file(path, settings)
    module = parse(base.text, path)
    params_here = {i.name.text for i in module.items if isinstance(i, ast.Param)}
    from ..compiler.resolve import load

    program = load(path, base.text)
    strategies: dict[str, SearchStrategy] = {}
    for key, value in vary.items():
        if "." not in key and key not in params_here and key not in program.params:
            from ..dsl.codes import suggest

            raise KeyError(f"no param `{key}` in {path}. {suggest(key, program.params)}".strip())
        if "." in key and key.split(".")[0] not in program.declarations:
            raise KeyError(f"no declaration `{key.split('.')[0]}` in {path} or its imports")
        if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
            strategies[key] = _quantity_range(*value)
        else:
            strategies[key] = _strategy(value)
    edit_source(base.text, path, {k: "0" for k in vary if "." not in k},
                {k: (lambda old: old) for k in vary if "." in k})  # fail now on keys that cannot be edited

    @st.composite
    def build(draw) -> GeneratedDesign:
        values = {key: draw(s) for key, s in strategies.items()}
        params = {k: v for k, v in values.items() if "." not in k}
        fields = {k: v for k, v in values.items() if "." in k}
        text, extra = edit_source(base.text, path, params, fields)
        return GeneratedDesign(text, path, {**base.settings, **extra}, None)

    return build()
