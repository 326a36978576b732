"""Shortcuts the train search takes for start-up time (issue 27), each against what it replaces:

- `enumerate.layout` is a tuple of fields, not a configuration with its order and power cap
  cleared: two keys are equal exactly where those configurations are;
- `dp_sync.traffic` prices only the collectives a configuration's ZeRO stage runs, so the
  others read 0: `exposed` and `kinks` read no field but the stage's;
- `enumerate.config_maker` copies a template's fields rather than calling TrainConfig's
  __init__: the same fields, in the same order, as the __init__ stores."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from pathlib import Path

from gclc.compiler.driver import check_file
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train import dp_sync
from gclc.solver.train import enumerate as space_def
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


_JOB = train_job(check_file(str(Path(__file__).resolve().parents[3] / "examples" / "dgx_h100_superpod.gcl")).design)
_SPACE = space_def.variant_spaces(_JOB, space_def.space(_JOB))[0]


@given(st.sampled_from(_SPACE.tps), st.sampled_from(_SPACE.pps), st.integers(1, 64), st.sampled_from([1, 2]),
       st.sampled_from([1, 2]), st.integers(1, 16), st.integers(1, 8), st.sampled_from(_SPACE.recomputes),
       st.sampled_from(_SPACE.zeros), st.permutations(["tp", "cp", "dp", "pp"]).map(tuple),
       st.none() | st.integers(1, 4096), st.sampled_from([None, 400.0]))
def test_a_made_configuration_is_the_one_its_init_builds(tp, pp, dp, cp, ep, mb, vp, recompute, zero, order, batch, cap):
    made = space_def.config_maker(_JOB, _SPACE, cap)(tp, pp, dp, cp, ep, mb, vp, recompute, zero, order, batch=batch)
    fixed = dict(seq=_JOB.seq, precision=_JOB.precision, stack=_JOB.stack, gpipe=_JOB.pinned.get("schedule") == "gpipe",
                 sample_bytes=_JOB.sample_bytes, checkpoint_every=_JOB.checkpoint_every, power_cap=cap,
                 **space_def.job_optimizer(_JOB), **_SPACE.pinned_only)
    built = TrainConfig(batch=_JOB.batch if batch is None else batch, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp,
                        microbatch=mb, recompute=recompute, zero=zero,
                        sp=tp > 1 if _SPACE.seq_parallel is None else _SPACE.seq_parallel, order=order, **fixed)
    assert list(vars(made).items()) == list(vars(built).items())
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
