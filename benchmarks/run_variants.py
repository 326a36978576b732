"""Hardware a published run states that differs from the std part or fabric `make_runs.py` would
otherwise write: an H100 with other memory or a power limit below its TDP (torchtitan's Grand Teton
runs: 96 GB HBM2e at 500 W), and a scale-out network whose per-node ports the row states (BLOOM's
4 x 100 Gb/s Omni-Path). Each returns None when the row states nothing different, so rows that
match the std parts keep their designs unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What std/nvidia's H100_SXM is (its sources are in dsl/std/nvidia.gcl): the data sheet's 80 GB part, which
# std writes as the 81,559 MiB the driver reports; a row naming another size gets that size as written.
H100_STD = {"capacity_gb": 80, "bandwidth_tbs": 3.35, "type": "HBM3", "tdp_w": 700}


@dataclass(frozen=True)
class NodeVariant:
    node: str        # the node the cluster is made of
    decl: str        # its declaration (gcl text)


def h100_variant(row: dict) -> NodeVariant | None:
    """A DGX H100-like node whose GPUs carry the memory and power limit the row's accelerator cell
    states (e.g. 'H100 SXM 96GB HBM2e 2.4 TB/s, 500 W power limit'); None when it states the std part."""
    cell = row["accelerator"]
    overrides, said = [], []
    capacity = re.search(r"(\d+)\s*GB", cell)
    if capacity and int(capacity.group(1)) != H100_STD["capacity_gb"]:
        overrides.append(f"hbm.capacity = {capacity.group(1)} GB")
        said.append(f"{capacity.group(1)} GB")
    bandwidth = re.search(r"(\d+(?:\.\d+)?)\s*TB/s", cell)
    if bandwidth and float(bandwidth.group(1)) != H100_STD["bandwidth_tbs"]:
        overrides.append(f"hbm.bandwidth = {bandwidth.group(1)} TB/s")
        said.append(f"{bandwidth.group(1)} TB/s")
    kind = re.search(r"HBM[0-9a-zA-Z]*", cell)
    if kind and kind.group(0) != H100_STD["type"]:
        overrides.append(f'hbm.type = "{kind.group(0)}"')
        said.append(kind.group(0))
    watts = re.search(r"(\d+)\s*W\b", cell)
    if watts and int(watts.group(1)) < H100_STD["tdp_w"]:
        # the operator's limit below TDP: the model slows the clock along the chip's DVFS curve (model/dvfs.py)
        overrides.append(f"power.cap = {watts.group(1)} W")
        said.append(f"capped at {watts.group(1)} W")
    if not overrides:
        return None
    clean = cell.replace('"', "'")
    decl = (f"# The run's H100: {', '.join(said)} (row accelerator: {clean}); otherwise std's H100_SXM.\n"
            "node H100_Run_Node extends DGX_H100 {\n"
            f"  gpus   = 8 x H100_SXM {{ {'  '.join(overrides)} }}\n"
            f"  source = \"row accelerator: {clean}\"\n"
            "}")
    return NodeVariant("H100_Run_Node", decl)


@dataclass(frozen=True)
class StatedNics:
    ports: int       # NIC ports per node on the compute fabric
    gbps: int        # per port
    per_gpu: float   # Gb/s per GPU, the figure the design's fabric carries

    def note(self, gpus_per_node: int) -> str:
        return (f"{self.ports} x {self.gbps} Gb/s per node (the row) / {gpus_per_node} GPUs = "
                f"{self.per_gpu:g} Gb/s per GPU")


def stated_nics(row: dict, gpus_per_node: int) -> StatedNics | None:
    """The per-node scale-out ports a row's network cell states ('4 x 100 Gb/s per node'); None if none."""
    m = re.search(r"(\d+)\s*x\s*(\d+)\s*Gb/?s\s+per\s+node", row["inter_node_network"], re.IGNORECASE)
    if not m:
        return None
    ports, gbps = int(m.group(1)), int(m.group(2))
    return StatedNics(ports, gbps, ports * gbps / gpus_per_node)
