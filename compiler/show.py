"""A checked design value as an architect reads it, one renderer for every view of a design's
values (the editor's hover, `gclc diff`): quantities by the one number formatter in the units
GCL writes, parts and keywords by name, constructors and lists as the language writes them."""

from __future__ import annotations

from typing import Any

from ..dsl.units import Quantity, format_quantity
from .design import Bound, Construct, Entity, Partition, Record, Repeat

# A value as written in a design reads back whole (`494.5 TFLOPS`, `1.755 GHz`), and two
# designs that differ in the fourth digit do not look the same.
DIGITS = 6


def show_value(value: Any, digits: int = DIGITS) -> str:
    """`3.35 TB/s`, `8 x DGX_H100`, `fat_tree(tiers = 2, radix = 64)`, `Pod.h100`, `true`,
    `power <= 3 MW`, `[bf16, fp8]`."""
    def again(inner: Any) -> str:
        return show_value(inner, digits)

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Quantity):
        return format_quantity(value, digits)
    if isinstance(value, Entity):
        return value.name
    if isinstance(value, Repeat):
        return f"{value.count} x {value.part.name}"
    if isinstance(value, Construct):
        args = ", ".join(f"{i.name} = {again(i.value)}" for i in value.args.items)
        return f"{value.name}({args})" if args else value.name
    if isinstance(value, Partition):
        return f"{value.cluster.name}.{value.name}"
    if isinstance(value, Bound):
        return f"{value.target} {value.op} {again(value.value)}"
    if isinstance(value, Record):
        return "{ " + "  ".join(f"{i.name} = {again(i.value)}" for i in value.items) + " }"
    if isinstance(value, tuple):
        return "[" + ", ".join(again(v) for v in value) + "]"
    if isinstance(value, (int, float)):
        return format_quantity(Quantity(value), digits)
    if isinstance(value, str):
        return value
    return str(value)  # a Symbol (a keyword) reads as its name
