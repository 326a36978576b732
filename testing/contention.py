"""The small shared cluster that tests/solver/schedule/test_contention.py and
benchmarks/contention.py schedule jobs on: 4-GPU nodes under a two-tier fat tree of radix-8
switches (a leaf holds two nodes at 3:1), so two 32-GPU jobs share spine links."""

from __future__ import annotations

DESIGN = """\
chip C {{
  hbm   {{ capacity = 80 GB  bandwidth = 2 TB/s }}
  peak  {{ bf16 = 400 TFLOPS }}
  power {{ tdp = 500 W  idle = 60 W }}
}}
switch Sw {{ radix = 8  port_speed = 200 Gb/s  power = 1 kW }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 400 GB/s  latency = 1 us }}
fabric Out {{
  kind      = {kind}
  topology  = fat_tree(tiers = 2, radix = 8, oversubscription = {oversubscription})
  bandwidth = 200 Gb/s
  latency   = 1 us
  switch    = Sw
}}
node Box {{ gpus = 4 x C  scaleup = Up }}
cluster K {{ scaleout = Out  units = {units} x Box }}
model M {{ arch = dense  layers = 8  hidden = 2048  heads = 16  kv_heads = 8  ffn = 8192  vocab = 32000  seq = 2048 }}
{jobs}
"""


# An MoE model for the same cluster: an expert all-to-all over 32 GPUs crosses the spine.
MOE = """\
model E {
  arch = moe  layers = 8  hidden = 2048  heads = 16  kv_heads = 8  ffn = 8192  vocab = 32000  seq = 2048
  experts { routed = 64  top_k = 4  ffn = 1024 }
}
"""


def design(jobs: str, kind: str = "infiniband", oversubscription: str = "3:1", units: int = 18,
           fabric: str = "") -> str:
    """The cluster's GCL text with `jobs` (train blocks on cluster K of model M, or of the MoE
    model E) appended; `fabric`: more fields of the scale-out fabric (`congestion = pfc`)."""
    text = DESIGN.format(kind=kind, oversubscription=oversubscription, units=units, jobs=MOE + jobs)
    return text.replace("  switch    = Sw\n", f"  switch    = Sw\n  {fabric}\n") if fabric else text
