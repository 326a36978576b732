"""The flow simulation (model/network/flows.py) against ns-3, a packet-level simulator, on small
fabrics: the same links and flows, TCP bulk transfers in ns-3 (its point-to-point links, drop-tail
queues, global routing; benchmarks/ns3/flows.cc, compiled against Debian's libns3-dev 3.37),
max-min fair rates in gclc (what ECN/DCQCN-style rate control aims at; `congestion="ecn"`).

    apt-get install libns3-dev        # Debian's ns-3 3.37 and g++ (the Python `ns3` wheel needs cppyy,
                                      # built from source: over 15 minutes here, so not used)
    .venv/bin/python benchmarks/ns3_agreement.py

Scenarios (one ns-3 run, disjoint parts of one network):
- incast: four hosts of one switch send to a fifth, one of them also to a sixth (fan-in and its
  victim's share: 1/4 and 3/4 of a port);
- oversubscribed: two leaves of four hosts under one spine at 2:1, four flows across and one
  inside a leaf from a host that also sends across (1/2 of a port each);
- ring: a ring of eight over the two leaves (every hop at the port's rate).

A flow's ns-3 goodput is TCP payload; it is put on the wire's scale by the frame's share that is
payload (1448 of the 1502 bytes a point-to-point frame of a 1500-byte packet takes). Each row:
the flow, gclc's rate, ns-3's, the difference. The last line is a one-line summary.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

SOURCE = HERE / "ns3" / "flows.cc"
LIBRARIES = ("-lns3-core", "-lns3-network", "-lns3-internet", "-lns3-point-to-point", "-lns3-applications")
PAYLOAD = 1448 / 1502        # TCP payload of a 1500-byte IP packet in a point-to-point frame (2-byte PPP header)
PORT = 100e6 / 8             # bytes/s: 100 Mb/s ports keep the packet count (and ns-3's time) small


def available() -> str | None:
    """Why ns-3 cannot run here, or None: g++ and Debian's libns3-dev headers are needed."""
    if shutil.which("g++") is None:
        return "g++ is missing (apt-get install g++)"
    if not Path("/usr/include/ns3/core-module.h").exists():
        return "ns-3's headers are missing (apt-get install libns3-dev)"
    return None


def build(folder: Path) -> Path:
    """Compile flows.cc against the installed ns-3 into `folder`."""
    binary = folder / "ns3_flows"
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(binary), str(SOURCE), *LIBRARIES], check=True,
                   capture_output=True, text=True, timeout=600)
    return binary


def scenarios():
    """(name, tiers, GPUs, flows as (sender, receiver)) of each small fabric."""
    from gclc.compiler.ir import Tier
    from gclc.dsl.source import no_span

    def tier(level, group, bandwidth, oversubscription=1.0):
        return Tier(level, f"t{level}", "net", "ethernet", "scaleout", group, bandwidth, 1e-6, oversubscription, False,
                    1.0, span=no_span())

    return [("incast", (tier(0, 6, PORT),), 6, [(1, 0), (2, 0), (3, 0), (4, 0), (1, 5)]),
            ("oversubscribed", (tier(0, 4, PORT), tier(1, 8, PORT / 2, 2.0)), 8,
             [(0, 4), (1, 5), (2, 6), (3, 7), (0, 1)]),
            ("ring", (tier(0, 4, PORT), tier(1, 8, PORT / 2, 2.0)), 8, [(k, (k + 1) % 8) for k in range(8)])]


def topology(fabric, offset: int) -> tuple[int, list[tuple[int, int, float]]]:
    """ns-3 nodes and links (a, b, bytes/s each way) of a flows.Fabric of one fabric and at most
    two tiers: hosts 0..G-1, a switch per first-tier domain, one spine over them (pooled uplinks)."""
    gpus, tiers = fabric.gpus, fabric.tiers
    domains = -(-gpus // tiers[0].group_gpus)
    port = fabric.ports[tiers[0].fabric]
    links = [(offset + i, offset + gpus + i // tiers[0].group_gpus, float(fabric.capacity[port + 2 * i]))
             for i in range(gpus)]
    if len(tiers) > 1:
        spine, start = offset + gpus + domains, fabric.uplinks[1]
        links += [(offset + gpus + d, spine, float(fabric.capacity[start + 2 * d])) for d in range(domains)]
    return gpus + domains + (len(tiers) > 1), links


def compare(binary: Path, seconds: tuple[float, float] = (1.0, 3.0)):
    """Per flow of every scenario: (scenario, sender, receiver, gclc bytes/s, ns-3 bytes/s on the wire)."""
    from gclc.model.network import flows

    lines, expected, offset = [], [], 0
    for name, tiers, gpus, pairs in scenarios():
        f = flows.fabric(tiers, gpus)
        rates = flows.pair_rates(f, pairs)
        nodes, links = topology(f, offset)
        lines += [f"link {a} {b} {int(rate * 8)}" for a, b, rate in links]
        lines += [f"flow {offset + a} {offset + b}" for a, b in pairs]
        expected += [(name, a, b, float(r)) for (a, b), r in zip(pairs, rates)]
        offset += nodes
    spec = f"nodes {offset}\n" + "\n".join(lines) + f"\ntime {seconds[0]} {seconds[1]}\n"
    done = subprocess.run([str(binary)], input=spec, capture_output=True, text=True, timeout=600, check=True)
    measured = [float(line.split()[2]) / 8 / PAYLOAD for line in done.stdout.splitlines() if line.startswith("flow ")]
    return [(*row, m) for row, m in zip(expected, measured)]


def main() -> int:
    why = available()
    if why is not None:
        print(f"ns-3 agreement: not run: {why}")
        return 0
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as folder:
        binary = build(Path(folder))
        rows = compare(binary)
    children = os.times()
    print(f"{'scenario':<15} {'flow':>7} {'gclc Mb/s':>10} {'ns-3 Mb/s':>10} {'off':>7}")
    worst = 0.0
    for name, a, b, ours, theirs in rows:
        off = theirs / ours - 1
        worst = max(worst, abs(off))
        print(f"{name:<15} {a:>3}->{b:<3} {ours * 8 / 1e6:10.2f} {theirs * 8 / 1e6:10.2f} {off:+7.1%}")
    median = statistics.median(abs(theirs / ours - 1) for *_, ours, theirs in rows)
    print(f"ns-3 agreement: {len(rows)} flows in 3 scenarios, max-min rates within {worst:.1%} (median {median:.1%}) "
          f"of ns-3's TCP goodput "
          f"(on the wire) | wall {time.perf_counter() - wall:.1f} s, cpu {time.process_time() - cpu:.1f} s here + "
          f"{children.children_user + children.children_system:.1f} s compiling and simulating")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
