"""The engines' own tensor-parallel all-reduce kernels inside one host, as measured: a decode
step's all-reduce (tens to hundreds of KB) is bound by the kernel's launch, its cross-GPU barrier
and its peer loads, not by the NVLink rate the tiers' alpha-beta price assumes (which puts 256 KB
over 4 H100s at about 3 us where the kernels take 14-21 us).

Source [sgl2904]: sgl-project/sglang pull 2904 (2025-01-15, "optimize custom allreduce kernel"),
"unit test performance in H100 (without cuda graph)", tests/test_trt_reduce.py: latency in ms by TP
size (2 / 4 / 8) and message size in bytes, for vLLM's custom all-reduce (`vllm`, the kernel of
vllm/distributed/device_communicators/custom_all_reduce.py, which SGLang 0.3 imported with vLLM's
distributed layer) and SGLang's own kernel after that pull (`sglang`, adapted from TensorRT-LLM's).
Measured outside a CUDA graph, so each time holds one kernel launch, which the replica model does
not charge an all-reduce elsewhere. ASSUMPTION: other NVLink parts take the H100's times (the
barrier and the launch do not scale with the link; the bytes past the tables do: below); between the sizes measured the time is
interpolated linearly, below them the smallest's, and above them the kernel's algorithm's (below), the
tiers' price (bandwidth-bound) taking over where it is higher. Each table is priced as its monotone
envelope (`PRICED`: the time at a size is the largest measured at any size up to it): the tables dip
by a few tenths of a microsecond below 32 KiB (vLLM's kernel at TP 2: 9.5 us at 512 B, 8.8 at 4 KiB,
8.7 at 32 KiB), run-to-run noise, since a larger call on the same kernel could do the smaller
call's work and more, so it cannot take less time. TensorRT-LLM's kernels (fused with
the norms, Lamport one-shot) publish no such table: their engines keep the tiers' price (`tiers`).

Source [vllm42324]: vllm-project/vllm pull 42324 (2026-05-11, "Support tuned symmetric memory two-shot
fallback"), its SM 9.0 world-size-8 table (benchmarks/kernels/benchmark_device_communicators.py, CUDA
graphs): PyTorch symmetric memory's `multimem_all_reduce_` (`symm_mem`, the kernel vLLM's
SymmMemCommunicator runs for 6 and 8 GPUs on SM 10.0 and 4-8 on SM 9.0, vllm/distributed/device_communicators/symm_mem.py
`_WORLD_SIZES_MULTIMEM`, v0.11.2-v0.20.0) took 11 us at 512 KiB and 14 us at 1 MiB, where pynccl took
24 and 25 us. The table starts at 512 KiB; below it the smallest's time (a multimem call of 16-256 KiB
took 13-15 us, flat, on SM 10.3 in vllm pull 37756's table). ASSUMPTION: Blackwell's NVLink 5, one
switch hop across an NVL72's trays, takes Hopper's times, as for the kernels above. Only the world
sizes SymmMemCommunicator accepts run it (`SYMM_MAX`). The same table's two-shot column
(`symm_mem_two_shot`: 15 us at 512 KiB, 17 us at 1 MiB) prices the group sizes that run
`two_shot_all_reduce_` instead (`MULTIMEM`; ASSUMPTION: other sizes and Blackwell take its times, as
vllm pull 42324's SM 10.0 world-size-2 two-shot, 17 and 20 us, about does).

Source [vllmsymm]: vLLM 0.11.2, 0.17.1 and 0.20.0 (the wheels, the releases NeMo-RL v0.5-v0.7 pin),
vllm/distributed/device_communicators: `CudaCommunicator.all_reduce` (cuda_communicator.py) tries custom
all-reduce, then SymmMemCommunicator, then NCCL; CustomAllreduce (custom_all_reduce.py) takes a call
of under `max_size` bytes, its default 8 MiB lowered, once symmetric memory is up, to
all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES by SM and world size (`CUSTOM_LIMITS`, keyed by compute
capability as vLLM keys it: `CAPABILITY` reads SM 9.0 as Hopper, 10.0 as Blackwell (B200, GB200) and 10.3 as
Blackwell Ultra (B300, GB300: model/compute.py exp_generation)); symm_mem.py `_WORLD_SIZES_MULTIMEM` (SM 9.0:
4, 6 and 8; SM 10.0 and 10.3: 6 and 8) says which sizes run multimem. So a TP 8 call of 256 KiB or more
inside an H100 host runs the multimem kernel. Only 0.20.0 has SM 10.3 rows (custom all-reduce to 4 / 4 / 8 /
4 MiB at TP 2 / 4 / 6 / 8); in 0.11.2 and 0.17.1 SymmMemCommunicator disables itself on SM 10.3 ("Device
capability 10.3 not supported"), so there custom all-reduce keeps its 8 MiB and a group across GB300 trays
runs NCCL. ASSUMPTION: the tables take 0.20.0's rows (NeMo-RL v0.7.0's pin, the newest, the release a plan
for a B300 or GB300 now runs; the RL stack `nemo_rl` spans v0.5-v0.7 and carries no vLLM release to tell
them apart). Other GPUs (SM 8.0, 8.6, 8.9: not in SYMM_MEM_ALL_REDUCE_MAX_SIZES) leave symmetric memory
off, and custom all-reduce keeps its 8 MiB.

Source [aic]: ai-dynamo/aiconfigurator (commit 095f58a5, files of 4fabb773), vLLM's custom all-reduce on H100
captured in a CUDA graph (`GRAPHED`), as vLLM captures its decode and mixed steps (model/serve/engines.py
`Engine.graphed`): vLLM 0.14.0's `vllm_graph` rows where vLLM runs custom all-reduce (TP 2 and 4 to 4 MiB,
TP 8 to 128 KiB: 4.3-20.3, 4.5-30.5 and 4.5-7.7 us), and at TP 8 from 256 KiB, where vLLM hands the call to
symmetric memory, SGLang 0.5.9's rows of the same kernel (sgl-kernel's port, within 0.5-6.1 % of vLLM's
wherever both run it: 15.0 us at 256 KiB, 34.3 at 4 MiB), for an engine whose custom all-reduce keeps
the call. The rows, their paths and licence: benchmarks/data/allreduce_graphed.csv. An iteration vLLM
issues kernel by kernel (a prefill chunk past the largest capture size) keeps [sgl2904]'s table, measured
outside graphs. The same collector's eager rows (20-21 us flat to 1 MiB) time the Python call and an
input copy, which an eager iteration's host pace charges apart (`Engine.host`): not used.

Custom all-reduce's price under its hand-over limit comes from the table's rows under the limit, past
the last one by the kernel's algorithm (`measured`'s `under`, `beyond`): the rows at or above it time calls vLLM, with symmetric memory
up, never gives that kernel. A handed-over call costs no less than custom all-reduce's price at the limit
so found, in the same mode (graphed or eager), and a call past symmetric memory's maximum no less than
symmetric memory's there (model/serve/inference.py `tp_all_reduce`): within one mode the priced call
never falls as the message grows, across the kernels vLLM switches between (a drop at a limit would be
the tables' difference, no graphs against graphs, not vLLM's).

Source [vllm8558]: vllm-project/vllm pull 8558 (2024-09-18, first in v0.6.2, "Fix potentially unsafe
custom allreduce synchronization"): the two-stage kernel's middle barrier had fenced with
`__threadfence_system()` (csrc/custom_all_reduce.cuh `end_sync`, read in the v0.5.5, v0.6.0 and v0.6.1
sources; v0.3.0's barrier has no such fence); the pull's acquire-release flags took "6~7us" off each
two-stage call on H100 (`FENCE_S`, the middle). The releases read (v0.3.0, 0.5.5, 0.6.0, 0.6.2, 0.14.0)
pick the kernel alike:
one-stage at TP 2, and at TP 4 under 512 KiB or TP 6 and 8 under 256 KiB; two-stage above (`two_stage`).
Both tables above time the kernel after the pull (aiconfigurator's 0.14.0; pull 2904's of January 2025,
ASSUMPTION: a vLLM of 0.6.2 or later, SGLang's pin then), so an engine built before it (`fenced`: vLLM
0.5.5-0.6.1, and SGLang 0.3.0, which imported vLLM 0.5.5) pays the fence on top, graphed or eager.

Above a table's last row priced (its last row, or its last under a hand-over limit) the custom kernels
(`vllm`, `sglang`: `CUSTOM`) are priced by their algorithm, not held at that row ([carsrc]): each byte
past the row costs the bytes each GPU then reads from its peers over NVLink at `p2p_rate` (`P2P_RATE` on
an H100, the same share of another part's link: a GB200's NVLink 5, twice the rate), one-shot
(every peer's whole buffer: n - 1 reads a byte) or two-shot (a reduce-scatter then an all-gather, each
reading (n - 1) / n of it: 2 (n - 1) / n) as the kernel picks at that size (`two_shot_from`), up to the
kernel's maximum (`MAX_SIZE`), past which the engine hands the call to NCCL: priced no lower than the
kernel there (ASSUMPTION: the price never falls as the call grows, as at vLLM's other switches, but this
maximum is a buffer's size, not a crossover anyone tuned: on an H100 at TP 8 eager, without symmetric
memory, 91.9 us from 8 MiB until the tiers' price passes it at 32 MiB, where the tiers price a 16 MiB
call at 47.9 us), the tiers' price taking over where higher. Graph-captured
and eager tables take the same law, so a captured call never costs more than the same call eager
(the eager tables' last rows lie above the captured ones'). The eager table's own last slope (vLLM's
kernel at TP 8: 14.6 us from 512 KiB to 1 MiB, about 63 GB/s of NVLink reads) is not a link rate and
is not extended; nor is the input copy an eager call makes into the registered buffer (ASSUMPTION:
left out, under 1 us a MiB at HBM rates), so the eager extension is a lower bound. Symmetric memory's
tables (multimem, two-shot) stay held at their last row.

Source [carsrc]: vllm-project/vllm csrc/custom_all_reduce.cuh (read at 036bb685): `cross_device_reduce_1stage`
reads `size` elements from each of the n ranks' buffers (`packed_reduce` over `dp.ptrs`), and
`cross_device_reduce_2stage` reads `size / ngpus` from each (reduce-scatter) and then each rank's part of
the others' results (all-gather); `CustomAllreduce::allreduce` picks one-stage at TP 2, at TP 4 under
512 KiB and at TP 6-8 under 256 KiB (`two_stage`). vllm/distributed/device_communicators/custom_all_reduce.py
`CustomAllreduce(max_size=8192 * 1024)` and `should_custom_ar` (`inp_size < self.max_size`), and SGLang's
python/sglang/srt/distributed/device_communicators/custom_all_reduce.py `_MAX_CAR_SIZE = 8192 * 1024` on
CUDA: the 8 MiB maximum. sgl-kernel's TensorRT-LLM-derived kernel (the `sglang` table, [sgl2904];
trt_reduce_internal.cuh `SelectImplementation`): one-shot at TP 2, at TP 4 under 1 MiB and at TP 6-8
under 512 KiB, two-shot above (`SGLANG_TWO_SHOT`), the same byte counts (oneShotAllReduceKernel reads
every peer's buffer, twoShotAllReduceKernel a rank's 1 / n of each, then the others' reduced parts).
ESTIMATE `P2P_RATE`: [aic]'s graph-captured rows from 2 to 4 MiB, the tables' only doubling bound by
bytes (two-stage at TP 4 and 8), read at these factors: TP 2 (one-shot, 2 MiB more read) 7.82 us, 268 GB/s;
TP 4 (two-stage, 3 MiB) 11.81 us, 266 GB/s; TP 8 (two-stage, 3.5 MiB) 13.41 us, 274 GB/s (TP 8's rows
from 256 KiB are SGLang 0.5.9's port of the kernel: `GRAPHED`). The three agree to 3 % once the
algorithm's bytes are counted (the law's check); the rate is the fastest of them, the port's at TP 8
(vLLM's own fastest: 268 GB/s at TP 2; its kernel runs on at most 36 blocks at 036bb685), 61 % of NVLink
4's 450 GB/s a direction ([stas00-net]), so the extension never rises faster than a measured doubling did.
Source [stas00-net]: stas00/ml-engineering network/README.md, the NVLink table (per-direction rates).
"""

from __future__ import annotations

import bisect

from ...dsl.units import MIB

SIZES = (512, 4096, 32768, 262144, 524288, 1048576)     # bytes
# seconds by TP size, at SIZES ([sgl2904])
KERNELS = {
    "vllm": {2: (9.5e-6, 8.8e-6, 8.7e-6, 12.9e-6, 17.7e-6, 26.6e-6),
             4: (9.1e-6, 8.5e-6, 9.2e-6, 20.6e-6, 26.9e-6, 40.2e-6),
             8: (10.1e-6, 9.3e-6, 11.8e-6, 24.1e-6, 30.4e-6, 45.0e-6)},
    "sglang": {2: (3.7e-6, 3.9e-6, 4.5e-6, 7.9e-6, 12.5e-6, 19.9e-6),
               4: (4.8e-6, 3.7e-6, 4.8e-6, 13.9e-6, 20.2e-6, 31.1e-6),
               8: (5.9e-6, 5.7e-6, 7.8e-6, 16.7e-6, 22.1e-6, 33.8e-6)},
    "symm_mem": {8: (11e-6, 11e-6, 11e-6, 11e-6, 11e-6, 14e-6)},    # [vllm42324] multimem
    "symm_mem_two_shot": {8: (15e-6, 15e-6, 15e-6, 15e-6, 15e-6, 17e-6)},    # [vllm42324] two-shot
}
# vLLM's custom all-reduce captured in a CUDA graph ([aic], benchmarks/data/allreduce_graphed.csv): bytes
# (bf16, 2 x the elements measured), and seconds by TP size at them
GRAPH_SIZES = tuple(256 << k for k in range(15))    # 256 B to 4 MiB
GRAPHED = {
    "vllm": {2: (4.284e-6, 4.285e-6, 4.294e-6, 4.276e-6, 4.318e-6, 4.423e-6, 4.440e-6, 4.498e-6,
                 4.591e-6, 4.799e-6, 5.125e-6, 6.257e-6, 8.393e-6, 12.451e-6, 20.272e-6),
             4: (4.577e-6, 4.539e-6, 4.565e-6, 4.595e-6, 4.620e-6, 4.794e-6, 4.878e-6, 4.970e-6,
                 5.313e-6, 5.835e-6, 7.098e-6, 11.359e-6, 12.800e-6, 18.644e-6, 30.454e-6),
             8: (4.747e-6, 4.766e-6, 4.553e-6, 4.532e-6, 4.647e-6, 4.944e-6, 5.168e-6, 5.441e-6,
                 6.308e-6, 7.720e-6,                                   # vLLM 0.14.0, to 128 KiB
                 14.986e-6, 15.774e-6, 17.348e-6, 20.900e-6, 34.309e-6)},   # SGLang 0.5.9, from 256 KiB
}
# bytes under which vLLM's SymmMemCommunicator takes a call, by compute capability and world size
# ([vllmsymm] all_reduce_utils.py SYMM_MEM_ALL_REDUCE_MAX_SIZES, symm_mem.py should_use_symm_mem
# `inp_size < self.max_size`; 10.3: 0.20.0): a capability or world size it lacks disables it, and a call at
# or above the maximum falls through to NCCL
SYMM_MAX = {"9.0": {2: 64 * MIB, 4: 32 * MIB, 6: 64 * MIB, 8: 64 * MIB},
            "10.0": {2: 8 * MIB, 4: 32 * MIB, 6: 128 * MIB, 8: 128 * MIB},
            "10.3": {2: 4 * MIB, 4: 32 * MIB, 6: 32 * MIB, 8: 64 * MIB}}
# the compute capability, as vLLM keys its tables, of each generation model/compute.py exp_generation names
CAPABILITY = {"ampere": "8.0", "ada": "8.9", "hopper": "9.0", "blackwell": "10.0", "blackwell_ultra": "10.3"}
# bytes from which vLLM's custom all-reduce hands a call to symmetric memory, by compute capability and TP
# size ([vllmsymm] CUSTOM_ALL_REDUCE_MAX_SIZES, each at most CustomAllreduce's default 8 MiB; 10.3: 0.20.0)
CUSTOM_LIMITS = {"9.0": {2: 8 * MIB, 4: 8 * MIB, 6: MIB // 2, 8: MIB // 4},
                 "10.0": {2: 2 * MIB, 4: 2 * MIB, 6: MIB, 8: MIB},
                 "10.3": {2: 4 * MIB, 4: 4 * MIB, 6: 8 * MIB, 8: 4 * MIB}}
MULTIMEM = {"9.0": (4, 6, 8), "10.0": (6, 8), "10.3": (6, 8)}   # [vllmsymm] _WORLD_SIZES_MULTIMEM
KINDS = ("tiers", *KERNELS)
CUSTOM = ("vllm", "sglang")     # the one- / two-shot kernels the algorithm's law extends ([carsrc])
MAX_SIZE = 8 * MIB              # [carsrc] the custom kernels' maximum (vLLM max_size, SGLang _MAX_CAR_SIZE)
P2P_RATE = 273.7e9              # bytes/s an H100 reads from its peers in the custom kernels ([carsrc] ESTIMATE)
MEASURED_LINK = 450e9           # bytes/s a direction of the H100's NVLink 4, where P2P_RATE was read ([stas00-net])
SGLANG_TWO_SHOT = {4: MIB, 8: MIB // 2}     # [carsrc] sgl-kernel: two-shot from these bytes at TP <= 4 / above
FENCE_S = 6.5e-6    # [vllm8558]: the system fence of a two-stage call before the pull, on H100 (ESTIMATE: "6~7us")


def _envelope(times: tuple[float, ...]) -> tuple[float, ...]:
    """The running maximum of `times`: no size takes less than a smaller one did."""
    out, top = [], 0.0
    for t in times:
        top = max(top, t)
        out.append(top)
    return tuple(out)


# the tables as priced: each one's monotone envelope (module docstring)
PRICED = {kernel: {tp: _envelope(times) for tp, times in table.items()} for kernel, table in KERNELS.items()}
PRICED_GRAPHED = {kernel: {tp: _envelope(times) for tp, times in table.items()} for kernel, table in GRAPHED.items()}


def capability(generation: str | None) -> str:
    """vLLM's compute-capability key for GPUs of `generation` ("" for a part vLLM's tables do not know)."""
    return CAPABILITY.get(generation or "", "")


def takes(kernel: str, tp: int, generation: str | None = None, nbytes: float = 0.0) -> bool:
    """Whether the engine's `kernel` reduces a call of `nbytes` over `tp` GPUs of `generation` (only
    symm_mem is bounded: by SYMM_MAX, so not on SM 8.x, whose parts vLLM leaves without symmetric memory)."""
    return kernel != "symm_mem" or nbytes < SYMM_MAX.get(capability(generation), {}).get(tp, 0)


def custom_limit(tp: int, generation: str | None) -> float | None:
    """Bytes from which vLLM's custom all-reduce hands a call over `tp` GPUs of `generation` to symmetric
    memory ([vllmsymm] CUSTOM_LIMITS); None where vLLM's tables list no limit (symmetric memory off)."""
    return CUSTOM_LIMITS.get(capability(generation), {}).get(tp)


def hands_over(kernel: str, nbytes: float, tp: int, generation: str | None) -> bool:
    """Whether vLLM's custom all-reduce (`kernel` vllm) hands a call of `nbytes` over `tp` GPUs of
    `generation` to symmetric memory ([vllmsymm]): at or above its limit, where symmetric memory runs."""
    limit = custom_limit(tp, generation)
    return kernel == "vllm" and limit is not None and nbytes >= limit


def algorithm(kernel: str, tp: int, generation: str | None) -> str:
    """The measured kernel that runs `kernel` over `tp` GPUs of `generation`: SymmMemCommunicator
    (symm_mem) runs multimem for the sizes in MULTIMEM, two-shot for the others ([vllmsymm])."""
    if kernel == "symm_mem" and tp not in MULTIMEM.get(capability(generation), MULTIMEM["10.0"]):
        return "symm_mem_two_shot"
    return kernel


def two_stage(nbytes: float, tp: int) -> bool:
    """Whether vLLM's custom all-reduce runs its two-stage kernel for `nbytes` over `tp` GPUs ([vllm8558]:
    custom_all_reduce.cuh `allreduce`, fully NVLinked GPUs)."""
    return nbytes >= two_shot_from("vllm", tp)


def two_shot_from(kernel: str, tp: int) -> float:
    """The bytes from which the custom `kernel` reduces over `tp` GPUs two-shot ([carsrc]; never at TP 2)."""
    if tp <= 2:
        return float("inf")
    if kernel == "sglang":
        return SGLANG_TWO_SHOT[4 if tp <= 4 else 8]
    return MIB // 2 if tp <= 4 else MIB // 4    # two_stage's sizes


def peer_reads(kernel: str, low: float, high: float, tp: int) -> float:
    """Bytes each GPU reads from its peers for the part of a call between `low` and `high` bytes, each
    byte by the algorithm the custom `kernel` runs at that size: one-shot n - 1, two-shot 2 (n - 1) / n
    ([carsrc]); summed over the sizes, so it never falls where the kernel switches to two-shot."""
    if high <= low:
        return 0.0
    start = min(max(two_shot_from(kernel, tp), low), high)
    return (tp - 1) * (start - low) + 2 * (tp - 1) / tp * (high - start)


def p2p_rate(link: float = MEASURED_LINK) -> float:
    """Bytes/s a GPU reads from its peers in the custom kernels over NVLink of `link` bytes/s a direction: the
    H100's share of its link (P2P_RATE / MEASURED_LINK, 61 %) on every part (ASSUMPTION: the kernel's blocks
    keep the same share of a faster or slower link)."""
    return P2P_RATE * link / MEASURED_LINK


def beyond(kernel: str, nbytes: float, tp: int, last: float, link: float = MEASURED_LINK) -> float:
    """Seconds a custom `kernel`'s call of `nbytes` over `tp` GPUs takes beyond its table's row at `last`
    bytes: its peer reads past the row at `p2p_rate(link)`, to the kernel's maximum (MAX_SIZE; past it the
    engine's NCCL call is priced no lower, an ASSUMPTION: docs/serving.md); 0 for the other kernels, held
    at their last row."""
    if kernel not in CUSTOM:
        return 0.0
    return peer_reads(kernel, last, min(nbytes, MAX_SIZE), tp) / p2p_rate(link)


def measured(kernel: str, nbytes: float, tp: int, graphed: bool = False, under: float = float("inf"),
             fenced: bool = False, link: float = MEASURED_LINK) -> float:
    """Seconds of one all-reduce of `nbytes` over `tp` GPUs by the engine's `kernel` (0 for
    `tiers`, an engine priced on the tiers alone, and for one GPU); a TP size between those
    measured takes the nearer one's times (the larger on a tie), from its table as priced (`PRICED`;
    `graphed`: captured in a CUDA graph, `PRICED_GRAPHED`, where the kernel has such a table). Only the
    rows under `under` bytes price the call (a hand-over limit: the kernel never runs the larger calls);
    above the last row priced a custom kernel's call rises by its algorithm's peer reads (`beyond`) over NVLink
    of `link` bytes/s a direction (the scale-up tier's);
    `fenced`: vLLM's kernel as built before pull 8558, its two-stage calls a system fence slower (`FENCE_S`)."""
    if kernel == "tiers" or tp < 2:
        return 0.0
    if fenced and kernel == "vllm" and two_stage(nbytes, tp):
        return FENCE_S + measured(kernel, nbytes, tp, graphed, under, link=link)
    sizes, table = (GRAPH_SIZES, PRICED_GRAPHED[kernel]) if graphed and kernel in GRAPHED else (SIZES, PRICED[kernel])
    times = table[min(table, key=lambda t: (abs(t - tp), -t))]
    kept = max(1, bisect.bisect_left(sizes, under))
    sizes, times = sizes[:kept], times[:kept]
    if nbytes <= sizes[0]:
        return times[0]
    if nbytes >= sizes[-1]:
        return times[-1] + beyond(kernel, nbytes, tp, sizes[-1], link)
    i = bisect.bisect_left(sizes, nbytes)
    share = (nbytes - sizes[i - 1]) / (sizes[i] - sizes[i - 1])
    return times[i - 1] + share * (times[i] - times[i - 1])
