"""Host CPU work of a training step, and the network share of it a DPU takes over.

Each GPU has two host threads that its step can wait on (as PyTorch and NCCL run them):

- the launch thread issues every kernel of the step, `LAUNCH_S` of CPU each (compute
  kernels, and one per collective call);
- the network proxy posts and completes every chunk of the collectives that leave the
  node over the scale-out network, `MESSAGE_S` each (NCCL's proxy thread drives the NIC;
  inside a node NVLink or a torus moves data with no host thread). A ring step sends one
  chunk and receives one; an in-network reduction (SHARP) sends each chunk up once and
  receives it once, whatever the group size.

Each thread works serially. With two cores per GPU they run apart and neither outlasts the
GPU work it feeds (ASSUMPTION: a launch costs the CPU less than its kernel's GPU overhead,
`KERNEL_OVERHEAD_S`, and a chunk's proxy work less than its transfer: 512 KiB at 50 GB/s
take 10 us), so the host never binds and is not computed. With fewer, the node's cores
time-share the GPUs' threads, so the host needs max(launch, proxy, (launch + proxy) x GPUs
/ cores). When the host needs longer than the GPUs, the step waits for it: it is
host-bound, and the difference is `Breakdown.host`.

A DPU whose `offload` lists `network` is the node's scale-out NIC and runs the transport
and the collectives' progress on its Arm cores (DOCA / UCC-style collective offload, or
MPI's BlueField offload): the proxy's chunks cost `DPU_MESSAGE_S` each, spread over the
node's DPU cores, and the network stage of each collective is posted to the DPU
(`POST_S`) instead of being launched as a kernel (its launch share leaves the host). The
runtime keeps the host path when that is faster, so a DPU never slows a step.

Beside the network, a DPU is a second path for the node's data (its `offload` lists
`storage` and `input` by default): `storage_rate` and `input_rate` below are what that path
carries, used by the step's data loading and checkpoint share (model/train/host.py) and by
goodput's checkpoint write and restart read (solver/schedule/failures.py). This module is
the one place that says what a DPU can do.

- Storage: the DPU writes checkpoints to network storage through its own ports, NVMe-oF
  presented to the host as a local drive (BlueField SNAP), with GPUDirect Storage moving the
  bytes from GPU memory by DMA and no staging in host DRAM. SNAP's zero-copy mode DMAs
  between the host and the remote target with no copy on the Arm cores (NVIDIA BlueField-3
  SNAP 4.3.1 docs, Introduction), so the path runs at the DPU's line rate
  (ASSUMPTION: a checkpoint is large sequential writes; it stalls training, so no
  collective traffic shares the DPU's ports while it is written; and the storage system
  absorbs what the nodes send: a job states a slower one with `checkpoint { bandwidth }`).
- Input: samples read through the DPU are decoded and collated on its Arm cores, at the
  same rate per core as a host core (`BYTES_PER_CORE`), at most its line rate.

A node that does not declare its CPU cores constrains nothing: unknown is not slow.
"""

from __future__ import annotations

import functools
import math

import attrs

from ...compiler.ir import NodeType, Partition
from .. import comms
from . import optimizer, recompute
from ..config import TrainConfig
from .memory import params_per_gpu
from ..shape import ModelShape
from .workload import layer_forward, moe_tokens
from ...dsl.records import frozen

# ESTIMATE: host CPU time of one asynchronous kernel launch (cudaLaunchKernel through the
# PyTorch dispatcher). A launch-and-synchronize round trip measures 4-6 us on a current
# GPU (susun-blog.com "pegainfer (3): From Launch Overhead to CUDA Graph", RTX 5070 Ti,
# CUDA 13); the launch call alone is about half of it.
LAUNCH_S = 2.5e-6
# ESTIMATE: proxy CPU time per network chunk sent or received (post a work request, poll
# its completion): about one LogGP send overhead `o` on InfiniBand.
MESSAGE_S = 1.0e-6
# ASSUMPTION: a DPU Arm core takes twice as long per chunk as a host core: BlueField-3's
# Cortex-A78 cores (DOCA docs, std/network.gcl) lack direct cache access, which multiplies
# their DRAM traffic (Hu et al. 2026, "Communication Offloading on SmartNIC DPUs: A
# Quantitative Approach", arXiv:2605.04842; offloading still gave host-dominated codes up
# to 1.55x there).
DPU_MESSAGE_S = 2.0e-6
POST_S = 1.0e-6         # ESTIMATE: host CPU time to post one collective's descriptor to the DPU
# NCCL's network chunk: NCCL_BUFFSIZE, 4 MiB by default (NCCL docs, Environment Variables),
# split over its 8 pipelined steps (NCCL_STEPS in the NCCL source).
CHUNK_BYTES = 4 * 2**20 / 8
# Gradient buckets: PyTorch DDP's bucket_cap_mb default, 25 MB (torch.nn.parallel
# DistributedDataParallel docs); one collective call per bucket.
BUCKET_BYTES = 25e6
THREADS_PER_GPU = 2     # the launch thread and the network proxy
# ASSUMPTION: one host (or DPU Arm) core reads, decompresses and collates about 1 GB/s of
# tokenized samples (memcpy-class work); image or video decoding is far slower.
BYTES_PER_CORE = 1e9


@frozen
class HostWork:
    """Host CPU seconds per step of one GPU, by thread, and what a network DPU changes."""

    launch: float        # launch thread: compute kernels and collective calls
    proxy: float         # network proxy: scale-out chunks
    network_calls: float  # collective calls with a scale-out stage (posted to a DPU instead)
    network_only: float  # ... of which every stage is scale-out (no kernel left to launch)
    chunks: float        # scale-out chunks (the DPU's work when it takes them)


@functools.lru_cache(maxsize=1024)
def host_cores(node: NodeType) -> float:
    """CPU cores of a node (inf when any CPU leaves them undeclared, or it has none)."""
    cpus = node.parts_of("cpu")
    if not cpus or any(p.cores is None for p in cpus):
        return math.inf
    return float(sum(p.count * p.cores for p in cpus))


@functools.lru_cache(maxsize=1024)
def dpu_cores(node: NodeType) -> float:
    """Arm cores of the DPUs that take over the node's network (0 when none does)."""
    return float(sum(p.count * (p.cores or 0) for p in node.parts_of("dpu") if p.offloads("network")))


@functools.lru_cache(maxsize=1024)
def storage_rate(node: NodeType) -> float:
    """Bytes/s the node's storage-offloading DPUs write to (or read from) network storage."""
    return float(sum(p.count * (p.bandwidth or 0.0) for p in node.parts_of("dpu") if p.offloads("storage")))


@functools.lru_cache(maxsize=1024)
def input_rate(node: NodeType) -> float:
    """Bytes/s of samples the node's input-offloading DPUs load: Arm cores, at most line rate."""
    rate = 0.0
    for p in node.parts_of("dpu"):
        if p.offloads("input"):
            cores = p.cores * BYTES_PER_CORE if p.cores else math.inf
            rate += p.count * min(p.bandwidth or 0.0, cores)
    return rate


def host_time(shape: ModelShape, cfg: TrainConfig, partition: Partition, offload: bool = True) -> float:
    """Seconds the host needs per step (0 when its CPU cores are unknown or number two per GPU). With
    `offload`, a network DPU takes the proxy's work when that is faster."""
    node = partition.node
    cores = host_cores(node)
    gpus = min(node.gpus, cfg.gpus)
    if cores >= THREADS_PER_GPU * gpus:  # unknown (inf), or a core for each thread
        return 0.0
    work = host_work(shape, cfg, partition)
    plain = _threads(work.launch, work.proxy, gpus, cores)
    arm = dpu_cores(node)
    if not offload or not arm or not work.network_calls:
        return plain
    launch = work.launch - work.network_only * LAUNCH_S + work.network_calls * POST_S
    dpu = work.chunks * DPU_MESSAGE_S * gpus / arm
    return min(plain, max(_threads(launch, 0.0, gpus, cores), dpu))


def _threads(launch: float, proxy: float, gpus: int, cores: float) -> float:
    return max(launch, proxy, (launch + proxy) * gpus / cores)


def host_work(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> HostWork:
    """Kernels, collective calls and network chunks of one GPU's step."""
    m = cfg.microbatches
    layers = shape.layers / cfg.pp
    moe_layers = shape.moe_layers / cfg.pp
    # (launches, network calls, network-only calls, chunks): per layer and micro-batch, then per step.
    # Keyed on what each depends on (a tuple: cheaper than normalizing the config), so the
    # configurations of a search share them.
    layer_key = (shape, cfg.seq, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.microbatch, cfg.recompute,
                 cfg.recompute_modules, cfg.recompute_every, cfg.sp, cfg.precision, cfg.stack, cfg.order, partition)
    step_key = (shape, cfg.seq, cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.vp, cfg.microbatch, cfg.sp, cfg.zero,
                cfg.precision, cfg.stack, cfg.main_grads, cfg.grad_reduce, cfg.order, partition)
    if len(_WORK) >= 65536:  # bounded, like the lru caches beside it
        _WORK.clear()
    work = _WORK.get(layer_key)
    if work is None:
        layer_cfg = attrs.evolve(cfg, batch=0, vp=1, zero=0, sample_bytes=0.0, checkpoint_every=0.0,
                                 checkpoint_size=0.0, checkpoint_bandwidth=0.0)
        work = _WORK[layer_key] = (_layer_work(shape, layer_cfg, partition, False),
                                   _layer_work(shape, layer_cfg, partition, True) if moe_layers else (0.0,) * 4)
    dense, moe = work
    step = _WORK.get(step_key)
    if step is None:
        step = _WORK[step_key] = _step_work(shape, attrs.evolve(cfg, batch=0, recompute="none", sample_bytes=0.0,
                                                                checkpoint_every=0.0, checkpoint_size=0.0,
                                                                checkpoint_bandwidth=0.0), partition)
    total = [m * ((layers - moe_layers) * d + moe_layers * e) for d, e in zip(dense, moe)]
    total = [t + x for t, x in zip(total, _per_microbatch_steps(step, m))]
    launches, calls, only, chunks = total
    return HostWork(launches * LAUNCH_S, chunks * MESSAGE_S, calls, only, chunks)


_WORK: dict[tuple, tuple] = {}


def clear_caches() -> None:
    _WORK.clear()
    _layer_work.cache_clear()
    _step_work.cache_clear()
    _kernels.cache_clear()


def _per_microbatch_steps(step: tuple[tuple[float, ...], tuple[float, ...]], m: int) -> list[float]:
    per_mb, fixed = step
    return [m * a + b for a, b in zip(per_mb, fixed)]


def _tally(calls: list[tuple[float, tuple[comms.Stage, ...], float]], kernels: float = 0.0) -> tuple[float, ...]:
    network = [(n, s) for n, s, _ in calls if any(_network(x.tier) for x in s)]
    return (kernels + sum(n for n, _, _ in calls), sum(n for n, _ in network),
            sum(n for n, s in network if all(_network(x.tier) for x in s)), sum(n * c for n, _, c in calls))


@functools.lru_cache(maxsize=16384)
def _layer_work(shape: ModelShape, cfg: TrainConfig, partition: Partition, moe: bool) -> tuple[float, ...]:
    """One layer, one micro-batch: its kernels and its TP, CP and EP collectives."""
    tiers = partition.tiers
    calls: list[tuple[float, tuple[comms.Stage, ...], float]] = []  # (calls, stages, chunks per call)
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    message = 2 * tokens * shape.hidden / (1 if cfg.sp else cfg.tp)
    if cfg.tp > 1:
        stages = comms.place(cfg.tp, cfg.stride("tp"), tiers)
        count = 4 + (2 if cfg.recompute == "full" else 0) + (0.5 if cfg.sp else 0)
        calls.append((count, stages, _all_reduce(message * (cfg.tp if cfg.sp else 1), stages)))
    if cfg.cp > 1:
        stages = comms.place(cfg.cp, cfg.stride("cp"), tiers)
        kv = 2 * tokens * 2 * shape.kv_heads * shape.head_dim / cfg.tp
        calls.append((3, stages, _all_to_all(kv * (cfg.cp - 1), stages)))
    if cfg.ep > 1 and moe:
        stages = comms.place(cfg.ep, cfg.stride("ep"), tiers)
        calls.append((4, stages, _all_to_all(moe_tokens(cfg) * shape.top_k * shape.hidden * 2, stages)))
    return _tally(calls, _kernels(shape, cfg, moe))


@functools.lru_cache(maxsize=16384)
def _step_work(shape: ModelShape, cfg: TrainConfig, partition: Partition) -> tuple[tuple[float, ...], ...]:
    """Pipeline sends and data-parallel collectives: (per micro-batch, per step)."""
    tiers = partition.tiers
    per_mb: list[tuple[float, tuple[comms.Stage, ...], float]] = []
    if cfg.pp > 1:
        boundary = comms.outermost(cfg.pp, cfg.stride("pp"), tiers)
        stages = (comms.Stage(boundary, 2),) if boundary is not None else ()
        message = 2 * cfg.microbatch * cfg.seq / cfg.cp * shape.hidden / (1 if cfg.sp else cfg.tp)
        per_mb.append((2 * cfg.vp, stages, 2 * _chunks(message) if _network(boundary) else 0.0))
    fixed: list[tuple[float, tuple[comms.Stage, ...], float]] = []
    replicas = cfg.dp * cfg.cp
    if replicas > 1:
        stages = comms.place(replicas, min(cfg.stride("dp"), cfg.stride("cp")), tiers)
        if not cfg.behaviour("hierarchical"):
            stages = comms.flat(stages)
        params = params_per_gpu(shape, cfg)
        grads, weights = params * optimizer.grad_bytes(cfg), params * 2
        if cfg.zero >= 3:  # per layer, every micro-batch: gather forward and backward, reduce-scatter
            per = max(1.0, shape.layers / cfg.pp)
            per_mb += [(per, stages, _scatter(grads / per, stages)), (2 * per, stages, _scatter(weights / per, stages))]
        elif cfg.zero >= 1:
            fixed += [(_buckets(grads), stages, _scatter(min(grads, BUCKET_BYTES), stages)),
                      (_buckets(weights), stages, _scatter(min(weights, BUCKET_BYTES), stages))]
        else:
            fixed.append((_buckets(grads), stages, _all_reduce(min(grads, BUCKET_BYTES), stages)))
    return _tally(per_mb), _tally(fixed)


def _buckets(nbytes: float) -> float:
    return max(1.0, math.ceil(nbytes / BUCKET_BYTES))


@functools.lru_cache(maxsize=4096)
def _kernels(shape: ModelShape, cfg: TrainConfig, moe: bool) -> float:
    """Kernels of one layer for one micro-batch: the forward's, twice as many backward (data
    and weight gradients: ASSUMPTION), and those the recompute reruns (model/train/recompute.py)."""
    counts: dict[str, float] = {}
    for op in layer_forward(shape, cfg, moe):
        counts[op.name] = counts.get(op.name, 0.0) + op.count
    return 3 * sum(counts.values()) + recompute.kernels(cfg, counts, recompute.op_level_kernels(shape, counts))


def _network(tier) -> bool:
    return tier is not None and tier.scope == "scaleout"


def _chunks(nbytes: float) -> float:
    return max(1.0, math.ceil(nbytes / CHUNK_BYTES))


def _all_reduce(nbytes: float, stages) -> float:
    """Network chunks one rank sends and receives in a hierarchical all-reduce."""
    total, share = 0.0, nbytes
    for stage in stages:
        n = stage.peers
        if _network(stage.tier):
            if stage.tier.in_network_reduction:
                total += 2 * _chunks(share)
            else:
                total += 2 * 2 * (n - 1) * _chunks(share / n)
        share /= n
    return total


def _scatter(nbytes: float, stages) -> float:
    """... in a reduce-scatter or an all-gather (half the ring steps)."""
    total, share = 0.0, nbytes
    for stage in stages:
        n = stage.peers
        if _network(stage.tier):
            total += 2 * (n - 1) * _chunks(share / n)
        share /= n
    return total


def _all_to_all(nbytes: float, stages) -> float:
    """... in an all-to-all: one message each way to every member reached over the network."""
    group = math.prod(s.peers for s in stages) if stages else 1
    total, inside = 0.0, 1
    for stage in stages:
        reached = inside * stage.peers
        if _network(stage.tier):
            total += 2 * (reached - inside) * _chunks(nbytes / group)
        inside = reached
    return total
