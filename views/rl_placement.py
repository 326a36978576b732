"""An rl plan's pools as a diagram: each pool on its partition (GPUs, replicas or layout), and
the weights' path between them (bytes a step, the link, the time)."""

from __future__ import annotations

import graphviz

from ..dsl.numbers import duration, quantity
from ..model.rl import phases as ph
from ..model.rl.step import COLOCATED
from .diagram import FONT, ident


def rl_placement(plan) -> graphviz.Digraph:
    b, job = plan.best, plan.job
    g, t = b.generation.layout, b.train
    c = t.policy.config
    dot = graphviz.Digraph(ident(plan.name, "rl"), graph_attr={
        "rankdir": "LR", "fontname": FONT, "fontsize": "14", "labelloc": "t",
        "label": f"{plan.name}: {b.placement} pools, staleness {b.staleness}"},
        node_attr={"fontname": FONT, "fontsize": "11", "shape": "box", "style": "rounded,filled"})
    dot.node("generate", f"generation pool\n{g.gpus} GPUs of {g.partition}\n{g.replicas} x (tp={g.config.tp} "
                         f"pp={g.config.pp} ep={g.config.ep}), max_batch {g.config.batch}", fillcolor="#e3f2fd")
    dot.node("train", f"training pool\n{t.gpus} GPUs of {t.partition}\ntp={c.tp} pp={c.pp} dp={c.dp} cp={c.cp} "
                      f"ep={c.ep}, {c.stack}", fillcolor="#e8f5e9")
    nbytes = ph.sync_bytes(job.policy, g.config.precision, c)
    s = b.step.phases
    if b.placement == COLOCATED:
        dot.edge("train", "generate", label=f"same GPUs in turn\nreshard {duration(s.sync)}", style="dashed")
    else:
        link = ph.link_between(job.partition(g.partition), job.partition(t.partition), g.gpus, t.gpus)
        dot.edge("train", "generate", label=f"weights {quantity(nbytes, 'B')} a step\nover {link.name}, "
                                            f"{duration(s.sync)}")
    dot.edge("generate", "train", label=f"{plan.samples} samples a step", style="dotted")
    return dot
