"""The layers' elementwise work follows the model's position embedding and the stack's dropout
(model/train/workload.py `elementwise_parts`): only rotary models rotate their queries and keys
in every layer (a learned table is added once at the embedding, ALiBi's bias rides in the
attention kernel), and only a stack that trains with dropout writes the residual adds' masks
(at p = 0 PyTorch returns the input without drawing one: ATen Dropout.cpp `_dropout_impl`)."""

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.config import TrainConfig
from gclc.model.job import pinned_config, train_job
from gclc.model.ops import ACT_BYTES
from gclc.model.shape import ModelShape
from gclc.model.train.step import estimate
from gclc.model.train.workload import elementwise_parts, rotary
from gclc.testing import load_profile

load_profile()

GPT = ModelShape(layers=24, hidden=2048, heads=16, kv_heads=16, head_dim=128, ffn=8192, vocab=50304, seq=2048,
                 mlp_matrices=2)


@given(heads=st.sampled_from([8, 16, 32, 64]), kv=st.sampled_from([1, 4, 8]), tp=st.sampled_from([1, 2, 4, 8]),
       sp=st.booleans(), stack=st.sampled_from(["megatron", "megatron_core", "fsdp", "fsdp_compiled", "maxtext"]))
def test_a_learned_table_drops_exactly_the_rotary_traffic(heads, kv, tp, sp, stack):
    shape = attrs.evolve(GPT, heads=heads, kv_heads=min(kv, heads), position_embedding="rope")
    cfg = TrainConfig(batch=64, seq=2048, tp=tp, sp=sp, dp=8, stack=stack)
    rope = elementwise_parts(shape, cfg, False)
    for kind in ("learned", "none"):
        table = elementwise_parts(attrs.evolve(shape, position_embedding=kind), cfg, False)
        unfused = 1 if cfg.behaviour("fused") else 2
        assert "rotary" not in table
        assert rope["rotary"] == pytest.approx(ACT_BYTES * unfused * 2 * (heads + min(kv, heads)) * 128 / tp)
        assert {k: v for k, v in rope.items() if k != "rotary"} == table
    # unstated, a model rotates as modern models do
    assert rotary(attrs.evolve(shape, position_embedding="")) and not rotary(attrs.evolve(shape, position_embedding="learned"))


@pytest.mark.parametrize("tp, sp", [(1, False), (4, False), (4, True)])
def test_the_residual_adds_write_masks_only_under_dropout(tp, sp):
    cfg = TrainConfig(batch=64, seq=2048, tp=tp, sp=sp, dp=8, stack="megatron_core")
    off = elementwise_parts(GPT, attrs.evolve(cfg, dropout=False), False)["residual"]
    on = elementwise_parts(GPT, attrs.evolve(cfg, dropout=True), False)["residual"]
    split = tp if sp else 1
    # two adds, each reads two h-vectors and writes one; dropout adds a 1-byte mask of h elements
    assert off == pytest.approx(ACT_BYTES * 2 * 3 * GPT.hidden / split)
    assert on - off == pytest.approx(2 * GPT.hidden / split)   # 2 masks x h bytes
    # the stack's own dropout when the job states none: Megatron-LM 2021 trains with it, Megatron-Core recipes without
    assert elementwise_parts(GPT, attrs.evolve(cfg, stack="megatron"), False)["residual"] == pytest.approx(on)
    assert elementwise_parts(GPT, cfg, False)["residual"] == pytest.approx(off)


DESIGN = """import "std/nvidia"
cluster Pod { units = 1 x DGX_A100 }
model M {
  arch = dense  layers = 24  hidden = 2048  heads = 16  ffn = 8192  mlp = gelu  vocab = 50304  seq = 2048
  POSITION
}
train job {
  model = M  on = Pod  batch = 512  precision = bf16  software = fsdp
  parallelism { tp = 1 pp = 1 dp = 8 microbatch = 8 zero = 3 recompute = full }
}
"""


def _step(position: str) -> float:
    result = check_text(DESIGN.replace("POSITION", position), "positions.gcl")
    assert result.ok, [d.summary for d in result.diagnostics]
    job = train_job(result.design)
    return estimate(job.shape, pinned_config(job), job.partition).step_time


def test_the_step_reads_the_stated_position_embedding():
    rope, learned, none = (_step(f"position_embedding = {k}") for k in ("rope", "learned", "none"))
    assert learned < rope and none == pytest.approx(learned)
    assert _step("") == pytest.approx(rope)   # unstated: rotary
