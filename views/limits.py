"""What limits a planned design, in words an architect reads without the source: the
parts of the step in order of their share (compute first when it dominates), each
communication named by what it is and the tier it crosses, then the limits the plan
presses against (memory, power, a stated constraint). Shared by `gclc plan` and the
report's headline."""

from __future__ import annotations

from ..dsl.numbers import percent

# What each part of the step is, for a reader who does not know the breakdown's keys.
WORDS = {
    "compute": "compute",
    "recompute": "recomputing activations",
    "tp": "tensor-parallel traffic",
    "cp": "context-parallel traffic",
    "ep": "expert all-to-all",
    "pp": "pipeline sends",
    "bubble": "pipeline bubble",
    "dp": "gradient synchronization",
    "optimizer": "optimizer step",
    "host": "waiting for the host CPUs",
    "data": "waiting for input data",
    "checkpoint": "checkpoint saves",
    "offload": "activation copies to host memory",
    "step_overhead": "host work between steps",
}
MEMORY_WORDS = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer state",
                "activations": "activations", "logits": "logits", "buffers": "CUDA context and NCCL buffers",
                "rebuilt": "recomputed layer", "gathered": "gathered ZeRO-3 layers",
                "allocator": "allocator slack"}
COMMUNICATION = ("tp", "cp", "ep", "pp", "dp")
_NOTABLE = 0.02   # parts of the step below this share are left out of the sentence


def tiers_text(tiers: tuple[str, ...]) -> str:
    """`NVLink3 (node)`, `HDR_3Tier leaf and core`: the tiers a group crosses, each once,
    a fabric named once for its tiers."""
    seen: list[tuple[str, str]] = []
    for name in tiers:
        fabric, _, tier = name.rpartition(" ") if " " in name and "(" not in name else (name, "", "")
        if (fabric, tier) not in seen:
            seen.append((fabric, tier))
    parts: list[str] = []
    for fabric in dict.fromkeys(f for f, _ in seen):
        levels = [t for f, t in seen if f == fabric and t]
        parts.append(fabric + (" " + " and ".join(levels) if levels else ""))
    return ", ".join(parts) or "one GPU"


def step_parts(plan) -> list[tuple[str, float, str]]:
    """(key, share of the step, words) for each notable part of the chosen step, largest first."""
    e = plan.best
    where = {p.dim: tiers_text(p.tiers) for p in getattr(plan, "placement", ()) if p.size > 1}
    parts = []
    for key, seconds in e.breakdown.rows():
        share = seconds / e.step_time if e.step_time > 0 else 0.0
        if share < _NOTABLE:
            continue
        words = WORDS.get(key, key)
        if key in COMMUNICATION and key in where:
            words += f" on {where[key]}"
        parts.append((key, share, words))
    return sorted(parts, key=lambda part: -part[1])


def limits_sentence(plan) -> str:
    """`Compute takes 66% of the step (MFU 39.8%), then recomputing activations 21% and
    tensor-parallel traffic on NVLink3 (node) 10%; memory 44.1 GB of 80 GB.`"""
    parts = step_parts(plan)
    if not parts:
        return "Nothing stands out: the step is spread over many small parts."
    (key, share, words), rest = parts[0], parts[1:4]
    lead = f"{words[0].upper()}{words[1:]} takes {percent(share)} of the step"
    if key == "compute":
        lead += f" (MFU {percent(plan.best.mfu)})"
    if rest:
        lead += ", then " + _and([f"{w} {percent(s)}" for _, s, w in rest])
    pressed = [_constraint(line) for line in getattr(plan, "binding", ())
               if line.split(":", 1)[0] not in ("link", "bubble", "recompute", "data", "checkpoint", "compute",
                                                "step_overhead")]
    return lead + "." + "".join(f" {p}" for p in pressed if p)


def _constraint(line: str) -> str:
    """A limit the plan presses against (from the solver's binding list), as a sentence."""
    what, _, detail = line.partition(": ")
    detail = detail.strip()
    if not detail:
        return ""
    return f"{what[0].upper()}{what[1:]}: {detail}."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
