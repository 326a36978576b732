"""The model shapes of the published runs: where a row of public_runs.csv lacks layers / hidden /
heads / ffn / vocab, the model's public configuration (each entry cites its source; the generated
file repeats the citation), and the layout fill-ins some families imply (Korthikanti Table 5,
MaxText benchmark scripts). Used by make_runs.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field


class Unexpressible(Exception):
    """The row cannot be written as a design; the message says why."""


# ----------------------------------------------------------------- small parsers


def num(text: str | None) -> float | None:
    """A plain number from a cell ('8', '1.7', '1,024'); None for '', 'n/a', words or ranges."""
    if text is None:
        return None
    t = text.strip().replace(",", "")
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", t):
        return None
    return float(t)


def integer(text: str | None) -> int | None:
    value = num(text)
    return int(value) if value is not None and value == int(value) else None


# ----------------------------------------------------------------- model library
#
# Public configurations used where a row lacks the shape. Each entry cites its source; the
# generated file repeats the citation next to every number taken from here.

CITE_MEGATRON_FFN = "Megatron-LM GPT default ffn_hidden_size = 4 x hidden, GeLU MLP (SC21 Sec 2: 'h -> 4h')"
CITE_MEGATRON_TIED = "Megatron-LM GPT shares input and output embeddings unless --untie-embeddings-and-output-weights"
# Learned absolute positions: a seq x hidden table added once at the embedding, no rotary kernel in the layers
CITE_MEGATRON_POSITIONS = ("Megatron-LM --position-embedding-type default 'learned_absolute' (megatron/training/"
                           "arguments.py, core_v0.16.1; the only kind of the 2021-22 releases); GPT-2/3 architecture")
CITE_NEMO_POSITIONS = ("NeMo GPTConfig and Megatron-Bridge GPTModelProvider position_embedding_type default "
                       "'learned_absolute', not overridden by GPTConfig5B/20B/175B or GPTProvider175B; NeMo 1.0 "
                       "(r2.0.0rc1 megatron_gpt_model.py cfg.get('position_embedding_type', 'learned_absolute')), "
                       "which the launcher's gpt3 configs at tag 24.07 leave unset")
CITE_BLOOM_ALIBI = "BLOOM (arXiv:2211.05100) Sec 3.2.3: ALiBi positional embeddings instead of learned or rotary ones"
CITE_MPT_POSITIONS = ("llm-foundry llmfoundry/models/mpt/configuration_mpt.py learned_pos_emb = True, attn_config "
                      "alibi and rope False by default; the benchmark yamls set neither")
CITE_MPT_NORM = ("llm-foundry llmfoundry/models/mpt/configuration_mpt.py norm_type = 'low_precision_layernorm' "
                 "(one PyTorch layer_norm kernel), no_bias = False, resid_pdrop = 0.0 by default; the benchmark yamls "
                 "set none of them")
CITE_KORT_T3 = "Korthikanti et al. 2022 Table 3 (rows kort_t5_* of public_runs.csv): layers/hidden/heads, vocab 51200, seq 2048"
CITE_NEMO_GPT = "NVIDIA/NeMo nemo/collections/llm/gpt/model/base.py GPTConfig5B/20B/175B"
CITE_GPT2_VOCAB = ("GPT-2 BPE vocabulary 50257 (NeMo 1.0 launcher tokenizer GPT2BPETokenizer; NeMo 2.0 perf script "
                   "pretrain_gpt3_175b.py hf_tokenizer('nvidia/megatron-gpt2-345m')), padded by the framework (see vocab)")
CITE_LLAMA2 = "NVIDIA/NeMo nemo/collections/llm/gpt/model/llama.py Llama2Config7B/13B/70B; vocab 32000 (Llama 2 paper: '32k tokens')"
CITE_LLAMA3 = "NVIDIA/NeMo llama.py Llama3Config8B/70B, Llama31Config405B; vocab 128256 (Meta Llama 3 tokenizer)"
CITE_NEMOTRON = ("NVIDIA/NeMo nemo/collections/llm/gpt/model/nemotron.py Nemotron3Config22B / Nemotron4Config15B / "
                 "Nemotron4Config340B; vocab 256000 and squared-ReLU MLP (nvidia/Nemotron-4-340B model_config.yaml)")
CITE_MIXTRAL = ("NVIDIA/NeMo nemo/collections/llm/gpt/model/mixtral.py MixtralConfig8x22B (56 layers, 6144, 48 heads, "
                "ffn 16384, 8 experts top-2); 8 KV heads (Mixtral paper, arXiv:2401.04088)")
# NeMo's performance script trains Mixtral-8x22B on a NullTokenizer of 32000 tokens, not the 32768 of
# the later HF tokenizer release (NVIDIA/NeMo scripts/performance/llm/pretrain_mixtral_8x22b.py:
# get_nmt_tokenizer(library="null", model_name="NullTokenizer", vocab_size=32000))
CITE_MIXTRAL_NEMO_VOCAB = "vocab 32000: NeMo scripts/performance/llm/pretrain_mixtral_8x22b.py NullTokenizer(vocab_size=32000)"
CITE_DSV3 = ("DeepSeek-V3 Technical Report (arXiv:2412.19437) Sec 2 and 4.2: 61 layers, d_model 7168, 128 heads, dense FFN "
             "18432 in the first 3 layers, 256 routed + 1 shared experts of width 2048, top-8, vocab 129280")
# Megatron-Bridge v0.1.0rc4 (DeepSeekV3Provider), v0.2.0 and v0.3.0 (DeepSeekV3ModelProvider)
# src/megatron/bridge/models/deepseek/deepseek_provider.py
# (the recipes' provider): group-limited routing over 8 groups, 4 picked (DeepSeek-V3 config.json n_group, topk_group)
CITE_DSV3_GROUPS = ("groups: Megatron-Bridge DeepSeekV3ModelProvider moe_router_num_groups 8, moe_router_group_topk 4 "
                    "(deepseek-ai/DeepSeek-V3 config.json n_group 8, topk_group 4)")
CITE_DSV3_MLA = ("MLA: deepseek-ai/DeepSeek-V3 config.json q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, "
                 "qk_nope_head_dim = v_head_dim = 128")
# NVIDIA/NeMo nemo/lightning/pytorch/callbacks/moe_token_drop.py: MegatronTokenDropCallback defaults
CITE_TOKEN_DROP = "MegatronTokenDropCallback moe_expert_capacity_factor 1.0, moe_pad_expert_input_to_capacity True"
CITE_GPTOSS = ("openai/gpt-oss-120b config (vLLM / transformers GptOssConfig defaults): 36 layers, hidden 2880, 64 query "
               "heads of 64, 8 KV heads, 128 experts top-4 of width 2880, vocab 201088; experts with biases and "
               "the activation clamped at 7 (config.json swiglu_limit 7.0; Megatron-Bridge v0.2.0 and v0.3.0 "
               "gpt_oss_provider.py add_bias_linear True, activation_func_clamp_value 7.0)")
# huggingface openai/gpt-oss-120b config.json: sliding_window 128, layer_types alternating
# "sliding_attention" / "full_attention" from layer 0; Megatron-Bridge gpt_oss_bridge.py sets
# window_size = (sliding_window - 1, 0) and window_attn_skip_freq = 2 (every 2nd layer global)
CITE_GPTOSS_WINDOW = ("sliding_window 128 in alternate layers (config.json layer_types; Megatron-Bridge "
                      "gpt_oss_bridge.py window_size = (127, 0), window_attn_skip_freq = 2)")
# The designs state the windows (`window = 128`, `global_every = 2`): what the model is. (They
# were left out until 2026-12-07 because with them the model, which already over-predicted these
# runs, over-predicted them further; leaving known physics out to keep a figure down is fitting
# runs, not physics. What the windows expose is a per-token cost of these runs the model lacks:
# docs/moe_dispatcher.md, GPT-OSS.) Attention sinks (one learned logit per head added to each
# softmax denominator, config.json / modeling_gpt_oss.py `sinks`) add no matrix work: one
# exponential per query row and head, run inside cuDNN's fused attention since Transformer Engine
# 2.8 (PR #2148); they are not priced.
CITE_GPTOSS_SINKS = ("attention sinks (one learned logit per head in each softmax denominator; fused in cuDNN "
                     "attention since Transformer Engine 2.8, PR #2148) add no matrix work and are not priced")
CITE_QWEN3 = ("Qwen3 MoE configs as used for Megatron training (THUDM/slime scripts/models/qwen3-30B-A3B.sh and "
              "qwen3-235B-A22B.sh): heads, 4 query groups, kv-channels 128, moe-ffn-hidden-size, 128 experts top-8, vocab 151936")
CITE_MPT = ("mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-{7b,13b,30b,70b}.yaml: d_model, n_heads, n_layers, "
            "expansion_ratio 4, vocab_size 50368; MPT ties the output layer to the input embedding, GeLU MLP")
CITE_MAXTEXT = ("AI-Hypercomputer/maxtext MaxText/configs/base.yml (base_emb_dim 2048, base_num_query_heads 16, "
                "base_num_kv_heads 16, base_mlp_dim 7168, base_num_decoder_layers 16, head_dim 128, vocab_size 32000, "
                "mlp_activations silu+linear, logits_via_embedding False) scaled by pyconfig.get_individual_scales")


@dataclass
class Shape:
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    kv_heads: int | None = None
    head_dim: int | None = None
    mlp: str = "swiglu"
    tied: bool = False
    experts: dict | None = None     # routed, shared, top_k, ffn, dense_layers (and capacity_factor)
    mla: dict | None = None         # kv_rank, rope_dim, q_rank
    mtp: int = 0                    # multi-token-prediction modules
    window: int = 0                 # sliding-window attention: keys each query sees (0: global)
    global_every: int = 0           # with a window: every k-th layer attends globally
    position: str = ""              # position_embedding as the model's framework sets it ("": not stated)
    normalization: str = ""         # the norm as the model's framework sets it ("": not stated, RMSNorm-like)
    cite: str = ""
    gaps: list[str] = field(default_factory=list)   # what gclc cannot express about this model


CITE_MCORE_UNTIED = ("untied input and output embeddings: the row's params_B equals the shape's count only with "
                     "two vocab x hidden matrices (e.g. GPT-7.1B: 6.58 B + 131072 x 4096 = 7.11 B)")


def _megatron_gpt(layers: int, hidden: int, heads: int, vocab: int, cite: str, tied: bool = True) -> Shape:
    return Shape(layers, hidden, heads, 4 * hidden, vocab, mlp="gelu", tied=tied, position="learned",
                 cite=f"{cite}; ffn: {CITE_MEGATRON_FFN}; {CITE_MEGATRON_TIED if tied else CITE_MCORE_UNTIED}; "
                      f"positions: {CITE_MEGATRON_POSITIONS}")


KORTHIKANTI = {  # size -> (layers, hidden, heads, tp, pp, vp, microbatch, sequences per replica)  (Tables 3 and 5)
    "22b": (48, 6144, 64, 8, 1, 1, 4, 4), "175b": (96, 12288, 96, 8, 8, 3, 1, 64),
    "530b": (105, 20480, 128, 8, 35, 3, 1, 280), "1t": (128, 25600, 160, 8, 64, 1, 1, 512),
}
NEMO_GPT3 = {"5b": (24, 4096, 32, 16384), "20b": (44, 6144, 48, 24576), "175b": (96, 12288, 96, 49152)}
LLAMA2 = {"7b": (32, 4096, 32, 32, 11008), "13b": (40, 5120, 40, 40, 13824), "70b": (80, 8192, 64, 8, 28672)}
LLAMA3 = {"8b": (32, 4096, 32, 8, 14336), "70b": (80, 8192, 64, 8, 28672), "405b": (126, 16384, 128, 8, 53248)}
NEMOTRON = {"22b": (40, 6144, 48, 48, 24576), "15b": (32, 6144, 48, 8, 24576), "340b": (96, 18432, 96, 8, 73728)}
MPT = {"7b": (32, 4096, 32), "13b": (40, 5120, 40), "30b": (48, 7168, 56), "70b": (80, 8192, 64)}


def maxtext_shape(scale: int, base_emb: int = 2048) -> Shape:
    """MaxText's global_parameter_scale: doubling heads+mlp, then embed, then layers in turn."""
    log2 = int(math.log2(scale))
    if 2 ** log2 != scale:
        raise Unexpressible(f"MaxText global_parameter_scale {scale} is not a power of two")
    base, rem = divmod(log2, 3)
    head_scale = base + int(rem > 0)
    emb_scale = base + int(rem > 1)
    layers = 16 * 2 ** base
    heads = 16 * 2 ** head_scale
    return Shape(layers, base_emb * 2 ** emb_scale, heads, 7168 * 2 ** head_scale, 32000, kv_heads=heads,
                 head_dim=128, mlp="swiglu", tied=False, cite=CITE_MAXTEXT)


# MaxText benchmark scripts: (per-device batch, remat policy, ici tensor parallelism, ici data parallelism)
# 1024b.sh writes `ici_tensor_parallelism=8\ ici_data_parallelism=16\`: the backslash-escaped space
# joins both settings into one argument, and with data parallelism 16 the model state alone (1,024 B
# parameters over FSDP 16 x TP 8) would need 116 GiB of a v5p's 95 GiB, so the run the README
# reports cannot have used it: ASSUMPTION FSDP over all 256 non-tensor-parallel chips (ici_data 1).
MAXTEXT_V5P = {  # MaxText/configs/v5p/{32b,64b,128b,256b,512b,1024b}.sh
    32: (7, "minimal", 4, 1), 64: (3, "minimal", 4, 1), 128: (1, "minimal", 8, 1), 256: (1, "minimal", 8, 1),
    512: (2, "full", 8, 1), 1024: (2, "full", 8, 1),
}
MAXTEXT_V5E = {  # MaxText/configs/v5e/{16b,32b,64b,128b}.sh
    16: (6, "full", 1, 1), 32: (4, "full", 1, 1), 64: (2, "full", 1, 1), 128: (1, "minimal_offloaded", 16, 1),
}
CITE_MAXTEXT_V5P = "AI-Hypercomputer/maxtext MaxText/configs/v5p/{size}b.sh (per_device_batch_size, remat_policy, ici_tensor_parallelism, ici_fsdp_parallelism=-1)"
CITE_MAXTEXT_V5E = "AI-Hypercomputer/maxtext MaxText/configs/v5e/{size}b.sh (per_device_batch_size, remat_policy, ici_*_parallelism; dcn_data_parallelism=-1 across slices)"


def _norm(model: str) -> str:
    return re.sub(r"[\s_\-]", "", model.lower())


def resolve_shape(row: dict, fills: list[str]) -> tuple[Shape, dict]:
    """The model shape for a row, and layout fill-ins implied by the model's family (for rows whose
    source table gives the parallel layout elsewhere)."""
    name, n = row["model"], _norm(row["model"])
    framework = (row["framework"] + " " + row["group"]).lower()
    layout: dict = {}
    shape, layout = _resolve_shape(row, fills, name, n, framework, layout)
    drop = token_drop(row, n)
    if drop and shape.experts is not None and "capacity_factor" not in shape.experts:
        shape.experts = {**shape.experts, "capacity_factor": 1.0}
        shape.cite += f"; capacity_factor 1.0: {drop} ({CITE_TOKEN_DROP})"
    return shape, layout


def token_drop(row: dict, n: str) -> str:
    """Why a row's MoE routing drops tokens ('' when dropless)."""
    if "tokendrop" in n:
        return "the row's 'tokendrop' model variant (Megatron-Bridge 25.09 run_script apply_moe_token_drop)"
    accel = row["accelerator"].lower()
    if (n.startswith("deepseekv3") and "25.09" in row["group"]
            and any(chip in accel for chip in ("b200", "gb200")) and "tokendrop" not in n):
        # NVIDIA-NeMo/Megatron-Bridge fa0315ae2 scripts/performance/run_script.py: DeepSeek-V3 on
        # B200/GB200 runs use_tokendrop unless told otherwise
        return "Megatron-Bridge fa0315ae2 run_script.py: use_tokendrop defaults to True for DeepSeek-V3 on B200/GB200"
    return ""


def _resolve_shape(row: dict, fills: list[str], name: str, n: str, framework: str, layout: dict) -> tuple[Shape, dict]:
    m = re.match(r"maxtext(\d+)b", n)
    if m:
        size = int(m.group(1))
        accel = row["accelerator"].lower()
        table, cite = (MAXTEXT_V5P, CITE_MAXTEXT_V5P) if "v5p" in accel else (MAXTEXT_V5E, CITE_MAXTEXT_V5E)
        if size not in table:
            raise Unexpressible(f"no MaxText benchmark script found for the {size}B synthetic model on {row['accelerator']} "
                                "(v5p-12288.sh, scale 512 with base_emb_dim 6144, gives 1.49 T parameters, not 1160 B)")
        shape = maxtext_shape(size)
        pdbs, remat, tp, ici_dp = table[size]
        layout = {"pdbs": pdbs, "remat": remat, "tp": tp, "ici_dp": ici_dp, "cite": cite.format(size=size),
                  "seq": 2048}
        return shape, layout
    m = re.match(r"mpt(\d+)b", n)
    if m and m.group(1) + "b" in MPT:
        layers, hidden, heads = MPT[m.group(1) + "b"]
        return Shape(layers, hidden, heads, 4 * hidden, 50368, mlp="gelu", tied=True, position="learned",
                     normalization="layernorm",
                     cite=f"{CITE_MPT}; positions: {CITE_MPT_POSITIONS}; norms: {CITE_MPT_NORM}",
                     gaps=[
                           # llm-foundry 061f2c7c scripts/train/benchmarking/submit_benchmarks.py: --attn_impl default
                           "attention kernel: Triton flash attention (submit_benchmarks.py --attn_impl default 'triton'), "
                           "not the CUDA FlashAttention gclc's attention efficiency is calibrated on elsewhere"]), layout
    if n.startswith("deepseekv3"):
        # Megatron-Bridge v0.3.0 (NeMo 26.02) recipes/deepseek/deepseek_v3.py: mtp_num_layers defaults to 1
        mtp_default = "26.02" in row["group"]
        mtp = 1 if ("mtp" in n or mtp_default) and "w/o" not in name.lower() else 0
        cite = CITE_DSV3 + "; " + CITE_DSV3_MLA + "; " + CITE_DSV3_GROUPS
        if mtp:
            cite += "; mtp = 1: " + ("the row's model name" if "mtp" in n else
                                     "26.02 recipe default mtp_num_layers = 1 (Megatron-Bridge v0.3.0 deepseek_v3.py)")
        return Shape(61, 7168, 128, 18432, 129280, head_dim=128, mlp="swiglu",
                     experts={"routed": 256, "shared": 1, "top_k": 8, "ffn": 2048, "dense_layers": 3,
                              "groups": 8, "group_top_k": 4},
                     mla={"kv_rank": 512, "rope_dim": 64, "q_rank": 1536}, mtp=mtp, cite=cite), layout
    if n.startswith("gptoss120b"):
        return Shape(36, 2880, 64, 2880, 201088, kv_heads=8, head_dim=64, mlp="swiglu",
                     experts={"routed": 128, "shared": 0, "top_k": 4, "ffn": 2880, "dense_layers": 0,
                              "bias": True, "clamp": 7},
                     window=128, global_every=2, cite=f"{CITE_GPTOSS}; windows: {CITE_GPTOSS_WINDOW}",
                     gaps=[CITE_GPTOSS_SINKS]), layout
    m = re.match(r"qwen3(30|235)ba(3|22)b", n)
    if m:
        if m.group(1) == "30":
            s = Shape(48, 2048, 32, 768, 151936, kv_heads=4, head_dim=128,
                      experts={"routed": 128, "shared": 0, "top_k": 8, "ffn": 768, "dense_layers": 0}, cite=CITE_QWEN3)
        else:
            s = Shape(94, 4096, 64, 1536, 151936, kv_heads=4, head_dim=128,
                      experts={"routed": 128, "shared": 0, "top_k": 8, "ffn": 1536, "dense_layers": 0}, cite=CITE_QWEN3)
        return s, layout
    if n.startswith("mixtral8x22b"):
        nemo = "nemo" in framework
        # NeMo's 64k recipe in performance mode adds MegatronTokenDropCallback (capacity-factor token
        # dropping): NVIDIA/NeMo nemo/collections/llm/recipes/mixtral_8x22b_64k.py
        experts = {"routed": 8, "shared": 0, "top_k": 2, "ffn": 16384, "dense_layers": 0}
        cite = CITE_MIXTRAL + "; " + (CITE_MIXTRAL_NEMO_VOCAB if nemo else
                                      "vocab 32768 ASSUMPTION (Mistral v3 tokenizer of 8x22B; not re-read)")
        if nemo:
            experts["capacity_factor"] = 1.0
            cite += "; capacity_factor 1.0: " + CITE_TOKEN_DROP + " (added by the mixtral_8x22b_64k recipe)"
        return Shape(56, 6144, 48, 16384, 32000 if nemo else 32768, kv_heads=8, mlp="swiglu",
                     experts=experts, cite=cite), layout
    m = re.match(r"nemotron(\d+)b", n)
    if m and m.group(1) + "b" in NEMOTRON:
        layers, hidden, heads, kv, ffn = NEMOTRON[m.group(1) + "b"]
        return Shape(layers, hidden, heads, ffn, 256000, kv_heads=kv, mlp="relu", cite=CITE_NEMOTRON,
                     gaps=["squared-ReLU MLP written as `mlp = relu` (two matrices; same FLOPs)"]), layout
    m = re.match(r"llama3(\.1)?(\d+)b", n)
    if m and m.group(2) + "b" in LLAMA3:
        layers, hidden, heads, kv, ffn = LLAMA3[m.group(2) + "b"]
        return Shape(layers, hidden, heads, ffn, 128256, kv_heads=kv, cite=CITE_LLAMA3), layout
    m = re.match(r"llama2(\d+)b", n)
    if m and m.group(1) + "b" in LLAMA2:
        layers, hidden, heads, kv, ffn = LLAMA2[m.group(1) + "b"]
        return Shape(layers, hidden, heads, ffn, 32000, kv_heads=kv, cite=CITE_LLAMA2), layout
    m = re.match(r"gpt3(5|20|175)b$", n)
    if m and "nemo" in framework:
        layers, hidden, heads, ffn = NEMO_GPT3[m.group(1) + "b"]
        return Shape(layers, hidden, heads, ffn, 50257, mlp="gelu", tied=True, position="learned",
                     cite=f"{CITE_NEMO_GPT}; {CITE_GPT2_VOCAB}; {CITE_MEGATRON_TIED}; positions: {CITE_NEMO_POSITIONS}"), layout
    if "131072vocab" in n and "175b" in n:
        # Megatron-Core strong scaling: the GPT-3 175B shape with a 131072 vocabulary (177 B).
        layout = {"tp": 8, "pp": 6, "cite": "row note: 'the 177B row of the weak-scaling table used TP8 PP6' "
                  "(NVIDIA/Megatron-LM README model table, row mlm_h100_7)"}
        return _megatron_gpt(96, 12288, 96, 131072,
                             "GPT-3 175B: Brown et al. 2020 Table 2.1 (96 layers, d_model 12288, 96 heads), "
                             "as the GPT-177B row of the same README table", tied=False), layout
    if "gopher" in n:
        raise Unexpressible("Gopher on TPU v3: the parallel layout (model-parallel degree, pipeline across pods) "
                            "and the global batch are not published in the row (step rate from personal "
                            "communication); TPU v3 is not in std")
    if n.startswith("falcon"):
        raise Unexpressible("no measured throughput in the source (configuration-only row); Gigatron's "
                            "ZeRO stage is not stated")
    m = re.match(r"gpt(?:3style)?(\d+(?:\.\d+)?)([bt])", n)
    if m:
        size = m.group(1).rstrip("0").rstrip(".") if "." in m.group(1) else m.group(1)
        key = size + m.group(2)
        layers, hidden, heads = (integer(row.get(k)) for k in ("layers", "hidden", "heads"))
        vocab = integer(row.get("vocab")) or 51200
        if layers and hidden and heads:
            tied = "megatron-core" not in framework
            s = _megatron_gpt(layers, hidden, heads, vocab,
                              "shape from the row" if integer(row.get("ffn")) else "layers/hidden/heads/vocab from the row", tied)
            if integer(row.get("ffn")):
                s.ffn = integer(row["ffn"])
            if "bloom" in n:   # ALiBi: no position weights, its bias applied inside attention
                s.position = "none"
                s.cite = s.cite.split("; positions: ")[0] + f"; positions: {CITE_BLOOM_ALIBI}"
            return s, layout
        if key in KORTHIKANTI and "megatron" in framework:
            l_, h_, a_, tp, pp, vp, mb, per_replica = KORTHIKANTI[key]
            layout = {"tp": tp, "pp": pp, "vp": vp, "microbatch": mb, "seq": 2048, "per_replica": per_replica,
                      "cite": "Korthikanti et al. 2022 Tables 3 and 5 (the same configuration as rows kort_t5_*)"}
            return _megatron_gpt(l_, h_, a_, 51200, CITE_KORT_T3), layout
        if "v100" in row["accelerator"].lower() or not row["n_accel"].strip():
            raise Unexpressible("GPU count and parallel layout not published (PaLM Table 3 re-derivation of "
                                "OpenAI's GPT-3 run); V100 is not in std")
    raise Unexpressible(f"model shape of '{name}' unknown: the row lacks layers/hidden/heads and no public "
                        "configuration is on file for it")
