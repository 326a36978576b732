"""The laws of the compiler over generated designs, written with the public `gclc.testing`
strategies: round trips, determinism, unit algebra, monotonicity, conservation and the
optimizer's optimality against the exhaustive enumerator.

A failure prints the minimal `.gcl` design that breaks the law (hypothesis shrinks the
generated specs field by field). Plan-heavy laws run a third of the profile's examples.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.compiler.ir_json import from_json, graph_json
from gclc.compiler.lower import lower
from gclc.compiler.metrics import facility_power, power_breakdown
from gclc.model.train.workload import layer_forward
from gclc.dsl import parse
from gclc.dsl.format import format_text
from gclc.solver.train import enumerate as enumerator
from gclc.testing import designs, sources

# Plans cost tens of milliseconds each; laws that plan twice run a third of the examples.
heavy = settings(max_examples=max(10, settings.default.max_examples // 3))
EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "dgx_h100_superpod.gcl")
REL = 1e-9


def throughput(plan) -> float:
    return plan.best.tokens_per_s if plan.best is not None else 0.0


def scaled(percent: int):
    """A field value `percent` % of the old one, written as GCL arithmetic (exact)."""
    return lambda old: f"({old}) * {percent} / 100"


# ================================================================= round trips


@given(designs(heterogeneous=None, params=True))
def test_generated_sources_are_canonical_and_parse_to_their_spec(d):
    assert format_text(d.text) == d.text
    assert parse(d.text) == d.spec.module()


@given(sources(heterogeneous=None))
def test_formatting_a_generated_source_keeps_its_tree(text):
    assert parse(format_text(text)) == parse(text)


@given(designs(heterogeneous=None, job=False))
def test_ir_json_round_trips(d):
    text = graph_json(d.graph)
    assert from_json(text) == d.graph
    assert graph_json(from_json(text)) == text


# ================================================================= determinism


@given(designs(heterogeneous=None))
def test_checking_the_same_text_twice_gives_equal_results(d):
    first = check_file(d.path, {}, d.text)
    second = check_file(d.path, {}, d.text)
    assert first.diagnostics == second.diagnostics
    assert first.design == second.design
    assert graph_json(d.graph) == graph_json(d.with_params({}).graph)


@heavy
@given(designs(heterogeneous=None))
def test_planning_the_same_text_twice_gives_the_same_plan(d):
    again = d.with_params({})  # a fresh copy: checked, lowered and planned anew
    one, two = d.plan(), again.plan()
    assert one.status == two.status
    if one.best is not None:
        assert one.best.config == two.best.config
        assert one.best.step_time == two.best.step_time


@given(designs(params=True, job=False, heterogeneous=False), st.integers(1, 4))
def test_set_overrides_equal_editing_the_param(d, units):
    edited = d.with_params({"units": units})
    overridden = check_file(d.path, {"units": str(units)}, d.text)
    assert [(x.code, x.summary) for x in overridden.diagnostics] == [(x.code, x.summary) for x in edited.diagnostics]
    assert overridden.design == edited.result.design
    if overridden.design is not None:  # more units may outgrow the fabric: an error either way
        assert lower(overridden.design) == edited.graph


# ================================================================= unit algebra


@given(designs(heterogeneous=None, job=False))
def test_numbers_reach_the_ir_in_si_units_exactly(d):
    for spec, partition in zip(d.spec.partitions, d.graph.partitions):
        chip, acc = spec.node.chip, partition.node.accelerator
        assert acc.hbm_capacity == chip.hbm_gb * 10**9
        assert acc.hbm_bandwidth == chip.hbm_gbps * 10**9
        assert acc.peak_of("bf16") == chip.bf16_tflops * 10**12
        assert acc.tdp == chip.tdp_w and acc.idle == chip.idle_w
        assert partition.gpus == spec.gpus


@given(designs(heterogeneous=None, job=False), st.data())
def test_equivalent_units_give_the_same_graph(d, data):
    chip = data.draw(st.sampled_from([p.node.chip for p in d.spec.partitions]))
    rewrites = {
        f"{chip.name}.hbm.capacity": f"{chip.hbm_gb * 1000} MB",
        f"{chip.name}.hbm.bandwidth": f"{chip.hbm_gbps * 8} Gb/s",
        f"{chip.name}.peak.bf16": f"{Fraction(chip.bf16_tflops, 1000)} * 1 PFLOPS",
        f"{chip.name}.power.tdp": f"{Fraction(chip.tdp_w, 1000)} * 1 kW",
    }
    chosen = data.draw(st.lists(st.sampled_from(sorted(rewrites)), min_size=1, unique=True))
    assert d.with_fields({k: rewrites[k] for k in chosen}).graph == d.graph


# ================================================================= monotonicity


@heavy
@given(designs(heterogeneous=None), st.integers(101, 400))
def test_more_peak_flops_never_lowers_planned_throughput(d, percent):
    chip = d.spec.target.node.chip
    fields = {f"{chip.name}.peak.bf16": scaled(percent)}
    if chip.fp8_tflops is not None:
        fields[f"{chip.name}.peak.fp8"] = scaled(percent)
    before, after = d.plan(), d.with_fields(fields).plan()
    assert (after.best is None) == (before.best is None)  # peak changes no memory
    assert throughput(after) >= throughput(before) * (1 - REL)


@heavy
@given(designs(heterogeneous=None), st.integers(101, 400))
def test_more_hbm_never_turns_a_plan_infeasible_or_slower(d, percent):
    chip = d.spec.target.node.chip
    before = d.plan()
    after = d.with_fields({f"{chip.name}.hbm.capacity": scaled(percent)}).plan()
    if before.best is not None:
        assert after.best is not None
    assert throughput(after) >= throughput(before) * (1 - REL)


@heavy
@given(designs(heterogeneous=None), st.integers(101, 400))
def test_more_hbm_bandwidth_never_lowers_planned_throughput(d, percent):
    chip = d.spec.target.node.chip
    before, after = d.plan(), d.with_fields({f"{chip.name}.hbm.bandwidth": scaled(percent)}).plan()
    assert throughput(after) >= throughput(before) * (1 - REL)


@heavy
@given(designs(heterogeneous=None), st.integers(101, 400), st.data())
def test_more_link_bandwidth_never_lowers_planned_throughput(d, percent, data):
    node, cluster = d.spec.target.node, d.spec.cluster
    links = [f"{f.name}.bandwidth" for f in (node.scaleup, cluster.scaleout) if f is not None]
    links += [f"{node.nic.name}.bandwidth"] if node.nic is not None and node.nics else []
    assume(links)
    chosen = data.draw(st.lists(st.sampled_from(links), min_size=1, unique=True))
    before, after = d.plan(), d.with_fields({k: scaled(percent) for k in chosen}).plan()
    assert throughput(after) >= throughput(before) * (1 - REL)


@given(designs(heterogeneous=None, job=False, budget=True), st.integers(100, 300))
def test_a_larger_power_budget_never_adds_errors(d, percent):
    assert d.result.design is not None
    larger = d.with_fields({f"{d.spec.name}.power.budget": scaled(percent)})
    assert larger.result.design is not None, larger


@given(designs(heterogeneous=None, job=False, budget=True))
def test_a_budget_below_full_load_is_a_warning_to_plan_under(d):
    short = d.with_fields({f"{d.spec.name}.power.budget": f"{math.floor(facility_power(d.graph) * 0.99)} W"})
    assert "power-budget" in {x.code for x in short.diagnostics if not x.is_error}


@heavy
@given(designs(heterogeneous=None), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_larger_facility_budget_never_lowers_power_constrained_throughput(d, a, b):
    power = pytest.importorskip("gclc.solver.power.program")
    plan = d.plan()
    assume(plan.best is not None)
    inputs = power.inputs_of(plan)
    low, high = inputs.least_power, inputs.full_power
    small, large = sorted((low + a * (1.2 * high - low), low + b * (1.2 * high - low)))
    one, two = power.solve_power(inputs, small), power.solve_power(inputs, large)
    if one.feasible:
        assert two.feasible
    assert two.tokens_per_s >= one.tokens_per_s * (1 - 1e-5)


@settings(max_examples=max(5, settings.default.max_examples // 6))
@given(designs(like=EXAMPLE, vary={"sus": range(1, 5), "H100_SXM.power.tdp": ("300 W", "700 W")}),
       st.integers(1, 200))
def test_a_higher_tdp_never_lowers_facility_power_of_the_superpod(d, extra):
    hotter = d.with_fields({"H100_SXM_varied.power.tdp": lambda old: f"{old} + {extra} W"})
    assert facility_power(hotter.graph) >= facility_power(d.graph)


# ================================================================= conservation


@given(designs(heterogeneous=None, job=False))
def test_power_rows_sum_to_the_it_load(d):
    power_rows_sum_to_the_it_load(d.graph)


@settings(max_examples=max(5, settings.default.max_examples // 6))
@given(designs(like=EXAMPLE, vary={"sus": range(1, 5), "facility_pue": (1.0, 1.4)}))
def test_power_rows_sum_to_the_it_load_on_a_varied_example(d):
    power_rows_sum_to_the_it_load(d.graph)


def power_rows_sum_to_the_it_load(graph):
    rows = power_breakdown(graph)
    by_key = {r.key: r.value for r in rows}
    parts = rows[: [r.key for r in rows].index("power.it")]
    assert math.fsum(r.value for r in parts) == pytest.approx(by_key["power.it"], rel=1e-12)
    assert by_key["power.accelerators"] == pytest.approx(
        sum(p.gpus * p.node.accelerator.tdp for p in graph.partitions), rel=1e-12)
    assert by_key["power.facility"] == pytest.approx(by_key["power.it"] * graph.pue, rel=1e-12)
    assert by_key["power.cooling"] + by_key["power.it"] == pytest.approx(by_key["power.facility"], rel=1e-12)


def matmul_flops_per_token(spec) -> float:
    """6 N per token: N the parameters every token multiplies by (active experts, the
    output projection; not norms, and not the input embedding, which is a lookup)."""
    shape = spec.shape()
    norms = 2 * shape.hidden * shape.layers + shape.hidden
    lookup = 0 if shape.tied_embeddings else shape.vocab * shape.hidden
    return 6 * (shape.active_params - norms - lookup)


@heavy
@given(designs(heterogeneous=None))
def test_flops_per_step_are_6_n_tokens_plus_attention(d):
    spec, job = d.spec.model, d.job
    assert job.shape == spec.shape()  # the compiler reads the model as written
    attention = 12 * spec.layers * job.seq * spec.heads * spec.head_dim
    per_token = matmul_flops_per_token(spec) + attention
    assert job.shape.model_flops_per_token(job.seq) == per_token
    plan = d.plan()
    assume(plan.best is not None)
    e = plan.best
    tokens = e.config.batch * e.config.seq
    assert e.model_flops_per_gpu * e.config.gpus * e.step_time == pytest.approx(per_token * tokens, rel=1e-9)


@given(designs(heterogeneous=None, arch="dense"), st.data())
def test_a_layers_gemms_split_its_flops_exactly_over_tp_and_cp(d, data):
    job = d.job
    configs = list(enumerator.configurations(job))
    assume(configs)
    cfg = data.draw(st.sampled_from(configs))
    shape = job.shape
    tokens = cfg.microbatch * cfg.seq / cfg.cp
    ops = layer_forward(shape, cfg, False)
    gemms = sum(op.flops for op in ops if op.kind == "gemm")
    attention_core = 4 * tokens * cfg.seq * shape.heads / cfg.tp * shape.head_dim
    expected = tokens / cfg.tp * (2 * (shape.attention_params + shape.dense_mlp_params)
                                  + 4 * cfg.seq * shape.heads * shape.head_dim)
    assert gemms + attention_core == pytest.approx(expected, rel=1e-12)


@heavy
@given(designs(heterogeneous=None))
def test_a_jobs_power_never_exceeds_the_clusters_facility_power(d):
    plan = d.plan()
    assume(plan.best is not None)
    assert plan.power.total <= facility_power(d.job.graph) * (1 + REL)


# ================================================================= optimality


@heavy
@given(designs(heterogeneous=None, pins=True), st.sampled_from(["throughput", "energy"]))
def test_the_plan_is_the_enumerators_best(d, objective):
    job = d.job
    plan = d.plan(objective)
    oracle, _ = enumerator.best(job, objective)
    assert (plan.best is None) == (oracle is None)
    if oracle is not None:
        value = enumerator.objective_value(job, objective, plan.best)
        assert value == pytest.approx(enumerator.objective_value(job, objective, oracle), rel=1e-12)
        assert enumerator.admissible(job, enumerator.limits(job), plan.best)


@heavy
@given(designs(heterogeneous=None))
def test_the_plan_keeps_the_jobs_memory_limit(d):
    plan = d.plan()
    assume(plan.best is not None)
    limit = d.spec.memory_percent
    share = 1.0 if limit is None else limit / 100
    assert plan.best.memory.total <= share * plan.best.hbm * (1 + REL)


# ================================================================= heterogeneous jobs


@settings(max_examples=max(8, settings.default.max_examples // 6))
@given(designs(heterogeneous=True, spread=True, cluster={"partitions": 2}))
def test_adding_a_partition_never_lowers_a_heterogeneous_jobs_throughput(d):
    """`solver.split.plan` may always leave a partition out, so one more never hurts."""
    cluster = d.spec.cluster
    names = [f"{cluster.name}.{p}" for p in d.spec.partition]
    fewer = d.with_fields({"job.on": f"[{', '.join(names[:-1])}]"})
    before, after = fewer.hetero_plan(), d.hetero_plan()
    if before.best is not None:
        assert after.best is not None
    assert after.tokens_per_s >= before.tokens_per_s * (1 - REL)
