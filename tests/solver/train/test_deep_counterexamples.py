"""Counterexamples that the deep hypothesis runs (`GCLC_HYPOTHESIS=deep`) of the search,
placement and validation properties found, kept as explicit cases so that the derandomized
CI profile runs them every time."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path


from gclc.solver.train import enumerate as enumerator
from gclc.solver.train.search import search

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

# A 2-layer MoE on 16 GPUs (two 8-GPU nodes), batch 4, DeepSpeed stack: several layouts
# tie for the best goodput (dp 4 x cp 2 and dp 2 x cp 4, each in two orders).
TIES = {"hbm": 6, "up": 100, "inr": "true", "per_node": 8, "layers": 2, "hidden": 128, "heads": 4, "kv_heads": 1,
        "ffn": 256, "vocab": 32000, "seq": 256, "mlp": "gelu", "batch": 4, "precision": "bf16",
        "stack": "deepspeed", "nodes": 2, "routed": 4, "shared": 0, "top_k": 2, "expert_ffn": 256,
        "dense_layers": 1, "pins": {}, "limits": []}


# Found by the deep run of test_search_finds_the_enumerators_optimum: under `goodput` the
# search pruned a layout that ties the runners-up (a replica-count bound used the energy
# formula for goodput's negative values; fixed in solver/train/bounds.py).
def test_goodput_runners_up_keep_every_tie():
    job = designs.job(TIES)
    result = search(job, "goodput", 2)
    ranked = enumerator.ranked(job, "goodput")
    assert math.isclose(result.value, ranked[0][0], rel_tol=1e-9)
    expected = [v for v, _ in enumerator.distinct(ranked)[1:3]]
    assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(result.runner_values, expected)), (
        result.runner_values, expected)


def test_goodput_optimum_is_the_enumerators_despite_ties():
    # The optimum itself is right (only the runners-up are affected).
    job = designs.job(TIES)
    result = search(job, "goodput", 2)
    assert math.isclose(result.value, enumerator.ranked(job, "goodput")[0][0], rel_tol=1e-9)
