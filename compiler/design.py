"""The checked design: what `compiler.check` hands to lowering, the model and the solver.

Every value keeps the span of the text it came from, so later stages can point back.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs

from ..dsl import display
from ..dsl.source import SourceFile, Span
from ..dsl.records import frozen


@frozen
class Symbol:
    """A keyword value: `infiniband`, `moe`, `fp8`, `switched`."""

    name: str

    def __str__(self) -> str:
        return self.name


@frozen
class Item:
    name: str
    value: Any
    span: Span = attrs.field(eq=False, repr=False)


@frozen
class Record:
    """The checked contents of a block: fields and nested records, in source order."""

    items: tuple[Item, ...] = ()

    def get(self, path: str, default: Any = None) -> Any:
        head, _, rest = path.partition(".")
        for item in self.items:
            if item.name == head:
                if not rest:
                    return item.value
                return item.value.get(rest, default) if isinstance(item.value, Record) else default
        return default

    def span_of(self, path: str) -> Span | None:
        head, _, rest = path.partition(".")
        for item in self.items:
            if item.name == head:
                return item.value.span_of(rest) if rest and isinstance(item.value, Record) else item.span
        return None

    def __contains__(self, path: str) -> bool:
        return self.get(path, _MISSING) is not _MISSING

    def names(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.items)


_MISSING = object()


@frozen
class Entity:
    """A checked top-level declaration (or an anonymous copy with overrides: `2 x Grace { ... }`)."""

    kind: str
    name: str
    record: Record
    span: Span = attrs.field(eq=False, repr=False)
    parent: str | None = None
    # every declaration it extends, nearest first (`chip MyB200 extends B200`: ("B200", ...B200's
    # own)); a copy with overrides (`8 x B200 { ... }`) keeps its part's name and ancestry
    ancestors: tuple[str, ...] = ()

    def get(self, path: str, default: Any = None) -> Any:
        return self.record.get(path, default)

    def span_of(self, path: str) -> Span:
        return self.record.span_of(path) or self.span


@frozen
class Repeat:
    """`8 x H100`: a count of a part."""

    count: int
    part: Entity


@frozen
class Construct:
    """A constructor value such as `fat_tree(tiers = 2, radix = 64)`; `switched` has no args."""

    name: str
    args: Record = Record()


@frozen
class Bound:
    """A constraint: `power <= 100 MW`."""

    target: str
    op: str
    value: Any


@frozen
class Partition:
    """A reference to one partition of a cluster: `on = Colossus.h100`."""

    cluster: Entity
    name: str

    @property
    def empty(self) -> bool:
        """Whether it holds 0 units (swept to zero): the IR has no such partition."""
        units = self.cluster.get("partition").get(self.name).get("units")
        return units is not None and units.count == 0


@frozen
class Design:
    """All checked declarations and params of a file and its imports."""

    entities: tuple[Entity, ...]
    params: tuple[Item, ...]
    sources: tuple[SourceFile, ...] = attrs.field(eq=False, repr=False)
    root: str = ""

    def __getitem__(self, name: str) -> Entity:
        for entity in self.entities:
            if entity.name == name:
                return entity
        raise KeyError(name)

    def of_kind(self, kind: str) -> tuple[Entity, ...]:
        return tuple(e for e in self.entities if e.kind == kind)

    def local(self) -> Iterator[Entity]:
        """Entities declared in the root file (not in imports)."""
        return (e for e in self.entities if e.span.path == self.root)

    def _repr_svg_(self) -> str | None:
        """Jupyter: the topology diagram, drawn by whatever registered for designs."""
        return display.render(self, "svg")
