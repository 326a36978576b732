"""The cluster as Slurm configuration, and the job as an `sbatch` script.

Files (slurm.conf(5), gres.conf(5), topology.conf(5) of Slurm 22.05 to 25.05):
- `slurm.conf`: the lines a site's slurm.conf includes (`Include slurm.nodes.conf`):
  GRES types, the tree topology plugin, one NodeName line per node type with its GPUs
  as typed GRES, sockets, cores and memory from the node's parts, and a partition per
  design partition whose jobs get the node's cores and memory per GPU they ask
  (DefCpuPerGPU, DefMemPerGPU), so that jobs share nodes GPU by GPU as the schedule does.
- `gres.conf`: each node's GPUs with their device files (NVIDIA `/dev/nvidiaN`, AMD
  `/dev/dri/renderD128+N`; other accelerators by count).
- `topology.conf`: tree form: one switch per domain of each fabric tier (layout.py),
  the lowest listing nodes, the others listing switches.
- `topology-block.conf`: block form (topology/block, Slurm 23.11+): one block per
  scale-up domain when it spans several nodes (NVL72 racks), else per lowest tier.
- `qos.sh`, `accounts.sh` and the scheduling lines of `slurm.conf`: slurm_policy.py.
- `job.sbatch`: the time limit (the job's `time_limit`, else the schedule's request,
  solver/schedule/time_limit.py), its tenant's account, the QOS of its priority,
  `--requeue` (a failure restarts it from its checkpoint, as the goodput model assumes),
  nodes, GPUs per node, tasks, `--switches` (tree; it waits as long as `max_switch_wait`
  lets it) or `--segment` (block) for what the plan keeps together, the environment the
  stack needs, and one `srun` over every component of a heterogeneous job (`--het-group=0-N`).
Checked by Debian's slurmctld, slurmdbd, sacctmgr and `sbatch --test-only` (tests/views/test_export_slurm*.py).
"""

from __future__ import annotations

import math

from ...compiler.design import Design, Entity
from ...compiler.trace import priority_value
from ...solver.schedule.settings import SlurmSettings
from .slurm_policy import accounts_script, conf_lines, priorities, qos_name, qos_script, settings as policy_settings
from ...compiler.ir import NodeType
from ...compiler.hostlist import compress, lines as host_lines
from .layout import Group, Layout, slug
from .environment import shell_lines
from .serve_launch import engine_family, slurm_task, spans
from .target import JobPlan, header



def export(layout: Layout, design: Design, job: JobPlan | None, source: str,
           cluster: Entity | None = None) -> dict[str, str]:
    """`cluster`: the design's cluster being written (default: the one `layout` lays out)."""
    cluster = cluster or next(e for e in design.of_kind("cluster") if e.name == layout.cluster)
    settings = policy_settings(design, cluster)
    qos = priorities(design, cluster, job)
    files = {
        "slurm.conf": slurm_conf(layout, design, source, settings),
        "gres.conf": gres_conf(layout, source),
        "topology.conf": topology_tree(layout, source),
        "topology-block.conf": topology_block(layout, source),
        "qos.sh": qos_script(qos, settings, source),
    }
    accounts = accounts_script(design, cluster, qos, source)
    if accounts is not None:
        files["accounts.sh"] = accounts
    if job is not None:
        files["job.sbatch"] = sbatch(layout, job, source, settings)
    return files


def gres_type(group: Group) -> str:
    """`H100_SXM` -> `h100_sxm`: GRES type names are letters, digits and underscores."""
    return slug(group.partition.node.accelerator.name).replace("-", "_")


def slurm_conf(layout: Layout, design: Design, source: str, settings: SlurmSettings = SlurmSettings()) -> str:
    lines = [header(source, f"Slurm node and partition lines of cluster {layout.cluster}"),
             "# include from slurm.conf: Include <this file>",
             "GresTypes=gpu",
             "TopologyPlugin=topology/tree",
             "SelectType=select/cons_tres",
             "SelectTypeParameters=CR_Core_Memory"]
    lines += conf_lines(settings)
    for group in layout.groups:
        node = group.partition.node
        lines.append(f"# partition {group.partition.name}: {len(group.nodes)} x {node.name}, "
                     f"{node.gpus} x {node.accelerator.name} each")
        shape = " ".join(f"{k}={v}" for k, v in _node_shape(node, design).items())
        for hosts in host_lines(group.nodes):
            lines.append(f"NodeName={hosts} {shape} Gres=gpu:{gres_type(group)}:{node.gpus} "
                         f"Feature={slug(node.name).replace('-', '_')} State=UNKNOWN")
    for index, group in enumerate(layout.groups):
        nodes = "ALL" if len(layout.groups) == 1 else compress(group.nodes)
        lines.append(f"PartitionName={group.slug} Nodes={nodes} Default={'YES' if index == 0 else 'NO'} "
                     f"MaxTime=INFINITE{_per_gpu(group.partition.node, design)} State=UP")
    return "\n".join(lines) + "\n"


def _per_gpu(node: NodeType, design: Design) -> str:
    """A job's default cores and memory per GPU it asks (DefCpuPerGPU, DefMemPerGPU): the
    node's share per GPU, so that jobs share a node GPU by GPU as the schedule simulates it
    (without them, CR_Core_Memory gives a job the whole node's memory)."""
    shape, gpus = _node_shape(node, design), node.gpus
    cores = shape.get("SocketsPerBoard", 0) * shape.get("CoresPerSocket", 0)
    out = f" DefCpuPerGPU={cores // gpus}" if cores >= gpus else ""
    return out + (f" DefMemPerGPU={shape['RealMemory'] // gpus}" if shape.get("RealMemory", 0) >= gpus else "")


def _node_shape(node: NodeType, design: Design) -> dict[str, int]:
    """Sockets, cores and memory (MiB) from the node's parts; cores only when the CPU states them."""
    shape: dict[str, int] = {}
    entity = next((e for e in design.entities if e.kind == "node" and e.name == node.name), None)
    cpus = entity.get("cpus") if entity is not None else None
    if cpus is not None:
        shape["Boards"] = 1
        shape["SocketsPerBoard"] = cpus.count
        cores = cpus.part.get("cores")
        if cores:
            shape["CoresPerSocket"] = cores
            shape["ThreadsPerCore"] = 1  # the design does not say whether SMT is on
    if node.dram:
        shape["RealMemory"] = int(node.dram // 2**20)
    return shape


def gres_conf(layout: Layout, source: str) -> str:
    lines = [header(source, f"Slurm GRES of cluster {layout.cluster}")]
    for group in layout.groups:
        accelerator, count = group.partition.node.accelerator, group.gpus_per_node
        vendor = accelerator.vendor.lower()
        if "nvidia" in vendor:
            device = f" File=/dev/nvidia[0-{count - 1}]" if count > 1 else " File=/dev/nvidia0"
        elif "amd" in vendor:
            device = f" File=/dev/dri/renderD[128-{127 + count}]" if count > 1 else " File=/dev/dri/renderD128"
        else:
            device = f" Count={count}"
        for hosts in host_lines(group.nodes):
            lines.append(f"NodeName={hosts} Name=gpu Type={gres_type(group)}{device}")
    return "\n".join(lines) + "\n"


def topology_tree(layout: Layout, source: str) -> str:
    lines = [header(source, f"Slurm tree topology of cluster {layout.cluster} (topology/tree)")]
    tops = []
    for group in layout.groups:
        lines.append(f"# partition {group.partition.name}")
        if not group.levels:  # a single node, or nodes without a fabric: one switch holds them all
            lines.append(f"SwitchName={group.slug}-switch Nodes={compress(group.nodes)}")
            tops.append(f"{group.slug}-switch")
            continue
        for level in group.levels:
            lines.append(f"# {level.tier.name}: {len(level.domains)} x {level.nodes_per_domain} nodes")
            for domain in level.domains:
                if domain.children:
                    lines.append(f"SwitchName={domain.name} Switches={compress(domain.children)}")
                else:
                    nodes = group.nodes[domain.first:domain.first + domain.count]
                    lines.append(f"SwitchName={domain.name} Nodes={compress(nodes)}")
        tops += [d.name for d in group.levels[-1].domains]
    if len(tops) > 1:
        lines.append(f"# the partitions' fabrics joined at the top\nSwitchName={layout.slug} Switches={compress(tops)}")
    return "\n".join(lines) + "\n"


def block_level(group: Group):
    """The level whose domains are blocks: the scale-up domain if it spans nodes, else the lowest."""
    scaleup = [level for level in group.levels if level.tier.scope != "scaleout"]
    return (scaleup or list(group.levels) or [None])[-1 if scaleup else 0]


def topology_block(layout: Layout, source: str) -> str:
    lines = [header(source, f"Slurm block topology of cluster {layout.cluster} (topology/block, Slurm 23.11+)"),
             "# slurm.conf: TopologyPlugin=topology/block"]
    sizes = set()
    for group in layout.groups:
        level = block_level(group)
        if level is None:
            lines.append(f"BlockName={group.slug}-block Nodes={compress(group.nodes)}")
            sizes.add(len(group.nodes))
            continue
        lines.append(f"# partition {group.partition.name}: one block per {level.tier.name} domain")
        for domain in level.domains:
            nodes = group.nodes[domain.first:domain.first + domain.count]
            lines.append(f"BlockName={domain.name} Nodes={compress(nodes)}")
        sizes.add(level.nodes_per_domain)
    lines.append(f"BlockSizes={min(sizes)}")
    return "\n".join(lines) + "\n"


def sbatch(layout: Layout, job: JobPlan, source: str, settings: SlurmSettings = SlurmSettings()) -> str:
    """One component per partition share or serve pool (a heterogeneous job when there are
    several: a disaggregated serve plan's prefill and decode pools are components 0 and 1)."""
    lines = ["#!/bin/bash", header(source, f"sbatch script for job {job.name}")]
    lines += _run_lines(job)
    for index, share in enumerate(job.shares):
        if job.serve:
            lines.append(f"# {'component ' + str(index) + ', ' if len(job.shares) > 1 else ''}"
                         f"serve {share.role or 'serving'} pool: {share.items} replicas of {share.together} GPUs")
        group = layout.group(share.partition)
        per_node = group.gpus_per_node
        nodes = math.ceil(share.gpus / per_node)
        if index:
            lines.append("#SBATCH hetjob")
        tasks = 1 if _spanning(job, share, per_node) else per_node   # one engine per node starts its GPUs' workers
        lines += [f"#SBATCH --job-name={slug(job.name)}" if index == 0 else f"# component {index}: {share.partition}",
                  f"#SBATCH --partition={group.slug}",
                  f"#SBATCH --nodes={nodes}",
                  f"#SBATCH --gpus-per-node={gres_type(group)}:{per_node}",
                  f"#SBATCH --ntasks-per-node={tasks}",
                  "#SBATCH --exclusive"]
        lines += _placement_lines(group, share.together, nodes, settings.max_switch_wait)
    if job.serve and len(job.shares) > 1:  # disaggregated: each pool's servers in its own component
        lines.append("# one server per pool, told its role; the pools find each other through the job's hosts")
        for index, share in enumerate(job.shares):
            lines += _serve_step(layout, job, share, f"GCLC_SERVE_ROLE={share.role} srun --het-group={index}", " &")
        lines.append("wait")
        return "\n".join(lines) + "\n"
    what = "the serving command" if job.serve else "the training command, e.g. pretrain_gpt.py with megatron.args"
    lines += shell_lines(job)
    if job.serve and _spanning(job, job.shares[0], layout.group(job.shares[0].partition).gpus_per_node):
        return "\n".join(lines + _serve_step(layout, job, job.shares[0], "srun", "")) + "\n"
    if len(job.shares) > 1:   # one training step across every component (one world of ranks)
        lines.append(f"srun --het-group=0-{len(job.shares) - 1} --kill-on-bad-exit=1 \"$@\"  # {what}")
    else:
        lines.append(f"srun --kill-on-bad-exit=1 \"$@\"  # {what}")
    return "\n".join(lines) + "\n"


def _spanning(job: JobPlan, share, per_node: int) -> bool:
    return job.serve and spans(share, per_node) > 1


def _serve_step(layout: Layout, job: JobPlan, share, srun: str, tail: str) -> list[str]:
    """A serve pool's step: where its replica spans nodes, one task per node that finds its rank
    in the replica and the replica's head in the step's node list and starts the plan's engine
    with the pool's node flags (views/export/serve_launch.py); else the user's command."""
    nodes = spans(share, layout.group(share.partition).gpus_per_node)
    if nodes == 1:
        return [f"{srun} --kill-on-bad-exit=1 \"$@\"{tail}"]
    return [f"# each {share.role or 'serving'} replica spans {nodes} nodes, in the step's node order: one task per node,",
            "# NODE_RANK its place in the replica, HEAD_ADDR the replica's first node (its engine's rendezvous);",
            f"# the engine's flags from {engine_family(job)}'s args file in $GCLC_ARGS_DIR, the checkpoint in $CHECKPOINT",
            f"{srun} --ntasks-per-node=1 --kill-on-bad-exit=1 {slurm_task(job, share, nodes)} \"$@\"{tail}"]


def _run_lines(job: JobPlan) -> list[str]:
    """Time limit, QOS and restart policy: the wall clock the plan expects (a job Slurm cannot
    bound is one backfill cannot plan around), the priority's QOS, and requeueing, by which a
    job whose node fails restarts from its last checkpoint as the goodput model assumes."""
    run, out = job.run, []
    if run.time_limit:
        out += [f"# time limit: {run.time_source}", f"#SBATCH --time={slurm_time(run.time_limit)}"]
    elif run.time_source:
        out.append(f"# no time limit: {run.time_source}")
    if run.tenant:
        out.append(f"#SBATCH --account={run.tenant}")
    out.append(f"#SBATCH --qos={qos_name(priority_value(job.entity.get('priority'))[1])}")
    if not job.serve:
        expected = f", about {run.restarts} over the run" if run.restarts else ""
        out += [f"# a node failure requeues the job: it restarts from its last checkpoint{expected}",
                "#SBATCH --requeue"]
    return out


def slurm_time(seconds: float) -> str:
    """Slurm's `days-hours:minutes:seconds`; Slurm keeps time limits in whole minutes, so
    a limit is rounded up to the minute (the schedule's own are whole hours)."""
    minutes = max(1, math.ceil(seconds / 60 - 1e-9))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def _placement_lines(group: Group, together: int, nodes: int, wait: float) -> list[str]:
    """`--switches` for the tree (as few lowest-level switches as the job needs, each holding
    whole groups of what the plan keeps together; waiting for them as long as slurm.conf's
    max_switch_wait, `wait` seconds, lets a job) and, for the block plugin, `--segment`:
    the nodes of such a group, which a block must not split."""
    out = []
    segment = math.ceil(together / group.gpus_per_node)
    if group.levels and nodes > 1:
        lowest = group.levels[0]
        usable = lowest.nodes_per_domain
        if 1 < segment <= usable:
            usable = usable // segment * segment
        switches = math.ceil(nodes / usable)
        out += [f"# as few {lowest.tier.name} switches ({lowest.nodes_per_domain} nodes each) as the job needs",
                f"#SBATCH --switches={switches}@{_wait(wait)}"]
    level = block_level(group)
    if level is not None and 1 < segment <= level.nodes_per_domain and nodes % segment == 0:
        out += [f"# the plan keeps {together} GPUs within one {level.tier.name} domain; with topology/block",
                f"# (Slurm 24.11+) ask for it with: #SBATCH --segment={segment}"]
    return out


def _wait(seconds: float) -> str:
    """`--switches=N@TIME`: Slurm reads TIME as minutes, `minutes:seconds` or longer forms."""
    whole = int(round(seconds))
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
