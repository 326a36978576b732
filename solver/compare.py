"""`gclc diff`: two designs side by side — their params and declarations field by field, the
bill of materials line by line, and the plan, power and cost of their jobs."""

from __future__ import annotations

from typing import Any


from ..compiler.design import Design, Entity, Record, Repeat
from ..compiler.show import show_value
from ..compiler.driver import check_file
from ..compiler.lower import lower, pick_cluster
from .sweep.point import evaluate
from ..dsl.records import frozen

METRICS = ("gpus", "nodes", "tp", "pp", "dp", "cp", "ep", "clock", "power_cap_w", "step_time_s", "tokens_per_s", "mfu",
           "memory_per_gpu_bytes", "job_power_w", "facility_power_w", "time_to_train_s", "energy_to_train_j",
           "racks", "switches", "transceivers", "capex_usd", "tco_usd", "cost_per_token_usd", "cost_to_train_usd")


@frozen
class Change:
    section: str      # params | parts | bom | plan
    key: str
    a: Any
    b: Any


@frozen
class Comparison:
    a: str
    b: str
    changes: tuple[Change, ...]
    status: tuple[str, str]          # each side's plan status (ok, infeasible, invalid)
    reasons: tuple[str, str]


def compare(path_a: str, path_b: str, job: str | None = None, settings: dict[str, str] | None = None) -> Comparison:
    results = [check_file(p, dict(settings or {})) for p in (path_a, path_b)]
    changes: list[Change] = []
    if all(r.design is not None for r in results):
        da, db = (r.design for r in results)
        changes += _changed("params", _params(da), _params(db))
        changes += _part_changes(da, db)
        changes += _changed("bom", _bom(da), _bom(db))
    rows = [evaluate(p, 0, dict(settings or {}), job) for p in (path_a, path_b)]
    plan_a, plan_b = ({k: r.get(k) for k in METRICS} for r in rows)
    changes += [Change("plan", k, plan_a[k], plan_b[k]) for k in METRICS if plan_a[k] != plan_b[k]]
    return Comparison(path_a, path_b, tuple(changes), (rows[0]["status"], rows[1]["status"]),
                      (rows[0]["reason"] or "", rows[1]["reason"] or ""))


def _changed(section: str, a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    keys = list(dict.fromkeys([*a, *b]))
    return [Change(section, k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def _params(design: Design) -> dict[str, str]:
    return {i.name: show_value(i.value) for i in design.params if i.span.path == design.root}


def _part_changes(a: Design, b: Design) -> list[Change]:
    """Parts one design uses and the other does not, one line each; field by field for the
    parts both use (the root file's declarations and what their clusters are built of)."""
    pa, pb = ({f"{e.kind} {e.name}": e for e in _closure(d)} for d in (a, b))
    out = [Change("parts", name, "used" if name in pa else None, "used" if name in pb else None)
           for name in dict.fromkeys([*pa, *pb]) if (name in pa) != (name in pb)]
    for name in [n for n in pa if n in pb]:
        fa, fb = _flat(pa[name].record), _flat(pb[name].record)
        out += [Change("parts", f"{name}.{k}", v.a, v.b) for v in _changed("", fa, fb) for k in (v.key,)]
    return out


def _closure(design: Design) -> list[Entity]:
    seen: dict[str, Entity] = {}

    def visit(value: Any) -> None:
        if isinstance(value, Entity):
            if value.name not in seen:
                seen[value.name] = value
                visit(value.record)
        elif isinstance(value, Record):
            for item in value.items:
                visit(item.value)
        elif isinstance(value, Repeat):
            visit(value.part)
        elif isinstance(value, tuple):
            for v in value:
                visit(v)

    for entity in design.local():
        visit(entity)
    return list(seen.values())


def _flat(record: Record, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in record.items:
        if isinstance(item.value, Record):
            out |= _flat(item.value, f"{prefix}{item.name}.")
        else:
            out[f"{prefix}{item.name}"] = show_value(item.value)
    return out


def _bom(design: Design) -> dict[str, Any]:
    from ..compiler.cost.bom import bill
    from ..compiler.cost.tco import economics_of

    try:
        cluster = pick_cluster(design)
    except LookupError:
        return {}
    graph = lower(design)
    econ = economics_of(cluster)
    bom = bill(cluster, graph, *((econ.rack_power, econ.rack_price) if econ else ()))
    out: dict[str, Any] = {}
    for line in bom.lines:
        out[f"{line.label}: count"] = line.count
        if line.cost:
            out[f"{line.label}: cost"] = line.cost
    return out

