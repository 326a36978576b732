"""Why a serve job has no plan, in the user's terms: each limit that configurations break,
where it is written (file:line:col), how many of the configurations break it, the best
any of them reaches, and what would make room."""

from __future__ import annotations

from fractions import Fraction

from ..compiler.design import Bound, Entity
from ..dsl.numbers import number, percent as share_text
from ..dsl.units import NONE, Quantity, format_quantity

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


def infeasible_reasons(entity: Entity, broken: dict[str, set[int]], nearest: dict[str, float],
                       total: int) -> tuple[str, ...]:
    """One line per broken limit: `file:line:col: `ttft <= 1 ms` is broken by every one of
    624 configurations; the best reaches 180 ms; help: ...`."""
    out = []
    for name in sorted(broken, key=lambda n: (-len(broken[n]), n)):  # what breaks every configuration first
        item = _written(entity, name)
        where = f"{item.span}: " if item is not None else ""
        what = f"`{item.value.target} {item.value.op} {_show(item.value.value, percent=name == 'memory')}`" \
            if item is not None else {"power": "the cluster's power budget", "gpus": "the partition's GPUs",
                                      "memory": "the GPUs' HBM"}.get(name, f"`{name}`")
        count = len(broken[name])
        how_many = f"every one of {total}" if count >= total else f"{count} of {total}"
        best = f"; the best reaches {_show(nearest[name], UNITS.get(name))}" if name in nearest else ""
        out.append(f"{where}{what} is broken by {how_many} configurations{best}; help: {HELP.get(name, 'relax it')}")
    return tuple(out)


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
