"""What the scheduler schedules: a job's ways to run (`Option`), the job (`SchedJob`) and
the whole workload on one cluster (`Workload`), built from a design by
solver/schedule/jobs.py (train jobs and trace rows) and solver/schedule/services.py (serve
jobs, stretch by stretch)."""

from __future__ import annotations

import math

import attrs

from ...compiler.design import Entity
from ...compiler.ir import ClusterGraph
from ...dsl.source import SourceFile, Span
from .goodput import Reliability
from .tenants import Tenant
from ...dsl.records import frozen


@frozen
class Option:
    """One way to run a job: `gpus` GPUs of `partition` at `rate` units of work per second."""

    partition: str
    gpus: int
    rate: float
    interval: float          # seconds of work between checkpoints (inf: none)
    write: float             # seconds to write one
    restart: float           # seconds from a failure or preemption to training again
    share: float | None      # Young/Daly goodput share at this size (None: not modelled)
    # (partition, GPUs) bound with it, at once, on another partition: an rl job's generation pool
    # apart from its training pool (solver/rl/schedule.py); None for every other job
    companion: tuple[str, int] | None = None

    def needs(self, gang: bool = True) -> tuple[tuple[str, int], ...]:
        """(partition, GPUs) it holds on each partition at once: its own and its companion's. A
        job that is not a gang needs one GPU to start."""
        own = ((self.partition, self.gpus if gang else 1),)
        return own if self.companion is None else own + (self.companion,)


@frozen
class SchedJob:
    name: str
    priority: int                 # weight in the optimum; higher runs first
    label: str                    # the priority as written
    submit: float                 # seconds
    work: float                   # units: tokens for train jobs, GPU-seconds for trace rows
    unit: str                     # tokens | GPU-s
    gang: bool
    options: tuple[Option, ...]   # largest first within each partition, preferred partitions first
    prefer: tuple[str, ...]
    span: Span = attrs.field(eq=False, repr=False)
    time_limit: float = math.inf  # seconds a run may last before the scheduler ends it (Slurm's --time)
    tenant: str = ""              # the account / ClusterQueue it is charged to ("" where the design has none)
    service: str = ""             # the serve job this stretch of serving belongs to ("": not serving)
    user: str = ""                # who submitted it (Slurm's per-user QOS limits count it)

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.partition for o in self.options))

    @property
    def least(self) -> int:
        return min(o.gpus for o in self.options)

    @property
    def best_rate(self) -> float:
        return max(o.rate for o in self.options)


@frozen
class Workload:
    graph: ClusterGraph
    cluster: Entity
    jobs: tuple[SchedJob, ...]
    reliability: dict[str, Reliability]
    sources: tuple[SourceFile, ...] = ()   # trace files, to quote them
    tenants: dict[str, Tenant] = attrs.Factory(dict)
    # (job, partition, GPUs) -> its plan's step at shares of the tiers' rates (contention.py)
    curves: dict = attrs.Factory(dict)
