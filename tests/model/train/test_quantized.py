"""One answer for what a tensor in the GEMMs' low-precision format costs (model/train/quantized.py):
bytes per value with the MX block scales, the rowwise and columnwise copies Transformer Engine keeps
of a weight, what the fp8 parameter all-gather moves, and the fp8 tokens of an MoE dispatch."""

import ast
from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.model.config import TrainConfig
from gclc.model.shape import ModelShape
from gclc.model.train import dp_sync
from gclc.model.train.memory import activation_parts, weight_bytes
from gclc.model.train.quantized import fp8_token_bytes, gather_bytes, gathered_width, gemm_bytes, weight_copies
from gclc.testing import load_profile

load_profile()

MX = 1 + 1 / 32   # an 8-bit element and its share of one E8M0 scale per 32 (OCP MX v1.0)
GPT = ModelShape(layers=48, hidden=6144, heads=64, kv_heads=64, head_dim=96, ffn=24576, vocab=51200, seq=2048,
                 mlp_matrices=2, tied_embeddings=True)


def cfg(**kw):
    base = dict(batch=64, seq=2048, tp=8, dp=8, microbatch=1, precision="fp8", stack="megatron_core", zero=1)
    base.update(kw)
    return TrainConfig(**base)


def test_mx_fp8_is_one_and_a_thirty_second_byte_everywhere_it_is_priced():
    hopper, blackwell = cfg(), cfg(mx_fp8=True)
    assert gemm_bytes(hopper) == 1 and gemm_bytes(blackwell) == pytest.approx(MX)
    assert gemm_bytes(blackwell) == gemm_bytes(cfg(precision="mxfp8"))
    # the saved GEMM inputs (the MLP activation's output, the norms' outputs) in the same format
    parts, mx_parts = activation_parts(GPT, hopper), activation_parts(GPT, blackwell)
    assert mx_parts["mlp act"] == pytest.approx(parts["mlp act"] * MX)
    assert mx_parts["norm out"] == pytest.approx(parts["norm out"] * MX)
    assert mx_parts["qkv"] == parts["qkv"]   # bf16 tensors keep 2 B


def test_transformer_engine_keeps_a_rowwise_and_a_columnwise_copy_and_cast_at_use_stacks_none():
    # Hopper: fp8 data and its transpose; MXFP8: 1x32 and 32x1 blocks, quantized apart
    assert weight_copies(cfg()) == 2 and weight_bytes(cfg()) == 2 + 2
    assert weight_bytes(cfg(mx_fp8=True)) == pytest.approx(2 + 2 * MX)
    # torchao (FSDP) casts the weight at each use: bf16 alone
    assert weight_bytes(cfg(stack="fsdp")) == 2


def test_per_tensor_fp8_on_a_chip_with_non_tn_fp8_gemms_keeps_one_copy():
    # Transformer Engine (d0067d0) quantizer.cpp: Float8Quantizer / Float8CurrentScalingQuantizer allocate the
    # transpose only where `columnwise_usage && !is_non_tn_fp8_gemm_supported` (Blackwell reads the rowwise
    # data in any layout); MXFP8 allocates both usages everywhere
    blackwell = cfg(precision="fp8_e4m3", non_tn_fp8=True)
    assert weight_copies(blackwell) == 1 and weight_bytes(blackwell) == 2 + 1
    assert weight_copies(cfg(precision="fp8_e4m3")) == 2                    # Hopper: data and transpose
    assert weight_copies(cfg(precision="mxfp8", non_tn_fp8=True)) == 2       # MX: both usages, quantized apart
    assert weight_copies(cfg(precision="nvfp4", non_tn_fp8=True)) == 2       # (a stray flag: not fp8)
    # fp8 parameters under ZeRO-3: no transpose made locally beside the gathered data
    sharded = cfg(precision="fp8_e4m3", fp8_params=True, zero=3)
    assert gathered_width(sharded) == 2 and gathered_width(attrs.evolve(sharded, non_tn_fp8=True)) == 1


@pytest.mark.parametrize("chip, precision, non_tn", [("B200", "fp8_e4m3", True), ("GB300", "fp8_e5m2", True),
                                                     ("B200", "fp8", False), ("B200", "mxfp8", False),
                                                     ("H100_SXM", "fp8_e4m3", False), ("MI300X", "fp8_e4m3fnuz", False),
                                                     ("B200", "bf16", False)])
def test_the_job_says_where_per_tensor_fp8_needs_no_transpose(chip, precision, non_tn):
    from gclc.compiler.driver import check_text
    from gclc.compiler.lower import accelerator
    from gclc.model.job import non_tn_fp8, pinned_config, state_config, train_job

    design = check_text('import "std/nvidia"\nimport "std/amd"\n', "chips.gcl").design
    assert non_tn_fp8(precision, accelerator(design[chip])) == non_tn
    assert not non_tn_fp8(precision, None)
    if chip == "MI300X":
        return
    node = {"B200": "DGX_B200", "GB300": "GB300_NVL72", "H100_SXM": "DGX_H100"}[chip]
    text = (f'import "std/nvidia"\ncluster C {{ units = 1 x {node} }}\nmodel M {{ arch = dense  layers = 2  hidden = 1024  '
            f'heads = 8  ffn = 4096  vocab = 32000  seq = 2048 }}\ntrain t {{ model = M  on = C  batch = 16  '
            f'precision = {precision} }}\n')
    job = train_job(check_text(text, "t.gcl").design)
    planned = pinned_config(job)   # the configuration the search and the plan start from (model/job.py)
    assert planned.non_tn_fp8 == non_tn
    assert state_config(job.entity, job.partition.node.accelerator).non_tn_fp8 == non_tn   # a schedule's checkpoint


@pytest.mark.parametrize("mx, zero, sent", [
    (False, 1, 1.0),      # per-tensor fp8 parameters: their rowwise uint8 data, the transpose made after
    (True, 1, 2.0),       # MXFP8 under the distributed optimizer: bf16 into the gradient buffer, quantized after
    (True, 3, MX),        # Megatron-FSDP: the rowwise buffer for the forward, the columnwise for the backward
])
def test_the_fp8_parameter_all_gather_moves_what_megatron_sends(mx, zero, sent):
    job = cfg(fp8_params=True, mx_fp8=mx, zero=zero)
    assert gather_bytes(job) == pytest.approx(sent)
    assert gather_bytes(attrs.evolve(job, fp8_params=False)) == 2
    # a ZeRO-3 layer while gathered: Hopper's data and the transpose made from it, MX one usage
    assert gathered_width(attrs.evolve(job, zero=3)) == pytest.approx(MX if mx else 2 * 1)


def test_the_priced_all_gather_carries_those_bytes():
    from gclc.compiler.driver import check_text
    from gclc.model.job import train_job

    design = check_text(DESIGN, "quantized.gcl").design
    partition = train_job(design).partition
    sizes = {}
    for mx, fp8_params in ((False, False), (False, True), (True, True)):
        calls = dp_sync.calls(GPT, cfg(fp8_params=fp8_params, mx_fp8=mx, tp=8, dp=4, batch=32), partition)
        sizes[mx, fp8_params] = next(c.nbytes for c in calls if c.collective == "all_gather")
    assert sizes[False, True] == pytest.approx(sizes[False, False] / 2)   # fp8 rowwise: half of bf16
    assert sizes[True, True] == pytest.approx(sizes[False, False])        # MX: gathered in bf16


@given(precision=st.sampled_from(["fp8", "mxfp8", "nvfp4"]), mx=st.booleans())
def test_fp8_tokens_on_the_wire_carry_their_scales(precision, mx):
    # DeepEP's fp8 dispatch: one fp32 scale per 128 values (1 + 4/128); MXFP8: one E8M0 per 32
    job = cfg(precision=precision, mx_fp8=mx and precision == "fp8")
    assert fp8_token_bytes(job) == pytest.approx(1 + 4 / 128) == pytest.approx(MX)


# The modules of the model that turn a format's name into bytes, each for its own tensors: training's
# (quantized.py), serving's cached values and weights (kv.py, and config.py through kv.py's helper).
# MoE tokens on the wire go through compiler/formats.py dispatch_bytes in both rooms.
FORMAT_PRICERS = {("train", "quantized.py"), ("serve", "kv.py"), ("serve", "config.py")}


def test_no_module_of_the_model_prices_a_format_by_itself():
    # one answer: only the modules above turn a format's name into bytes (model/ scanned, serve included)
    model = Path(__file__).resolve().parents[3] / "model"
    scanned = 0
    for path in model.rglob("*.py"):
        if (path.parent.name, path.name) in FORMAT_PRICERS:
            continue
        names = {n.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
        assert "value_bytes" not in names, path.relative_to(model)
        scanned += 1
    assert scanned > 50


@given(precision=st.sampled_from(["fp8", "fp8_e4m3", "mxfp8", "int8", "nvfp4", "fp4", "mxfp4"]))
def test_serving_and_training_dispatch_an_fp8_token_in_the_same_bytes(precision):
    # DeepEP's fp8 dispatch (1 + 4/128) in both rooms; serving engines send nvfp4 tokens (0.5 + 1/16),
    # training's stacks never narrower than fp8
    from gclc.compiler.formats import dispatch_bytes, family
    job = cfg(precision=precision)
    assert fp8_token_bytes(job) == pytest.approx(1 + 4 / 128)
    served = dispatch_bytes(precision)
    assert served == pytest.approx(0.5 + 1 / 16 if family(precision) == "fp4" else 1 + 4 / 128)
    assert dispatch_bytes("bf16") == 2.0


DESIGN = """import "std/nvidia"
cluster Pod {
  units    = 4 x DGX_H100
  scaleout = NDR_FatTree
}
model M {
  arch = dense  layers = 48  hidden = 6144  heads = 64  ffn = 24576  vocab = 51200  seq = 2048
}
train job {
  model     = M
  on        = Pod
  batch     = 32
  precision = fp8
  software  = megatron_core
  parallelism { tp = 8 pp = 1 dp = 4 microbatch = 1 zero = 1 }
}
"""
