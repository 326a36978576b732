"""attrs classes whose repr, equality and hash are three shared functions rather than
methods written for each class: `frozen` and `define` are attrs's own otherwise.

attrs writes every class's __init__, __repr__, __eq__ and __hash__ as Python source and
compiles it when the class is made. A `gclc plan` makes about 120 classes as it starts and
a `gclc check` about 80; compiling their methods was the largest single cost of starting
gclc (issue 27: `gclc check` <= 0.15 s of CPU), three quarters of it for repr, eq and hash.
Here attrs still writes __init__, and the other three read the class's fields (the same
fields, flags and order attrs would read) through one function each, which behave as
attrs's generated ones do:

- repr: `Name(a=1, b='x')`, fields with `repr=False` left out, a field's own repr
  callable used, `...` for an object met again inside its own repr;
- ==: NotImplemented for another class, else the fields with `eq=True` compared in order
  with `and` (the first false comparison's value, else the last's);
- hash (frozen classes with eq): the fields that take part in it (`hash=True`, or `eq` and
  no `hash=False`) with a per-class constant; mutable classes with eq are unhashable.

A class that writes one of these methods in its body keeps it (attrs's `auto_detect`); one
that caches its hash (`cache_hash=True`) keeps attrs's own eq and hash; a field compared by
a key (`eq=callable`) is refused here (attrs.frozen does it).
tests/dsl/test_records.py checks each against attrs's generated method.
"""

from __future__ import annotations

import operator
import threading

import attrs

_local = threading.local()   # ids of the objects whose repr is being written, per thread
_EQ_METHODS = ("__eq__", "__ne__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__")


def frozen(maybe_cls=None, **options):
    """`attrs.frozen` with the shared repr, == and hash (see the module docstring)."""
    return _decorate(attrs.frozen, True, maybe_cls, options)


def define(maybe_cls=None, **options):
    """`attrs.define` with the shared repr and == (mutable: unhashable, as attrs makes it)."""
    return _decorate(attrs.define, False, maybe_cls, options)


def _decorate(make, is_frozen: bool, maybe_cls, options: dict):
    def wrap(cls):
        own = cls.__dict__
        shared_repr = options.get("repr", True) is True and "__repr__" not in own
        eq = options.get("eq", True)
        shared_eq = (eq is True and not options.get("cache_hash") and not options.get("order")
                     and "hash" not in options and "unsafe_hash" not in options
                     and not any(name in own for name in _EQ_METHODS))
        made = make(cls, **options, **({"repr": False} if shared_repr else {}), **({"eq": False} if shared_eq else {}))
        fields = attrs.fields(made)
        if shared_eq and any(a.eq_key for a in fields if a.eq):
            raise TypeError(f"{cls.__qualname__}: a field compared by a key needs attrs's own eq (attrs.frozen)")
        _with_repr(made, shared_repr)
        made.__records__ = True   # made here (tests/dsl/test_records.py checks every shipped class is)
        if shared_eq:
            made.__records_eq__ = tuple(a.name for a in fields if a.eq)
            made.__eq__, made.__ne__ = _eq, _ne
            if is_frozen:
                hashed = tuple(a.name for a in fields if a.hash is True or (a.hash is None and a.eq))
                made.__records_salt__ = hash(f"gclc.records {made.__module__}.{made.__qualname__}")
                made.__records_key__ = (operator.attrgetter(*hashed) if len(hashed) > 1
                                        else operator.attrgetter(*hashed, *hashed) if hashed else _no_fields)
                made.__hash__ = _hash
            else:
                made.__hash__ = None
        return made

    return wrap if maybe_cls is None else wrap(maybe_cls)


def _with_repr(cls, shared: bool):
    if shared:
        cls.__records_repr__ = tuple((a.name, None if a.repr is True else a.repr, a.init)
                                     for a in attrs.fields(cls) if a.repr is not False)
        cls.__repr__ = _repr
    return cls


def _no_fields(_obj) -> tuple:
    return ()


def _repr(self) -> str:
    busy = getattr(_local, "busy", None)
    if busy is None:
        busy = _local.busy = set()
    if id(self) in busy:
        return "..."
    busy.add(id(self))
    try:
        cls = self.__class__
        parts = []
        for name, show, init in cls.__records_repr__:
            value = getattr(self, name) if init else getattr(self, name, attrs.NOTHING)
            parts.append(f"{name}={value!r}" if show is None else f"{name}={show(value)}")
        return f"{cls.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"
    finally:
        busy.discard(id(self))


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    same = True
    for name in self.__records_eq__:
        same = getattr(self, name) == getattr(other, name)
        if not same:
            return same
    return same


def _ne(self, other):
    same = self.__eq__(other)
    return same if same is NotImplemented else not same


def _hash(self) -> int:
    return hash((self.__records_salt__, *self.__class__.__records_key__(self)))
