"""Goodput: the share of a job's GPU-time that trains, under failures and checkpoints.

A job on N GPUs fails at rate lambda(N) = N / MTBF_gpu + nodes / MTBF_node + switches /
MTBF_switch. It writes a checkpoint of `size` bytes in delta = size / bandwidth seconds
every tau seconds of work, with tau from Young (1974) / Daly (2006): tau = sqrt(2 delta M)
- delta (M = 1 / lambda, and tau = M when delta >= M / 2, Daly's cap). A failure costs
the restart R and, on average, half a period of lost work. Per unit of wall time the job
trains (first order, Daly 2006 eq. 13 without the higher terms):

    efficiency = tau / (tau + delta) * (1 - (R + (tau + delta) / 2) / M), at least 0.

A job that states `checkpoint_every` pins tau, and its step time already carries each
save's stall (model/train/host.py): the first factor is then 1, so the write is counted once.

Defaults, each from a published large run (Llama 3: Dubey et al., "The Llama 3 Herd of
Models", arXiv:2407.21783, section 3.3.4 and Table 5: 419 unexpected interruptions in a
54-day snapshot on 16,384 H100 GPUs, 2,048 hosts):
- GPU: 58.7 % of them GPU issues (faulty GPU 148, HBM3 72, SRAM 19, GPU system processor
  17, silent data corruption 6, thermal 6): 246 / (16,384 GPUs x 1,296 h) -> 86,300 h.
- host: host maintenance 32, NIC 7, SSD 3, power supply 3, chassis 2, IO board 2, CPU 2,
  system memory 2 = 53 / (2,048 hosts x 1,296 h) -> 50,100 h.
- switch: network switch and cable 35; ESTIMATE ~1,200 switches in the job's RoCE Clos
  (1,024 rack switches for 16 GPUs each plus aggregation) -> 44,000 h.
- node repair (MTTR): ASSUMPTION 4 h (swap from a spare pool; Llama 3 reports none).
- checkpoint size (14 bytes per parameter) and each node's write rate (its host's `storage`
  path, ~1 GB/s from Llama 3 by default, plus its storage DPUs): model/train/host.py, the one
  checkpoint model the step's `checkpoint_every` share uses too.
- restart: ASSUMPTION 10 min to reschedule and start the processes, plus reading the
  checkpoint back at the same bandwidth.
"""

from __future__ import annotations

import math

from ...dsl.records import frozen

HOUR = 3600.0
GPU_MTBF_S = 16_384 * 1_296 * HOUR / 246
NODE_MTBF_S = 2_048 * 1_296 * HOUR / 53
SWITCH_MTBF_S = 1_200 * 1_296 * HOUR / 35      # ESTIMATE: switch count, see above
NODE_MTTR_S = 4 * HOUR                          # ASSUMPTION
RESTART_FIXED_S = 600.0                         # ASSUMPTION


@frozen
class Reliability:
    """Failure rates of one partition's parts, in failures per second."""

    gpu_mtbf: float = GPU_MTBF_S
    node_mtbf: float = NODE_MTBF_S
    switch_mtbf: float = SWITCH_MTBF_S
    node_mttr: float = NODE_MTTR_S
    gpus_per_node: int = 8
    switches_per_gpu: float = 0.0               # switches of the scale-out fabric per GPU

    def rate(self, gpus: int) -> float:
        """Failures per second of a job holding `gpus` GPUs (every part it needs)."""
        nodes = math.ceil(gpus / self.gpus_per_node)
        switches = math.ceil(gpus * self.switches_per_gpu) if gpus > self.gpus_per_node else 0
        return gpus / self.gpu_mtbf + nodes / self.node_mtbf + switches / self.switch_mtbf


@frozen
class Checkpoint:
    size: float            # bytes
    bandwidth: float       # bytes/s the job writes at (all its nodes together)
    restart: float         # seconds from a failure to training again, reading included
    interval: float | None = None   # pinned in the file; None: Young/Daly
    in_step: bool = False  # the step time already carries each save (`checkpoint_every`)

    @property
    def write(self) -> float:
        return self.size / self.bandwidth


@frozen
class Goodput:
    efficiency: float      # share of wall time that trains
    interval: float        # seconds of work between checkpoints
    write: float           # seconds per checkpoint
    restart: float
    mtbf: float            # of the job at its size, seconds
    pinned: bool = False   # the interval is the file's (`checkpoint { interval }`, `checkpoint_every`)


def young_daly(write: float, mtbf: float) -> float:
    """The checkpoint interval that loses the least time (Daly 2006, first order)."""
    if write >= mtbf / 2:
        return mtbf
    return math.sqrt(2 * write * mtbf) - write


def goodput(checkpoint: Checkpoint, failure_rate: float) -> Goodput:
    mtbf = 1 / failure_rate if failure_rate > 0 else math.inf
    delta = checkpoint.write
    if math.isinf(mtbf):
        return Goodput(1.0, math.inf, delta, checkpoint.restart, mtbf)
    tau = checkpoint.interval or young_daly(delta, mtbf)
    saving = 1.0 if checkpoint.in_step else tau / (tau + delta)
    efficiency = saving * (1 - (checkpoint.restart + (tau + delta) / 2) / mtbf)
    return Goodput(max(0.0, efficiency), tau, delta, checkpoint.restart, mtbf, pinned=bool(checkpoint.interval))
