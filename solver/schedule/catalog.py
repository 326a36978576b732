"""Every scheduling policy by the name `gclc schedule --policy` takes."""

from __future__ import annotations

from .policies import Fifo, PriorityBestFit
from .slurm import Slurm

POLICIES = {"fifo": Fifo(), "priority": PriorityBestFit(), "slurm": Slurm()}
