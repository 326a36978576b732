"""Why a serve job has no plan, in the user's terms: each limit that keeps every configuration
out (not every limit some configuration breaks), where it is written (file:line:col), how
many of the configurations break it, the nearest any of them gets, and what would make room."""

from __future__ import annotations

from fractions import Fraction

from ...compiler.design import Bound, Entity
from ...dsl.numbers import number, percent as share_text
from ...dsl.units import NONE, Quantity, format_quantity

UNITS = {"memory": "byte", "ttft": "s", "tpot": "s", "e2e": "s", "power": "W", "gpus": None}
HELP = {
    "memory": "raise the bound, serve in a narrower precision (fp8 weights or `kv_precision`), or use chips "
              "with more HBM",
    "ttft": "relax it to at least what the best configuration reaches, shorten `prompt`, or use faster chips",
    "tpot": "relax it to at least what the best configuration reaches, cap the batch (`engine { max_batch }`), "
            "or use chips with more memory bandwidth",
    "e2e": "relax it to at least what the best configuration reaches, or shorten `prompt` and `output`",
    "power": "raise the power bound (or the cluster's `power { budget }`), or serve in a narrower precision",
    "gpus": "allow more GPUs (`gpus`, `subject to { gpus <= ... }`) or run on a larger partition",
}


ROLES = {"both": "", "prefill": " as prefill replicas", "decode": " as decode replicas"}


def infeasible_reasons(entity: Entity, misses: dict[tuple[str, int], dict[str, float]]) -> tuple[str, ...]:
    """One line per limit that keeps the job from a plan: `file:line:col: `ttft <= 1 ms` is
    broken by every one of 624 configurations; the best reaches 180 ms; help: ...`.

    `misses` holds, for each (role, configuration), the value it reaches on each limit it
    breaks. A limit binds when relaxing it (alone, or with the others of the fewest any
    configuration breaks) would admit a configuration: a limit that only configurations
    breaking more limits break is not why the job is infeasible and is not named. How far a
    binding limit is: the nearest a configuration breaking the fewest limits gets. Aggregated
    replicas are explained first (those that fit and failed later, in a power check or the
    simulation, are left out), then each role of a disaggregated plan that none fits."""
    out, named = [], set()
    for role, how in ROLES.items():
        group = [m for (r, _), m in misses.items() if r == role]
        if not group or role != "both" and not all(group):
            continue  # no configuration of the role, or one fits the role: the other role is why
        total, group = len(group), [m for m in group if m]  # aggregated ones that fit failed later
        if not group:
            continue
        for name, line in _binding(entity, group, total, how):
            if name not in named:
                named.add(name)
                out.append(line)
    return tuple(out)


def _binding(entity: Entity, group: list[dict[str, float]], total: int, how: str):
    """(limit, line) for each limit binding among the configurations of a role (`total` of them)
    that break some (`group`)."""
    fewest = min(len(m) for m in group)
    closest = [m for m in group if len(m) == fewest]
    among: dict[str, list[float]] = {}
    for m in closest:
        for name, value in m.items():
            among.setdefault(name, []).append(value)
    for name in sorted(among, key=lambda n: (-len(among[n]), n)):
        if name == "gpus" and entity.get("gpus") is not None:
            count = sum(name in m for m in group)
            yield name, (f"{entity.span_of('gpus')}: `gpus = {entity.get('gpus')}` is not a whole number of replicas "
                         f"for {broken_by(count, total)}{how}; help: pin a count that "
                         "a replica's tp x ep x pp divides (with `replicas`, replicas x tp x ep x pp), or drop `gpus`")
            continue
        item = _written(entity, name)
        where = f"{item.span}: " if item is not None else ""
        what = f"`{item.value.target} {item.value.op} {_show(item.value.value, percent=name == 'memory')}`" \
            if item is not None else {"power": "the cluster's power budget", "gpus": "the partition's GPUs",
                                      "memory": "the GPUs' HBM"}.get(name, f"`{name}`")
        count = sum(name in m for m in group)
        unit, fix = UNITS.get(name), HELP.get(name, "relax it")
        if count >= total:
            best = min(m[name] for m in group)
            yield name, (f"{where}{what} is broken by {broken_by(count, total)}{how}; "
                         f"the best reaches {_show(best, unit)}; help: {fix}")
            continue
        them = len(among[name])
        alone = (f"the only limit {them} of them {_verb(them)}" if fewest == 1 else
                 f"one of the {fewest} limits {them} of them {_verb(them)}, the fewest any configuration breaks")
        yield name, (f"{where}{what} is broken by {broken_by(count, total)}{how}, {alone}; the nearest "
                     f"of those reaches {_show(min(among[name]), unit)}; help: {fix}")


def broken_by(count: int, total: int) -> str:
    """`3 of 4 configurations`, `every one of 4 configurations`, `the only configuration`."""
    if count >= total:
        return "the only configuration" if total == 1 else f"every one of {total} configurations"
    return f"{count} of {total} configuration{'' if total == 1 else 's'}"


def _verb(count: int) -> str:
    return "breaks" if count == 1 else "break"


def _written(entity: Entity, name: str):
    """The item of `slo` or `subject to` that bounds `name` (`ttft.p99` bounds `ttft`)."""
    for block in ("slo", "subject to"):
        for item in getattr(entity.get(block), "items", ()):
            if isinstance(item.value, Bound) and item.value.target.split(".")[0] == name:
                return item
    return None


def _show(value, unit: str | None = None, percent: bool = False) -> str:
    if isinstance(value, Quantity) and percent and value.dim == NONE:
        return share_text(float(value.value), 3)
    if isinstance(value, Quantity):
        return format_quantity(value)
    if unit is None:
        return number(round(value)) if isinstance(value, float) else str(value)
    return format_quantity(Quantity.of(Fraction(value).limit_denominator(10**9), unit))
