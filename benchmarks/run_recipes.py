"""The recompute, offload and optimizer settings (ZeRO stage, state precisions) of the framework recipes behind the published runs
whose rows leave them blank (the NeMo and Megatron-Bridge performance tables print only the
parallel layout). `make_runs.py` pins what these recipes set instead of gclc's default (no
recompute). Sources: the recipe files at the release that produced each table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Megatron-Bridge performance recipes, by the NeMo container release of the table (rows' `group`).
MB_SOURCE = {
    # commit fa0315ae2 (2025-10-10) is "update 25.09 performance summary"; its recipes are
    # scripts/performance/configs/<family>/<model>_llm_pretrain.yaml (perf_matrix per chip and precision)
    "25.09": "NVIDIA-NeMo/Megatron-Bridge fa0315ae2 scripts/performance/configs/*/*_llm_pretrain.yaml",
    # v0.2.0 (2025-11-26) ships with NeMo 25.11: scripts/performance/configs/<family>/workload_base_configs.py
    "25.11": "NVIDIA-NeMo/Megatron-Bridge v0.2.0 scripts/performance/configs/*/workload_base_configs.py",
    # v0.3.0 (2026-02-26) ships with NeMo 26.02: scripts/performance/configs/<family>/*_workload_base_configs.py
    "26.02": "NVIDIA-NeMo/Megatron-Bridge v0.3.0 scripts/performance/configs/*/*_workload_base_configs.py",
}


@dataclass(frozen=True)
class Setting:
    release: str               # a MB_SOURCE key
    model: str                 # regex on the normalised model name
    chip: str                  # run_facts.system_of key, or "*" for every chip
    precision: str             # regex on the row's precision word ("" matches all)
    granularity: str | None = None        # recompute_granularity
    modules: tuple[str, ...] = ()         # recompute_modules (selective granularity)
    layers: int | None = None             # recompute_num_layers (full granularity, block method)
    offload: int | None = None            # cpu_offloading_num_layers (activations to host memory)
    name: str = ""                        # the recipe constant or perf_matrix entry


# Only entries that differ from "no recompute, no offload" are listed; every other Megatron-Bridge
# row runs without either (the recipes leave recompute_granularity None: Megatron-Core's default).
MB_SETTINGS: tuple[Setting, ...] = (
    # 25.09: deepseek_v3_llm_pretrain.yaml sets recompute_granularity "selective" with Megatron-Core's
    # default recompute_modules ["core_attn"]; llama yaml perf_matrix gb200 fp8_cs entries
    Setting("25.09", r"deepseekv3", "*", "", granularity="selective", modules=("core_attn",),
            name="deepseek_v3_llm_pretrain.yaml model.recompute_granularity"),
    Setting("25.09", r"llama370b", "gb200", "", offload=40, name="llama3_70b perf_matrix gb200 fp8_cs"),
    Setting("25.09", r"llama3\.?1405b", "gb200", "", offload=95, name="llama31_405b perf_matrix gb200 fp8_cs"),
    # 25.11 (v0.2.0 workload_base_configs.py)
    Setting("25.11", r"deepseekv3", "gb300", "", "selective", ("moe_act",), name="DEEPSEEK_V3_GB300_BASE_CONFIG"),
    Setting("25.11", r"deepseekv3", "gb200", "", "selective", ("mla_up_proj",), name="DEEPSEEK_V3_GB200_BASE_CONFIG"),
    Setting("25.11", r"deepseekv3", "b200", "", "selective", ("mla_up_proj",), name="DEEPSEEK_V3_B200_BASE_CONFIG"),
    # ASSUMPTION for GB200 (and GB300's CUDA graphs, which gclc cannot state): the 25.11 table's
    # GB200 / GB300 GPT-OSS rows (seq 8192, MBS 1 / 2) are not these presets (MBS 4; the recipe's
    # seq_length 4096, and v0.2.0 argument_parser.py has no sequence flag): they ran with Hydra
    # overrides (run_script.py), so the preset's other settings may not have held either.
    Setting("25.11", r"gptoss120b", "gb200|b200|h100", "", "selective", ("layernorm", "moe_act"),
            name="GPT_OSS_120B_<chip>_BF16_BASE_CONFIG"),
    Setting("25.11", r"llama370b", "gb300", "", offload=20, name="LLAMA3_70B_GB300_FP8_CS_BASE_CONFIG"),
    Setting("25.11", r"llama370b", "gb200", "", offload=40, name="LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG"),
    Setting("25.11", r"llama38b", "h100", "cs", layers=5, name="LLAMA3_8B_H100_FP8_CS_BASE_CONFIG"),
    # 26.02 (v0.3.0 *_workload_base_configs.py, the V2 presets whose batch sizes the 26.02 table prints)
    Setting("26.02", r"deepseekv3", "gb300|gb200|b300|b200", "", "selective", ("mla_up_proj",),
            name="DEEPSEEK_V3_PRETRAIN_CONFIG_<chip>_V2"),
    Setting("26.02", r"gptoss120b", "gb200|b200|h100", "", "selective", ("layernorm", "moe_act"),
            name="GPT_OSS_120B_PRETRAIN_CONFIG_<chip>_BF16_V2"),
    Setting("26.02", r"llama370b", "gb300", "", offload=20, name="LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_CS_V2"),
)

# Megatron-Core recompute modules that re-run matmuls or attention worth counting; the others
# (layernorm, moe_act, and MLA's small up-projections) re-run element-wise work or a small share of
# the layer's FLOPs, which gclc's `none` approximates. "mlp" re-runs the dense MLP of DeepSeek's first
# three layers only (the experts are "moe"): also small. (Megatron-Core transformer_config.py
# recompute_modules docstring.)
ATTENTION_MODULES = {"core_attn"}
# Megatron-Core's recompute modules (--recompute-modules) that gclc's `recompute_modules` name.
GCLC_MODULES = {"core_attn": "core_attention", "layernorm": "norm", "mlp": "mlp", "moe_act": "moe_act"}


@dataclass
class Recipe:
    recompute: str | None = None   # gclc value to pin; None leaves the generator's default
    zero: int | None = None
    offload: float | None = None   # share of each stage's layers whose activations go to host memory
    modules: tuple[str, ...] = ()  # gclc recompute_modules of a selective recompute (empty: the attention core)
    microbatch: int | None = None  # the recipe's micro-batch where the table's contradicts it
    ep: int | None = None          # the recipe's expert parallelism where the table's contradicts it
    optimizer_state: str | None = None   # Adam's moments as stored (None: fp32, gclc's default)
    master_weights: str | None = None    # the master weights Adam updates (None: fp32)
    dropout: bool | None = None    # the recipe trains with dropout (None: the stack's behaviour)
    why: dict[str, str] = field(default_factory=dict)   # the source of each optimizer field set
    notes: list[str] = field(default_factory=list)   # why, with the source
    gaps: list[str] = field(default_factory=list)    # what gclc cannot express


# Rows whose table micro-batch the recipe contradicts: (release, model regex, chip) -> (micro-batch, why).
MB_MICROBATCH = {
    ("25.11", r"gptoss120b", "h100"): (1, "v0.2.0 scripts/performance/configs/gpt_oss/workload_base_configs.py: "
                                          "GPT_OSS_120B_H100_BF16_BASE_CONFIG keeps BASE_GPT_OSS_120B_CONFIG's "
                                          "micro_batch_size 1 (the 26.02 table prints MBS 1 for it); the 25.11 table's "
                                          "MBS 4 and GA 2 contradict its PP 4 on 64 GPUs (512 / (4 x 16) = 8)"),
}

# Rows whose table EP the recipe contradicts: (release, model regex, chip) -> (EP, why).
MB_EP = {
    ("25.11", r"gptoss120b", "b200"): (64, "v0.2.0 scripts/performance/configs/gpt_oss/workload_base_configs.py: "
                                           "GPT_OSS_120B_B200_BF16_BASE_CONFIG sets expert_model_parallel_size 64 (as "
                                           "for GB200 and GB300; only the H100 preset keeps the base EP 8), and the "
                                           "26.02 table's B200 row runs EP 64 at the same tokens/s (8,047 against "
                                           "8,213); the 25.11 table's EP 8 contradicts its recipe"),
}


def megatron_bridge(row: dict, model_key: str, system: str | None, layers_per_stage: int) -> Recipe:
    """The recompute and offload a Megatron-Bridge table row ran with."""
    m = re.search(r"(\d\d\.\d\d)", row["group"])
    release = m.group(1) if m else ""
    if release not in MB_SOURCE:
        return Recipe()
    precision = row["precision"].lower()
    hit = next((s for s in MB_SETTINGS if s.release == release and re.match(s.model, model_key)
                and (s.chip == "*" or re.fullmatch(s.chip, system or "")) and re.search(s.precision, precision)),
               None)
    source = MB_SOURCE[release]
    if hit is None:
        return Recipe("none", notes=[f"recipe sets no recompute ({source})"])
    where = f"{source}: {hit.name}"
    recipe = Recipe("none")
    if hit.modules and ATTENTION_MODULES & set(hit.modules):
        recipe.recompute = "selective"
        recipe.notes.append(f"recompute_granularity selective, modules {list(hit.modules)} ({where})")
    elif hit.modules and set(hit.modules) <= set(GCLC_MODULES):
        recipe.recompute = "selective"
        recipe.modules = tuple(GCLC_MODULES[m] for m in hit.modules)
        recipe.notes.append(f"recompute_granularity selective, modules {list(hit.modules)} ({where})")
    elif hit.modules:
        recipe.notes.append(f"recompute_modules {list(hit.modules)} re-run element-wise work or small "
                            f"projections only, written as none ({where})")
        recipe.gaps.append(f"selective recompute of {', '.join(hit.modules)} (recipe {hit.name}) is not "
                           "expressible; its small recompute cost and memory saving are ignored")
    if hit.layers:
        full = hit.layers * 2 >= layers_per_stage
        recipe.recompute = "full" if full else "none"
        recipe.notes.append(f"recompute_num_layers {hit.layers} of {layers_per_stage} per stage, full granularity, "
                            f"written as {recipe.recompute} ({where})")
        recipe.gaps.append(f"full recompute of {hit.layers} of {layers_per_stage} layers per stage is not "
                           "expressible (gclc recomputes all layers or none)")
    if hit.offload:
        recipe.notes.append(f"cpu_offloading_num_layers {hit.offload} ({where})")
        if hit.offload < layers_per_stage:
            recipe.offload = hit.offload / layers_per_stage
        else:
            recipe.gaps.append(f"activations of {hit.offload} layers are offloaded to host memory (recipe "
                               f"{hit.name}), more than the {layers_per_stage} layers of a stage")
    if not recipe.notes:
        recipe.notes.append(f"recipe sets no recompute ({where})")
    recipe.microbatch = next((mb for (rel, model, chip), (mb, _) in MB_MICROBATCH.items()
                              if rel == release and re.match(model, model_key) and chip == system), None)
    if recipe.microbatch:
        recipe.why["microbatch"] = next(why for (rel, model, chip), (_, why) in MB_MICROBATCH.items()
                                        if rel == release and re.match(model, model_key) and chip == system)
    ep = next(((n, why) for (rel, model, chip), (n, why) in MB_EP.items()
               if rel == release and re.match(model, model_key) and chip == system), None)
    if ep:
        recipe.ep, recipe.why["ep"] = ep
    return recipe


# NeMo 24.07: the NeMo 1.0 launcher's training configs (NVIDIA/NeMo-Framework-Launcher
# launcher_scripts/conf/training/<family>/<size>.yaml), read at the launcher's tag 24.07 (the release of
# the table's container). ASSUMPTION: the 24.07 table was measured with these configs (the container
# predates NeMo 2.0's recipes). Read at 24.07: llama/llama2_70b.yaml, llama/llama3_70b.yaml,
# nemotron/nemotron_22b.yaml, nemotron/nemotron_340b.yaml; the sizes not read are assumed to follow their
# family's config. At 24.07 every one of them runs Apex's distributed_fused_adam (ZeRO-2); the launcher
# switched llama3 and nemotron to mcore_distributed_optim only on 2024-12-05 (commit 3dd35614, "switch
# to mcore's optimizer"). gpt3's entry names files the 24.07 tag does not hold (kept as read before).
LAUNCHER = "NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/"
LAUNCHER_TAG = "24.07"
NEMO1: tuple[tuple[str, str | None, int, str], ...] = (   # (model regex, recompute, ZeRO stage, config read)
    # activations_checkpoint_granularity: selective; optim.name: distributed_fused_adam (Apex ZeRO-2)
    (r"gpt3(5|20|175)b$", "selective", 2, "gpt3/{5b,175b}_fp8_performance.yaml"),
    # activations_checkpoint_granularity: null; optim.name: distributed_fused_adam
    (r"llama2\d+b$", "none", 2, "llama/llama2_70b.yaml"),
    (r"llama3\d+b$", "none", 2, "llama/llama3_70b.yaml"),
    # activations_checkpoint_granularity: selective (340b) or null (22b); optim.name: distributed_fused_adam
    (r"nemotron340b$", "selective", 2, "nemotron/nemotron_340b.yaml"),
    (r"nemotron\d+b$", "none", 2, "nemotron/nemotron_22b.yaml"),
)
# Apex's DistributedFusedAdam keeps its state in `optim.dtype`; NeMo 1.0 at the 24.07 container
# (NVIDIA/NeMo r2.0.0rc1 nemo/collections/nlp/models/language_modeling/megatron_base_model.py
# `setup_optimization`) sets store_params = False when that dtype is the model's bf16: no master
# copy, Adam updates the bf16 weights. Configs that set optim.dtype at 24.07 (model regex -> dtype):
NEMO1_STATE = {r"nemotron340b$": "bf16"}   # nemotron/nemotron_340b.yaml: optim.dtype bf16
# The GPT-3 configs train with dropout where the llama and nemotron ones do not: at tag 24.07
# gpt3/5b.yaml, 20b.yaml, 175b.yaml and 175b_fp8.yaml set hidden_dropout 0.1 and attention_dropout 0.1
# (llama/llama2_13b.yaml, llama3_8b.yaml, llama3_70b.yaml, nemotron/nemotron_22b.yaml: 0.0).
NEMO1_DROPOUT = {r"gpt3(5|20|175)b$": "gpt3/{5b,20b,175b,175b_fp8}.yaml at tag 24.07: hidden_dropout 0.1, "
                                      "attention_dropout 0.1"}


def nemo_2407(row: dict, model_key: str) -> Recipe:
    for pattern, recompute, zero, config in NEMO1:
        if re.match(pattern, model_key):
            optimizer = "distributed_fused_adam" if zero == 2 else "mcore_distributed_optim"
            where = f"{LAUNCHER}{config}" + (f" at tag {LAUNCHER_TAG}" if not pattern.startswith("gpt3") else "")
            recipe = Recipe(recompute, zero, notes=[f"{where}: activations_checkpoint_granularity "
                                                    f"{'selective' if recompute == 'selective' else 'null'}, "
                                                    f"optim {optimizer} (ASSUMED: the 24.07 table ran these configs)"])
            dropout = next((d for p, d in NEMO1_DROPOUT.items() if re.match(p, model_key)), None)
            if dropout:
                recipe.dropout, recipe.why["dropout"] = True, f"recipe: {LAUNCHER}{dropout}"
            state = next((d for p, d in NEMO1_STATE.items() if re.match(p, model_key)), None)
            if state:
                recipe.optimizer_state, recipe.master_weights = state, "none"
                recipe.why = {"optimizer_state": f"recipe: {where}: optim.dtype {state} (Apex DistributedFusedAdam's state)",
                              "master_weights": "recipe: NeMo r2.0.0rc1 megatron_base_model.py setup_optimization: "
                                                "store_params = False when the optimizer's dtype is the model's bf16: "
                                                "Adam updates the weights"}
            return recipe
    return Recipe()


# DGX Cloud benchmarking's NeMo 24.11 Nemotron-4 340B recipe: NVIDIA/dgxc-benchmarking 143b90dd
# nemotron/nemotron4-340b-synth.yaml (the --config-name configure.sh passes NeMo 1.0's
# megatron_gpt_pretraining) and configure.sh (the overrides: fp8 runs add model.fp8 and
# +model.fp8_params). NeMo 1.0 builds Apex's DistributedFusedAdam, ZeRO-2 (optimizer state and
# gradients sharded), with `dtype` as its state; its `store_params` follows
# nemo/collections/nlp/models/language_modeling/megatron_base_model.py (NeMo v2.0.0,
# setup_optimization): False when the state dtype is the model's bf16 (Adam updates the bf16
# weights: no master), True with fp8 parameters (a bf16 master beside the fp8 weights).
DGXC_2411 = "NVIDIA/dgxc-benchmarking 143b90dd nemotron/nemotron4-340b-synth.yaml"


def dgxc_2411(row: dict) -> Recipe:
    fp8 = "fp8" in row["precision"].lower()
    recipe = Recipe("selective", 2, optimizer_state="bf16", master_weights="bf16" if fp8 else "none", notes=[
        f"{DGXC_2411}: optim.name distributed_fused_adam (Apex ZeRO-2), activations_checkpoint_granularity selective"],
        why={"optimizer_state": f"recipe: {DGXC_2411}: optim.dtype bf16 (Apex DistributedFusedAdam's state)",
             "master_weights": "recipe: NeMo 1.0 megatron_base_model.py store_params = " + (
                 "True with +model.fp8_params (configure.sh): a bf16 master" if fp8 else
                 "False when the optimizer's dtype is the model's bf16: Adam updates the weights"),
             **({"fp8_params": f"recipe: {DGXC_2411} configure.sh: +model.fp8_params (fp8 weights, the "
                               "optimizer's sharded bf16 master)"} if fp8 else {})})
    return recipe


def recipe_of(row: dict, model_key: str, system: str | None, layers_per_stage: int) -> Recipe:
    group = row["group"].lower()
    if "megatron-bridge" in group:
        return megatron_bridge(row, model_key, system, layers_per_stage)
    if "nemo 24.07" in group:
        return nemo_2407(row, model_key)
    if "dgx cloud benchmarking, nemo 24.11" in group:
        return dgxc_2411(row)
    return Recipe()


# Megatron-Bridge recipes that overlap the MoE all-to-all with another micro-batch's compute
# (`moe_a2a_overlap=True`, Megatron-Core overlap_moe_expert_parallel_comm; off by default):
# (release, model regex, chip regex, where). Read at the tags of MB_SOURCE: v0.2.0
# deepseek/ and qwen3/workload_base_configs.py, v0.3.0 qwen/qwen3_workload_base_configs.py
# (the V2 presets inherit it from V1 through dataclasses.replace); for 25.09, fa0315ae2
# run_script.py sets A2A_1F1B for DeepSeek-V3 on H100 only.
A2A_OVERLAP: tuple[tuple[str, str, str, str], ...] = (
    ("25.09", r"deepseekv3", "h100", "run_script.py A2A_1F1B = gpu in ['h100']"),
    ("25.11", r"deepseekv3", "h100", "DEEPSEEK_V3_H100_BASE_CONFIG"),
    ("25.11", r"qwen3(30|235)b", "h100", "QWEN3_*_H100_*_BASE_CONFIG"),
    ("25.11", r"qwen3235b", "b200", "QWEN3_235B_A22B_B200_*_BASE_CONFIG"),
    ("26.02", r"qwen3(30|235)b", "h100", "QWEN3_*_PRETRAIN_CONFIG_H100_*_V1/V2"),
    ("26.02", r"qwen3235b", "b300", "QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_*_V1/V2"),
)


def a2a_overlap(row: dict, model_key: str, system: str | None) -> str:
    """Where the run's recipe turns the MoE all-to-all overlap on ('' when it does not)."""
    m = re.search(r"(\d\d\.\d\d)", row["group"])
    release = m.group(1) if m else ""
    if "megatron-bridge" not in row["group"].lower() or release not in MB_SOURCE:
        return ""
    for rel, model, chip, where in A2A_OVERLAP:
        if rel == release and re.match(model, model_key) and re.fullmatch(chip, system or ""):
            return f"moe_a2a_overlap ({MB_SOURCE[release] if release != '25.09' else 'Megatron-Bridge fa0315ae2'}: {where})"
    return ""


# MoE token dispatchers of the Megatron-Bridge performance recipes (model/train/moe.py): the MoE
# model providers set moe_token_dispatcher_type = "alltoall" (src/megatron/bridge/models/qwen/
# qwen_provider.py, gpt_oss/gpt_oss_provider.py, deepseek/deepseek_provider.py at v0.2.0 and
# v0.3.0); a preset's `moe_flex_dispatcher_backend` turns it into Megatron-Core's flex dispatcher
# with that backend (training/flex_dispatcher_backend.py apply_flex_dispatcher_backend). Rows:
# (release, model regex, chip regex, dispatcher, where), read at the tags of MB_SOURCE; for 25.09,
# fa0315ae2 run_script.py enables DeepEP for DeepSeek-V3 on H100 only (and never with token drop).
DISPATCHERS: tuple[tuple[str, str, str, str, str], ...] = (
    ("25.09", r"deepseekv3", "h100", "deepep", "run_script.py enable_deepep = gpu in ['h100']"),
    ("25.11", r"qwen3(30|235)b", "gb[23]00", "hybridep", "QWEN3_*_GB200/GB300_*_BASE_CONFIG"),
    ("25.11", r"deepseekv3", "gb[23]00", "hybridep", "DEEPSEEK_V3_GB200/GB300_BASE_CONFIG"),
    ("25.11", r"deepseekv3", "h100", "deepep", "DEEPSEEK_V3_H100_BASE_CONFIG"),
    ("26.02", r"qwen3(30|235)b", "gb[23]00", "hybridep", "QWEN3_*_PRETRAIN_CONFIG_GB200/GB300_*_V1/V2"),
    ("26.02", r"qwen330b", "b300", "hybridep", "QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_*_V1"),
    ("26.02", r"qwen330b", "h100", "deepep", "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_*_V1"),
    ("26.02", r"deepseekv3", "(gb[23]00|b[23]00|h100)", "hybridep", "DEEPSEEK_V3_PRETRAIN_CONFIG_*_V1/V2"),
)


def dispatcher_of(row: dict, model_key: str, system: str | None) -> tuple[str, str] | None:
    """The MoE token dispatcher a Megatron-Bridge run's recipe uses, and where it is read (None
    for rows of other stacks: their dispatcher is not published)."""
    m = re.search(r"(\d\d\.\d\d)", row["group"])
    release = m.group(1) if m else ""
    if "megatron-bridge" not in row["group"].lower() or release not in MB_SOURCE:
        return None
    source = MB_SOURCE[release] if release != "25.09" else "Megatron-Bridge fa0315ae2"
    for rel, model, chip, dispatcher, where in DISPATCHERS:
        if rel == release and re.match(model, model_key) and re.fullmatch(chip, system or ""):
            return dispatcher, f"moe_flex_dispatcher_backend = \"{dispatcher}\" ({source}: {where})"
    return "alltoall", (f"the model provider's moe_token_dispatcher_type = \"alltoall\"; the recipe sets no "
                        f"flex backend ({source})")


# CUDA graphs of the Megatron-Bridge performance recipes: (release, model regex, chip regex,
# precision regex on the row's precision word, what is captured, where), read at the tags of
# MB_SOURCE. 25.09: fa0315ae2 perf_matrix `cuda_graphs` (utils/helpers.py set_cuda_graph_overrides:
# model.enable_cuda_graph, Megatron-Core's per-layer graphs); 25.11: v0.2.0 `cuda_graph_impl` /
# `cuda_graph_scope`; 26.02: v0.3.0, the V2 presets inheriting V1's (DEEPSEEK_V3_..._GB300_V1 sets an
# empty scope; QWEN3_30B_A3B_..._GB200_FP8_MX captures no attention, its CS sibling does). gclc has no
# field for them: stated per recipe, removing the captured router and dispatch-preprocessing ops
# from the MoE layers' host work made the cross-validated figures worse (docs/moe_dispatcher.md).
_TE = "transformer_engine graphs of "
CUDA_GRAPHS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("25.09", r"llama38b", "b200|gb200", "", "Megatron-Core per-layer graphs (enable_cuda_graph)",
     "llama3_8b_llm_pretrain.yaml perf_matrix cuda_graphs: true"),
    ("25.09", r"qwen3(30|235)b", "gb200", "", "Megatron-Core per-layer graphs (enable_cuda_graph)",
     "qwen3_*_llm_pretrain.yaml perf_matrix gb200 cuda_graphs: true"),
    ("25.09", r"qwen330b", "b200", "", "Megatron-Core per-layer graphs (enable_cuda_graph)",
     "qwen3_30b_a3b_llm_pretrain.yaml perf_matrix b200 cuda_graphs: true"),
    ("25.09", r"deepseekv3", "b200", "fp8", "Megatron-Core per-layer graphs (enable_cuda_graph)",
     "deepseek_v3_llm_pretrain.yaml perf_matrix b200 fp8_cs / fp8_mx cuda_graphs: true"),
    ("25.11", r"llama38b", "gb300|gb200|b200", "", "a full-iteration graph (local, full_iteration)",
     "LLAMA3_8B_<chip>_*_BASE_CONFIG"),
    ("25.11", r"gptoss120b", "gb300", "", _TE + "attn, moe_router, moe_preprocess", "GPT_OSS_120B_GB300_BF16_BASE_CONFIG"),
    ("25.11", r"deepseekv3", "gb300", "", _TE + "attn, moe_router, moe_preprocess", "DEEPSEEK_V3_GB300_BASE_CONFIG"),
    ("25.11", r"deepseekv3", "gb200", "", _TE + "moe_router, moe_preprocess", "DEEPSEEK_V3_GB200_BASE_CONFIG"),
    ("25.11", r"qwen3235b", "gb300", "", _TE + "moe_router, moe_preprocess", "QWEN3_235B_A22B_GB300_*_BASE_CONFIG"),
    ("25.11", r"qwen3235b", "gb200", "", _TE + "attn, moe_router, moe_preprocess", "QWEN3_235B_A22B_GB200_*_BASE_CONFIG"),
    ("25.11", r"qwen330b", "gb200", "mx", _TE + "moe_router, moe_preprocess", "QWEN3_30B_A3B_GB200_FP8_MX_BASE_CONFIG"),
    ("25.11", r"qwen330b", "gb200", "", _TE + "attn, moe_router, moe_preprocess", "QWEN3_30B_A3B_GB200_*_BASE_CONFIG"),
    ("25.11", r"qwen330b", "gb300|b200", "", _TE + "moe_router, moe_preprocess", "QWEN3_30B_A3B_<chip>_*_BASE_CONFIG"),
    ("25.11", r"qwen330b", "h100", "bf16", _TE + "moe_router, moe_preprocess", "QWEN3_30B_A3B_H100_BF16_BASE_CONFIG"),
    ("26.02", r"llama38b", "gb300|gb200|b300|b200", "bf16|cs", "a full-iteration graph (local, full_iteration)",
     "LLAMA3_8B_PRETRAIN_CONFIG_<chip>_*_V1"),
    ("26.02", r"llama370b", "b200", "bf16", "a full-iteration graph (local, full_iteration)",
     "LLAMA3_70B_PRETRAIN_CONFIG_B200_BF16_V1/V2"),
    ("26.02", r"gptoss120b", "gb300|b300", "", _TE + "attn, moe_router, moe_preprocess",
     "GPT_OSS_120B_PRETRAIN_CONFIG_<chip>_BF16_V1/V2"),
    ("26.02", r"deepseekv3", "gb200", "", _TE + "attn, moe_router, moe_preprocess", "DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_V1/V2"),
    ("26.02", r"qwen3235b", "gb200", "", _TE + "attn, moe_router, moe_preprocess",
     "QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_*_V1/V2"),
    ("26.02", r"qwen3235b", "gb300", "", _TE + "moe_router, moe_preprocess", "QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_*_V1/V2"),
    ("26.02", r"qwen330b", "gb200", "mx", _TE + "moe_router, moe_preprocess", "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1"),
    ("26.02", r"qwen330b", "gb200", "", _TE + "attn, moe_router, moe_preprocess", "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_*_V1"),
    ("26.02", r"qwen330b", "gb300|b300|b200", "", _TE + "moe_router, moe_preprocess",
     "QWEN3_30B_A3B_PRETRAIN_CONFIG_<chip>_*_V1"),
    ("26.02", r"qwen330b", "h100", "bf16", _TE + "moe_router, moe_preprocess", "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1"),
)


def cuda_graphs_of(row: dict, model_key: str, system: str | None) -> str:
    """What a Megatron-Bridge run's recipe captures in CUDA graphs, and where it says so ('' when
    nothing, or for rows of other stacks)."""
    m = re.search(r"(\d\d\.\d\d)", row["group"])
    release = m.group(1) if m else ""
    if "megatron-bridge" not in row["group"].lower() or release not in MB_SOURCE:
        return ""
    precision = row["precision"].lower()
    for rel, model, chip, prec, what, where in CUDA_GRAPHS:
        if (rel == release and re.match(model, model_key) and re.fullmatch(chip, system or "")
                and re.search(prec, precision)):
            source = MB_SOURCE[release] if release != "25.09" else "Megatron-Bridge fa0315ae2"
            return f"CUDA graphs: {what} ({source}: {where})"
    return ""
