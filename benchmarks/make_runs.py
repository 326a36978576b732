"""Turn every published training run into a checked gclc design: `benchmarks/runs/<run_id>.gcl`.

    .venv/bin/python benchmarks/make_runs.py [RUNS_CSV [MEASURED_CSV]] [--out DIR] [--no-check]
    .venv/bin/python benchmarks/make_runs.py --validation   # the never-fitted runs -> benchmarks/validation/

Each row of RUNS_CSV (columns as `benchmarks/data/public_runs.csv`) becomes one design: the
hardware (std nodes and fabrics sized to the row's accelerator count), the model shape (from the
row; where the row lacks layers / hidden / heads / ffn / vocab, from the model's public
configuration, cited in the file), and a `train` block that pins every parallel setting the row
states. The measured figure of MEASURED_CSV (columns as `public_runs_measured.csv`) goes into the
file's header comment. With --validation, RUNS_CSV is `data/validation_runs.csv` (its rows carry
their own measured columns) and DIR `benchmarks/validation`: runs no calibration sees. Rows that
cannot be expressed are listed with the reason in `<out>/UNEXPRESSIBLE.md`. Every written file is checked with gclc; a file with errors is removed
and listed as unexpressible (a bug to fix here, not a silent drop).

The sourced facts live beside it: model shapes in `run_models.py`; precision recipe names, sharding
names, vocabulary padding and each system's scale-out fabric in `run_facts.py`; the recompute,
offload and optimizer settings of the framework recipes in `run_recipes.py`. The audit behind them:
`benchmarks/runs/AUDIT.md`.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_facts import (SCALEOUT, Unknown, megatron_padded_vocab, precision_of as precision_word,  # noqa: E402
                       sharding_of, system_of)
from run_models import Shape, Unexpressible, _norm, integer, num, resolve_shape  # noqa: E402,F401
from run_recipes import Recipe, a2a_overlap, cuda_graphs_of, dispatcher_of, recipe_of  # noqa: E402
from run_stacks import software_of  # noqa: E402,F401  (the stack a run's framework and date imply)
from run_variants import h100_variant, stated_nics  # noqa: E402  (hardware a row states beyond the std parts)

DEFAULT_RUNS = HERE / "data" / "public_runs.csv"
DEFAULT_MEASURED = HERE / "data" / "public_runs_measured.csv"
DEFAULT_OUT = HERE / "runs"
DEFAULT_ORIGIN = "benchmarks/data/public_runs.csv"   # named in each design's header
# Published runs that no calibration sees (benchmarks/validation.py judges the shipped model on them)
VALIDATION_RUNS = HERE / "data" / "validation_runs.csv"
VALIDATION_OUT = HERE / "validation"


# ----------------------------------------------------------------- small helpers


def clean(text: str) -> str:
    """Text safe inside a gcl string or comment line."""
    return " ".join(text.replace('"', "'").split())


def fat_tree_capacity(radix: int, tiers: int) -> int:
    """Endpoints a non-blocking folded Clos of `tiers` tiers of `radix`-port switches serves
    (the same formula as gclc's compiler/topology.py, restated so this script needs only the CSV)."""
    down = max(1, min(radix - 1, round(radix / 2)))
    return down ** (tiers - 1) * radix


# ----------------------------------------------------------------- hardware


@dataclass
class Platform:
    imports: list[str]
    decls: list[str]          # local parts (text blocks)
    cluster: str              # the cluster block
    gpus: int
    notes: list[str] = field(default_factory=list)


FABRICS = {  # std fabric -> (topology constructor, radix, rails)
    "HDR_FatTree": ("fat_tree", 40, 8), "NDR_FatTree": ("rail_optimized", 64, 8), "XDR_FatTree": ("fat_tree", 144, 4),
}


def _scaleout(std: str, endpoints: int, rails: int | None, why: str, gbps: float | None = None) -> str:
    kind, radix, std_rails = FABRICS[std]
    tiers = next(t for t in range(1, 6) if fat_tree_capacity(radix, t) >= endpoints)
    lines = [f"# {why}", f"fabric Scaleout extends {std} {{",
             f"  topology = {kind}(tiers = {tiers}, radix = {radix})  # {endpoints} endpoints: "
             f"{tiers} tier(s) of radix {radix} serve up to {fat_tree_capacity(radix, tiers)}"]
    if rails and rails != std_rails:
        lines.append(f"  rails    = {rails}  # one NIC port per GPU")
    if gbps:
        lines.append(f"  bandwidth = {gbps:g} Gb/s  # per GPU, as the row states")
    lines.append("}")
    return "\n".join(lines)


# The DGX GB200 rack as NVIDIA's SuperPOD runs it: one 400 Gb/s ConnectX-7 per GPU (DGX SuperPOD GB200
# reference architecture: "NVIDIA NDR (400 Gbps) InfiniBand"); std's GB200_Tray carries the 800 Gb/s
# ConnectX-8 of later deployments.
DGX_GB200 = """# DGX GB200: the GB200 NVL72 rack with one 400 Gb/s ConnectX-7 per GPU (DGX SuperPOD GB200 RA: NDR 400 Gb/s).
node GB200_Tray_CX7 extends GB200_Tray {
  nics = 4 x ConnectX7
}

supernode DGX_GB200 extends GB200_NVL72 {
  nodes  = 18 x GB200_Tray_CX7
  source = "DGX SuperPOD GB200 reference architecture (NDR 400 Gb/s InfiniBand compute fabric, ConnectX-7)"
}"""


def resolve_platform(row: dict, n: int) -> Platform:
    accel = row["accelerator"].lower()
    network = row["inter_node_network"].lower()

    def dgx(node: str, per: int, std_fabric: str, rails: int | None, why: str, decls=None, imports=None, gbps=None):
        nodes = math.ceil(n / per)
        parts = list(decls or [])
        cluster = ["cluster Cluster {", f"  units    = {nodes} x {node}  # {nodes} x {per} = {nodes * per} GPUs"]
        if nodes > 1:
            parts.append(_scaleout(std_fabric, nodes * per, rails, why, gbps))  # one NIC port per GPU
            cluster.append("  scaleout = Scaleout")
        cluster.append("}")
        return Platform(imports or ["std/nvidia"], parts, "\n".join(cluster), n)

    system = system_of(row["accelerator"])
    if system in ("gb300", "gb200", "b300", "b200", "h100"):
        fab = SCALEOUT[system]
        why = (f"scale-out: {fab.cite}; the row does not restate the fabric, so the system's reference "
               f"architecture is ASSUMED ({fab.gbps} Gb/s per GPU)")
        rails = fab.rails if fab.rails != FABRICS[fab.std_fabric][2] else None
        if system == "gb200":
            return dgx("DGX_GB200", 72, fab.std_fabric, rails, why, decls=[DGX_GB200])
        node, per = {"gb300": ("GB300_NVL72", 72), "b300": ("DGX_B300", 8), "b200": ("DGX_B200", 8),
                     "h100": ("DGX_H100", 8)}[system]
        variant = h100_variant(row) if system == "h100" else None
        if variant:
            return dgx(variant.node, per, fab.std_fabric, rails, why, decls=[variant.decl])
        return dgx(node, per, fab.std_fabric, rails, why)
    if "h200" in accel:
        # std's HGX_H200 (8 x H200 SXM 141 GB, 8 x ConnectX-7); the compute fabric is the H100 SuperPOD's class
        fab = SCALEOUT["h100"]
        why = (f"scale-out: {clean(row['inter_node_network']) or 'not stated'} (the row); {fab.std_fabric} at "
               f"{fab.gbps} Gb/s per GPU (ASSUMPTION where the row states no topology)")
        return dgx("HGX_H200", 8, fab.std_fabric, None, why)
    if "a100" in accel:
        decls, node = [], "DGX_A100"
        if "40gb" in accel.replace(" ", ""):
            node = "A100_40GB_Server"
            decls.append("# An 8 x A100 40GB SXM server: the DGX A100 chassis with the 40 GB part (std A100_SXM_40GB).\n"
                         "node A100_40GB_Server extends DGX_A100 {\n"
                         "  gpus   = 8 x A100_SXM_40GB\n"
                         f"  source = \"row accelerator: {clean(row['accelerator'])}; chassis ASSUMED DGX A100-like\"\n"
                         "}")
        if "roce" in network:
            nodes = math.ceil(n / 8)
            decls.append("# " + clean(row["inter_node_network"]) + " (the row): 8 x 200 Gb/s per 8-GPU node, one port per GPU\n"
                         "# (ASSUMPTION); the topology is not stated: one non-blocking switched tier.\n"
                         "fabric Scaleout {\n"
                         "  kind      = ethernet\n"
                         "  topology  = switched\n"
                         "  rails     = 8\n"
                         "  bandwidth = 200 Gb/s  # 1600 Gbps per node / 8 GPUs\n"
                         f"  source    = \"row inter_node_network: {clean(row['inter_node_network'])}\"\n"
                         "}")
            cluster = f"cluster Cluster {{\n  units    = {nodes} x {node}  # {nodes} x 8 = {nodes * 8} GPUs\n"
            cluster += "  scaleout = Scaleout\n}" if nodes > 1 else "}"
            if nodes == 1:
                decls.pop()
            return Platform(["std/nvidia"], decls, cluster, n)
        nics = None if "hdr" in network or "selene" in network else stated_nics(row, 8)
        if nics:
            why = (f"scale-out: {clean(row['inter_node_network'])} (the row): {nics.note(8)}; an HDR-class "
                   "fat tree otherwise (ASSUMPTION: the row's topology is not a gclc topology)")
            return dgx(node, 8, "HDR_FatTree", None, why, decls, gbps=nics.per_gpu)
        why = ("scale-out: Selene, 8 x 200 Gb/s HDR InfiniBand per DGX A100 (the row)" if "hdr" in network or
               "selene" in network else "scale-out: not stated in the row; 8 x 200 Gb/s HDR per DGX A100 ASSUMED")
        return dgx(node, 8, "HDR_FatTree", None, why, decls)
    if "tpu v5p" in accel:
        if n % 4:
            raise Unexpressible(f"{n} TPU v5p chips is not a whole number of 4-chip hosts")
        hosts = n // 4
        decl = (f"# The v5p slice of the run: {n} chips = v5p-{2 * n} ({hosts} hosts), one ICI torus.\n"
                "supernode V5p_Slice {\n"
                f"  nodes   = {hosts} x TPU_v5p_Host\n"
                "  scaleup = ICI_v5p\n"
                f"  source  = \"row: {n} TPU v5p chips in one slice (v5p-N counts TensorCores, 2 per chip)\"\n"
                "}")
        return Platform(["std/google"], [decl], "cluster Cluster {\n  units = 1 x V5p_Slice\n}", n)
    if "tpu v5e" in accel:
        if n % 256:
            raise Unexpressible(f"{n} TPU v5e chips is not a whole number of v5e-256 slices")
        slices = n // 256
        cluster = f"cluster Cluster {{\n  units    = {slices} x TPU_v5e_Pod  # {slices} v5e-256 slice(s)\n"
        cluster += "  scaleout = DCN_v5e  # multislice over the data-center network\n}" if slices > 1 else "}"
        return Platform(["std/google"], [], cluster, n)
    raise Unexpressible(f"no std part for accelerator '{row['accelerator']}'")


# ----------------------------------------------------------------- training configuration


def precision_of(text: str) -> tuple[str, str]:
    """gclc precision and its note for a row's precision cell (recipe names: run_facts.PRECISION_WORDS)."""
    try:
        return precision_word(text)
    except Unknown as e:
        raise Unexpressible(str(e)) from None


def zero_of(row: dict, stack: str, recipe: Recipe) -> tuple[int, str]:
    stated = sharding_of(row["zero_or_fsdp"])
    if stated is not None:
        return stated
    if recipe.zero is not None:
        return recipe.zero, f"not in the row; recipe: {recipe.notes[0]}"
    if stack == "megatron":
        return 0, "not stated; 2021-22 Megatron-LM had no distributed optimizer (DDP all-reduce)"
    if stack in ("fsdp", "fsdp_compiled", "maxtext"):
        return 3, "not stated; the stack shards weights, gradients and optimizer state (FSDP)"
    return 1, "not stated; NeMo / Megatron-Core default distributed optimizer ASSUMED"


def recompute_of(row: dict, layout: dict, recipe: Recipe) -> tuple[str | None, str]:
    r = row["recompute"].lower()
    if "remat" in layout:
        remat = layout["remat"]
        value = "full" if remat == "full" else "selective"
        return value, (f"MaxText remat_policy={remat}" + ("" if remat == "full" else
                       " (matmul outputs saved, the rest recomputed; written as selective)") +
                       ("; the saved activations are offloaded to host memory, not written: the TPU hosts in "
                        "std declare no `host_link`"
                        if "offload" in remat else ""))
    if "selective layer" in r:
        # torchtitan config_manager.py (04133643): selective_ac_option default "2" = every other layer
        return "full", ("row: 'selective layer' = torchtitan recomputes every 2nd layer in full "
                        "(selective_ac_option default \"2\"; recompute_every = 2)")
    if "selective op" in r:
        # torchtitan op-level SAC (torchtitan/parallelisms/parallelize_llama.py, commits 04133643 and
        # 6b03ffa3): saves matmul and attention outputs but recomputes every second matmul
        return "selective", ("row: 'selective op' = torchtitan op-level SAC (saves matmul and attention "
                             "outputs except every 2nd matmul; recompute_modules = [op_level])")
    if "selective" in r:
        return "selective", f"row: {row['recompute']}"
    if "full" in r or "checkpointing" in r or "recomputation" in r:
        return "full", f"row: {row['recompute']}"
    if r.strip() == "none":
        return "none", "row: none"
    if "sc21" in row["group"].lower():
        return "full", "not stated; SC21's throughput accounting (eq. 3) assumes full activation recomputation"
    if recipe.recompute:
        return recipe.recompute, "not in the row; recipe: " + "; ".join(recipe.notes)
    return None, ""


@dataclass
class Train:
    values: list[tuple[str, object, str]]   # (field, value, comment) inside `parallelism { }`
    batch: int
    batch_note: str
    seq: int
    precision: str
    precision_note: str
    stack: str
    gpus: int
    fills: list[str]
    tp: int = 1
    gaps: list[str] = field(default_factory=list)
    optimizer: list[tuple[str, str, str]] = field(default_factory=list)   # (field, value, note) of the job


# Blackwell parts run gclc's generic `fp8` with MX block scaling (compiler/formats.py block_scaled); a row
# that ran per-tensor scaling there is written `fp8_e4m3`, the per-tensor format the language offers
# (Transformer Engine's tensorwise recipe in Megatron-Bridge's bf16_with_fp8_current_scaling_mixed runs
# fp8 = "hybrid", E4M3 forward / E5M2 gradients: the same 8 bits and the same per-tensor scale, so the
# same price; src/megatron/bridge/training/mixed_precision.py at v0.3.0). Which rows did:
# - the word says so: FP8-CS (per-tensor current scaling) or FP8-DS (delayed scaling);
# - Megatron-Bridge 25.09, whose table has no precision column: its footnote makes the primary figure
#   per-tensor current scaling (the row's notes);
# - Megatron-Bridge 26.02 "FP8" on Blackwell: the table's precisions are BF16, FP8, MXFP8 and NVFP4, and
#   the recipes name its FP8 variant FP8_CS (v0.3.0 scripts/performance/configs/llama/
#   llama3_workload_base_configs.py LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_CS_V1, llama31_workload_base_
#   configs.py LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V1, ...);
# - NeMo 25.02 "FP8" (DGX B200): its performance scripts (NVIDIA/NeMo v2.2.0, 2025-03-12,
#   scripts/llm/performance/pretrain_*.py) run fp8 as `bf16_with_fp8_mixed` (nemo/collections/llm/recipes/
#   precision/mixed_precision.py: fp8 = 'hybrid', an amax history of 1024, fp8_params = True), which names no
#   recipe: Megatron-Core's default, delayed scaling. NeMo's MXFP8 recipe came after it (PR #12503,
#   2025-04-10, first in v2.3.0).
PER_TENSOR_WORDS = r"fp8[-_ ]?[cd]s|current[-_ ]scaling|delayed[-_ ]scaling"
NEMO_2502 = "nemo 25.02"   # the groups of NeMo 25.02's tables (B200, H100)
NEMO_2502_FP8 = ("NeMo 25.02's performance scripts (NVIDIA/NeMo v2.2.0 scripts/llm/performance/pretrain_*.py) "
                 "run fp8 as bf16_with_fp8_mixed (nemo/collections/llm/recipes/precision/mixed_precision.py: "
                 "fp8 = 'hybrid', amax history 1024, fp8_params = True; no recipe named: Megatron-Core's delayed "
                 "scaling); NeMo's MXFP8 recipe came after it (PR #12503, 2025-04-10, v2.3.0)")
BLACKWELL_SYSTEMS = ("gb300", "gb200", "b300", "b200")


def per_tensor_fp8(row: dict, precision: str, note: str) -> tuple[str, str]:
    """`fp8_e4m3` for a Blackwell row that ran per-tensor fp8 scaling (above), else the precision as read."""
    if precision != "fp8" or system_of(row["accelerator"]) not in BLACKWELL_SYSTEMS:
        return precision, note
    primary = re.sub(r"\([^)]*\)", " ", row["precision"]).strip().lower()
    group = row["group"].lower()
    if re.search(PER_TENSOR_WORDS, primary):
        why = "the row's recipe scales per tensor"
    elif "megatron-bridge 25.09" in group and "primary = per-tensor/current scaling" in row["notes"]:
        why = "the 25.09 table's footnote: the primary figure is per-tensor current scaling"
    elif "megatron-bridge 26.02" in group and primary == "fp8":
        why = "the 26.02 table's FP8 is the recipes' FP8_CS variant (v0.3.0 scripts/performance/configs/llama/*)"
    elif group.startswith(NEMO_2502) and primary == "fp8":
        return "fp8_e4m3", (f"{note}; per-tensor scaling on Blackwell, where the generic fp8 is MXFP8: {NEMO_2502_FP8} "
                            "(hybrid E4M3/E5M2 with delayed scaling, priced as fp8_e4m3; the Megatron export of "
                            "fp8_e4m3 writes --fp8-format e4m3 --fp8-recipe delayed, the run's recipe in its E4M3 "
                            "format)")
    else:
        return precision, note
    return "fp8_e4m3", (f"{note}; per-tensor scaling on Blackwell, where the generic fp8 is MXFP8: {why} "
                        "(Transformer Engine's hybrid E4M3/E5M2 tensorwise recipe, priced as fp8_e4m3; the "
                        "language states no recipe, so the Megatron export of fp8_e4m3 writes --fp8-format e4m3 "
                        "--fp8-recipe delayed, not the run's hybrid format with --fp8-recipe tensorwise)")


def resolve_train(row: dict, shape: Shape, layout: dict, fills: list[str]) -> Train:
    stack = software_of(row)
    precision, precision_note = per_tensor_fp8(row, *precision_of(row["precision"]))
    seq = integer(row["seq_len"]) or layout.get("seq")
    if not seq:
        raise Unexpressible("sequence length not published")
    if not integer(row["seq_len"]):
        fills.append(f"seq {seq}: {layout['cite']}")
    n = integer(row["n_accel"])
    values: list[tuple[str, object, str]] = []

    def pin(name: str, value, note: str) -> None:
        values.append((name, value, note))

    tp = integer(row["TP"])
    pp = integer(row["PP"])
    cp = integer(row["CP"]) or 1
    dp = integer(row["DP"])
    ep = integer(row["EP"])
    vp = integer(row["VP"])
    mb = integer(row["micro_batch"])
    batch = integer(row["global_batch_seqs"])
    batch_note = "row: global batch, sequences per step"
    if batch and mb and batch < mb:
        # e.g. NeMo 25.02 Mixtral-8x22B: 'printed as GBS=1, MBS=64 (columns look swapped in source)'
        batch, mb = mb, batch
        batch_note = "row gives GBS < MBS; the source's columns are swapped (row notes), so GBS and MBS are exchanged"
        fills.append(f"global batch {batch} and micro-batch {mb}: {batch_note}")
    if "pdbs" in layout:   # MaxText: FSDP over the slice, tensor parallel inside
        if n is None:
            raise Unexpressible("chip count not published")
        tp = layout["tp"]
        pp, cp, dp = 1, 1, n // layout["tp"]
        batch = layout["pdbs"] * n
        batch_note = f"per_device_batch_size {layout['pdbs']} x {n} chips ({layout['cite']})"
        fills.append(f"layout, batch and remat: {layout['cite']}")
        pin("tp", tp, f"ici_tensor_parallelism = {tp} ({layout['cite']})")
        pin("pp", 1, "MaxText runs no pipeline here")
        pin("dp", dp, "ici_fsdp_parallelism = -1 (the rest of the chips)")
        # Hybrid sharding: FSDP over ici_fsdp inside a slice; ici_data_parallelism and, across
        # v5e slices, dcn_data_parallelism = -1 replicate
        slices = n // 256 if n > 256 and "v5e" in row["accelerator"].lower() else 1
        shard = dp // (layout["ici_dp"] * slices)
        if shard < dp:
            why = []
            if layout["ici_dp"] > 1:
                why.append(f"ici_data_parallelism = {layout['ici_dp']} replicates inside the slice")
            if slices > 1:
                why.append(f"dcn_data_parallelism = -1 replicates across the {slices} slices")
            pin("shard", shard, f"ici_fsdp_parallelism: FSDP over {shard} chips; " + "; ".join(why))
        mb = layout["pdbs"]
        pin("microbatch", mb, "per_device_batch_size: one micro-batch per step per chip")
    else:
        if tp is None and "tp" in layout:
            tp, pp = layout["tp"], layout["pp"]
            fills.append(f"tp {tp}, pp {pp}: {layout['cite']}")
            if "vp" in layout and vp is None:
                vp = layout["vp"]
                fills.append(f"vp {vp}: {layout['cite']}")
            if mb is None and "microbatch" in layout:
                mb = layout["microbatch"]
                fills.append(f"micro-batch {mb}: {layout['cite']}")
        tp, pp = tp or 1, pp or 1
        if n is None:
            if dp is None:
                raise Unexpressible("accelerator count not published")
            n = tp * pp * cp * dp
            fills.append(f"{n} GPUs = tp {tp} x pp {pp} x cp {cp} x dp {dp} (the row's DP with the layout above)")
        if dp is None:
            dp = n // (tp * pp * cp)
        if tp * pp * cp * dp != n:
            raise Unexpressible(f"tp {tp} x pp {pp} x cp {cp} x dp {dp} does not equal the {n} accelerators")
        if batch is None:
            if "per_replica" in layout:
                per_replica = layout["per_replica"]
                batch = per_replica * dp
                batch_note = (f"ASSUMPTION: not published; {per_replica} sequences per replica as in the "
                              f"matching Table 5 run x dp {dp}")
                fills.append(f"global batch {batch}: {batch_note}")
            else:
                raise Unexpressible("global batch not published")
        def origin(column: str, key: str, what: str) -> str:
            if integer(row[column]):
                return "row"
            if key in layout:
                return "fill-in (see header)"
            return f"not stated: no {what} (the row's layout is data parallel)"

        pin("tp", tp, origin("TP", "tp", "tensor parallelism"))
        pin("pp", pp, origin("PP", "pp", "pipeline parallelism"))
        pin("dp", dp, "row" if integer(row["DP"]) else f"{n} GPUs / (tp x pp x cp)")
        if cp > 1 or integer(row["CP"]):
            pin("cp", cp, "row")
        if ep and ep > 1:
            pin("ep", ep, "row")
        if vp and vp > 1:
            pin("vp", vp, "row" if integer(row["VP"]) else "fill-in (see header)")
            pin("schedule", "interleaved", "virtual pipeline stages")
        if mb:
            pin("microbatch", mb, "row" if integer(row["micro_batch"]) and "swapped" not in batch_note
                else "fill-in (see header)")
    stages = max(1, pp or 1) * max(1, vp or 1)
    recipe = recipe_of(row, _norm(row["model"]), system_of(row["accelerator"]), max(1, shape.layers // stages))
    if recipe.microbatch and recipe.microbatch != mb:
        mb = recipe.microbatch
        values[:] = [(k, mb if k == "microbatch" else v, f"recipe: {recipe.why['microbatch']}" if k == "microbatch"
                      else note) for k, v, note in values]
        fills.append(f"micro-batch {mb}: {recipe.why['microbatch']}")
    if recipe.ep and recipe.ep != ep:
        ep = recipe.ep
        values[:] = [(k, ep if k == "ep" else v, f"recipe: {recipe.why['ep']}" if k == "ep" else note)
                     for k, v, note in values]
        fills.append(f"ep {ep}: {recipe.why['ep']}")
    recompute, why = recompute_of(row, layout, recipe)
    if recompute:
        pin("recompute", recompute, why)
    r = row["recompute"].lower()
    if "selective layer" in r:
        pin("recompute_every", 2, "torchtitan selective_ac_option \"2\": every 2nd layer")
    if "selective op" in r:
        pin("recompute_modules", ["op_level"], "torchtitan selective_ac_option \"op\"")
    elif recipe.modules:
        pin("recompute_modules", list(recipe.modules), "recipe: " + recipe.notes[0])
    if recipe.offload:
        pin("offload", round(recipe.offload, 4), f"activations of {recipe.offload:.1%} of each stage's layers in "
            "host memory: " + next(n for n in recipe.notes if "cpu_offloading" in n))
    if "sequence" in r and "parallel" in r:
        pin("sp", True, "row: sequence parallelism")
    elif stack == "megatron" and tp > 1:
        pin("sp", False, "Megatron-LM before Korthikanti et al. (and its 'full' baseline) had no sequence parallelism")
    zero, why = zero_of(row, stack, recipe)
    pin("zero", zero, why)
    loss, why = loss_of(row, stack)
    if loss:
        pin("loss", loss, why)
    reduce, why = grad_reduce_of(row)
    if reduce:
        pin("grad_reduce", reduce, why)
    overlap = a2a_overlap(row, _norm(row["model"]), system_of(row["accelerator"])) if shape.experts else ""
    if overlap and ep and ep > 1:
        pin("ep_overlap", True, f"recipe: {overlap}")
    dispatcher = dispatcher_of(row, _norm(row["model"]), system_of(row["accelerator"])) if shape.experts else None
    if dispatcher and ep and ep > 1:
        pin("dispatcher", dispatcher[0], f"recipe: {dispatcher[1]}")
    if recipe.dropout is not None:
        pin("dropout", recipe.dropout, recipe.why["dropout"])
    optimizer = [(name, value, recipe.why[name]) for name, value in
                 (("optimizer_state", recipe.optimizer_state), ("master_weights", recipe.master_weights)) if value]
    fp8_params = fp8_params_of(row, precision, recipe)
    if fp8_params:
        optimizer.append(("fp8_params", "true", fp8_params))
    graphs = cuda_graphs_of(row, _norm(row["model"]), system_of(row["accelerator"]))
    gaps = recipe.gaps + ([f"{graphs}; no field states them (run_recipes.py CUDA_GRAPHS)"] if graphs else [])
    return Train(values, batch, batch_note, seq, precision, precision_note, stack, n, fills, tp, gaps,
                 optimizer)


# Megatron-Bridge's mixed-precision recipes keep the weights in fp8 (fp8_param_gather = True) for
# delayed, per-tensor current and MXFP8 scaling, not for sub-channel scaling: src/megatron/bridge/
# training/mixed_precision.py at fa0315ae2 (25.09), v0.2.0 (25.11) and v0.3.0 (26.02), which the
# performance scripts take unchanged (scripts/performance/utils get_precision_config).
MB_FP8_PARAMS = ("NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/mixed_precision.py (fa0315ae2, v0.2.0, "
                 "v0.3.0): bf16_with_fp8_current_scaling_mixed / bf16_with_mxfp8_mixed / "
                 "bf16_with_fp8_delayed_scaling_mixed set fp8_param_gather = True")


def fp8_params_of(row: dict, precision: str, recipe: Recipe) -> str:
    """Why a run keeps its weights in fp8 only ("" when it does not or nothing says so)."""
    if precision not in ("fp8", "fp8_e4m3"):
        return ""
    group, word = row["group"].lower(), row["precision"].lower()
    if "megatron-bridge" in group and not re.search(r"fp8[-_ ]?s[cs]|sub[-_ ]?channel|blockwise",
                                                     re.sub(r"\([^)]*\)", " ", word)):
        return MB_FP8_PARAMS
    if group.startswith(NEMO_2502):
        return NEMO_2502_FP8
    return recipe.why.get("fp8_params", "")


LLM_FOUNDRY_LOSS = ("mosaicml/llm-foundry llmfoundry/models/mpt/modeling_mpt.py ComposerMPTCausalLM: loss_fn "
                    "defaults to 'fused_crossentropy', flash-attn's fused cross entropy (flash_attn.losses.cross_entropy)")


# Composer's FSDP mixed-precision modes (mosaicml/composer composer/distributed/mosaic_parallelism.py
# get_mixed_precision, commit 1b7ba478): DEFAULT gathers the parameters in the autocast dtype but
# sets reduce_dtype = torch.float32, so every micro-batch's gradient reduce-scatter moves fp32;
# PURE reduces in the autocast dtype (the fsdp stack's bf16). llm-foundry's tables name the mode.
COMPOSER_MP = "mosaicml/composer composer/distributed/mosaic_parallelism.py get_mixed_precision (1b7ba478)"


def grad_reduce_of(row: dict) -> tuple[str, str]:
    """(the gradient reduction's format where the row's FSDP mixed-precision mode sets it, why)."""
    mode = re.search(r"mp mode (\w+)", row["zero_or_fsdp"], re.IGNORECASE)
    if not mode or mode.group(1).upper() != "DEFAULT":
        return "", ""
    return "fp32", (f"row: FSDP mixed precision DEFAULT = reduce_dtype torch.float32 ({COMPOSER_MP})")


def loss_of(row: dict, stack: str) -> tuple[str, str]:
    """(the loss's implementation where the run's framework differs from its stack's default, why):
    llm-foundry's MPT runs flash-attn's fused cross entropy; torchtitan compiles the loss with the
    model when `training.compile` is set since 2025-04 (pytorch/torchtitan PR #1033, merged
    2025-04-01), its runs before compiled the transformer blocks alone."""
    words = (row["framework"] + " " + row["group"]).lower()
    if "llm-foundry" in words or "composer" in words:
        return "fused", LLM_FOUNDRY_LOSS
    dated = re.search(r"(20\d\d)-(\d\d)", row["source"])
    if stack != "fsdp_compiled" or "torchtitan" not in words or not dated or dated.group(0) < "2025-04":
        return "", ""
    return "compiled", (f"torchtitan of {dated.group(0)} compiles the loss with the model (pytorch/torchtitan "
                        "PR #1033, 2025-04)")


# ----------------------------------------------------------------- vocabulary padding


def vocab_of(shape: Shape, row: dict, train: Train) -> tuple[int, str]:
    """The embedding rows the framework allocates: Megatron-family stacks pad the tokenizer's vocabulary
    to a multiple of 128 x TP (run_facts.megatron_padded_vocab, with its sources); Megatron-Bridge's
    performance recipes switch the padding on only for Llama (`cfg.model.should_pad_vocab = True` in
    scripts/performance/configs/llama*/*_llm_pretrain.py, v0.2.0 and v0.3.0; GPTModelProvider's default
    is False, so DeepSeek-V3, Qwen3 and GPT-OSS keep their tokenizer's size)."""
    bridge = "megatron-bridge" in row["group"].lower()
    pads = train.stack in ("megatron", "megatron_core", "nemo") and (not bridge or "llama" in _norm(row["model"]))
    if not pads:
        why = "not padded (Megatron-Bridge should_pad_vocab False for this model)" if bridge else "not padded"
        return shape.vocab, why
    padded = megatron_padded_vocab(shape.vocab, train.tp)
    if padded == shape.vocab:
        return padded, f"{shape.vocab} is already a multiple of 128 x tp {train.tp} (Megatron padding)"
    return padded, f"tokenizer {shape.vocab} padded to a multiple of 128 x tp {train.tp} = {padded} (Megatron padding)"


# ----------------------------------------------------------------- writing


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


def model_block(shape: Shape, row: dict, seq: int, vocab: tuple[int, str]) -> str:
    lines = ["model Model {", f"  arch     = {'moe' if shape.experts else 'dense'}"]
    row_has = lambda k: integer(row.get(k)) is not None  # noqa: E731

    def src(key: str) -> str:
        return "row" if row_has(key) else "fill-in (see header)"

    lines += [f"  layers   = {shape.layers}  # {src('layers')}",
              f"  hidden   = {shape.hidden}  # {src('hidden')}",
              f"  heads    = {shape.heads}  # {src('heads')}"]
    if shape.kv_heads and shape.kv_heads != shape.heads and not shape.mla:
        lines.append(f"  kv_heads = {shape.kv_heads}  # {src('kv_heads')}")
    if shape.head_dim and shape.head_dim * shape.heads != shape.hidden:
        lines.append(f"  head_dim = {shape.head_dim}  # fill-in (see header)")
    lines += [f"  ffn      = {shape.ffn}  # {src('ffn')}",
              f"  vocab    = {vocab[0]}  # {'row; ' if integer(row.get('vocab')) == vocab[0] else ''}{vocab[1]}",
              f"  seq      = {seq}",
              f"  mlp      = {shape.mlp}"]
    if shape.tied:
        lines.append("  tied_embeddings = true")
    if shape.position:
        lines.append(f"  position_embedding = {shape.position}  # fill-in (see header)")
    if shape.normalization:
        lines.append(f"  normalization = {shape.normalization}  # fill-in (see header)")
    if shape.experts:
        e = shape.experts
        capacity = f"  capacity_factor = {e['capacity_factor']:g}" if e.get("capacity_factor") else ""
        bias = "  bias = true" if e.get("bias") else ""
        clamp = f"  clamp = {e['clamp']:g}" if e.get("clamp") else ""
        groups = f"  groups = {e['groups']}  group_top_k = {e['group_top_k']}" if e.get("groups") else ""
        lines.append(f"  experts {{ routed = {e['routed']}  shared = {e['shared']}  top_k = {e['top_k']}  "
                     f"ffn = {e['ffn']}  dense_layers = {e['dense_layers']}{groups}{capacity}{bias}{clamp} }}")
    if shape.mla:
        lines.append("  mla { " + "  ".join(f"{k} = {v}" for k, v in shape.mla.items()) + " }")
    if shape.mtp:
        lines.append(f"  mtp      = {shape.mtp}  # fill-in (see header)")
    if shape.window:
        lines.append(f"  window   = {shape.window}  # fill-in (see header)")
        if shape.global_every:
            lines.append(f"  global_every = {shape.global_every}  # fill-in (see header)")
    params = num(row.get("params_B"))
    if params is not None:
        lines.append(f"  params   = {params:g} B  # row params_B (gclc warns if the shape disagrees by > 3 %)")
    lines.append(f"  source   = \"{clean(shape.cite)}\"")
    lines.append("}")
    return "\n".join(lines)


def train_block(row: dict, train: Train) -> str:
    name = re.sub(r"\W", "_", row["run_id"])
    lines = [f"train {name} {{", "  model     = Model", "  on        = Cluster",
             f"  gpus      = {train.gpus}",
             f"  batch     = {train.batch}  # {train.batch_note}",
             f"  seq       = {train.seq}",
             f"  precision = {train.precision}  # {clean(train.precision_note)}",
             f"  software  = {train.stack}  # row: {clean(row['framework']) or 'not stated'}"]
    lines += [f"  {key} = {value}  # {clean(note)}" for key, value, note in train.optimizer]
    lines.append("  parallelism {")
    for key, value, note in train.values:
        lines.append(f"    {key} = {_value(value)}  # {clean(note)}")
    lines += ["  }", "}"]
    return "\n".join(lines)


def header(row: dict, meas: dict, shape: Shape, platform: Platform, train: "Train",
           origin: str = DEFAULT_ORIGIN) -> str:
    fills = train.fills
    out = [f"# {row['run_id']} ({row['group']})",
           f"# Source: {clean(row['source'])}",
           f"#   locator: {clean(row['source_locator'])}",
           f"# Measured: {meas['meas_tokens_per_s_per_gpu']} tokens/s per accelerator "
           f"(kind {meas['kind']}, confidence {meas['confidence']})",
           f"#   derivation: {clean(meas['derivation'])}"]
    if row.get("notes"):
        out.append(f"# Row notes: {clean(row['notes'])}")
    out.append(f"# Generated by benchmarks/make_runs.py from {origin}; regenerate, do not edit.")
    if shape.cite or fills:
        out.append("#")
        out.append("# Model shape and fill-ins (numbers not in the row), with their sources:")
        if shape.cite:
            out.append(f"#   model shape: {clean(shape.cite)}")
        for f in fills:
            out.append(f"#   {clean(f)}")
    gaps = shape.gaps + platform.notes + train.gaps
    if gaps:
        out.append("# Not expressible in gclc (the estimate ignores it):")
        out += [f"#   {clean(g)}" for g in gaps]
    return "\n".join(out)


def render(row: dict, meas: dict, origin: str = DEFAULT_ORIGIN) -> str:
    if meas is None or meas.get("kind") != "steady_state" or num(meas.get("meas_tokens_per_s_per_gpu")) is None:
        kind = meas.get("kind") if meas else "missing"
        extra = ""
        try:
            resolve_shape(row, [])
        except Unexpressible as e:
            extra = f"; also: {e}"
        raise Unexpressible(f"no steady-state measured figure (kind = {kind}){extra}")
    fills: list[str] = []
    shape, layout = resolve_shape(row, fills)
    train = resolve_train(row, shape, layout, fills)
    platform = resolve_platform(row, train.gpus)
    body = [header(row, meas, shape, platform, train, origin), ""]
    body += [f'import "{i}"' for i in platform.imports]
    body.append("")
    for d in platform.decls:
        body += [d, ""]
    body += [model_block(shape, row, train.seq, vocab_of(shape, row, train)), "", platform.cluster, "",
             train_block(row, train), ""]
    return "\n".join(body)


def load(runs_csv: Path, measured_csv: Path | None) -> tuple[list[dict], dict[str, dict]]:
    """The rows, and their measured figures by run_id (from the rows themselves when measured_csv is None:
    the validation CSV carries its measured columns)."""
    with open(runs_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if measured_csv is None:
        return rows, {r["run_id"]: r for r in rows}
    with open(measured_csv, newline="") as f:
        measured = {r["run_id"]: r for r in csv.DictReader(f)}
    return rows, measured


def check(path: Path) -> list[str]:
    """gclc errors of a generated file (empty when it checks clean)."""
    sys.path.insert(0, str(HERE.parent.parent))
    from gclc.compiler.driver import check_file
    result = check_file(str(path))
    return [d.summary for d in result.diagnostics if d.is_error] if not result.ok else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_csv", nargs="?", default=str(DEFAULT_RUNS))
    parser.add_argument("measured_csv", nargs="?", default=str(DEFAULT_MEASURED))
    parser.add_argument("--out", help="folder for the .gcl files (default benchmarks/runs, or benchmarks/validation)")
    parser.add_argument("--no-check", action="store_true", help="do not run gclc check on the written files")
    parser.add_argument("--validation", action="store_true",
                        help="the never-fitted runs: data/validation_runs.csv (measured columns in the same file) "
                             "-> benchmarks/validation")
    args = parser.parse_args(argv)
    if args.validation:
        runs_csv, measured_csv, out = VALIDATION_RUNS, None, Path(args.out or VALIDATION_OUT)
    else:
        runs_csv, measured_csv, out = Path(args.runs_csv), Path(args.measured_csv), Path(args.out or DEFAULT_OUT)
    rows, measured = load(runs_csv, measured_csv)
    origin = f"benchmarks/data/{runs_csv.name}"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.gcl"):
        old.unlink()
    written, skipped = [], []
    for row in rows:
        meas = measured.get(row["run_id"])
        try:
            text = render(row, meas, origin)
        except Unexpressible as e:
            skipped.append((row, meas, str(e)))
            continue
        path = out / f"{row['run_id']}.gcl"
        path.write_text(text)
        errors = [] if args.no_check else check(path)
        if errors:
            path.unlink()
            skipped.append((row, meas, "gclc check errors: " + "; ".join(errors)))
        else:
            written.append(row["run_id"])
    write_unexpressible(out / "UNEXPRESSIBLE.md", skipped, len(rows), origin)
    steady = sum(1 for r in rows if (measured.get(r["run_id"]) or {}).get("kind") == "steady_state")
    print(f"wrote {len(written)} designs to {out}; {len(skipped)} rows unexpressible "
          f"({len(written)}/{steady} of the rows with a steady-state measured figure)")
    return 0


def write_unexpressible(path: Path, skipped: list, total: int, origin: str = DEFAULT_ORIGIN) -> None:
    lines = ["# Rows that are not expressed as gclc designs",
             "",
             f"Generated by `benchmarks/make_runs.py`: {len(skipped)} of {total} rows"
             + (f" of `{origin}`" if origin != DEFAULT_ORIGIN else "") + ". Each reason says what is "
             "missing (from the row or from gclc).",
             "",
             "| run_id | group | measured kind | reason |",
             "| --- | --- | --- | --- |"]
    for row, meas, reason in skipped:
        kind = (meas or {}).get("kind", "missing")
        lines.append(f"| {row['run_id']} | {row['group']} | {kind} | {reason.replace('|', '/')} |")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
