"""Where a serve replica's ranks sit, in the order its engine lays them out.

A replica is `tp` x `ep` x `pp` GPUs; ranks fill the nodes in order, and the engine decides
which dimension is innermost (model/serve/engines.py `rank_order`): SGLang keeps TP innermost,
then the attention groups (which share the experts), then the pipeline stages, so a replica over
two nodes puts a stage on each and the stage-to-stage sends cross the node boundary; vLLM's V1
engine keeps TP innermost, then the pipeline stages, then the data-parallel attention groups, so
a node holds whole DP ranks with all their stages and the expert all-to-all crosses the node
boundary instead. The costs (model/serve/inference.py), the plan's stated tiers (views/serve.py)
and the drawing (views/serve_placement.py) all read the ranks from here.
"""

from __future__ import annotations

from .. import comms
from ..network.placement import tile
from .pipeline import hop_tier, stage_hops

DEFAULT_ORDER = ("tp", "ep", "pp")


def strides(cfg, order: tuple = DEFAULT_ORDER) -> dict[str, int]:
    """Ranks between neighbours of each dimension: 1 for the innermost, then the product of those inside."""
    sizes, out, step = {"tp": cfg.tp, "ep": cfg.ep, "pp": cfg.pp}, {}, 1
    for dim in order:
        out[dim] = step
        step *= sizes[dim]
    return out


def rank(cfg, order: tuple, t: int, e: int, s: int) -> int:
    """The replica rank of TP rank `t` of attention group `e` on stage `s`."""
    k = strides(cfg, order)
    return t * k["tp"] + e * k["ep"] + s * k["pp"]


def stage_ranks(cfg, order: tuple, s: int) -> list[int]:
    """The replica ranks of pipeline stage `s`, ascending."""
    return sorted(rank(cfg, order, t, e, s) for e in range(cfg.ep) for t in range(cfg.tp))


def expert_stages(cfg, order: tuple, tiers: tuple) -> tuple:
    """The tiers the expert all-to-all (the tp x ep ranks of one stage) crosses."""
    k = strides(cfg, order)
    if cfg.pp == 1 or k["ep"] == cfg.tp:          # the group's ranks are consecutive
        return comms.place(cfg.tp * cfg.ep, 1, tiers)
    if cfg.tp == 1:
        return comms.place(cfg.ep, k["ep"], tiers)
    # blocks of tp consecutive ranks, `k["ep"]` apart: at each tier, the members its domain
    # holds are those of the TP block times the attention groups, met tier by tier
    met: dict = {}
    for stage in tile(cfg.tp, 1, tiers) + tile(cfg.ep, k["ep"], tiers):
        met[stage.tier] = met.get(stage.tier, 1) * stage.peers
    return tuple(comms.Stage(t, met[t]) for t in tiers if t in met)


def group_stages(cfg, order: tuple, tiers: tuple) -> tuple:
    """The tiers a group of the attention groups' ranks of one TP index crosses (vLLM's data-parallel
    group, over which its allgather_reducescatter backend gathers the tokens for the experts)."""
    return comms.place(cfg.ep, strides(cfg, order)["ep"], tiers) if cfg.ep > 1 else ()


def hops(cfg, order: tuple, tiers: tuple) -> tuple:
    """The tier of each hop between neighbouring stages (stage 0 -> 1 first): rank t of group e
    on stage s sends to the same rank on stage s + 1; the slowest such send of any group."""
    if order == DEFAULT_ORDER:      # a stage's ranks are consecutive
        return stage_hops(cfg.tp * cfg.ep, cfg.pp, tiers)
    return tuple(_outermost([hop_tier(rank(cfg, order, 0, e, s), rank(cfg, order, cfg.tp - 1, e, s + 1), tiers)
                             for e in range(cfg.ep)], tiers) for s in range(cfg.pp - 1))


def return_hop(cfg, order: tuple, tiers: tuple):
    """The tier from the last stage back to the first (sampled tokens); None without stages."""
    if cfg.pp == 1:
        return None
    if order == DEFAULT_ORDER:
        return hop_tier(0, cfg.gpus - 1, tiers)
    return _outermost([hop_tier(min(rank(cfg, order, 0, e, 0), rank(cfg, order, 0, e, cfg.pp - 1)),
                                max(rank(cfg, order, cfg.tp - 1, e, 0), rank(cfg, order, cfg.tp - 1, e, cfg.pp - 1)),
                                tiers) for e in range(cfg.ep)], tiers)


def _outermost(found: list, tiers: tuple):
    return max(found, key=tiers.index) if found and tiers else (found[0] if found else None)
