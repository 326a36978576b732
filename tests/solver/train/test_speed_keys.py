"""Shortcuts the train search takes for start-up time (issue 27), each against what it replaces:

- `enumerate.layout` is a tuple of fields, not a configuration with its order and power cap
  cleared: two keys are equal exactly where those configurations are;
- `dp_sync.traffic` prices only the collectives a configuration's ZeRO stage runs, so the
  others read 0: `exposed` and `kinks` read no field but the stage's."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from gclc.model.config import TrainConfig
from gclc.model.train import dp_sync
from gclc.solver.train.enumerate import layout
from gclc.testing import load_profile

load_profile()

# a few values per field, so that two drawn configurations often agree on all but some
_VALUES = {"tp": (1, 2, 8), "pp": (1, 4), "dp": (1, 16), "microbatch": (1, 2), "vp": (1, 2),
           "recompute": ("none", "full"), "zero": (0, 1, 3), "order": (("tp", "cp", "dp", "pp"), ("tp", "pp", "dp", "cp")),
           "power_cap": (None, 500.0), "stack": ("megatron", "nemo"), "sp": (False, True), "shard": (0, 8)}
_configs = st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in _VALUES.items()}).map(
    lambda fields: TrainConfig(batch=512, seq=2048, **fields))


class _Estimate:
    def __init__(self, cfg: TrainConfig) -> None:
        self.config = cfg


@given(_configs, _configs)
def test_layout_keys_are_equal_exactly_where_the_configurations_less_order_and_cap_are(a, b):
    cleared = [attrs.evolve(c, order=(), power_cap=None) for c in (a, b)]
    assert (layout(_Estimate(a)) == layout(_Estimate(b))) == (cleared[0] == cleared[1])


_seconds = st.floats(0.0, 10.0)
_traffics = st.builds(dp_sync.Traffic, _seconds, _seconds, _seconds, _seconds, _seconds)
_READ = {0: ("all_reduces",), 1: ("gathers", "reduces", "across"), 3: ("fsdp", "across")}


@given(_traffics, _traffics, st.sampled_from([0, 1, 2, 3]), st.integers(1, 64), st.booleans(), _seconds)
def test_exposed_and_kinks_read_only_the_collectives_of_the_stage(traffic, other, zero, microbatches, overlap, layer_pass):
    read = _READ[min(zero, 1) if zero < 3 else 3]
    mixed = dp_sync.Traffic(*[getattr(traffic if name in read else other, name) for name in dp_sync.Traffic._fields])
    assert dp_sync.exposed(mixed, zero, microbatches, overlap, layer_pass) == dp_sync.exposed(
        traffic, zero, microbatches, overlap, layer_pass)
    assert dp_sync.kinks(mixed, zero, overlap) == dp_sync.kinks(traffic, zero, overlap)
