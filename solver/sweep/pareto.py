"""Pareto fronts over sweep rows, kept incrementally so that a streaming sweep needs memory
for the front only, never for every point.

A point dominates another when it is no worse in every objective and better in one.
Objectives are table columns with a sense; `--pareto time_to_train,tco` names them.
"""

from __future__ import annotations

from typing import Iterable

import attrs
from ...dsl.records import define

# objective name -> (column, +1 to minimize or -1 to maximize)
OBJECTIVES: dict[str, tuple[str, int]] = {
    "time_to_train": ("time_to_train_s", 1), "tco": ("tco_usd", 1), "capex": ("capex_usd", 1),
    "cost_per_token": ("cost_per_token_usd", 1), "cost_to_train": ("cost_to_train_usd", 1),
    "power": ("facility_power_w", 1), "energy": ("energy_to_train_j", 1), "step_time": ("step_time_s", 1),
    "gpus": ("gpus", 1), "throughput": ("tokens_per_s", -1), "mfu": ("mfu", -1),
    "goodput": ("goodput_tokens_per_s", -1),
}


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """`a` and `b` are already signed so that smaller is better."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


@define
class Front:
    """The non-dominated points seen so far: (key, signed objective values)."""

    objectives: tuple[str, ...]
    members: list[tuple[object, tuple[float, ...]]] = attrs.Factory(list)

    def key_of(self, row: dict) -> tuple[float, ...] | None:
        """The signed objective values of `row`, or None when it has no value for one."""
        if row.get("status", "ok") != "ok":
            return None
        values = []
        for name in self.objectives:
            column, sign = OBJECTIVES[name]
            value = row.get(column)
            if value is None or value != value:  # None or NaN
                return None
            values.append(sign * float(value))
        return tuple(values)

    def add(self, key: object, values: tuple[float, ...]) -> bool:
        """Add a point; True when it joins the front (dropping the members it dominates)."""
        if any(dominates(v, values) for _, v in self.members):
            return False
        self.members = [(k, v) for k, v in self.members if not dominates(values, v)]
        self.members.append((key, values))
        return True

    def add_row(self, row: dict) -> None:
        values = self.key_of(row)
        if values is not None:
            self.add(row["point"], values)

    def keys(self) -> list[object]:
        return sorted((k for k, _ in self.members), key=lambda k: (isinstance(k, str), k))


def front(points: Iterable[tuple[object, tuple[float, ...]]], objectives: tuple[str, ...] = ()) -> list[object]:
    """The keys of the non-dominated points (signed values, smaller is better)."""
    f = Front(objectives)
    for key, values in points:
        f.add(key, values)
    return f.keys()
