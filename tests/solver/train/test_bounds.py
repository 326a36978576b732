"""The search's lower bounds never exceed the true objective of any configuration in the
part of the space they cover, and the structure of the cost model they rest on holds (see
solver/train/search.py's docstring): if a recalibration breaks one of these, the search could
return a wrong optimum, so it fails here first."""

import importlib.util
import itertools
import math
from collections import defaultdict
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.model.train.memory import memory
from gclc.model.power import job_power
from gclc.solver.train import enumerate as enumerator
from gclc.solver.train.search import compute_monotone, search

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

# the search is exact whatever the clock grid: a coarse one keeps the enumerator quick (tests/solver/conftest.py)
pytestmark = pytest.mark.usefixtures("coarse_clock_steps")

EXAMPLES = max(15, settings.default.max_examples // 2)
LAYOUT = ("tp", "pp", "dp", "cp", "ep")
RECOMPUTE = enumerator.RECOMPUTE


def below(bound: float, value: float) -> bool:
    return bound <= value + 1e-9 * abs(value)


def same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def key(cfg, *fields):
    return tuple(getattr(cfg, f) for f in fields)


def everything(job, objective="throughput"):
    return list(enumerator.evaluate_all(job, objective))


def _check_every_bound(job, objective):
    audits = []
    search(job, objective, top=1, audit=lambda bound, fields: audits.append((bound, fields)))
    groups = defaultdict(list)
    limit = enumerator.limits(job).memory
    for e in everything(job, objective):   # every clock step the objective searches
        groups[key(e.config, *LAYOUT)].append((enumerator.objective_value(job, objective, e), e.config,
                                               e.memory.total <= limit))
    for bound, fields in audits:
        members = groups[tuple(fields[f] for f in LAYOUT)]
        covered = 0
        for value, cfg, fits in members:
            mb = fields["microbatch"]
            if cfg.microbatch not in (mb if isinstance(mb, tuple) else (mb,)):
                continue
            if fields.get("fitting") and not fits:    # a bound raised by what fits covers only that
                continue
            if any(getattr(cfg, f) != fields[f] for f in ("order", "zero", "recompute", "vp", "power_cap",
                                                          *enumerator.SEARCHABLE) if f in fields):
                continue
            covered += 1
            assert below(bound, value), (bound, value, fields, cfg)
        assert covered or fields.get("fitting"), fields
    return audits


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, variants=None), st.sampled_from(enumerator.OBJECTIVES))
def test_every_bound_is_below_every_configuration_it_covers(p, objective):
    _check_every_bound(designs.job(p), objective)


@settings(max_examples=max(8, EXAMPLES // 3), deadline=None)
@given(designs.designs(limits=False, variants=None, search=True, max_gpus=8), st.sampled_from(enumerator.OBJECTIVES))
def test_every_bound_holds_over_the_choices_a_job_asks_to_search(p, objective):
    _check_every_bound(designs.job(p), objective)


# Under the step objectives the layouts of one tp x pp x cp x ep wait as one chain, bounded
# by the least compute per sequence over the micro-batches their own bounds read (search.py
# `push_chain`): for MoE layouts those differ per replica count. The chain's bound holds for
# every configuration of every layout in it, and the optimum is the enumerator's.
@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, variants=None, moe=True), st.sampled_from(("throughput", "time")))
def test_chained_layout_bounds_hold_and_keep_the_optimum(p, objective):
    job = designs.job(p)
    _check_every_bound(job, objective)
    best, _ = enumerator.best(job, objective)
    result = search(job, objective, top=0)
    assert (result.best is None) == (best is None)
    if best is not None:
        assert same(result.value, enumerator.objective_value(job, objective, best))


# The counterexample CI's derandomized examples found (issue 11's note): the bound on a
# layout of fewer replicas than the most (the GPU count is searched) was the energy bound,
# positive, under the goodput objective, whose values are negative (-tokens/s x share).
GOODPUT_COUNTEREXAMPLE = {"hbm": 6, "up": 100, "inr": "true", "per_node": 2, "layers": 2, "hidden": 128, "heads": 4,
                          "kv_heads": 1, "ffn": 256, "vocab": 512, "seq": 256, "mlp": "gelu", "batch": 4,
                          "precision": "bf16", "stack": "megatron_core", "nodes": 1, "pins": {}}


@pytest.mark.parametrize("objective", enumerator.OBJECTIVES)
def test_replica_count_bounds_hold_on_the_counterexample(objective):
    audits = _check_every_bound(designs.job(GOODPUT_COUNTEREXAMPLE), objective)
    # the layouts of fewer replicas were bounded (else this would test nothing)
    assert any(fields["dp"] == 1 and isinstance(fields["microbatch"], tuple) for _, fields in audits)


# ----------------------------------------------------------------- the model's structure


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, variants=None))
def test_the_step_is_the_sum_of_non_negative_terms(p):
    for e in everything(designs.job(p)):
        terms = [v for _, v in e.breakdown.rows()]
        assert all(t >= 0 for t in terms) and same(sum(terms), e.step_time)


def _groups(estimates, *fields):
    out = defaultdict(list)
    for e in estimates:
        out[key(e.config, *fields)].append(e)
    return out.values()


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, variants=None))
def test_what_each_term_depends_on(p):
    """Compute, recompute and TP: not on ZeRO, vp or order. Optimizer: only on the layout and
    ZeRO. CP and EP: not on recompute, ZeRO or vp, EP not on the order either; PP: not on
    recompute or ZeRO. DP: not on vp."""
    es = everything(designs.job(p))
    for group in _groups(es, *LAYOUT, "microbatch", "recompute"):
        for term in ("compute", "recompute", "tp"):
            assert all(same(getattr(e.breakdown, term), getattr(group[0].breakdown, term)) for e in group), term
    for group in _groups(es, *LAYOUT, "zero"):
        assert all(same(e.breakdown.optimizer, group[0].breakdown.optimizer) for e in group)
    for group in _groups(es, *LAYOUT, "microbatch", "order", "vp"):
        for term in ("cp", "ep", "pp"):
            assert all(same(getattr(e.breakdown, term), getattr(group[0].breakdown, term)) for e in group), term
    for group in _groups(es, *LAYOUT, "microbatch", "order"):
        for term in ("cp", "ep"):
            assert all(same(getattr(e.breakdown, term), getattr(group[0].breakdown, term)) for e in group), term
    for group in _groups(es, *LAYOUT, "microbatch"):     # expert groups take consecutive ranks in every order
        assert all(same(e.breakdown.ep, group[0].breakdown.ep) for e in group)
    for group in _groups(es, *LAYOUT, "microbatch", "order", "recompute", "zero"):
        assert all(same(e.breakdown.dp, group[0].breakdown.dp) for e in group)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, variants=None))
def test_the_orderings_the_bounds_use(p):
    """No recompute has the least compute + recompute + TP; more recompute never adds DP time;
    a higher ZeRO stage never adds optimizer time; more virtual stages never cut PP time;
    the bubble is at least (pp - 1) / vp of one micro-batch's work on a stage but the output
    layer's."""
    from gclc.model.train.step import output_layer_time

    job = designs.job(p)
    es = everything(job)
    fixed = lambda e: e.breakdown.compute + e.breakdown.recompute + e.breakdown.tp  # noqa: E731
    for group in _groups(es, *LAYOUT, "microbatch", "zero", "vp", "order"):
        by = {e.config.recompute: e for e in group}
        if "none" in by:
            assert all(fixed(by["none"]) <= fixed(e) * (1 + 1e-12) for e in group)
        for lo, hi in itertools.combinations([r for r in RECOMPUTE if r in by], 2):
            assert by[hi].breakdown.dp <= by[lo].breakdown.dp * (1 + 1e-12) + 1e-15
    for group in _groups(es, *LAYOUT, "microbatch", "recompute", "vp", "order"):
        by = {e.config.zero: e for e in group}
        for lo, hi in itertools.combinations(sorted(by), 2):
            assert by[hi].breakdown.optimizer <= by[lo].breakdown.optimizer * (1 + 1e-12)
    for group in _groups(es, *LAYOUT, "microbatch", "recompute", "zero", "order"):
        by = {e.config.vp: e for e in group}
        for lo, hi in itertools.combinations(sorted(by), 2):
            assert by[lo].breakdown.pp <= by[hi].breakdown.pp * (1 + 1e-12)
    for e in es:
        b, c = e.breakdown, e.config
        if c.pp > 1:
            head = output_layer_time(job.shape, c, job.partition)
            share = (c.pp - 1) / c.vp * ((fixed(e) + b.cp + b.ep + b.pp) / c.microbatches - head)
            assert share <= b.bubble * (1 + 1e-9)
            # and the output layer's time per micro-batch grows with the micro-batch (the search
            # bounds a layout's micro-batches with the largest's)
            if c.microbatch > 1:
                smaller = attrs.evolve(c, microbatch=c.microbatch // 2)
                assert output_layer_time(job.shape, smaller, job.partition) <= head * (1 + 1e-12)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False))
def test_compute_per_step_never_grows_with_the_micro_batch(p):
    """Where the search bounds a layout by its largest micro-batch (search.compute_monotone)."""
    job = designs.job(p)
    for group in _groups(everything(job), *LAYOUT, "recompute", "zero", "vp", "order"):
        c = group[0].config
        if not compute_monotone(job, c.tp, c.cp, c.ep, [e.config.microbatch for e in group]):
            continue   # the search does not rely on it here
        ordered = sorted(group, key=lambda e: e.config.microbatch)
        for small, large in zip(ordered, ordered[1:]):
            assert large.breakdown.compute <= small.breakdown.compute * (1 + 1e-9)


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False, variants=None))
def test_memory_monotonicity_the_pruning_uses(p):
    """Memory does not depend on the placement order and never grows with more recompute,
    a higher ZeRO stage or a smaller micro-batch."""
    job = designs.job(p)
    configs = list(enumerator.configurations(job))
    need = {c: memory(job.shape, c).total for c in configs}
    for group in _groups_cfg(configs, *LAYOUT, "microbatch", "recompute", "zero", "vp"):
        assert all(same(need[c], need[group[0]]) for c in group)
    for group in _groups_cfg(configs, *LAYOUT, "microbatch", "zero", "vp", "order"):
        by = {c.recompute: need[c] for c in group}
        levels = [r for r in RECOMPUTE if r in by]
        assert all(by[hi] <= by[lo] * (1 + 1e-12) for lo, hi in zip(levels, levels[1:]))
    for group in _groups_cfg(configs, *LAYOUT, "microbatch", "recompute", "vp", "order"):
        by = {c.zero: need[c] for c in group}
        assert all(by[hi] <= by[lo] * (1 + 1e-12) for lo, hi in itertools.combinations(sorted(by), 2))
    for group in _groups_cfg(configs, *LAYOUT, "recompute", "zero", "vp", "order"):
        by = {c.microbatch: need[c] for c in group}
        assert all(by[lo] <= by[hi] * (1 + 1e-12) for lo, hi in itertools.combinations(sorted(by), 2))


def _groups_cfg(configs, *fields):
    out = defaultdict(list)
    for c in configs:
        out[key(c, *fields)].append(c)
    return out.values()


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(limits=False), st.floats(0.0, 1.0))
def test_job_power_is_affine_in_the_busy_share(p, busy):
    job = designs.job(p)
    for gpus in {1, job.gpus, max(1, job.gpus // 2)}:
        p0, p1 = (job_power(job.graph, job.partition, gpus, b).total for b in (0.0, 1.0))
        value = job_power(job.graph, job.partition, gpus, busy).total
        assert math.isclose(value, p0 + (p1 - p0) * busy, rel_tol=1e-9)


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None)
@given(designs.designs(limits=False, variants=None))
def test_the_searchs_shortcuts_equal_the_model(p):
    """`memory_grid` gives `memory(...).total` to the last bit for every recompute, ZeRO stage
    and vp (with hybrid sharding, recompute modules and intervals, offload pinned beside
    them), `compute_time` the estimate's compute term (windowed and global layers blended,
    parallel blocks) and its model FLOPs over peak, and `moe_overhead_time` never exceeds EP."""

    from gclc.model.train.memory_grid import memory_grid
    from gclc.model.train.step import compute_time, moe_overhead_time

    job = designs.job(p)
    for e in itertools.islice(everything(job), 400):
        c = e.config
        grid = memory_grid(job.shape, c, RECOMPUTE, (0, 1, 2, 3), (1, 2, 4))
        assert len(grid) == len(RECOMPUTE) * 4 * 3
        for (rc, z, vp), total in grid.items():
            assert total == memory(job.shape, attrs.evolve(c, recompute=rc, zero=z, vp=vp)).total
        compute, flops = compute_time(job.shape, c, job.partition)
        assert compute == e.breakdown.compute
        assert same(flops, e.mfu * e.step_time * c.gpus)
        assert moe_overhead_time(job.shape, c) <= e.breakdown.ep * (1 + 1e-12)


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None)
@given(designs.designs(limits=False, variants=None))
def test_the_searchs_shortcuts_across_microbatches_and_depths_equal_the_model(p):
    """What the search reads off one configuration for others, to the last bit: memory at
    another micro-batch or ZeRO stage (`memory_grid`'s, `least_memory_by_microbatch`'s,
    `least_memory_by_zero`'s; `fitting_microbatches`'s count), and the compute term, model FLOPs and MoE overhead at another pipeline depth (`compute_by_depth`)."""

    from gclc.model.train.memory_grid import (fitting_microbatches, least_memory_by_microbatch, least_memory_by_zero,
                                              memory_grid)
    from gclc.model.train.step import compute_by_depth, compute_time, moe_overhead_time

    job = designs.job(p)
    mbs, pps = (1, 2, 3, 4, 8), (1, 2, 3, 4)
    for e in itertools.islice(everything(job), 200):
        c = e.config
        for mb in mbs:
            other = attrs.evolve(c, microbatch=mb)
            for (rc, z, vp), total in memory_grid(job.shape, c, RECOMPUTE, (1, 3), (1, 2), mb).items():
                assert total == memory(job.shape, attrs.evolve(other, recompute=rc, zero=z, vp=vp)).total
        least = list(least_memory_by_microbatch(job.shape, c, "full", 3, (1, 2), mbs))
        assert least == [min(memory(job.shape, attrs.evolve(c, microbatch=mb, recompute="full", zero=3, vp=vp)).total
                             for vp in (1, 2)) for mb in mbs]
        # the bisected count of micro-batches that fit is the linear scan's (where the least
        # memory rises with the micro-batch, as test_memory_monotonicity_the_pruning_uses checks
        # up to rounding)
        limits = [0.0, *least, *[(a + b) / 2 for a, b in zip(least, least[1:])], 2 * least[-1]]
        for limit in limits if least == sorted(least) else ():
            scan = next((i for i, need in enumerate(least) if need > limit), len(mbs))
            assert fitting_microbatches(job.shape, c, "full", 3, (1, 2), mbs, limit) == scan
        for mb in mbs:   # every ZeRO stage at once (the sync bound's memory filter)
            assert least_memory_by_zero(job.shape, c, "selective", (0, 1, 2, 3), (1, 2), mb) == [
                next(least_memory_by_microbatch(job.shape, c, "selective", z, (1, 2), [mb])) for z in (0, 1, 2, 3)]
        for pp, (compute, flops, overhead) in zip(pps, compute_by_depth(job.shape, c, job.partition, pps)):
            deeper = attrs.evolve(c, pp=pp)
            assert (compute, flops) == compute_time(job.shape, deeper, job.partition)
            assert overhead == moe_overhead_time(job.shape, deeper)


@pytest.mark.parametrize("objective", [o for o in enumerator.OBJECTIVES if o != "cost"])   # (no economics here)
def test_the_bounds_carry_the_nodes_fixed_time_per_step(objective):
    """500 ms of host work between steps (the node's `step_overhead`) is in every configuration's
    step: every bound stays below every configuration it covers, and a bound on the step (the
    step objectives') is at least those 500 ms, many times the small job's GPU work."""
    from gclc.solver.train.bounds import SAFETY
    job = designs.job(designs.small(node_extra={"step_overhead": "500 ms"}))
    assert job.partition.node.step_overhead == 0.5
    audits = _check_every_bound(job, objective)
    assert audits
    if objective in ("throughput", "time"):
        assert all(bound >= 0.5 * SAFETY for bound, _ in audits)
        best, _ = enumerator.best(job, objective)
        assert search(job, objective, top=0).value == pytest.approx(enumerator.objective_value(job, objective, best))
