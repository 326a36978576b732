"""The enumerator's space (solver/train/enumerate.py), checked rule by rule on random designs:
every configuration is valid, dp is the largest that leaves a valid configuration, and
placement orders are distinct and canonical."""

import pytest
import importlib.util
import itertools
import math
from collections import defaultdict
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gclc.solver.train import enumerate as enumerator

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

# the search is exact whatever the clock grid: a coarse one keeps the enumerator quick (tests/solver/conftest.py)
pytestmark = pytest.mark.usefixtures("coarse_clock_steps")

EXAMPLES = max(20, settings.default.max_examples // 2)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs())
def test_every_configuration_is_valid(p):
    job = designs.job(p)
    shape, pins = job.shape, job.pinned
    gpus = enumerator.max_gpus(job, enumerator.limits(job))
    for c in enumerator.configurations(job):
        assert c.gpus <= gpus and c.batch == job.batch and c.seq == job.seq
        assert job.batch % (c.dp * c.microbatch) == 0
        if "tp" not in pins:
            assert shape.heads % c.tp == 0 and shape.kv_heads % c.tp == 0 and c.tp & (c.tp - 1) == 0
        if "pp" not in pins:
            assert shape.layers % c.pp == 0
        if "vp" not in pins and c.vp > 1:
            assert shape.layers % (c.pp * c.vp) == 0 and c.pp > 1
        if c.vp > 1:
            assert c.microbatches % c.pp == 0
        if "cp" not in pins and c.cp > 1:
            assert job.seq % (2 * c.cp) == 0
        if "ep" not in pins:
            assert (shape.routed if shape.is_moe else 1) % c.ep == 0
        # Expert groups fold over a stage's tp x cp x dp ranks as consecutive ranks: the
        # pipeline stride holds whole groups (MoE parallel folding, expert TP = 1).
        assert (c.tp * c.cp * c.dp) % c.ep == 0 and c.stride("pp") % c.ep == 0
        if "zero" not in pins:
            assert c.zero in enumerator.ZERO_STAGES
        assert c.order[0] == "tp" and sorted(c.order) == ["cp", "dp", "pp", "tp"]
        for k, v in pins.items():
            if k in ("tp", "pp", "dp", "cp", "ep", "vp", "microbatch", "zero"):
                assert getattr(c, k) == int(v)
            if k == "recompute":
                assert c.recompute == v
            if k == "microbatches":
                assert c.microbatches == int(v)


def _pipeline_stride(tp: int, perm: tuple[str, ...], sizes: dict[str, int]) -> int:
    """Ranks between pipeline neighbours: tp and the placed dimensions inside pp (all when pp is one)."""
    inside = perm[: perm.index("pp")] if "pp" in perm else perm
    return tp * math.prod(sizes[d] for d in inside)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs())
def test_orders_are_distinct_and_size_one_dimensions_go_last(p):
    job = designs.job(p)
    strides = defaultdict(set)
    for c in enumerator.configurations(job):
        sizes = {d: getattr(c, d) for d in ("cp", "dp", "pp")}
        big = [d for d in c.order[1:] if sizes[d] > 1]
        assert list(c.order[1 : 1 + len(big)]) == big        # the dimensions above one come first
        signature = tuple(c.stride(d) for d in ("tp", "cp", "dp", "pp") if getattr(c, d) > 1)
        layout = (c.tp, c.pp, c.dp, c.cp, c.ep, c.microbatch, c.vp, c.recompute, c.zero, c.power_cap)
        assert (signature, c.order) not in strides[layout]
        strides[layout].add((signature, c.order))
    for layout, seen in strides.items():
        tp, pp, dp, cp, ep = layout[:5]
        sizes_of = {"cp": cp, "dp": dp, "pp": pp}
        placed = sum(1 for s in (pp, cp, dp) if s > 1)
        # every order of the placed dimensions whose stages hold whole expert groups
        wanted = sum(1 for perm in itertools.permutations([d for d in ("cp", "dp", "pp") if sizes_of[d] > 1])
                     if _pipeline_stride(tp, perm, sizes_of) % ep == 0)
        assert len(seen) == wanted and (ep > 1 or wanted == math.factorial(placed))
        # different orders give different strides for some dimension above one
        assert len({sig for sig, _ in seen}) == len(seen)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs())
def test_every_replica_count_that_leaves_a_valid_configuration_is_searched(p):
    # The GPU count is searched in whole replicas: every dp up to the job's GPUs that
    # splits the batch (and folds the experts) is in the space, unless dp is pinned.
    job = designs.job(p)
    space = enumerator.space(job)
    seen: dict[tuple, set[int]] = {}
    for c in enumerator.configurations(job):
        seen.setdefault((c.tp, c.pp, c.cp, c.ep), set()).add(c.dp)
    for tp in space.tps:
        for pp in space.pps:
            for cp in space.cps:
                for ep in space.eps:
                    if tp * pp * cp > space.gpus:
                        continue
                    valid = {dp for dp in range(1, space.gpus // (tp * pp * cp) + 1)
                             if job.batch % dp == 0 and (tp * cp * dp) % ep == 0
                             and enumerator.inner_choices(job, pp, dp)}
                    if "dp" in job.pinned:
                        valid &= {int(job.pinned["dp"])}
                    assert seen.get((tp, pp, cp, ep), set()) == valid


def test_stage_two_is_left_out_unless_pinned():
    assert 2 not in enumerator.ZERO_STAGES and set(enumerator.ZERO_STAGES) == {0, 1, 3}


def test_orders_equal_their_definition_for_every_size():
    """`orders` shares its cache between sizes that place alike: it still returns, for every
    size, each order of the dimensions above one whose pipeline stride holds whole expert groups."""
    sizes = (1, 2, 3, 4, 6, 8, 61, 64)
    for tp, pp, dp, cp, ep in itertools.product((1, 2, 8), sizes, sizes, (1, 2, 3), (1, 2, 3, 8, 64)):
        size = {"cp": cp, "dp": dp, "pp": pp}
        placed = [d for d in ("cp", "dp", "pp") if size[d] > 1]
        rest = tuple(d for d in ("cp", "dp", "pp") if size[d] == 1)
        wanted = tuple(("tp", *perm, *rest) for perm in itertools.permutations(placed)
                       if _pipeline_stride(tp, (*perm, *rest), size) % ep == 0)
        assert enumerator.orders(tp, pp, dp, cp, ep) == wanted, (tp, pp, dp, cp, ep)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.integers(1, 128), st.integers(1, 32), st.integers(1, 6))
def test_a_pinned_vp_allows_what_the_unpinned_space_holds(layers, pp, vp):
    """Pinning vp to a value the unpinned space holds keeps it: one stage a rank needs no equal
    chunks (DeepSeek-V3's 61 layers on pp = 16 with vp = 1 pinned were once refused, though
    unpinned they planned at vp = 1)."""
    unpinned = enumerator._vp_candidates(None, None, layers, pp)
    if vp in unpinned:
        assert enumerator._vp_candidates(vp, None, layers, pp) == (vp,)
    assert enumerator._vp_candidates(1, None, 61, 16) == (1,)


@pytest.mark.parametrize("stack, fields, distributed", [
    ("megatron_core", "optimizer_state = bf16", True),     # Megatron's precision-aware optimizer asserts it
    ("nemo", "optimizer_state = bf16  master_weights = none", True),   # NeMo 1.0: Apex's distributed_fused_adam only
    ("nemo", "main_grads = bf16", True),
    ("fsdp", "optimizer_state = bf16", False),              # AdamW at a bf16-stored model's dtype, any stage
    ("nemo", "", False),
])
def test_a_narrower_optimizer_searches_only_the_stages_its_stack_narrows_in(stack, fields, distributed):
    """What compiler/rules/optimizer.py refuses pinned (ZeRO 0 beside a state the stack narrows only in a
    distributed optimizer), the search does not pick unpinned."""
    from gclc.compiler.driver import check_text
    from gclc.model.job import train_job

    path = Path(__file__).parents[2] / "data" / "dense_variants.gcl"
    text = path.read_text().replace("software  = fsdp", f"software  = {stack}\n  {fields}").replace(
        "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }",
        "parallelism { tp = 1 pp = 1 }")
    space = enumerator.space(train_job(check_text(text, str(path)).design))
    assert (0 not in space.zeros) == distributed and set(space.zeros) >= {1, 3}


def test_the_problem_names_every_public_definition_and_re_export():
    """enumerate.py defines the problem in one place (its docstring): `__all__` holds each of its public
    definitions and each name it re-exports from limits.py and operating.py, and nothing else."""
    import ast

    tree = ast.parse(Path(enumerator.__file__).read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1
                and n.module in ("limits", "operating") for a in n.names}
    assert set(enumerator.__all__) == {d for d in defined if not d.startswith("_")}
    assert len(enumerator.__all__) == len(set(enumerator.__all__))
