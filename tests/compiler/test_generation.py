"""One NVIDIA generation per chip (compiler/formats.py `generation`), read off its vendor and peaks, never
its name: every std chip reads as it did when the MX recipe and NCCL's constants went by name and the
attention kernels and L2 by peaks, and a chip that only renames another (`chip MyB200 extends B200 {}`,
or the same data sheet under a new name) gets its parent's generation, plan and exports."""

from __future__ import annotations

import json

import attrs
import pytest

from gclc.compiler import formats
from gclc.compiler.driver import check_text
from gclc.compiler.lower import accelerator, lower_cluster
from gclc.model import cache, collectives, compute
from gclc.solver.jobs import plan_design
from gclc.views.export import export
from gclc.views.export.environment import arch
from gclc.views.export.jobs import job_entity, job_plan
from gclc.views.plan_json import outcome_json

STD = check_text("".join(f'import "std/{v}"\n' for v in ("nvidia", "amd", "google", "intel", "huawei")), "std.gcl").design

# Each std chip as the name-keyed tables read it before the generation went by peaks: the MX fp8 recipe
# (MX_FP8_CHIPS by prefix: B200, GB200, B300, GB300), the attention kernels (NVIDIA fp4: Blackwell, fp8:
# Hopper) and the L2 (NVIDIA bf16 without fp8: Ampere); other vendors' chips have no NVIDIA generation.
TABLE = {"A100_SXM_80GB": "ampere", "A100_SXM_40GB": "ampere", "H100_SXM": "hopper", "H200_SXM": "hopper",
         "H800": "hopper", "B200": "blackwell", "GB200": "blackwell", "B300": "blackwell", "GB300": "blackwell",
         "MI300X": None, "MI325X": None, "MI355X": None, "TPU_v4": None, "TPU_v5p": None, "TPU_v5e": None,
         "Gaudi3": None, "Ascend910B": None}


def test_the_table_covers_every_std_chip():
    assert sorted(e.name for e in STD.of_kind("chip")) == sorted(TABLE)


@pytest.mark.parametrize("name, generation", sorted(TABLE.items()))
def test_every_std_chip_is_the_generation_it_was(name, generation):
    chip = accelerator(STD[name])
    assert formats.generation(chip) == generation
    assert formats.block_scaled("fp8", chip) == (generation == "blackwell")   # MX only on Blackwell
    assert formats.block_scaled("mxfp8", chip) and not formats.block_scaled("fp8_e4m3", chip)
    assert (compute.kernel_efficiency(chip) is not None) == (generation in ("hopper", "blackwell"))
    assert compute.warp_group_tensor_cores(chip) == (generation in ("hopper", "blackwell"))
    assert arch(chip) == {"ampere": 8, "hopper": 9, "blackwell": 10}.get(generation, 9)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_a_new_name_changes_nothing_the_generation_decides(name):
    chip = accelerator(STD[name])
    renamed = attrs.evolve(chip, name="Renamed_" + name[::-1])   # no prefix of any std name
    assert formats.generation(renamed) == formats.generation(chip)
    for precision in ("fp8", "mxfp8", "fp8_e4m3", "bf16"):
        assert formats.block_scaled(precision, renamed) == formats.block_scaled(precision, chip)
    assert compute.kernel_efficiency(renamed) == compute.kernel_efficiency(chip)
    assert compute.attention_efficiency(renamed) == compute.attention_efficiency(chip)
    assert compute.mla_decode_rate(renamed) == compute.mla_decode_rate(chip)
    assert cache.l2_source(renamed) == cache.l2_source(chip) and arch(renamed) == arch(chip)


CHIP = """chip {name} {{
  vendor = "{vendor}"
  peak {{ bf16 = 2250 TFLOPS  fp8 = 4500 TFLOPS  {fp4} }}
  hbm {{ capacity = 180 GB  bandwidth = 7.7 TB/s }}
  power {{ tdp = 1000 W }}
}}
"""


@pytest.mark.parametrize("vendor, fp4, generation", [("NVIDIA", "fp4 = 9000 TFLOPS", "blackwell"),
                                                     ("NVIDIA", "", "hopper"),
                                                     ("AMD", "fp4 = 9000 TFLOPS", None)])
def test_a_chip_written_from_its_data_sheet_is_what_its_peaks_say(vendor, fp4, generation):
    # a new name no table knows: an fp4 peak makes an NVIDIA part Blackwell (MX fp8), none Hopper; another
    # vendor's fp4 part (as MI355X) has no NVIDIA generation and keeps per-tensor fp8
    design = check_text(CHIP.format(name="Vera_X1", vendor=vendor, fp4=fp4), "sheet.gcl").design
    chip = accelerator(design["Vera_X1"])
    assert formats.generation(chip) == generation
    assert formats.block_scaled("fp8", chip) == (generation == "blackwell")


DESIGN = """import "std/nvidia"
import "std/network"

chip MyB200 extends B200 {{}}
chip MyH100 extends H100_SXM {{}}
node MyDGX_B200 extends DGX_B200 {{ gpus = 8 x MyB200 }}
node MyDGX_H100 extends DGX_H100 {{ gpus = 8 x MyH100 }}

cluster Pod {{
  units    = 2 x {node}
  scaleout = NDR_FatTree
}}

model M {{ arch = dense  layers = 8  hidden = 2048  heads = 16  ffn = 8192  vocab = 32000  seq = 4096 }}

train job {{
  model     = M
  on        = Pod
  batch     = 64
  precision = fp8
  software  = megatron_core
}}
"""


def _planned(node: str):
    design = check_text(DESIGN.format(node=node), "renamed.gcl").design
    return design, outcome_json(plan_design(design))


def _parents(text: str, parent: str) -> str:
    """The renamed design's text with its chip and node called by their parents' names."""
    chip, low = {"B200": "B200", "H100": "H100_SXM"}[parent], parent.lower()
    for renamed, original in ((f"MyDGX_{parent}", f"DGX_{parent}"), (f"My{parent}", chip),   # and as Slurm slugs them
                              (f"mydgx-{low}", f"dgx-{low}"), (f"mydgx_{low}", f"dgx_{low}"), (f"my{low}", chip.lower())):
        text = text.replace(renamed, original)
    return text


@pytest.mark.parametrize("parent, generation", [("B200", "blackwell"), ("H100", "hopper")])
def test_a_renamed_chip_plans_and_exports_as_its_parent(parent, generation):
    (design, renamed), (parents_design, original) = _planned(f"MyDGX_{parent}"), _planned(f"DGX_{parent}")
    chip = lower_cluster(design["Pod"]).partitions[0].node.accelerator
    assert chip.name == f"My{parent}" and formats.generation(chip) == generation
    up = next(t for t in lower_cluster(design["Pod"]).partitions[0].tiers if t.kind == "nvlink")
    assert up.generation == generation and collectives.generation(up) == generation
    # the plan, error band included: a chip that changes none of its parent's physics is calibrated by its
    # parent's published runs (model/calibration.py calibrated_as)
    assert json.loads(_parents(json.dumps(renamed), parent)) == original
    assert job_plan(job_entity(design, None), timed=False).config.mx_fp8 == (generation == "blackwell")
    for target in ("megatron", "torchtitan", "slurm"):   # the recipe, the environment, the scripts
        files = export(target, design, source="renamed.gcl")
        assert {k: _parents(v, parent) for k, v in files.items()} == export(target, parents_design, source="renamed.gcl")
    recipe = "mxfp8" if generation == "blackwell" else "delayed"
    assert f"--fp8-recipe {recipe}" in export("megatron", design, source="renamed.gcl")["megatron.args"]



@pytest.mark.parametrize("vendor", ["Nvidia", "nvidia", "NVIDIA Corporation"])
@pytest.mark.parametrize("name", ["A100_SXM_80GB", "H100_SXM", "B200", "GB300"])
def test_a_vendor_spelled_otherwise_changes_nothing_the_vendor_decides(name, vendor):
    # review: `vendor = "Nvidia"` read as no NVIDIA generation (per-tensor fp8 instead of MX, Hopper's NCCL
    # constants, no attention kernels, arch 9) while the exports accepted it: one helper (compiler/vendors.py)
    from gclc.compiler.vendors import vendor_of

    chip = accelerator(STD[name])
    spelled = attrs.evolve(chip, vendor=vendor)
    assert vendor_of(vendor) == "NVIDIA"      # what the exports' checks compare
    assert formats.generation(spelled) == formats.generation(chip) is not None
    assert formats.block_scaled("fp8", spelled) == formats.block_scaled("fp8", chip)
    assert compute.kernel_efficiency(spelled) == compute.kernel_efficiency(chip)
    assert compute.attention_efficiency(spelled) == compute.attention_efficiency(chip)
    assert compute.gemm_efficiency(spelled, "bf16") == compute.gemm_efficiency(chip, "bf16")
    assert arch(spelled) == arch(chip)


@pytest.mark.parametrize("vendor", ["Acme", "AMD", ""])
def test_another_vendor_has_no_nvidia_generation(vendor):
    # negative control: B200's peaks under another vendor are no NVIDIA generation
    assert formats.generation(attrs.evolve(accelerator(STD["B200"]), vendor=vendor)) is None


# NVIDIA L40S from its data sheet (nvidia.com/en-us/data-center/l40s: 48 GB GDDR6 at 864 GB/s, 362 dense
# BF16 and 733 dense FP8 TFLOPS, 350 W; compute capability 8.9, developer.nvidia.com/cuda-gpus), eight to a
# box on PCIe Gen4 x16 (64 GB/s bidirectional; the L40S has no NVLink).
ADA = """import "std/network"
chip L40S {{
  vendor = "NVIDIA"
  peak {{ fp32 = 91.6 TFLOPS  tf32 = 183 TFLOPS  bf16 = 362 TFLOPS  fp16 = 362 TFLOPS  fp8 = 733 TFLOPS  int8 = 733 TOPS }}
  hbm {{ capacity = 48 GB  bandwidth = 864 GB/s  type = "{memory}" }}
  power {{ tdp = 350 W }}
}}
fabric PCIe4 {{ kind = pcie  topology = switched  bandwidth = 64 GB/s bidir }}
node Box {{ gpus = 8 x L40S  scaleup = PCIe4 }}
cluster C {{ units = 2 x Box  scaleout = NDR_FatTree }}
"""


def _ada(memory: str = "GDDR6"):
    result = check_text(ADA.format(memory=memory), "ada.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return result.design


def test_an_ada_part_is_ada_to_each_reader_as_its_silicon_is():
    # review: an L40S (sm_89) read as Hopper, so NCCL priced it on Hopper's rows, the exports told Megatron
    # it was compute capability 9, and the attention took Hopper's wgmma kernels' rates
    design = _ada()
    part = lower_cluster(design["C"]).partitions[0]
    chip = part.node.accelerator
    assert formats.generation(chip) == "ada"
    assert chip.peak_of("fp8") == pytest.approx(733e12)   # fp8 tensor cores (Ampere has none)
    assert not formats.block_scaled("fp8", chip)           # per-tensor fp8, as on Hopper: no MX in hardware
    assert arch(chip) == 8                                 # compute capability 8.9
    assert compute.kernel_efficiency(chip) is None         # no wgmma: Hopper's fused-attention rates do not apply
    assert not compute.warp_group_tensor_cores(chip)       # synchronous mma, as Ampere's
    assert cache.l2_source(chip) == "not stated: one memory level (GDDR6) only"   # review: it said HBM
    # NCCL's rows go by compute capability: under 9.0, Ampere's (tuning.cc compCapIndex)
    up = next(t for t in part.tiers if t.scope == "node")
    assert up.generation == "ada" and collectives.generation(up) == "ampere"
    c = collectives.communicator(collectives.comms.place(8, 1, part.tiers))
    assert c.generation == "ampere" and c.nvls_channels == 0 and c.nvls_share == 0


def test_an_ada_part_that_does_not_state_its_memory_reads_as_hopper():
    # the ASSUMPTION compiler/formats.py states: fp8 and no fp4 is Hopper unless the memory says GDDR
    chip = lower_cluster(_ada("HBM3")["C"]).partitions[0].node.accelerator
    assert formats.generation(chip) == "hopper"
    assert formats.generation(attrs.evolve(chip, hbm_type=None)) == "hopper"
    assert formats.generation(attrs.evolve(chip, hbm_type="gddr6x")) == "ada"
