"""What the readers return: one frozen record per measured run, each point keeping the
file and line it was read from, so that a calibrated value can name its measurements."""

from __future__ import annotations

import statistics


from ...dsl.source import Span
from ...dsl.records import frozen

# Collectives as nccl-tests names its binaries (`all_reduce_perf`, ...).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast", "reduce")


@frozen
class CollectivePoint:
    """One message size of an nccl-tests run: out-of-place and in-place times (seconds) and
    bandwidths (bytes/s); in-place is None where the test prints none."""

    size: int                     # bytes, as nccl-tests prints them (the whole buffer)
    count: int
    dtype: str
    redop: str
    time: float                   # out-of-place
    algbw: float
    busbw: float
    in_time: float | None
    span: Span

    @property
    def best_time(self) -> float:
        """The faster of the two placements (they run the same algorithm)."""
        return min(self.time, self.in_time) if self.in_time else self.time


@frozen
class CollectiveRun:
    """One nccl-tests run: a collective over `ranks` GPUs on `nodes` hosts."""

    op: str                       # one of COLLECTIVES
    ranks: int                    # GPUs taking part (every `Rank` line, one per GPU)
    nodes: int                    # distinct hosts
    devices: tuple[str, ...]      # the GPU names the run lists
    points: tuple[CollectivePoint, ...]
    span: Span                    # the run's header
    nccl: str = ""                # the NCCL library that ran (2.28.7); empty: the output does not say

    @property
    def gpus_per_node(self) -> int:
        return self.ranks // max(1, self.nodes)


@frozen
class TrainStep:
    """One logged training step (or the mean of a logging interval)."""

    iteration: int
    seconds: float | None         # per step (torchtitan logs throughput only)
    tflops: float | None = None   # per GPU, as the framework counts it
    tokens_per_s: float | None = None   # per GPU
    mfu: float | None = None      # share, as the framework counts it
    memory: float | None = None   # bytes, peak per GPU
    span: Span | None = None


# Steps logged before the run reaches its steady state (compilation, allocator warm-up, the
# first data loads): Megatron-LM's first logging interval and torchtitan's first steps run
# 2-10x slower (the logs in tests/data/measurements/ show it). ASSUMPTION: a quarter of the
# logged steps, at least one when there are two or more.
WARMUP_SHARE = 0.25


@frozen
class TrainRun:
    """A training log: its steps and whatever configuration it states (Megatron-LM's
    argument dump, torchtitan's mesh and batch lines)."""

    framework: str                # megatron | torchtitan | nemo
    steps: tuple[TrainStep, ...]
    settings: tuple[tuple[str, str], ...]   # name -> value as logged
    span: Span                    # the first step line

    def setting(self, name: str) -> str | None:
        return next((v for k, v in self.settings if k == name), None)

    @property
    def steady(self) -> tuple[TrainStep, ...]:
        """The steps after the warm-up (WARMUP_SHARE of them)."""
        skip = max(1, round(len(self.steps) * WARMUP_SHARE)) if len(self.steps) > 1 else 0
        return self.steps[skip:]

    def median(self, field: str) -> float | None:
        """The median of a steady step's `field` (seconds, tflops, tokens_per_s, ...), None
        where the log does not state it."""
        values = [getattr(s, field) for s in self.steady if getattr(s, field) is not None]
        return statistics.median(values) if values else None


@frozen
class ServeRun:
    """A serving benchmark's summary. Latencies in seconds by statistic (`mean`, `p50`,
    `p90`, `p99`, ...), throughputs per second."""

    tool: str                     # vllm | sglang | genai-perf | aiperf
    rate: float | None            # requests/s offered (None: all at once)
    concurrency: int | None       # the client's limit on requests in flight
    requests: int
    input_tokens: float | None    # mean per request (None: the export does not say)
    output_tokens: float          # mean per request
    request_throughput: float
    output_throughput: float      # tokens/s
    ttft: tuple[tuple[str, float], ...]
    tpot: tuple[tuple[str, float], ...]
    itl: tuple[tuple[str, float], ...]
    e2e: tuple[tuple[str, float], ...]
    model: str
    span: Span

    def latency(self, metric: str, statistic: str) -> float | None:
        return dict(getattr(self, metric)).get(statistic)


KERNELS = ("gemm", "attention", "hbm_copy")


@frozen
class KernelPoint:
    """One kernel measurement of the kernel CSV (docs/calibration.md): its shape, the
    median seconds per call, and the rate it implies (FLOP/s or bytes/s)."""

    kind: str                     # one of KERNELS
    precision: str
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 0
    heads: int = 0
    seq: int = 0
    head_dim: int = 0
    causal: bool = True
    nbytes: int = 0               # hbm_copy: bytes read plus bytes written
    seconds: float = 0.0
    span: Span | None = None

    @property
    def work(self) -> float:
        """FLOPs (GEMM: 2mnk; causal attention forward: 2 x 2 x b h s^2 d / 2) or bytes moved."""
        if self.kind == "gemm":
            return 2.0 * self.m * self.n * self.k
        if self.kind == "attention":
            full = 4.0 * self.batch * self.heads * self.seq * self.seq * self.head_dim
            return full / 2 if self.causal else full
        return float(self.nbytes)

    @property
    def rate(self) -> float:
        return self.work / self.seconds


@frozen
class KernelRun:
    """A kernel CSV: the machine it ran on and its rows."""

    identity: tuple[tuple[str, str], ...]   # gpu, driver, cuda, nccl, torch, clocks
    points: tuple[KernelPoint, ...]
    span: Span

    def about(self, key: str) -> str | None:
        return next((v for k, v in self.identity if k == key), None)


Measurement = CollectiveRun | TrainRun | ServeRun | KernelRun
