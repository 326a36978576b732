"""Megatron-LM's defaults that a stack does not share, as a job states them (`grad_reduce`,
`dropout` in `parallelism`): an fp32 gradient buffer (Megatron-LM's validate_args with --bf16)
and dropout masks (its default 0.1). Unstated, the software stack's behaviour holds; stated, the
memory and the data-parallel traffic follow (model/config.py `behaviour`, model/train/optimizer.py
`grad_bytes`, model/train/memory.py `activation_parts`)."""

from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.job import pinned_config, train_job
from gclc.model.train import dp_sync
from gclc.model.train.memory import memory, model_state
from gclc.testing import load_profile

load_profile()

# Megatron-LM's functional test gpt3_7b (benchmarks/memory/mcore_7b_tp4_pp1.gcl) on two DGX H100s.
DESIGN = """import "std/nvidia"
cluster Pod {
  units    = 2 x DGX_H100
  scaleout = NDR_FatTree
}
model M {
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8  ffn = 16384  mlp = gelu  vocab = 131200  seq = 8192
}
train job {
  model     = M
  on        = Pod
  batch     = 16
  precision = bf16
  software  = STACK
  parallelism { tp = TP pp = 1 dp = DP microbatch = 1 zero = 1 sp = SP PINS}
}
"""


def _job(stack: str = "megatron_core", pins: str = "", tp: int = 4, sp: bool = False):
    text = (DESIGN.replace("STACK", stack).replace("PINS", pins).replace("TP", str(tp))
            .replace("DP", str(16 // tp)).replace("SP", "true" if sp else "false"))
    result = check_text(text, "overrides.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def _memory(job):
    return memory(job.shape, pinned_config(job), job.partition.node.accelerator)


def test_unstated_the_stack_decides_and_stating_its_own_value_changes_nothing():
    cfg = pinned_config(_job())
    assert cfg.grad_reduce is None and cfg.dropout is None
    assert _memory(_job()) == _memory(_job(pins="grad_reduce = bf16 dropout = false "))
    old = _job("megatron")                  # Megatron-LM of 2019-23: fp32 buffer, dropout masks
    assert _memory(old) == _memory(_job("megatron", "grad_reduce = fp32 dropout = true "))


def test_an_fp32_gradient_buffer_doubles_the_gradients_and_their_reduction():
    bf16, fp32 = _job(), _job(pins="grad_reduce = fp32 ")
    assert _memory(fp32).gradients == 2 * _memory(bf16).gradients
    cfg16, cfg32 = pinned_config(bf16), pinned_config(fp32)
    assert model_state(fp32.shape, cfg32)[2] == model_state(bf16.shape, cfg16)[2]   # Adam's state unchanged
    assert dp_sync.traffic(fp32.shape, cfg32, fp32.partition).reduces > dp_sync.traffic(bf16.shape, cfg16, bf16.partition).reduces


def test_bf16_main_grads_keep_the_buffer_16_bit():
    text = (DESIGN.replace("STACK", "megatron_core").replace("PINS", "grad_reduce = fp32 ").replace("TP", "4")
            .replace("DP", "4").replace("SP", "false").replace("software  =", "main_grads = bf16\n  software  ="))
    narrowed = check_text(text, "narrow.gcl")
    assert narrowed.ok, [str(d) for d in narrowed.diagnostics]
    assert _memory(train_job(narrowed.design)).gradients == _memory(_job()).gradients


@given(tp=st.sampled_from([1, 2, 4]), sp=st.booleans())
def test_dropout_masks_are_one_byte_per_element_of_two_residual_streams(tp, sp):
    """Two hidden dropouts per layer keep a 1-byte mask over the hidden width each, split by TP
    under sequence parallelism only (the attention dropout of a fused kernel keeps none)."""
    off, on = _memory(_job(tp=tp, sp=sp)), _memory(_job(pins="dropout = true ", tp=tp, sp=sp))
    cfg = pinned_config(_job(tp=tp, sp=sp))
    tokens, layers, hidden = cfg.seq, 32, 4096
    split = tp if (sp and tp > 1) else 1
    assert on.activations - off.activations == tokens * layers * 2 * hidden / split
    assert on.weights == off.weights and on.gradients == off.gradients
