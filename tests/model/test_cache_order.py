"""The model's caches never alias two inputs: a collective's price is the same whatever was asked
before it (an lru_cache keyed on an object whose == ignores a field it reads would answer one input
with another's price, and a law would pass or fail by the order the tests ran in). Checked by
pricing the same calls in two orders with every cache of gclc.model emptied between; and the one
key that equals what it does not price the same (a Placement equals the tuple of its fastest
stages, but is priced over every option) is kept apart."""

from __future__ import annotations

import importlib
import pkgutil

import gclc.model
from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model import collectives, comms

CALLS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


def _tier(level, group, bandwidth, scope="scaleout", oversubscription=1.0, latency=1e-6, reduces=False,
          kind="infiniband"):
    return Tier(level, f"t{level}", f"f{level}", kind, scope, group, bandwidth, latency, oversubscription,
                reduces, 1.0, span=no_span())


def _hierarchies():
    for up, out, leaf, over, nvls, sharp in ((450e9, 50e9, 64, 1.0, True, False), (900e9, 100e9, 24, 2.0, False, True),
                                             (150e9, 12.5e9, 256, 4.0, True, True), (450e9, 50e9, 64, 1.0, False, False)):
        yield (_tier(0, 8, up, "node", latency=0.5e-6, reduces=nvls, kind="nvlink"), _tier(1, leaf, out, reduces=sharp),
               _tier(2, 4096, out / over, oversubscription=over, reduces=sharp))


def _clear_model_caches() -> None:
    for info in pkgutil.walk_packages(gclc.model.__path__, "gclc.model."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == info.name:
                value.cache_clear()


def _prices(order) -> dict:
    return {(i, call, size, stride, n): getattr(collectives, call)(n, comms.place(size, stride, tiers))
            for i, tiers, call, size, stride, n in order}


def test_a_collectives_price_does_not_depend_on_what_was_asked_before():
    cases = [(i, tiers, call, size, stride, n) for i, tiers in enumerate(_hierarchies()) for call in CALLS
             for size, stride in ((2, 1), (8, 1), (16, 2), (64, 8), (256, 1)) for n in (4e3, 3.3e6, 1.7e10)]
    _clear_model_caches()
    forward = _prices(cases)
    _clear_model_caches()
    backward = _prices(cases[::-1])
    assert forward == backward


def test_a_placement_and_the_tuple_of_its_stages_are_priced_apart():
    tiers = list(_hierarchies())[1]
    placed = comms.place(96, 1, tiers)    # 12 nodes on 24-GPU leaves: tiled, or rings in rank order
    assert len(placed.options) > 1 and placed == tuple(placed) and hash(placed) == hash(tuple(placed))
    _clear_model_caches()
    group, fastest = collectives.all_reduce(1e6, placed), collectives.all_reduce(1e6, tuple(placed))
    assert group < fastest      # another option is faster at this size than the one that moves bytes soonest
    _clear_model_caches()
    assert collectives.all_reduce(1e6, tuple(placed)) == fastest and collectives.all_reduce(1e6, placed) == group
