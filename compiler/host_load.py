"""What a node's parts other than its accelerators draw at the job's load, instead of their
rating: each draws an idle floor plus a part that grows with the load, as shares of its rated
power (the `power` of a cpu, nic or dpu, the DRAM allowance, the node's `overhead`).

The load is the heat the accelerators put out: `heat_load` is a chip's draw above idle over
its full-load draw above idle (0 idle, 1 at its curve's top). Fans move air in proportion to
the heat, power supplies lose a share of what they convert, and the host CPUs feed the GPUs,
so all of them follow it; a power-capped chip (MLPerf MaxQ) loads its host less. Every draw
is affine in the load, so a job's power stays affine in the share of the step its GPUs
compute (the search's power bound relies on it).

The shares, with where they come from:

- CPUs idle at a quarter of their TDP and draw half of it while GPUs run (ASSUMPTION: package
  C-states idle a recent Xeon or EPYC near a quarter of its TDP, the order SPECpower_ssj2008
  servers of the last years show at active idle, Tröpgen et al., "16 Years of SPEC Power",
  arXiv:2411.07062; while GPUs run, the host keeps data loaders, launch and NCCL proxy threads
  busy on a fraction of its cores, far from the all-core load that draws TDP).
- DRAM: half its allowance idle (refresh and background power), 70 % busy (ASSUMPTION, Micron
  TN-40-07's DDR4 power calculator splits a loaded RDIMM's draw about evenly between
  background and access power).
- NICs and DPUs: 80 % idle, all of it busy (ASSUMPTION: SerDes and optics stay lit; NVIDIA's
  400G OSFP transceiver "draws 9 Watts maximum or 9 Watts typical", docs.nvidia.com MMS4X00-NS400).
- The node's `overhead` (fans, NVSwitch and PCIe switch boards, drives, BMC, voltage regulators
  and the power supplies' conversion losses): its idle floor is measured, its busy share fitted.
  Idle: a DGX H100 with its GPUs idle draws 2,101-2,182 W at the wall, the least sample of the
  power analyser's testing window before the load starts (MLPerf Inference v3.1, NVIDIA
  DGX-H100_H100-SXM-80GBx8_TRT_MaxQ, bert-99 Offline and dlrm-v2-99 Server,
  performance/power/server.json "Watts" min), which after the GPUs (8 x 70 W idle) and the
  parts above leaves 27 % of the node's overhead. Busy: the one constant fitted, by least
  squares over the measured node peaks of benchmarks/data/power_measured.csv;
  benchmarks/power_accuracy.py refits it leaving each source out and reports that error.
"""

from __future__ import annotations


from ..dsl.numbers import percent
from ..dsl.records import frozen


@frozen
class Shares:
    idle: float    # share of the rated draw with the accelerators idle
    busy: float    # share at full load

    def at(self, load: float) -> float:
        return self.idle + (self.busy - self.idle) * min(1.0, max(0.0, load))


CPU = Shares(0.25, 0.50)
DRAM = Shares(0.50, 0.70)
NETWORK = Shares(0.80, 1.00)          # NICs and DPUs
OVERHEAD_IDLE = 0.27
OVERHEAD_BUSY = 0.47                  # fitted: benchmarks/power_accuracy.py prints the fit
OVERHEAD = Shares(OVERHEAD_IDLE, OVERHEAD_BUSY)

BY_KIND = {"cpu": CPU, "nic": NETWORK, "dpu": NETWORK, "dram": DRAM, "overhead": OVERHEAD}


def heat_load(idle: float, full: float, watts: float) -> float:
    """The accelerators' heat as a share of their full-load heat (0 idle, 1 at `full`)."""
    if full <= idle:
        return 1.0
    return min(1.0, max(0.0, (watts - idle) / (full - idle)))


def shares_text(kind: str, load: float) -> str:
    """How the formula names a part's share at `load`."""
    s = BY_KIND[kind]
    return f"{percent(s.at(load))} at load {percent(load)} (idle {percent(s.idle)}, busy {percent(s.busy)})"
