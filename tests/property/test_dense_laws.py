"""Laws of hybrid sharding, recompute intervals, offload and sliding windows, over random
configurations of the dense-variants design (tests/data/dense_variants.gcl)."""

from pathlib import Path

import attrs
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.config import TrainConfig
from gclc.model.job import train_job
from gclc.model.train.memory import memory, model_state
from gclc.model.train.step import estimate

JOB = train_job(check_file(str(Path(__file__).parent.parent / "data" / "dense_variants.gcl")).design)
configs = st.builds(lambda dp, mb, stack, zero, rc: TrainConfig(batch=64, seq=8192, tp=1, dp=dp, microbatch=mb,
                                                                 stack=stack, zero=zero, recompute=rc),
                    st.sampled_from([8, 16, 32]), st.sampled_from([1, 2]),
                    st.sampled_from(["fsdp", "megatron_core", "megatron"]), st.sampled_from([1, 3]),
                    st.sampled_from(["selective", "full"]))


@given(configs, st.sampled_from([1, 2, 4]))
def test_a_larger_shard_group_never_holds_more_state(cfg, shard):
    small, large = attrs.evolve(cfg, shard=shard), attrs.evolve(cfg, shard=shard * 2)
    assert sum(model_state(JOB.shape, large)) <= sum(model_state(JOB.shape, small)) * (1 + 1e-12)


@given(configs, st.sampled_from([1, 2, 4, 8]))
def test_recomputing_more_layers_never_needs_more_memory_nor_less_time(cfg, every):
    more, fewer = attrs.evolve(cfg, recompute_every=every), attrs.evolve(cfg, recompute_every=every * 2)
    assert memory(JOB.shape, more).total <= memory(JOB.shape, fewer).total * (1 + 1e-12)
    assert estimate(JOB.shape, more, JOB.partition).breakdown.recompute >= \
        estimate(JOB.shape, fewer, JOB.partition).breakdown.recompute


@given(configs, st.floats(0.0, 0.9), st.floats(0.05, 0.1))
def test_offloading_more_frees_gpu_memory_and_fills_host_memory(cfg, share, more):
    low, high = attrs.evolve(cfg, offload=share), attrs.evolve(cfg, offload=share + more)
    assert memory(JOB.shape, high).total <= memory(JOB.shape, low).total * (1 + 1e-12)
    assert memory(JOB.shape, high).offloaded >= memory(JOB.shape, low).offloaded
    assert estimate(JOB.shape, high, JOB.partition).step_time >= estimate(JOB.shape, low, JOB.partition).step_time * (1 - 1e-12)


@given(configs, st.sampled_from([512, 1024, 2048, 4096]))
def test_a_wider_window_never_makes_a_step_faster(cfg, window):
    narrow, wide = attrs.evolve(JOB.shape, window=window), attrs.evolve(JOB.shape, window=window * 2)
    assert estimate(wide, cfg, JOB.partition).step_time >= estimate(narrow, cfg, JOB.partition).step_time * (1 - 1e-12)
    assert wide.forward_flops_per_token() >= narrow.forward_flops_per_token()
