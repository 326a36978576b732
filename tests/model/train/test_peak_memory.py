"""The step's memory peak (model/train/peak.py, model/train/memory.py): the stage that binds,
the loss's logits by implementation, the layer a recompute rebuilds, ZeRO-3's gathered layers,
FSDP under a pipeline, fp8 parameters, and what lies outside the framework's allocator. Hand
figures first, then the laws the planner's search relies on (a higher ZeRO stage, more recompute
and a smaller micro-batch never need more memory)."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.config import TrainConfig
from gclc.model.job import pinned_config, train_job
from gclc.model.shape import ModelShape
from gclc.model.train import peak
from gclc.model.train.memory import memory, model_state

# Llama-2-7B's shape (Touvron et al. 2023, Table 1)
LLAMA = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, head_dim=128, ffn=11008, vocab=32000, seq=4096,
                   mlp_matrices=3, tied_embeddings=False)
MOE = ModelShape(layers=8, hidden=2048, heads=16, kv_heads=4, head_dim=128, ffn=1024, vocab=32000, seq=4096,
                 mlp_matrices=3, routed=64, shared=0, top_k=4, expert_ffn=1024)
GIB = 2 ** 30


def cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"batch": 64, "seq": 4096, "dp": 8, **kw})


@pytest.mark.parametrize("loss, per_logit", [("eager", 12), ("fused", 6), ("compiled", 4)])
def test_the_loss_peak_is_its_logits_times_the_bytes_its_implementation_holds(loss, per_logit):
    # no recompute: nothing is rebuilt, so one micro-batch's logits at the loss's peak bind
    m = memory(LLAMA, cfg(microbatch=2, loss=loss))
    assert m.logits == 2 * 4096 * 32000 * per_logit
    assert m.rebuilt == 0
    # vocabulary-parallel over TP
    assert memory(LLAMA, cfg(microbatch=2, tp=4, sp=True, loss=loss)).logits == 2 * 4096 * 32000 / 4 * per_logit


def test_a_stack_sets_the_default_loss():
    assert memory(LLAMA, cfg(stack="fsdp")).logits == memory(LLAMA, cfg(stack="fsdp", loss="eager")).logits
    assert memory(LLAMA, cfg(stack="nemo")).logits == memory(LLAMA, cfg(stack="nemo", loss="fused")).logits


def test_pipeline_stages_never_add_their_peaks():
    # full recompute, 1F1B: the first stage holds 4 micro-batches' layer inputs and rebuilds one
    # layer; the last holds one micro-batch and the loss; whichever is larger binds, never the sum
    one_f_one_b = cfg(pp=4, dp=2, recompute="full")
    first = 4 * 8 * 4096 * 4096 * 2
    m = memory(LLAMA, one_f_one_b)
    assert (m.activations, m.logits) == (first, 0)
    # a long vocabulary at a wide micro-batch makes the last stage bind: one micro-batch held
    wide = attrs.evolve(one_f_one_b, microbatch=4, loss="eager")
    m = memory(LLAMA, wide)
    assert m.activations == 8 * 4 * 4096 * 4096 * 2 and m.logits == 4 * 4096 * 32000 * 12


def test_the_last_rank_of_an_interleaved_pipeline_holds_its_warm_up_chunks():
    # Megatron's warm-up on the last rank: (vp - 1) x pp chunks, then one more in 1F1B
    c = cfg(pp=4, dp=2, vp=2, batch=64)
    assert peak.last_flight(c, 99.0) == (1 * 4 + 1) / 2
    assert peak.last_flight(attrs.evolve(c, vp=1), 99.0) == 1
    assert peak.last_flight(attrs.evolve(c, gpipe=True, vp=1), 16.0) == 16.0


def test_full_recompute_rebuilds_one_layer_of_one_micro_batch():
    none, full = memory(LLAMA, cfg(pp=2, dp=4)), memory(LLAMA, cfg(pp=2, dp=4, recompute="full"))
    per_layer = none.activations / (2 * 16)          # 1F1B first stage: 2 micro-batches of 16 layers
    assert full.rebuilt == pytest.approx(per_layer - 4096 * 4096 * 2)   # all but the kept layer input
    assert full.total < none.total


def test_zero3_gathers_two_layers_and_one_layers_gradients():
    c = cfg(zero=3, stack="megatron_core")
    layer = LLAMA.layer_params(False)
    assert memory(LLAMA, c).gathered == pytest.approx(2 * 2 * layer + 2 * layer)
    # FSDP keeps its root module (embedding and output layer) whole from forward to backward
    fsdp = memory(LLAMA, attrs.evolve(c, stack="fsdp")).gathered
    assert fsdp == pytest.approx(2 * (2 * layer + 2 * 32000 * 4096) + 2 * layer)
    # DeepSpeed gathers module by module: its largest matrix (here QKV, 3 x 4096 x 4096), not the layer
    deepspeed = memory(LLAMA, attrs.evolve(c, stack="deepspeed")).gathered
    assert deepspeed == pytest.approx(2 * 2 * 4096 * 12288 + 2 * 4096 * 12288)


def test_fsdp_under_a_pipeline_holds_weights_and_gradients_whole():
    c = cfg(pp=4, dp=2, zero=3, stack="fsdp")
    w3, g3, o3 = model_state(LLAMA, c)
    w1, g1, o1 = model_state(LLAMA, attrs.evolve(c, zero=1))
    assert (w3, g3) == (w1, g1) and o3 == o1
    assert memory(LLAMA, c).gathered == 0
    # Megatron's ZeRO-3 under a pipeline does shard them
    assert model_state(LLAMA, attrs.evolve(c, stack="megatron_core"))[0] < w1


def test_fp8_parameters_replace_the_bf16_weights_and_their_copy():
    plain = model_state(LLAMA, cfg(precision="fp8", zero=1))[0]
    kept = model_state(LLAMA, cfg(precision="fp8", zero=1, fp8_params=True))[0]
    # bf16 + the fp8 copies (data and transpose, TE "Handling transposes"), against fp8 alone (both)
    assert plain == pytest.approx(2 * kept)
    # torchao and XLA cast at each use: no persistent copy
    assert model_state(LLAMA, cfg(precision="fp8", stack="fsdp", zero=1))[0] == model_state(LLAMA, cfg(zero=1))[0]


def test_moe_act_drops_the_routed_experts_activation_output_only():
    base = cfg(ep=8, recompute="selective", recompute_modules=("norm",))
    act = attrs.evolve(base, recompute_modules=("norm", "moe_act"))
    saved = memory(MOE, base).activations - memory(MOE, act).activations
    tokens = 4096   # one micro-batch; 1 flight without a pipeline
    assert saved == pytest.approx(tokens * MOE.layers * 2 * 4 * 1024)   # bf16, top-4 x expert ffn
    assert memory(LLAMA, attrs.evolve(base, ep=1, recompute_modules=("moe_act",))).activations == memory(
        LLAMA, attrs.evolve(base, ep=1, recompute="none", recompute_modules=())).activations


def test_outside_the_allocator_cuda_context_and_nccl_per_communicator():
    one = memory(LLAMA, cfg())
    assert one.buffers == pytest.approx(peak.CUDA_CONTEXT_BYTES + peak.NCCL_CHANNELS * 2 * peak.NCCL_CONNECTION_BYTES)
    two = memory(LLAMA, cfg(tp=2, sp=True, dp=4))
    assert two.buffers - one.buffers == pytest.approx(peak.NCCL_CHANNELS * 2 * peak.NCCL_CONNECTION_BYTES)
    assert one.reserved == one.total - one.buffers
    assert one.allocated == pytest.approx(one.reserved / (1 + peak.FRAGMENTATION))


def test_a_tpu_has_no_cuda_context():
    design = Path(__file__).parents[3] / "benchmarks" / "runs" / "maxtext_v5e_16B_1x.gcl"
    job = train_job(check_file(str(design)).design)
    held = memory(job.shape, pinned_config(job), job.partition.node.accelerator)
    assert held.buffers == 0 and held.total > 0


# ----------------------------------------------------------------- the search's laws

LAYOUTS = st.builds(dict, tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 8]),
                    vp=st.sampled_from([1, 2]), stack=st.sampled_from(["megatron_core", "fsdp", "deepspeed", "nemo"]),
                    precision=st.sampled_from(["bf16", "fp8"]), loss=st.sampled_from([None, "eager", "compiled"]),
                    offload=st.sampled_from([0.0, 0.5]), gpipe=st.booleans())
SHAPES = st.sampled_from([LLAMA, MOE, attrs.evolve(LLAMA, layers=4, vocab=128000)])


def _config(layout: dict, **kw) -> TrainConfig:
    base = {"batch": 64, "seq": 4096, "sp": layout["tp"] > 1, **layout, **kw}
    if base["gpipe"]:
        base["vp"] = 1
    return TrainConfig(**base)


@settings(deadline=None)
@given(SHAPES, LAYOUTS, st.sampled_from(["none", "selective", "full"]))
def test_a_higher_zero_stage_never_needs_more(shape, layout, recompute):
    totals = [memory(shape, _config(layout, zero=z, recompute=recompute)).total for z in range(4)]
    assert all(a >= b * (1 - 1e-12) for a, b in zip(totals, totals[1:])), totals


@settings(deadline=None)
@given(SHAPES, LAYOUTS, st.sampled_from([0, 1, 3]))
def test_more_recompute_never_needs_more(shape, layout, zero):
    totals = [memory(shape, _config(layout, zero=zero, recompute=r)).total for r in ("none", "selective", "full")]
    assert totals[0] >= totals[1] * (1 - 1e-12) and totals[1] >= totals[2] * (1 - 1e-12), totals


@settings(deadline=None)
@given(SHAPES, LAYOUTS, st.sampled_from(["none", "full"]), st.sampled_from([0, 1, 3]))
def test_a_smaller_micro_batch_never_needs_more(shape, layout, recompute, zero):
    totals = [memory(shape, _config(layout, zero=zero, recompute=recompute, microbatch=mb)).total for mb in (1, 2, 4)]
    assert totals == sorted(totals), totals


# ----------------------------------------------------------------- the fields, as written

def _job(extra: str, arch: str = "dense", precision: str = "bf16"):
    from gclc.compiler.driver import check_text

    experts = "  experts { routed = 8  top_k = 2 }\n" if arch == "moe" else ""
    text = ('import "std/nvidia"\n'
            f"model M {{\n  arch = {arch}\n  layers = 4\n  hidden = 512\n  heads = 8\n  ffn = 2048\n  vocab = 1000\n"
            f"  seq = 512\n{experts}}}\n"
            "cluster C { units = 1 x DGX_H100 }\n"
            f"train t {{\n  model = M\n  on = C\n  batch = 8\n  precision = {precision}\n{extra}\n}}\n")
    return check_text(text, "job.gcl")


def test_fp8_params_and_loss_reach_the_configuration():
    checked = _job("  fp8_params = true\n  parallelism { dp = 8  loss = compiled }", precision="fp8")
    assert checked.ok
    c = pinned_config(train_job(checked.design))
    assert c.fp8_params and c.loss == "compiled"


@pytest.mark.parametrize("extra, arch, precision, line, words", [
    ("  fp8_params = true", "dense", "bf16", 17, "GEMMs run in bf16"),
    ("  parallelism { recompute = selective  recompute_modules = [moe_act] }", "dense", "bf16", 17,
     "has no routed experts"),
])
def test_a_field_the_model_would_ignore_is_a_located_error(extra, arch, precision, line, words):
    checked = _job(extra, arch, precision)
    errors = [d for d in checked.diagnostics if d.is_error]
    assert len(errors) == 1 and errors[0].code == "pin-meaningless"
    assert errors[0].subject.line == line and words in errors[0].summary


def test_moe_act_on_a_moe_model_is_accepted():
    assert _job("  parallelism { recompute = selective  recompute_modules = [norm, moe_act] }", "moe").ok
