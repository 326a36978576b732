"""Small random training designs for the solver tests: GCL text built from a few drawn
numbers (self-contained, no std import, so each checks in milliseconds), and the Job."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import strategies as st

from gclc.compiler.driver import check_file
from gclc.compiler.schema import OFFLOAD_NEEDS_FULL_RECOMPUTE, OFFLOAD_SWITCHES, offload_refusal
from gclc.model.job import train_job

_DIR = Path(tempfile.mkdtemp(prefix="gclc-solver-tests-"))
_COUNT = [0]

TEMPLATE = """\
chip Chip {{
  hbm   {{ capacity = {hbm} GB  bandwidth = 2 TB/s }}
  peak  {{ bf16 = 400 TFLOPS  fp8 = 800 TFLOPS }}
  power {{ tdp = 500 W  idle = 60 W }}
  price = 10 kUSD
}}
cpu Host {{ cores = 32  power = 300 W }}
nic Nic {{ bandwidth = 200 Gb/s  power = 20 W }}
switch Sw {{ radix = 32  port_speed = 200 Gb/s  power = 1 kW }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = {up} GB/s  latency = 1 us }}
fabric Out {{
  kind                 = infiniband
  topology             = fat_tree(tiers = 2, radix = 32, oversubscription = 1:1)
  bandwidth            = 200 Gb/s
  latency              = 1 us
  switch               = Sw
  in_network_reduction = {inr}
}}
node Box {{
  gpus    = {per_node} x Chip
  cpus    = 2 x Host
  nics    = {per_node} x Nic
  scaleup = Up
{node_extra}}}
cluster Farm {{
  units    = {nodes} x Box
  scaleout = Out
  power {{ pue = 1.2 }}
  economics {{ years = 4  energy_price = 0.1 USD/kWh }}
}}
model M {{
  arch     = {arch}
  layers   = {layers}
  hidden   = {hidden}
  heads    = {heads}
  kv_heads = {kv_heads}
  ffn      = {ffn}
  vocab    = {vocab}
  seq      = {seq}
  mlp      = {mlp}
{model_extra}{experts}}}
train T {{
  model     = M
  on        = Farm
  batch     = {batch}
  precision = {precision}
  software  = {stack}
{gpus}{parallelism}{limits}}}
"""


def small(**changes) -> dict:
    """The parameters of a small dense job on one 8-GPU node (80 GB, NVLink at 300 GB/s),
    with `changes` applied."""
    p = {"hbm": 80, "up": 300, "inr": "true", "per_node": 8, "nodes": 1, "layers": 8, "hidden": 1024, "heads": 8,
         "kv_heads": 8, "ffn": 4096, "vocab": 8000, "seq": 1024, "mlp": "swiglu", "batch": 64,
         "precision": "bf16", "stack": "megatron_core"}
    p.update(changes)
    return p


def text(p: dict) -> str:
    experts = ""
    if p.get("routed"):
        experts = (f"  experts {{ routed = {p['routed']}  shared = {p['shared']}  top_k = {p['top_k']}  "
                   f"ffn = {p['expert_ffn']}  dense_layers = {p['dense_layers']} }}\n")
    pins = p.get("pins") or {}
    parallelism = ""
    if pins:
        parallelism = "  parallelism {\n" + "".join(f"    {k} = {v}\n" for k, v in pins.items()) + "  }\n"
    limits = ""
    if p.get("limits"):
        limits = "  subject to {\n" + "".join(f"    {k}\n" for k in p["limits"]) + "  }\n"
    gpus = f"  gpus      = {p['job_gpus']}\n" if p.get("job_gpus") else ""
    fields = {k: v for k, v in p.items() if k not in ("pins", "limits", "job_gpus", "model_extra", "node_extra")}
    model_extra = "".join(f"  {k} = {v}\n" for k, v in (p.get("model_extra") or {}).items())
    node_extra = "".join(f"  {k} = {v}\n" for k, v in (p.get("node_extra") or {}).items())
    return TEMPLATE.format(experts=experts, parallelism=parallelism, limits=limits, gpus=gpus,
                           model_extra=model_extra, node_extra=node_extra,
                           arch="moe" if p.get("routed") else "dense", **fields)


def job(p: dict):
    """The Job of the design drawn as `p` (written to a temporary file and checked)."""
    _COUNT[0] += 1
    path = _DIR / f"design{_COUNT[0]}.gcl"
    source = text(p)
    path.write_text(source)
    result = check_file(str(path))
    assert result.design is not None, (source, [d.summary for d in result.diagnostics])
    return train_job(result.design)


@st.composite
def designs(draw, moe: bool | None = None, pins: bool = True, limits: bool = True, hbm=None, max_gpus: int = 16,
            variants: bool | None = False, search: bool = False):
    """Parameters of a small design: model shape, GPUs, batch, pins and limits; with
    `variants`, also a sliding window (some layers global), parallel blocks, a host link and
    the pins the search chooses only on request (hybrid sharding, recompute modules and
    interval, activation offload); `variants=None` draws whether; with `search`, the job asks
    the planner to search one or two of those it leaves free (`parallelism { search = [...] }`)."""
    heads = draw(st.sampled_from([4, 8, 16]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    hidden = heads * head_dim
    layers = draw(st.sampled_from([2, 3, 4, 6, 8]))
    p = {
        "hbm": draw(hbm if hbm is not None else st.sampled_from([6, 8, 12, 24, 80])),
        "up": draw(st.sampled_from([100, 300, 900])),
        "inr": draw(st.sampled_from(["true", "false"])),
        "per_node": draw(st.sampled_from([2, 4, 8])),
        "layers": layers, "hidden": hidden, "heads": heads,
        "kv_heads": draw(st.sampled_from([k for k in (1, 2, 4, 8, 16) if heads % k == 0])),
        "ffn": draw(st.sampled_from([2, 4])) * hidden,
        "vocab": draw(st.sampled_from([512, 8000, 32000])),
        "seq": draw(st.sampled_from([256, 1024, 4096])),
        "mlp": draw(st.sampled_from(["gelu", "swiglu"])),
        "batch": draw(st.integers(4, 72)),
        "precision": draw(st.sampled_from(["bf16", "bf16", "fp8"])),
        "stack": draw(st.sampled_from(["megatron_core", "megatron", "deepspeed", "fsdp"])),
    }
    p["nodes"] = draw(st.integers(1, max(1, max_gpus // p["per_node"])))
    total = p["nodes"] * p["per_node"]
    if draw(st.integers(0, 4)) == 0:
        p["job_gpus"] = draw(st.integers(1, total))
    is_moe = draw(st.booleans()) if moe is None else moe
    if is_moe:
        p.update(routed=draw(st.sampled_from([4, 8])), shared=draw(st.sampled_from([0, 1])),
                 top_k=draw(st.sampled_from([1, 2])), expert_ffn=draw(st.sampled_from([1, 2])) * hidden,
                 dense_layers=draw(st.integers(0, min(1, layers - 1))))
    if pins:
        choices = {"tp": [1, 2, 4], "pp": [1, 2], "cp": [1, 2], "dp": [1, 2, 4], "microbatch": [1, 2],
                   "recompute": ["none", "selective", "full"], "zero": [0, 1, 2, 3], "vp": [1, 2],
                   "schedule": ["gpipe", "interleaved"], "sp": ["true", "false"]}
        if is_moe:
            choices["ep"] = [1, 2, 4]
        chosen = draw(st.lists(st.sampled_from(sorted(choices)), max_size=3, unique=True))
        pins = {k: draw(st.sampled_from(choices[k])) for k in chosen if draw(st.integers(0, 2)) == 0}
        # Only pins `gclc check` accepts: the schedule agrees with vp, the batch splits into
        # the pinned replicas and micro-batches, expert groups fold over tp x cp x dp.
        if "schedule" in pins and "vp" in pins:
            pins["vp"] = 2 if pins["schedule"] == "interleaved" else 1
        if pins.get("vp", 1) > 1 and pins.get("pp") == 1:
            del pins["vp"]
        unit = pins.get("dp", 1) * pins.get("microbatch", 1)
        p["batch"] += -p["batch"] % unit
        if "ep" in pins and all(k in pins for k in ("tp", "cp", "dp")) and (
                pins["tp"] * pins["cp"] * pins["dp"]) % pins["ep"]:
            del pins["ep"]
        p["pins"] = pins
    if variants or (variants is None and draw(st.booleans())):
        _variants(draw, p)
    if search:
        _search(draw, p)
    if limits:
        items = []
        memory = draw(st.sampled_from([None, None, "memory <= 80%", "memory <= 10 GB"]))
        if memory:
            items.append(memory)
        if draw(st.integers(0, 5)) == 0:
            items.append(f"power <= {draw(st.sampled_from([2, 5, 20]))} kW")
        if draw(st.integers(0, 5)) == 0:
            items.append(f"mfu >= {draw(st.sampled_from([10, 30]))}%")
        p["limits"] = items
    return p


def _variants(draw, p: dict) -> None:
    """Dense-model variants and the pins taken from the file only (model/train/sharding.py,
    model/train/recompute.py, model/train/offload.py), kept to what `gclc check` accepts."""
    model = {}
    if draw(st.booleans()):
        model["window"] = draw(st.sampled_from([64, 128, 512]))
        if draw(st.booleans()):
            model["global_every"] = draw(st.integers(1, p["layers"]))
    if draw(st.booleans()):
        model["block"] = "parallel"
    p["model_extra"] = model
    p["node_extra"] = {"host_link": f"{draw(st.sampled_from([32, 64, 450]))} GB/s"}
    pins = p.setdefault("pins", {})
    if draw(st.booleans()):
        pins["shard"] = draw(st.sampled_from([1, 2]))
        if pins.get("zero") == 0:
            del pins["zero"]
        if (pins.get("dp", 1) * pins.get("cp", 1)) % pins["shard"]:
            pins.pop("dp", None)
            pins.pop("cp", None)
    kind = draw(st.sampled_from(["plain", "modules", "every"]))
    if kind == "modules":
        pins["recompute"] = "selective"
        chosen = draw(st.lists(st.sampled_from(["core_attention", "norm", "mlp"]), min_size=1, max_size=3, unique=True))
        pins["recompute_modules"] = "[" + ", ".join(chosen) + "]"
    if kind == "every" or (kind == "modules" and draw(st.booleans())):
        if pins.get("recompute") not in ("selective", "full"):
            pins["recompute"] = draw(st.sampled_from(["selective", "full"]))
        pins["recompute_every"] = draw(st.integers(1, p["layers"]))
    if draw(st.booleans()):
        share = draw(st.sampled_from([0.25, 0.5, 1.0]))
        if _offloads(p["stack"], share, pins):
            pins["offload"] = f"{share:.0%}"


def _offloads(stack: str, share: float | None, pins: dict) -> bool:
    """Whether `gclc check` accepts an offload of `share` (None: a searched one) on `stack` beside `pins`
    (compiler/schema.py: the stacks with a switch, and what each switch runs beside)."""
    recompute = pins.get("recompute", "unpinned" if stack in OFFLOAD_NEEDS_FULL_RECOMPUTE else None)
    return stack in OFFLOAD_SWITCHES and offload_refusal(stack, share, pins.get("pp"), recompute) is None


def _search(draw, p: dict) -> None:
    """Ask the planner to search one or two of the choices the design leaves free (with a
    host link for offload; without pins that make the choice meaningless)."""
    pins = p.setdefault("pins", {})
    free = [n for n in ("shard", "recompute_modules", "recompute_every", "offload") if n not in pins]
    if not _offloads(p["stack"], None, pins):
        free = [n for n in free if n != "offload"]
    if pins.get("recompute") in ("none", "full"):
        free = [n for n in free if n != "recompute_modules"]
    if pins.get("recompute") == "none":
        free = [n for n in free if n != "recompute_every"]
    if pins.get("zero") == 0:
        free = [n for n in free if n != "shard"]
    if not free:
        return
    chosen = draw(st.lists(st.sampled_from(free), min_size=1, max_size=2, unique=True))
    if "offload" in chosen:
        p["node_extra"] = {**(p.get("node_extra") or {}), "host_link": f"{draw(st.sampled_from([32, 450]))} GB/s"}
    pins["search"] = "[" + ", ".join(chosen) + "]"
