"""The GCL file `gclc calibrate -o FILE` writes: it imports the design and derives, with
`extends`, each part a calibrated constant belongs to (the chip's `efficiency` block, a
fabric's `efficiency` and `latency`), then the node, supernode and cluster that hold them,
the cluster carrying its `calibration` band, and each job of the design re-targeted to the
calibrated cluster. Every value names the measurements it came from. `gclc plan FILE` plans
the calibrated job; the design itself is left as it was."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ...compiler.design import Design, Entity, Repeat
from ...dsl.numbers import number, percent
from ...solver.calibrate.calibrate import Calibration
from ...solver.calibrate.step_overhead import measured

MAX_NAMED = 3   # measurements named in a value's comment before "and N more"
SAME = 0.005    # a constant the fit moved by less is the design's (the report says it was confirmed)


class CannotWrite(ValueError):
    """The calibration cannot be written as a derivation of this design (the message says why)."""


def tag_of(output: str) -> str:
    """The suffix of the derived names: the output file's stem as an identifier (`mycluster`)."""
    stem = re.sub(r"\W+", "_", Path(output).stem).strip("_") or "calibrated"
    return stem if not stem[0].isdigit() else f"c{stem}"


def import_path(design_path: str, output: str) -> str:
    """The design as the output file imports it: a path below the output's folder, no `.gcl`."""
    folder = Path(output).resolve().parent
    target = Path(design_path).resolve()
    if not target.is_relative_to(folder):
        raise CannotWrite(f"write the calibration in the design's folder ({Path(design_path).parent or '.'}) or a "
                          "folder above it: a .gcl file imports only files below its own folder")
    return os.path.relpath(target.with_suffix(""), folder).replace(os.sep, "/")


def overrides(design: Design, calibration: Calibration, design_path: str, output: str,
              source: str) -> str:
    """The text of the calibrated design."""
    tag = tag_of(output)
    cluster = _cluster(design, calibration)
    folder = Path(output).resolve().parent
    moved = {param.key: (param, value, tuple(_short(g, folder) for g in groups))
             for param, value, groups in calibration.moved() if _moved(param, value, calibration)}
    taken = {e.name for e in design.entities}
    blocks: list[str] = []
    renamed: dict[str, str] = {}
    _derive_parts(design, cluster, moved, tag, blocks, renamed, calibration.spread_of)
    blocks.append(_cluster_block(cluster, calibration, tag, renamed, source))
    renamed[cluster.name] = f"{cluster.name}_{tag}"
    for job in design.entities:
        if job.kind in ("train", "serve") and _runs_on(job, cluster):
            engine = [_value(param, value, groups) for (kind, name, _), (param, value, groups) in moved.items()
                      if kind == "engine" and name == job.name]
            body = f"  on = {renamed[cluster.name]}" + (
                "\n  engine {\n" + "\n".join(f"    {line}" for line in engine) + "\n  }" if engine else "")
            blocks.append(f"{job.kind} {job.name}_{tag} extends {job.name} {{\n{body}\n}}")
    clash = [f"{n}_{tag}" for n in renamed if f"{n}_{tag}" in taken]
    if clash:
        raise CannotWrite(f"the design already declares `{clash[0]}`; name the output file differently")
    head = [f"# {line}" if line else "#" for line in _header(calibration, source, output)]
    return "\n".join(head + ["", f'import "{import_path(design_path, output)}"', ""] + ["\n\n".join(blocks)]) + "\n"


def _header(calibration: Calibration, source: str, output: str) -> list[str]:
    files = sorted({r.obs.span.path for r in calibration.rows})
    band = calibration.band
    lines = [f"Calibrated by {source}", f"on {len(calibration.rows)} measurements from {len(files)} files.",
             f"Plan the calibrated job: gclc plan {output} (the design is left as it was)."]
    if band is not None:
        lines.append(f"Band: calibrated on {band.runs} of your runs, ±{percent(band.half_width)} "
                     "(each run predicted by a fit without it).")
    return lines + list(calibration.overhead_kept)


def _cluster(design: Design, calibration: Calibration) -> Entity:
    name = calibration.partition_cluster
    found = next((e for e in design.entities if e.kind == "cluster" and e.name == name), None)
    if found is None:
        raise CannotWrite(f"no cluster `{name}` in the design")
    if found.get("partition") is not None:
        raise CannotWrite(f"`{name}` has partitions; calibrating one partition is not implemented yet")
    return found


def _runs_on(job: Entity, cluster: Entity) -> bool:
    target = job.get("on")
    return getattr(target, "name", None) == cluster.name and not isinstance(target, tuple)


def _derive_parts(design, cluster: Entity, moved: dict, tag: str, blocks: list[str], renamed: dict,
                  spread_of=lambda key: None) -> None:
    units: Repeat = cluster.get("units")
    unit = units.part
    node = unit if unit.kind == "node" else unit.get("nodes").part
    gpus: Repeat = node.get("gpus")
    chip = gpus.part
    lines = [_value(param, value, groups) for (kind, name, what), (param, value, groups) in moved.items()
             if kind == "chip" and name == chip.name]
    if lines:
        blocks.append(f"chip {chip.name}_{tag} extends {chip.name} {{\n  efficiency {{\n"
                      + "\n".join(f"    {line}" for line in lines) + "\n  }\n}")
        renamed[chip.name] = f"{chip.name}_{tag}"
    for holder in (node, unit if unit is not node else None, cluster):
        fabric = holder.get("scaleout" if holder is cluster else "scaleup") if holder is not None else None
        if fabric is not None and fabric.name not in renamed:
            lines = [_value(param, value, groups, what) for (kind, name, what), (param, value, groups) in moved.items()
                     if kind == "fabric" and name == fabric.name]
            if lines:
                blocks.append(f"fabric {fabric.name}_{tag} extends {fabric.name} {{\n"
                              + "\n".join(f"  {line}" for line in lines) + "\n}")
                renamed[fabric.name] = f"{fabric.name}_{tag}"
    changed = [f"  gpus = {gpus.count} x {renamed[chip.name]}"] if chip.name in renamed else []
    changed += [f"  {_value(param, value, groups, before=node_overhead(node), spread=spread_of(param.key))}"
                for (kind, name, _), (param, value, groups) in moved.items() if kind == "node" and name == node.name]
    scaleup = node.get("scaleup")
    if scaleup is not None and scaleup.name in renamed:
        changed.append(f"  scaleup = {renamed[scaleup.name]}")
    if changed:
        blocks.append(f"node {node.name}_{tag} extends {node.name} {{\n" + "\n".join(changed) + "\n}")
        renamed[node.name] = f"{node.name}_{tag}"
    if unit is not node:
        nodes: Repeat = unit.get("nodes")
        changed = [f"  nodes = {nodes.count} x {renamed[node.name]}"] if node.name in renamed else []
        scaleup = unit.get("scaleup")
        if scaleup is not None and scaleup.name in renamed:
            changed.append(f"  scaleup = {renamed[scaleup.name]}")
        if changed:
            blocks.append(f"supernode {unit.name}_{tag} extends {unit.name} {{\n" + "\n".join(changed) + "\n}")
            renamed[unit.name] = f"{unit.name}_{tag}"


def _cluster_block(cluster: Entity, calibration: Calibration, tag: str, renamed: dict, source: str) -> str:
    units: Repeat = cluster.get("units")
    lines = []
    if units.part.name in renamed:
        lines.append(f"  units = {units.count} x {renamed[units.part.name]}  # as `{cluster.name}`, "
                     "with the calibrated parts")
    scaleout = cluster.get("scaleout")
    if scaleout is not None and scaleout.name in renamed:
        lines.append(f"  scaleout = {renamed[scaleout.name]}")
    band, serve = calibration.band, calibration.serve_band
    fields = []
    if band is not None:
        covered = calibration.coverage
        fields = [f"runs = {band.runs}  # end-to-end runs, each predicted by a fit made without it",
                  f"low = {percent(band.low, 4)}  # 80 % bounds on measured / predicted throughput",
                  f"high = {percent(band.high, 4)}"]
        if covered["precisions"]:
            fields.append(f"precisions = [{', '.join(covered['precisions'])}]")
        fields += [f"gpus = {covered['gpus']}", f"moe = {'true' if covered['moe'] else 'false'}"]
        if band.beyond:
            fields.append(f"beyond = {number(band.beyond, 3)}  # the band's factor beyond {covered['gpus']} GPUs: "
                          "your largest runs predicted by a fit of the smaller ones")
    if serve is not None:
        fields += [f"serve_runs = {serve.runs}  # serving benchmarks, each predicted by a fit made without it",
                   f"serve_low = {percent(min(serve.low, 1.0), 4)}  # 80 % bounds on measured / predicted "
                   "throughput, TTFT and TPOT",
                   f"serve_high = {percent(max(serve.high, 1.0), 4)}"]
    if fields:
        fields.append(f'source = "{source}"')
        lines.append("  calibration {\n" + "\n".join(f"    {f}" for f in fields) + "\n  }")
    body = "\n".join(lines) if lines else "  # nothing measured moves this cluster's parts"
    return f"cluster {cluster.name}_{tag} extends {cluster.name} {{\n{body}\n}}"


def _moved(param, value: float, calibration: Calibration) -> bool:
    """Whether the fit moved a constant off the design's value: a node's per-step host time off
    what the node states (0 s where it states none, whatever the fit's prior), any other off its prior."""
    if param.key[0] == "node":
        stated = calibration.partition.node.step_overhead if calibration.partition is not None else 0.0
        return stated == 0 or abs(value / stated - 1) > SAME
    return abs(value / param.prior - 1) > SAME


def node_overhead(node: Entity) -> float:
    """The node's stated `step_overhead` in seconds (0: none stated)."""
    stated = node.get("step_overhead")
    return float(stated) if stated is not None else 0.0


def _value(param, value: float, groups: tuple[str, ...], what: str | None = None,
           before: float | None = None, spread: float | None = None) -> str:
    """`bf16 = 61.2%  # was 64%: measured by ...` (a fabric's field by its own name; `before`, the
    design's value where it is not the fit's prior; a per-step host time also says the prior it
    moved from and its posterior width, `spread`)."""
    field = what or param.key[2]
    fitted = ""
    if field in ("latency", "host_step"):
        text, before = f"{number(value * 1e6, 3)} us", f"{number(param.prior * 1e6, 3)} us"
    elif field == "step_overhead":
        stated = param.prior if before is None else before
        text, before = f"{number(value * 1e3, 3)} ms", f"{number(stated * 1e3, 3)} ms" if stated else "0 s (unstated)"
        width = f", posterior width e^±{number(spread, 2)} against the prior's e^±{number(param.spread, 2)}: " \
            f"{measured(value, spread, stated)}" if spread is not None else ""
        fitted = f" (prior {number(param.prior * 1e3, 3)} ms -> {text}{width})"
    else:
        text, before = percent(value, 4), percent(param.prior, 4)
    named = ", ".join(groups[:MAX_NAMED])
    more = f" and {len(groups) - MAX_NAMED} more" if len(groups) > MAX_NAMED else ""
    bound = " (at the edge of its physical range)" if value in (param.low, param.high) or not (
        param.low * 1.0001 < value < param.high * 0.9999) else ""
    source = f"fitted from runs {named}{more}{fitted}" if field == "step_overhead" else f"{named}{more}"
    return f"{field} = {text}  # was {before}{bound}: {source}"


def _short(group: str, folder: Path) -> str:
    """A measurement's file and line: relative to the written file's folder when it lies below
    it, else as it was named on the command line."""
    path, _, line = group.rpartition(":") if group.rpartition(":")[2].isdigit() else (group, "", "")
    try:
        relative = os.path.relpath(Path(path).resolve(), folder).replace(os.sep, "/")
    except ValueError:   # another drive
        relative = ".."
    shown = path if relative.startswith("..") else relative
    return f"{shown}:{line}" if line else shown
