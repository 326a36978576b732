"""A simulated schedule as the files that make real Slurm take the same decisions
(`gclc schedule FILE --export slurm DIR`): the cluster's files as `gclc export --to slurm`
writes them (node, partition, GRES and topology lines, QOS), one sbatch script per run of
a job and a `submit.sh` that submits them all.

Each script carries what decided its run in the simulation: when it may begin (its
submit time, `--begin=now+S`), where (`--nodelist`, the nodes of the domains it held;
inside a domain of several nodes, its first ones: the simulation counts GPUs per domain,
not which of its nodes), how many GPUs, its time limit, and a `--priority` that ranks the
runs in the order the simulation started them (an administrator's fixed priority), so
that of two jobs wanting the same nodes Slurm starts the earlier one first, and the QOS of
its priority (`--qos`, made by qos.sh with the design's QOS limits, which slurmctld holds
jobs for under AccountingStorageEnforce=limits,qos) under its tenant's account (`--account`,
made by accounts.sh). The scripts are submitted by one user: a design whose jobs name
several `user`s needs each run submitted by its own for the per-user limits to count alike. A run the
simulation cut short (preempted, failed, ended at a resize) is replayed as the run it was:
its script sleeps as long as the run lasted. An rl job generating on one partition and
training on another is one heterogeneous job (`#SBATCH hetjob`,
slurm.schedmd.com/heterogeneous_jobs.html): its components start together, each placed as
the simulation placed its pool.
"""

from __future__ import annotations

import math

from ...compiler.design import Design
from ...dsl.numbers import duration
from ...compiler.hostlist import compress
from ...solver.schedule.records import SchedJob
from .layout import Layout, layout, slug
from .slurm import export as cluster_files, slurm_time
from .slurm_policy import qos_name
from .target import header


def slurm_replay(design: Design, workload, data: dict, source: str) -> dict[str, str]:
    """{file name: text} for the schedule JSON `data` (views/schedule.py) of `workload`."""
    lay = layout(workload.graph, design)
    files = cluster_files(lay, design, None, source)
    names, runs = [], runs_in_order(data)
    jobs = {j.name: j for j in workload.jobs}
    for rank, (name, index, seg, job) in enumerate(runs):
        file = f"jobs/{rank + 1:04d}-{slug(name)}{'-' + str(index + 1) if index else ''}.sbatch"
        files[file] = _script(lay, workload, job, seg, index, len(runs) - rank, source, jobs[name])
        names.append((file, job["submit_s"] if index == 0 else seg["start_s"]))
    files["submit.sh"] = _submit(names, source)
    return files


def runs_in_order(data: dict) -> list[tuple[str, int, dict, dict]]:
    """(job name, run index, segment, job) of every run, in the order the simulation started them."""
    runs = sorted(((s["start_s"], j["name"], i, s, j) for j in data["jobs"] for i, s in enumerate(j["segments"])),
                  key=lambda r: (r[0], r[1], r[2]))
    return [(name, index, seg, job) for _, name, index, seg, job in runs]


def _script(lay: Layout, workload, job: dict, seg: dict, index: int, priority: int, source: str,
            sched: SchedJob) -> str:
    length = seg["end_s"] - seg["start_s"]
    lines = ["#!/bin/bash", header(source, f"replay of {job['name']}, run {index + 1}: "
                                           f"{seg['gpus']} GPUs from {duration(seg['start_s'])}, ended {seg['ended']}"),
             f"# started by the simulation's rule: {seg['rule']}"]
    # an rl gang across two partitions is a heterogeneous job: both pools start, end and are
    # preempted together; each component its own partition, nodes and options
    parts = [seg] + ([seg["companion"]] if seg.get("companion") else [])
    for i, part in enumerate(parts):
        if i:
            lines += ["# the generation pool, on its own partition", "#SBATCH hetjob"]
        lines += _component(lay, workload, job, part, priority)
        if sched.tenant:
            lines.append(f"#SBATCH --account={sched.tenant}")
        lines.append(f"#SBATCH --qos={qos_name(sched.label)}")
    lines.append(f"sleep {max(0, math.ceil(length))}  # as long as the simulated run lasted")
    return "\n".join(lines) + "\n"


def _component(lay: Layout, workload, job: dict, part: dict, priority: int) -> list[str]:
    """The #SBATCH lines placing one component of a run: where, how many, its rank and limit."""
    group = lay.group(part["partition"])
    nodes = nodes_of(group, workload, job["name"], part)
    lines = [f"#SBATCH --job-name={slug(job['name'])}",
             f"#SBATCH --partition={group.slug}",
             f"#SBATCH --nodelist={compress(nodes)}",
             f"#SBATCH --nodes={len(nodes)}",
             f"#SBATCH --gpus={part['gpus']}",
             f"#SBATCH --priority={priority}"]
    if job["time_limit_s"]:
        lines.append(f"#SBATCH --time={slurm_time(job['time_limit_s'])}")
    return lines


def nodes_of(group, workload, name: str, seg: dict) -> list[str]:
    """The nodes of the domains the run held: each domain's first nodes, enough for its GPUs."""
    allocation = seg.get("domain_gpus") or []
    partition = workload.graph.partition(seg["partition"])
    per_domain, per_node = partition.nodes_per_unit, partition.node.gpus
    out = []
    for domain, gpus in allocation:
        first = domain * per_domain
        out += group.nodes[first:first + math.ceil(gpus / per_node)]
    return out


def _submit(files: list[tuple[str, float]], source: str) -> str:
    lines = ["#!/bin/bash", header(source, "submit every run, each beginning when the simulation submitted it"),
             "set -euo pipefail", 'cd "$(dirname "$0")"']
    for file, begin in files:
        lines.append(f"sbatch --begin=now+{math.ceil(begin)} {file}")
    return "\n".join(lines) + "\n"
