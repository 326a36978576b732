"""The step model's per-layer caches (model/train/layer_cost.py `layer`, `layer_compute`, `logits`)
are keyed by the fields the layer cost reads: an estimate taken with a warm cache, filled
by configurations that differ in one field only, equals the estimate taken cold. A field
missing from a key would return another configuration's layer here (a silent wrong answer)."""

from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train.step import clear_caches, estimate

JOB = train_job(check_file(str(Path(__file__).parent.parent.parent / "data" / "dense_variants.gcl")).design)
BASE = TrainConfig(batch=64, seq=8192, tp=2, dp=16, microbatch=1, sp=True, stack="megatron_core", zero=1,
                   recompute="selective")
GLOBAL = attrs.evolve(JOB.shape, window=0)           # every layer global: the `local` flag off
HALF = attrs.evolve(JOB.shape, global_every=2)       # half the layers windowed: the blend

VARIANTS = [
    {}, {"recompute_modules": ("mlp",)}, {"recompute_modules": ("norm",)},
    {"recompute_modules": ("core_attention", "mlp")}, {"recompute_every": 2}, {"recompute_every": 4},
    {"recompute": "full"}, {"recompute": "full", "recompute_every": 2}, {"recompute": "none"},
    {"shard": 4, "zero": 3}, {"zero": 0}, {"zero": 3}, {"offload": 0.5}, {"sp": False}, {"order": ("tp", "dp", "cp", "pp")},
    {"precision": "fp8"}, {"stack": "fsdp"},
    # placement: in the key only through the TP and CP strides (model/train/layer_cost.py)
    {"pp": 2}, {"dp": 8}, {"order": ("dp", "tp", "cp", "pp")}, {"cp": 2, "dp": 8},
    {"cp": 2, "dp": 8, "order": ("tp", "dp", "cp", "pp")}, {"cp": 2, "dp": 4, "order": ("tp", "dp", "cp", "pp")},
]


def _warm_then_cold(shape):
    configs = [attrs.evolve(BASE, **v) for v in VARIANTS]
    clear_caches()
    warm = [estimate(shape, c, JOB.partition) for c in configs]
    cold = []
    for c in configs:
        clear_caches()
        cold.append(estimate(shape, c, JOB.partition))
    return configs, warm, cold


@pytest.mark.parametrize("shape", [JOB.shape, GLOBAL, HALF], ids=["windowed", "global", "blend"])
def test_a_warm_cache_gives_the_cold_estimate(shape):
    configs, warm, cold = _warm_then_cold(shape)
    for c, w, k in zip(configs, warm, cold):
        assert w.breakdown == k.breakdown and w.memory == k.memory and w.hfu == k.hfu, c
    # the variants do change the layer's cost (else this would test nothing)
    assert len({w.breakdown.recompute for w in warm}) >= 5
    assert len({w.breakdown.tp for w in warm}) >= 3


def test_windowed_and_global_layers_are_cached_apart():
    """A model of both kinds of layer costs the blend of the two pure models' compute (the
    layer arithmetic is linear in the share): one cache entry for both kinds would not."""
    share = HALF.local_layers / HALF.layers
    assert 0 < share < 1
    clear_caches()
    compute = {name: estimate(shape, BASE, JOB.partition).breakdown.compute
               for name, shape in (("blend", HALF), ("windowed", JOB.shape), ("global", GLOBAL))}
    assert compute["windowed"] < compute["global"]
    assert compute["blend"] == pytest.approx(share * compute["windowed"] + (1 - share) * compute["global"], rel=1e-12)


@pytest.mark.parametrize("shape", [JOB.shape, HALF], ids=["windowed", "blend"])
def test_the_search_bound_terms_of_a_dense_model_are_the_estimates_own(shape):
    """A dense model has no MoE layer to cost (model/train/layer_cost.py NO_LAYER): the terms the
    search bounds with stay the estimate's, to the last bit."""
    from gclc.model.train.step import bound_terms
    for c in (attrs.evolve(BASE, **v) for v in VARIANTS):
        b = estimate(shape, c, JOB.partition).breakdown
        assert bound_terms(shape, c, JOB.partition) == (b.compute, b.tp, b.ep, b.optimizer), c


def test_the_routed_experts_are_cached_apart_by_the_stacks_eager_passes():
    """Megatron's stacks run the clamp and the experts' bias eager around their kernels, a fused
    stack does not (model/train/moe.py `runs_unfused`): the routed layer's cache keys that, so a
    warm cache filled by one stack gives the other stack its own cold estimate (it did not: the
    stack timed first won)."""
    from gclc.model.train import moe
    shape = attrs.evolve(JOB.shape, routed=32, top_k=4, expert_ffn=JOB.shape.ffn, expert_bias=True, expert_clamp=7.0)
    a = attrs.evolve(BASE, ep=2)
    b = attrs.evolve(a, stack="maxtext")
    assert moe.runs_unfused(a) != moe.runs_unfused(b)
    clear_caches()
    warm = [estimate(shape, c, JOB.partition) for c in (a, b)]
    cold = []
    for c in (a, b):
        clear_caches()
        cold.append(estimate(shape, c, JOB.partition))
    assert [w.breakdown for w in warm] == [k.breakdown for k in cold]
