"""Every scheduling policy by the name `gclc schedule --policy` takes, configured by the
design's `scheduler NAME { ... }` block where it has one (solver/schedule/settings.py)."""

from __future__ import annotations

import attrs

from .kueue import Kueue
from .policies import Fifo, Kube, PriorityBestFit
from .slurm import Slurm

POLICIES = {"fifo": Fifo(), "priority": PriorityBestFit(), "slurm": Slurm(), "kueue": Kueue(), "kube": Kube()}


def policy(name: str, settings=None):
    """The policy `name`, with `settings` (None: the real scheduler's defaults)."""
    chosen = POLICIES[name]
    return chosen if settings is None else attrs.evolve(chosen, settings=settings)
