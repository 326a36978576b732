"""dsl/records.py: a class made by `records.frozen` / `records.define` has the repr, == and
hash that attrs would generate for it (laws over generated values, against a twin class made
by attrs itself from the same body), and every attrs class gclc ships is made that way."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gclc
from gclc.dsl import records
from gclc.testing import load_profile

load_profile()


def _shout(value) -> str:
    return f"<{value}>"


def _bodies():
    """Class bodies covering the field options gclc uses: eq=False, repr=False, a repr
    callable, hash=False, init=False, kw_only, defaults and factories."""

    class Point:
        x: float
        y: float = 0.0

    class Spanned:
        text: str
        span: tuple = attrs.field(eq=False, repr=False, factory=tuple, kw_only=True)

    class Shown:
        name: str
        code: int = attrs.field(repr=_shout)
        limits: dict = attrs.field(factory=dict, hash=False)

    class Derived:
        a: int
        total: int = attrs.field(init=False, eq=False)

        def __attrs_post_init__(self) -> None:
            object.__setattr__(self, "total", self.a * 2)

    class Empty:
        pass

    class One:
        value: object

    return {"Point": Point, "Spanned": Spanned, "Shown": Shown, "Derived": Derived, "Empty": Empty, "One": One}


def _twins(name: str, make_ours, make_theirs):
    body = _bodies()[name]
    fresh = _bodies()[name]   # attrs may change the class it is given: one body each
    return make_ours(body), make_theirs(fresh)


values = st.one_of(st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                   st.tuples(st.integers(0, 2)), st.none())


def _build(cls, name: str, a, b):
    if name == "Point":
        return cls(a, b)
    if name == "Spanned":
        return cls(str(a), span=(b,))
    if name == "Shown":
        return cls(str(a), 1 if b is None else 2, limits={"k": str(b)})
    if name == "Derived":
        return cls(a if isinstance(a, int) else 1)
    if name == "Empty":
        return cls()
    return cls(a)


@pytest.mark.parametrize("name", sorted(_bodies()))
@given(a=values, b=values, c=values, d=values)
def test_frozen_repr_eq_and_hash_are_attrs_own(name, a, b, c, d):
    ours_cls, theirs_cls = _twins(name, records.frozen, attrs.frozen)
    ours, theirs = _build(ours_cls, name, a, b), _build(theirs_cls, name, a, b)
    other_ours, other_theirs = _build(ours_cls, name, c, d), _build(theirs_cls, name, c, d)
    assert repr(ours).replace(ours_cls.__qualname__, "X") == repr(theirs).replace(theirs_cls.__qualname__, "X")
    assert (ours == other_ours) == (theirs == other_theirs)
    assert (ours != other_ours) == (theirs != other_theirs)
    assert (ours == ours) == (theirs == theirs)      # a NaN field: unequal to itself under attrs too
    assert ours.__eq__(theirs) is NotImplemented and ours.__eq__(1) is NotImplemented
    hashable = all(isinstance(v, (int, float, str, tuple, type(None))) for v in (a, b))
    if hashable and ours == other_ours:
        assert hash(ours) == hash(other_ours)


@given(a=values, b=values)
def test_define_is_mutable_comparable_and_unhashable_as_attrs_makes_it(a, b):
    ours_cls, theirs_cls = _twins("Point", records.define, attrs.define)
    ours, theirs = ours_cls(a, b), theirs_cls(a, b)
    assert repr(ours).replace(ours_cls.__qualname__, "X") == repr(theirs).replace(theirs_cls.__qualname__, "X")
    assert (ours == ours_cls(a, b)) == (theirs == theirs_cls(a, b))
    assert ours_cls.__hash__ is None and theirs_cls.__hash__ is None
    ours.x = 5
    assert ours.x == 5


def test_a_repr_met_again_inside_itself_reads_dots_as_attrs_writes_it():
    ours_cls, theirs_cls = _twins("One", records.define, attrs.define)
    ours, theirs = ours_cls(None), theirs_cls(None)
    ours.value, theirs.value = [ours], [theirs]
    assert repr(ours).replace(ours_cls.__qualname__, "X") == repr(theirs).replace(theirs_cls.__qualname__, "X")
    assert repr(ours).endswith("(value=[...])")


def test_a_method_written_in_the_class_is_kept():
    @records.frozen
    class Own:
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other) -> bool:
            return True

        __hash__ = object.__hash__

    assert repr(Own(1)) == "own" and Own(1) == Own(2)


def test_cached_hash_keeps_attrs_own_eq_and_hash():
    @records.frozen(cache_hash=True)
    class Cached:
        x: int

    assert Cached(1) == Cached(1) and hash(Cached(1)) == hash(Cached(1)) and repr(Cached(1)) == "Cached(x=1)"
    assert "__records_eq__" not in Cached.__dict__


def test_a_nan_field_compares_as_attrs_does():
    ours_cls, theirs_cls = _twins("Point", records.frozen, attrs.frozen)
    nan = math.nan
    assert (ours_cls(nan) == ours_cls(nan)) == (theirs_cls(nan) == theirs_cls(nan)) is False


LAYERS = ("dsl", "compiler", "model", "solver", "views", "cli", "lsp", "testing")


def _plain_classes(paths) -> list[str]:
    """Classes decorated with attrs's own class makers (`@attrs.frozen`, `@attr.s(...)`, ...)."""
    plain = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if "@attr" not in text:   # (parse only the files that may hold one)
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id in ("attrs", "attr")):
                        plain.append(f"{path.name}:{node.lineno} {node.name}")
    return plain


def test_every_shipped_attrs_class_is_made_by_records(tmp_path):
    """No module of the package decorates a class with attrs's own class makers (read from
    the source: importing every module would take longer than the check)."""
    root = Path(gclc.__file__).parent
    paths = [path for layer in LAYERS for path in sorted((root / layer).rglob("*.py"))]
    assert len(paths) > 300   # the walk sees the package
    plain = _plain_classes(paths)
    assert not plain, (f"made by @attrs.frozen / @attrs.define: use gclc.dsl.records' `frozen` / `define` "
                       f"instead (the same options; start-up time, issue 27): {plain}")
    control = tmp_path / "control.py"   # the check finds one
    control.write_text("import attrs\n\n\n@attrs.frozen(slots=False)\nclass A:\n    x: int\n", encoding="utf-8")
    assert _plain_classes([control]) == ["control.py:5 A"]


def test_records_marks_what_it_makes():
    from gclc.compiler.ir import Tier
    from gclc.dsl.ast import Identifier

    assert Identifier.__records__ and Tier.__records__ and Identifier.__repr__ is records._repr
