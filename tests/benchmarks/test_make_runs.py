"""benchmarks/make_runs.py writes the designs the calibration is fitted on; one test per class of
error the audit (benchmarks/runs/AUDIT.md) found, on representative rows of the real CSV."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_text
from gclc.model.job import train_job

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


make_runs = _load("make_runs")
run_facts = sys.modules["run_facts"]
run_models = sys.modules["run_models"]

ROWS, MEASURED = make_runs.load(BENCH / "data" / "public_runs.csv", BENCH / "data" / "public_runs_measured.csv")
BY_ID = {r["run_id"]: r for r in ROWS}


def design(run_id: str) -> str:
    return make_runs.render(BY_ID[run_id], MEASURED[run_id])


def field(text: str, name: str) -> str:
    return re.search(rf"^\s*{name}\s*=\s*([^#\n]+?)\s*(#|$)", text, re.M).group(1)


def job(run_id: str):
    result = check_text(design(run_id), path=str(BENCH / "runs" / f"{run_id}.gcl"))
    assert result.ok, [d.summary for d in result.diagnostics if d.is_error]
    return train_job(result.design)


def scaleout_gbps(run_id: str) -> float:
    tiers = [t for t in job(run_id).partition.tiers if t.scope == "scaleout"]
    return tiers[0].bandwidth * 8 / 1e9


# ----------------------------------------------------------------- model shape from the wrong release


def test_mixtral_uses_the_tokenizer_nemo_trained_with():
    # NeMo 25.02's pretrain_mixtral_8x22b.py trains on a 32000-token NullTokenizer, not HF's 32768
    assert field(design("nemo2502_b200_8"), "vocab") == "32000"


def test_nemo_gpt3_starts_from_the_gpt2_tokenizer():
    shape, _ = make_runs.resolve_shape(BY_ID["nemo2407_1"], [])
    assert shape.vocab == 50257 and shape.tied


def test_mpt_30b_has_the_benchmark_yaml_heads():
    # llm-foundry 061f2c7c scripts/train/yamls/pretrain/mpt-30b.yaml: n_heads 56 (the HF release has 64)
    shape, _ = make_runs.resolve_shape(BY_ID["mpt_h100_5"], [])
    assert (shape.layers, shape.hidden, shape.heads) == (48, 7168, 56)


# ----------------------------------------------------------------- chip variant and scale-out


def test_dgx_gb200_runs_connectx7_at_400_gbps_per_gpu():
    text = design("mb2602_13")   # 256 GB200 GPUs over 4 racks
    assert "4 x ConnectX7" in text and "extends NDR_FatTree" in text
    j = job("mb2602_13")
    assert j.partition.node.accelerator.name == "GB200"
    assert j.partition.node.accelerator.tdp == pytest.approx(1200)
    assert scaleout_gbps("mb2602_13") == pytest.approx(400, rel=0.01)


@pytest.mark.parametrize("run_id, gbps", [("mb2511_25", 400), ("mb2602_31", 800), ("mb2602_18", 400),
                                          ("sc21_t1_5", 200)])
def test_scaleout_follows_the_reference_architecture(run_id, gbps):
    assert scaleout_gbps(run_id) == pytest.approx(gbps, rel=0.01)


# the row's "40 GB" / "180 GB" / "80 GB" part, at the capacity nvidia-smi reports for it (std/nvidia [smi])
@pytest.mark.parametrize("run_id, chip, memory_mib", [("mpt_a100_40_46", "A100_SXM_40GB", 40960),
                                                      ("mb2602_18", "B200", 183359),
                                                      ("kort_t5_3", "A100_SXM_80GB", 81920)])
def test_chip_variant_is_the_one_the_row_names(run_id, chip, memory_mib):
    accelerator = job(run_id).partition.node.accelerator
    assert accelerator.name == chip and accelerator.hbm_capacity == pytest.approx(memory_mib * 2**20)


# ----------------------------------------------------------------- precision recipe names


@pytest.mark.parametrize("word, precision", [
    ("FP8-CS (FP8-MX)", "fp8"), ("MXFP8", "fp8"), ("FP8-DS", "fp8"), ("fp8_sc", "fp8"), ("NVFP4", "fp4"),
    ("float8 (torchao)", "fp8"), ("TE hybrid", "fp8"), ("e4m3", "fp8"), ("amp_bf16", "bf16"), ("bfloat16", "bf16"),
    ("fp16", "fp16"), ("tf32", "tf32"), ("fp32", "fp32"), ("mixed precision", "bf16"), ("", "bf16")])
def test_precision_words(word, precision):
    assert make_runs.precision_of(word)[0] == precision


def test_unknown_precision_word_is_an_error_not_bf16():
    with pytest.raises(make_runs.Unexpressible, match="int4"):
        make_runs.precision_of("int4 awq")


@pytest.mark.parametrize("run_id, precision", [
    ("mb2511_10", "fp8_e4m3"),   # GB200, FP8-CS: per-tensor current scaling
    ("mb2511_18", "fp8_e4m3"),   # B200, FP8-CS (FP8-MX): the primary figure is FP8-CS
    ("mb2509_1", "fp8_e4m3"),    # GB200, 25.09: the footnote makes the primary figure per-tensor
    ("mb2602_13", "fp8_e4m3"),   # GB200, 26.02 "FP8": the recipes' FP8_CS variant
    ("nemo2502_b200_2", "fp8_e4m3"),   # B200, NeMo 25.02 "FP8": bf16_with_fp8_mixed, delayed scaling (no MX yet)
    ("mb2511_13", "fp8"),        # GB200, FP8-MX: block scaling, the generic fp8 on Blackwell
    ("mb2602_16", "fp8"),        # GB200, 26.02 MXFP8
    ("mb2511_24", "fp8"),        # H100, FP8-CS: the generic fp8 is per-tensor there already
    ("mb2602_7", "fp8"),         # H100, 26.02 FP8
    ("mb2511_14", "bf16")])
def test_blackwell_per_tensor_fp8_rows_are_not_priced_as_mxfp8(run_id, precision):
    text = design(run_id)
    assert field(text, "precision") == precision
    cfg = job(run_id)
    from gclc.compiler.formats import generation
    from gclc.model.job import pinned_config
    blackwell = generation(cfg.partition.node.accelerator) == "blackwell"   # by its data sheet, not its name
    assert pinned_config(cfg).mx_fp8 is (precision == "fp8" and blackwell)
    if precision == "fp8_e4m3":   # Megatron-Bridge's current-scaling and NeMo 25.02's delayed recipes keep fp8 weights
        assert field(text, "fp8_params") == "true"
        # the note says whether the export's delayed recipe is the run's
        assert ("--fp8-recipe tensorwise" in text) is run_id.startswith("mb")


# ----------------------------------------------------------------- vocabulary padding


def test_megatron_pads_to_128_times_tp():
    assert run_facts.megatron_padded_vocab(128256, 8) == 129024
    assert run_facts.megatron_padded_vocab(50257, 1) == 50304


@pytest.mark.parametrize("run_id, vocab", [("mb2602_14", "129024"),      # Llama 3.1 405B, TP 8
                                           ("nemo2407_3", "50688"),      # GPT-3 175B, TP 4
                                           ("nemo_longctx_h100_8", "32768"),  # Llama 2 7B, TP 8
                                           ("mb2509_15", "129280"),      # DeepSeek-V3: should_pad_vocab False
                                           ("sc21_t1_10", "51200")])     # already padded in the row
def test_vocabulary_padding(run_id, vocab):
    assert field(design(run_id), "vocab") == vocab


# ----------------------------------------------------------------- sharding names


@pytest.mark.parametrize("word, stage", [
    ("ZeRO-2", 2), ("DeepSpeed ZeRO stage 1", 1), ("ZeRO-3 (DeepSpeed)", 3), ("FSDP SHARD_GRAD_OP", 2),
    ("NO_SHARD", 0), ("FSDP FULL_SHARD (mp mode PURE)", 3), ("FSDP2 (1D, 64 ranks)", 3), ("FSDP (64)", 3),
    ("DDP + distributed optimizer (FSDP=0)", 1), ("distributed_fused_adam", 2), ("optim_grads", 2), ("none", 0),
    ("distributed_fused_adam_with_cosine_annealing", 1)])   # NeMo 2.0's factory: Megatron-Core ZeRO-1, not Apex
def test_sharding_names(word, stage):
    assert run_facts.sharding_of(word)[0] == stage


def test_unstated_sharding_is_left_to_the_recipe():
    assert run_facts.sharding_of("ZeRO (stage not stated)") is None
    assert field(design("nemo2407_3"), "zero") == "2"   # NeMo 1.0 launcher: distributed_fused_adam


# ----------------------------------------------------------------- recompute defaults of a recipe


def test_recipe_recompute_defaults():
    assert field(design("mb2509_9"), "recompute") == "selective"    # 25.09 DeepSeek-V3 yaml: selective
    assert field(design("nemo2407_3"), "recompute") == "selective"  # NeMo 1.0 GPT-3 175B config
    assert field(design("mb2602_19"), "recompute") == "none"        # GB300 GPT-OSS: no recompute


def test_nemo_2407_recipes_are_read_at_the_release_tag():
    # NeMo-Framework-Launcher at tag 24.07: nemotron_340b.yaml recomputes selectively and runs Apex's
    # distributed_fused_adam with optim.dtype bf16 (NeMo r2.0.0rc1: store_params False, no master);
    # llama3_70b.yaml and nemotron_22b.yaml run distributed_fused_adam too (mcore's optimizer came 2024-12-05)
    nemotron = design("nemo2407_10")
    assert field(nemotron, "recompute") == "selective" and field(nemotron, "zero") == "2"
    assert field(nemotron, "optimizer_state") == "bf16" and field(nemotron, "master_weights") == "none"
    assert field(design("nemo2407_12"), "zero") == "2" and "optimizer_state" not in design("nemo2407_12")


def test_recipe_settings_gclc_cannot_express_are_stated():
    partial = design("mb2511_23")   # Llama 3 8B H100 FP8-CS: recompute_num_layers 5
    assert field(partial, "recompute") == "none" and "5 of 32 layers" in partial
    offload = design("mb2602_5")    # Llama 3 70B GB300 FSDP: cpu_offloading_num_layers 20 of 80
    assert field(offload, "offload") == "0.25" and "cpu_offloading_num_layers 20" in offload   # now expressible


def _shape(run_id: str):
    return train_job(check_text(design(run_id), f"{run_id}.gcl").design)


def test_deepseek_v3_is_written_with_mla_and_the_recipes_mtp():
    # 25.11 GB200 row "w/o MTP"; the 26.02 recipe defaults to mtp_num_layers = 1
    without, with_mtp = _shape("mb2511_12"), _shape("mb2602_16")
    for job in (without, with_mtp):
        s = job.shape
        assert (s.kv_rank, s.rope_dim, s.q_rank, s.head_dim, s.kv_heads) == (512, 64, 1536, 128, 128)
    assert without.shape.mtp == 0 and with_mtp.shape.mtp == 1


@pytest.mark.parametrize("run_id, factor", [("mb2509_5", 1.0), ("nemo2502_b200_8", 1.0), ("mb2511_15", 0.0)])
def test_token_dropping_rows_route_with_a_capacity_factor(run_id, factor):
    # 'tokendrop' variants of the 25.09 table and NeMo's Mixtral 64k recipe (MegatronTokenDropCallback)
    assert _shape(run_id).shape.capacity_factor == factor


@pytest.mark.parametrize("run_id, overlap", [("mb2511_27", True), ("mb2602_33", True), ("mb2511_15", None)])
def test_recipes_that_overlap_the_moe_all_to_all_pin_it(run_id, overlap):
    assert _shape(run_id).pinned.get("ep_overlap") == overlap


def test_the_stack_is_the_one_the_runs_framework_and_date_imply():
    run_stacks = sys.modules["run_stacks"]
    by_group = {r["group"]: r for r in ROWS}
    sc21 = by_group["Megatron SC21 weak scaling"]
    assert (run_stacks.date_of(sc21), run_stacks.software_of(sc21)) == ("2021-04", "megatron")
    core = by_group["Megatron-Core H100 weak scaling"]
    assert (run_stacks.date_of(core), run_stacks.software_of(core)) == ("2024-07", "megatron_core")
    assert field(design(core["run_id"]), "software") == "megatron_core"
    # the same framework words, dated after Megatron-Core 0.4, get the overlapped stack
    later = dict(sc21, source="a 2024 report (arXiv:2406.01234)", source_locator="", group="x")
    assert run_stacks.software_of(later) == "megatron_core"
    undated = dict(sc21, source="", source_locator="", group="x")
    with pytest.raises(make_runs.Unexpressible, match="states no date"):
        run_stacks.software_of(undated)


def test_every_stack_names_releases_and_a_source():
    from gclc.model.config import STACKS
    from gclc.model.stacks import ERAS, NoStack, stack_for

    assert {e.stack for e in ERAS} == set(STACKS)
    assert all(e.source and e.releases and (e.last is None or e.first <= e.last) for e in ERAS)
    assert stack_for("megatron", "2022-05").stack == "megatron" and stack_for("megatron", "2025-01").stack == "megatron_core"
    with pytest.raises(NoStack, match="covers"):
        stack_for("deepspeed", "2024-01")


def test_multislice_maxtext_is_hybrid_sharded_and_torchtitan_layer_checkpointing_every_second_layer():
    multislice = design("maxtext_v5e_16B_16x")
    assert (field(multislice, "dp"), field(multislice, "shard"), field(multislice, "zero")) == ("4096", "256", "3")
    assert "shard" not in re.findall(r"^\s*(\w+)\s*=", design("maxtext_v5e_16B_1x"), re.M)   # one slice: plain FSDP
    layered = design("torchtitan_a100_1")
    assert (field(layered, "recompute"), field(layered, "recompute_every")) == ("full", "2")
    job = train_job(check_text(multislice, str(BENCH / "runs" / "maxtext_v5e_16B_16x.gcl")).design)
    assert job.pinned["shard"] == 256


def test_megatron_bridge_cpu_offloading_is_the_offloaded_share_of_a_stage():
    # llama31_405b perf_matrix gb200 fp8_cs: cpu_offloading_num_layers 95 of 126 layers (pp 1)
    text = design("mb2509_3")
    assert float(field(text, "offload")) == pytest.approx(95 / 126, abs=1e-4)
    job = train_job(check_text(text, str(BENCH / "runs" / "mb2509_3.gcl")).design)
    assert job.partition.node.host_link == 225e9      # GB200 tray: NVLink-C2C per GPU
    assert "offload" not in design("mb2509_9")        # a recipe without offloading



def test_the_generator_writes_a_window_and_its_global_layers():
    # a model with sliding windows is written with them (gclc's `window`, `global_every`)
    shape = run_models.Shape(36, 2880, 64, 2880, 201088, kv_heads=8, head_dim=64, window=128, global_every=2)
    text = make_runs.model_block(shape, {}, 4096, (201088, "tokenizer"))
    assert field(text, "window") == "128" and field(text, "global_every") == "2"
    assert "window" not in make_runs.model_block(run_models.Shape(2, 64, 2, 256, 1000), {}, 128, (1000, "t"))


GPT_OSS_RUNS = ("mb2511_6", "mb2511_14", "mb2511_20", "mb2511_26", "mb2602_19", "mb2602_20",
                "mb2602_21", "mb2602_22", "mb2602_23")


def test_gpt_oss_designs_state_their_windows():
    # what the model is: sliding_window 128 in alternate layers (openai/gpt-oss-120b config.json
    # layer_types; Megatron-Bridge gpt_oss_bridge.py window_attn_skip_freq = 2), never left out
    # to keep a figure down; the sinks are named as unpriced
    for run_id in GPT_OSS_RUNS:
        shape = _shape(run_id).shape
        assert (shape.window, shape.global_every, shape.local_layers) == (128, 2, 18), run_id
        assert "sinks" in design(run_id) and "left out" not in design(run_id)


# ----------------------------------------------------------------- what the frameworks set and the tables do not say


@pytest.mark.parametrize("run_id, position", [("sc21_t1_1", "learned"), ("mpt_h100_1", "learned"),
                                              ("nemo2407_1", "learned"), ("nemo2407_6", "rope"),
                                              ("mb2602_4", "rope")])
def test_position_embeddings_are_the_frameworks(run_id, position):
    # Megatron-LM's GPT and NeMo's GPT-3 default to learned_absolute, MPT to learned_pos_emb;
    # Llama (NeMo 24.07 and Megatron-Bridge) rotates: unstated, a model is rotary
    assert _shape(run_id).shape.position_embedding in ((position,) if position == "learned" else ("", "rope"))


def test_nemo_2407_gpt3_trains_with_the_launchers_dropout():
    # launcher gpt3/*.yaml at tag 24.07: hidden_dropout 0.1, attention_dropout 0.1; llama: 0.0
    assert field(design("nemo2407_1"), "dropout") == "true" and "hidden_dropout 0.1" in design("nemo2407_1")
    assert "dropout =" not in design("nemo2407_6")


def test_a_recipe_ep_the_table_contradicts_is_the_recipes():
    # 25.11 GPT-OSS on B200: the table says EP 8, the v0.2.0 recipe and the 26.02 table EP 64
    text = design("mb2511_20")
    assert field(text, "ep") == "64" and "contradicts its recipe" in text
    assert field(design("mb2602_22"), "ep") == "64" and field(design("mb2511_21"), "ep") == "8"


def test_composer_default_mixed_precision_reduces_gradients_in_fp32():
    # Composer's get_mixed_precision: DEFAULT sets reduce_dtype = float32, PURE the autocast dtype;
    # llm-foundry's H100 and A100 80GB tables ran DEFAULT, the A100 40GB table PURE
    from gclc.model.job import pinned_config
    from gclc.model.train import dp_sync

    assert field(design("mpt_h100_15"), "grad_reduce") == "fp32" and "reduce_dtype" in design("mpt_h100_15")
    assert "grad_reduce" not in design("mpt_a100_40_53") and "grad_reduce" not in design("nemo2407_1")
    job = _shape("mpt_h100_15")
    fp32 = pinned_config(job)
    assert fp32.grad_reduce == "fp32"
    bf16 = attrs.evolve(fp32, grad_reduce="bf16")
    # every micro-batch's reduce-scatter moves twice the bytes; the gathers stay bf16
    wide, narrow = (dp_sync.traffic(job.shape, c, job.partition) for c in (fp32, bf16))
    assert wide.fsdp - narrow.fsdp == pytest.approx(wide.reduces - narrow.reduces, rel=1e-9)
    assert 1.9 * narrow.reduces < wide.reduces < 2 * narrow.reduces   # twice the bytes, one latency
    assert wide.gathers == narrow.gathers


def test_mpt_designs_state_layernorm_the_others_leave_it():
    # llm-foundry configuration_mpt.py norm_type 'low_precision_layernorm'; unstated elsewhere
    assert field(design("mpt_h100_15"), "normalization") == "layernorm"
    assert _shape("mpt_h100_15").shape.normalization == "layernorm"
    assert "normalization" not in design("nemo2407_6")


def test_a_recipes_cuda_graphs_are_named_in_the_header_as_not_expressible():
    """The Megatron-Bridge recipes' CUDA graphs (run_recipes.py CUDA_GRAPHS) reach the design's
    header as what gclc cannot state, by chip and precision as the presets set them; the train
    block is the same with or without them (no field carries them)."""
    gb300, gb200 = design("mb2602_19"), design("mb2602_20")   # GPT-OSS 26.02: graphs on GB300 only
    note = "CUDA graphs: transformer_engine graphs of attn, moe_router, moe_preprocess"
    assert note in gb300 and "GPT_OSS_120B_PRETRAIN_CONFIG_<chip>_BF16_V1/V2" in gb300
    assert "CUDA graphs" not in gb200
    assert gb300.split("train mb2602_19")[1].count("graph") == 0
    # Qwen3-30B on GB200 in 25.11: the FP8-MX preset captures no attention (its CS sibling does)
    mx = design("mb2511_15")
    assert "graphs of moe_router, moe_preprocess" in mx and "QWEN3_30B_A3B_GB200_FP8_MX_BASE_CONFIG" in mx
    # 25.09's perf_matrix switch, per precision: DeepSeek-V3 on B200 in fp8 ran them, on H100 not
    assert "enable_cuda_graph" in design("mb2509_9") and "CUDA graphs" not in design("mb2509_15")
    # the committed designs are the generator's
    for run_id in ("mb2602_19", "mb2511_15", "mb2509_9"):
        assert (BENCH / "runs" / f"{run_id}.gcl").read_text().rstrip("\n") == design(run_id).rstrip("\n")
