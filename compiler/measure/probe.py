"""`gclc probe`: measure the machine it runs on with PyTorch (an optional dependency:
`pip install gclc[probe]`) and write the kernel CSV that `kernels.py` reads: GEMM rates by
shape and precision, fused attention, HBM copy bandwidth, and, launched with torchrun on
several GPUs, torch.distributed collectives; under `# key: value` lines naming the machine
(GPU, driver, clocks, CUDA, NCCL and PyTorch versions).

Each row is the median of timed calls after warm-up calls (CUDA events on a GPU, the
wall clock on a CPU). `quick` runs small shapes (a CPU smoke run: what CI checks); the
default shapes are those the std chips' efficiencies were measured at (MAMF's best shape
2048 x 2048 x 13312, dsl/std/nvidia.gcl [mb]) and large square ones."""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import time

try:
    from .columns import COLUMNS, MAGIC
except ImportError:   # run as a script where gclc is not installed (benchmarks/probe_gpu.sh)
    from columns import COLUMNS, MAGIC

GEMMS = ((2048, 2048, 13312), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 1024), (1024, 1024, 1024))
ATTENTION = ((4, 32, 4096, 128), (2, 32, 8192, 128), (1, 32, 16384, 128), (4, 32, 4096, 64))  # batch, heads, seq, head_dim
COPY_BYTES = 2**30
COLLECTIVE_BYTES = tuple(2**e for e in range(20, 31, 2))       # 1 MiB to 1 GiB
QUICK = {"gemms": ((128, 128, 128), (256, 256, 512)), "attention": ((1, 2, 128, 32),), "copy": 2**22,
         "collective": (2**12, 2**16), "warmup": 1, "iterations": 3}
FULL = {"gemms": GEMMS, "attention": ATTENTION, "copy": COPY_BYTES, "collective": COLLECTIVE_BYTES,
        "warmup": 5, "iterations": 20}


class ProbeUnavailable(RuntimeError):
    """PyTorch is missing or cannot run what was asked (the message says how to fix it)."""


def _torch():
    try:
        import torch
    except ImportError:
        raise ProbeUnavailable("gclc probe needs PyTorch: pip install 'gclc[probe]' (or torch)") from None
    return torch


def run(quick: bool = False, collectives: bool = True, kernels: bool = True) -> str | None:
    """The kernel CSV of this machine (None on a torch.distributed rank other than 0)."""
    torch = _torch()
    plan = QUICK if quick else FULL
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    if kernels:
        rows += _gemm_rows(torch, device, plan) + _attention_rows(torch, device, plan) + [_copy_row(torch, device, plan)]
    if collectives:
        rows += _collective_rows(torch, device, plan)
    if _rank(torch) != 0:
        return None
    header = [MAGIC] + [f"# {key}: {value}" for key, value in identity(torch, device)]
    return "\n".join(header + [",".join(COLUMNS)] + [",".join(str(r.get(c, "")) for c in COLUMNS) for r in rows]) + "\n"


def identity(torch, device: str) -> list[tuple[str, str]]:
    """What machine the rows come from."""
    out = [("gpu", torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({os.cpu_count()} threads)"),
           ("torch", torch.__version__), ("device_count", str(torch.cuda.device_count() if device == "cuda" else 0))]
    if device == "cuda":
        out.append(("cuda", str(torch.version.cuda)))
        try:
            out.append(("nccl", ".".join(str(v) for v in torch.cuda.nccl.version())))
        except (AttributeError, RuntimeError):
            pass
        out += _smi()
    return out


def _smi() -> list[tuple[str, str]]:
    """Driver and clocks from nvidia-smi, when it is there."""
    if shutil.which("nvidia-smi") is None:
        return []
    fields = ("driver_version", "clocks.max.sm", "clocks.max.memory", "power.limit")
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    values = [v.strip() for v in done.stdout.strip().split(",")]
    names = ("driver", "clock_sm_max_mhz", "clock_memory_max_mhz", "power_limit_w")
    return [(n, v) for n, v in zip(names, values) if v]


def _timed(torch, device: str, call, plan) -> float:
    """The median seconds of one call."""
    for _ in range(plan["warmup"]):
        call()
    times = []
    for _ in range(plan["iterations"]):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            begin = time.perf_counter()
            call()
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


def _precisions(torch, device: str) -> list[str]:
    if device == "cpu":
        return ["fp32", "bf16"]
    out = ["bf16", "fp16"]
    major, minor = torch.cuda.get_device_capability(0)
    if (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        out.append("fp8")
    return out


def _gemm_rows(torch, device: str, plan) -> list[dict]:
    rows = []
    for precision in _precisions(torch, device):
        for m, n, k in plan["gemms"]:
            call = _gemm_call(torch, device, precision, m, n, k)
            if call is None:
                continue
            seconds = _timed(torch, device, call, plan)
            rows.append({"kind": "gemm", "precision": precision, "m": m, "n": n, "k": k, "seconds": _g(seconds),
                         "rate": _g(2.0 * m * n * k / seconds)})
    return rows


def _gemm_call(torch, device: str, precision: str, m: int, n: int, k: int):
    if precision == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()   # column-major, as _scaled_mm wants
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
    return lambda: torch.matmul(a, b)


def _attention_rows(torch, device: str, plan) -> list[dict]:
    rows, dtype = [], torch.bfloat16 if device == "cuda" else torch.float32
    for batch, heads, seq, head_dim in plan["attention"]:
        q, k, v = (torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype) for _ in range(3))
        seconds = _timed(torch, device, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                         plan)
        work = 4.0 * batch * heads * seq * seq * head_dim / 2     # causal: half the blocks
        rows.append({"kind": "attention", "precision": "bf16" if device == "cuda" else "fp32", "batch": batch,
                     "heads": heads, "seq": seq, "head_dim": head_dim, "causal": 1, "seconds": _g(seconds),
                     "rate": _g(work / seconds)})
    return rows


def _copy_row(torch, device: str, plan) -> dict:
    size = plan["copy"]
    source = torch.empty(size // 2, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = _timed(torch, device, lambda: target.copy_(source), plan)
    return {"kind": "hbm_copy", "precision": "", "bytes": size, "seconds": _g(seconds), "rate": _g(size / seconds)}


def _rank(torch) -> int:
    distributed = torch.distributed
    return distributed.get_rank() if distributed.is_available() and distributed.is_initialized() else 0


def _collective_rows(torch, device: str, plan) -> list[dict]:
    """all_reduce, all_gather and reduce_scatter over every rank of torch.distributed, when
    launched so (torchrun sets WORLD_SIZE) or already initialized; nothing otherwise."""
    distributed = torch.distributed
    if not distributed.is_available():
        return []
    if not distributed.is_initialized():
        if _launched("WORLD_SIZE", "1") < 2:
            return []
        distributed.init_process_group("nccl" if device == "cuda" else "gloo")
        if device == "cuda":
            torch.cuda.set_device(_launched("LOCAL_RANK", "0"))
    world = distributed.get_world_size()
    hosts: list = [None] * world
    distributed.all_gather_object(hosts, socket.gethostname())
    cuda = device == "cuda"
    rows = []
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for size in plan["collective"]:
            call = _collective_call(torch, distributed, op, size, world, "cuda" if cuda else "cpu")
            seconds = _timed(torch, device, call, plan)
            rows.append({"kind": op, "precision": "fp32", "bytes": size, "ranks": world, "nodes": len(set(hosts)),
                         "seconds": _g(seconds), "rate": _g(size / seconds)})
    return rows


def _launched(name: str, default: str) -> int:
    """A count torchrun sets in the environment. The probe runs as a plain script without gclc
    (so not through dsl/plain_number.py), with that parser's rule for a count: ASCII digits
    only (`int` would take `²`, `1_000` or a 5,000-digit string)."""
    value = os.environ.get(name, default).strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 9):
        raise ProbeUnavailable(f"the environment's {name} is `{value[:20]}`, not a whole number: "
                               "launch the probe with torchrun, or unset it")
    return int(value)


def _collective_call(torch, distributed, op: str, size: int, world: int, device: str):
    """`size` bytes as nccl-tests counts them: the whole buffer (all_gather's output,
    reduce_scatter's input, all_reduce's one buffer)."""
    count = max(world, size // 4 // world * world)
    whole = torch.ones(count, dtype=torch.float32, device=device)
    part = torch.ones(count // world, dtype=torch.float32, device=device)
    if op == "all_reduce":
        return lambda: distributed.all_reduce(whole)
    if op == "all_gather":
        gather = getattr(distributed, "all_gather_single", None) or distributed.all_gather_into_tensor
        return lambda: gather(whole, part)
    scatter = getattr(distributed, "reduce_scatter_single", None) or distributed.reduce_scatter_tensor
    return lambda: scatter(part, whole)


def _g(value: float) -> str:
    """A measured number as the CSV keeps it: six significant digits, exponent when needed."""
    return format(value, ".6g")


def main(argv: list[str] | None = None) -> int:
    """`python compiler/measure/probe.py -o OUT [--quick] [--no-collectives] [--collectives-only]`:
    the probe without gclc installed (under torchrun for collectives)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-collectives", action="store_true")
    parser.add_argument("--collectives-only", action="store_true")
    args = parser.parse_args(argv)
    text = run(args.quick, not args.no_collectives, not args.collectives_only)
    if text is not None:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
