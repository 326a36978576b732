"""The rl planner: its best-first search returns what simulating every point of the space
returns (the exhaustive enumerator is the oracle), for each objective, placement and
algorithm, and the plan says where each pool runs and why."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.rl.job import rl_job
from gclc.solver.rl.exhaustive import exhaustive
from gclc.solver.rl.plan import plan_rl
from gclc.solver.rl.search import Context, search
from gclc.testing.profiles import scaled_examples

SMALL = (Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl").read_text()


# The oracle simulates every point: a smaller space (one node a partition, 32 samples) keeps it quick.
TINY = lambda t: t.replace("2 x DGX_H100", "1 x DGX_H100").replace("2 x DGX_A100", "1 x DGX_A100").replace(  # noqa: E731
    "prompts      = 16", "prompts = 8").replace("samples      = 8", "samples = 4").replace("max_response = 1024",
                                                                                       "max_response = 512")


def design(edit=lambda t: t):
    result = check_text(edit(SMALL), "rl.gcl")
    assert result.design is not None, [d.summary for d in result.diagnostics]
    return result.design["grpo"]


VARIANTS = {
    "as written": lambda t: t,
    "synchronous": lambda t: t.replace("staleness    = 1", "staleness    = 0"),
    "colocated": lambda t: t.replace("staleness    = 1", "placement = colocated"),
    "energy": lambda t: t.replace("staleness    = 1", "staleness = 1  minimize = energy"),
    "ppo": lambda t: t.replace("algorithm    = grpo", "algorithm = ppo  critic = Llama8B"),
    "power bound": lambda t: t.replace("memory <= 90%", "memory <= 90%  power <= 25 kW"),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_the_search_finds_what_the_exhaustive_enumerator_finds(name):
    job = rl_job(design(lambda t: VARIANTS[name](TINY(t))))
    ctx = Context(job)
    found = search(job, 2, ctx)
    searched = ctx.simulated
    every = exhaustive(job, ctx)
    assert found.best and every, found.reasons
    values = [c.value(job.objective) for c in every]
    assert [c.value(job.objective) for c in found.best] == pytest.approx(values[:3], rel=1e-12)
    assert searched < ctx.simulated      # the bounds spared simulations the oracle needed
    if name == "power bound":
        assert all(c.power <= 25e3 for c in found.best)


def test_the_plan_says_where_each_pool_goes_and_why():
    plan = plan_rl(design())
    b = plan.best
    assert plan.status == "optimal" and b.placement == "disaggregated" and b.staleness == 1
    assert {b.generation.layout.partition, b.train.partition} <= {"h100", "a100"}
    whats = [a.what for a in plan.alternatives]
    assert any(w.startswith("colocated on") for w in whats) and "the same pools synchronous (staleness 0)" in whats
    # every alternative is one the search could have chosen, so none is better
    assert all(a.candidate is None or a.candidate.step.step_time >= b.step.step_time * (1 - 1e-12)
               for a in plan.alternatives)
    assert plan.samples == 128 and plan.samples_per_s == pytest.approx(128 / b.step.step_time)


@pytest.mark.parametrize("bound", ["6 GB", "1 GB"])   # 1 GB: the other models' weights alone fill it
def test_an_impossible_memory_bound_is_an_infeasible_plan_with_reasons(bound):
    # (12 GB fitted no layout until the memory model was judged against published peaks, issue 35)
    plan = plan_rl(design(lambda t: t.replace("memory <= 90%", f"memory <= {bound}")))
    assert plan.status == "infeasible" and plan.best is None
    assert any("fits no layout" in r for r in plan.result.reasons), plan.result.reasons


def test_more_gpus_for_the_job_never_slow_its_plan():
    steps = [plan_rl(design(lambda t, n=n: t.replace("memory <= 90%", f"memory <= 90%  gpus <= {n}"))).step_time
             for n in (8, 16, 32)]
    assert all(b <= a for a, b in zip(steps, steps[1:])) and steps[-1] < steps[0], steps


@pytest.mark.parametrize("generate, train", [(None, None), (16, None), (None, 16), (16, 16), (8, 8), (16, 8)])
def test_pools_on_one_partition_take_disjoint_gpus(generate, train):
    """Every point of the space fits: pools apart on one partition hold no more than its GPUs
    together, pinned sizes included (two pinned pools of 8 on one 8-GPU partition were once
    planned there side by side)."""
    from gclc.solver.rl.space import pools

    def pinned(text):
        text = text.replace("engine { max_batch = 64 }", "engine { max_batch = 64 }" +
                            (f"  gpus = {generate}" if generate else ""))
        return text.replace("staleness    = 1", "staleness    = 1" + (f"\n  train {{ gpus = {train} }}" if train else ""))

    job = rl_job(design(pinned))
    size = {q.name: q.gpus for q in job.partitions}
    points = list(pools(job))
    assert points
    for p in points:
        assert p.gen_gpus <= size[p.generate] and p.train_gpus <= size[p.train]
        if p.placement == "disaggregated":
            assert p.gen_gpus + p.train_gpus <= job.gpus
            if p.generate == p.train:
                assert p.gen_gpus + p.train_gpus <= size[p.generate]
    if generate == 16 and train == 16:   # apart, each fills a partition: never both on one
        assert all(p.generate != p.train for p in points if p.placement == "disaggregated")


def test_a_faster_host_link_never_slows_a_planned_colocated_step():
    """The plan's colocated step over host links of 16, 64 and 256 GB/s a GPU (the training pool's
    host copies: model/rl/host.py): never slower with a faster link, and slower with the slowest
    one, whose pinned copies are slower than the PCIe Gen5 node's."""
    def on(link):
        def edit(t):
            # both pools pinned to the partition whose host link varies (colocating on the A100s can
            # win where the H100s' link is slowest, and there the link is not the one varied)
            t = TINY(t).replace("staleness    = 1", "placement = colocated").replace(
                "on           = [Lab.h100, Lab.a100]", "on           = [Lab.h100]")
            t = t.replace("partition h100 { units = 1 x DGX_H100 }", "partition h100 { units = 1 x Host }")
            return t.replace("cluster Lab {", f"node Host extends DGX_H100 {{ host_link = {link} GB/s }}\ncluster Lab {{")
        return plan_rl(design(edit))
    plans = [on(link) for link in (16, 64, 256)]
    steps = [p.step_time for p in plans]
    assert all(p.best is not None and p.best.train.partition == "h100" for p in plans), steps
    assert all(b <= a for a, b in zip(steps, steps[1:])) and steps[-1] < steps[0], steps


EXAMPLE = (Path(__file__).resolve().parents[3] / "examples" / "rl_grpo_70b.gcl").read_text()


@settings(max_examples=scaled_examples(3), deadline=None)
@given(epochs=st.integers(min_value=100, max_value=10**6))
def test_a_training_phase_that_outlasts_generation_costs_no_simulations_of_its_own(epochs):
    """Plan time does not grow with `epochs`: once the training outlasts every overlapped point's
    stream and its batch's latency, which one step off sets the step (model/rl/step.py: 100 epochs on
    the example; 30 outlast the streams alone, and then 7 layouts are simulated), the
    step is the training's, so the search simulates only the layouts it reports (the plan and its
    runners-up): simulated ties come off first. Before, ties at the training's step time were each
    simulated: 17 layouts at epochs = 1000."""
    text = EXAMPLE.replace("minibatches  = 4", f"epochs = {epochs}  minibatches  = 4")
    job = rl_job(check_text(text, "rl.gcl").design["grpo_70b"])
    found = search(job, 3, Context(job))
    assert len(found.best) == 4 and found.simulated <= 4, found.simulated
    for c in found.best:   # each reported step is the training's: it outlasts the stream
        p = c.step.phases
        assert p.offload + p.score + p.train >= p.stream
        assert c.step.step_time == pytest.approx(p.sync + p.offload + p.score + p.train, rel=1e-12)


def test_a_policy_too_large_to_train_says_so_once_a_partition_with_the_gpus_it_needs():
    """A vocabulary of 1e12 makes every training pool infeasible: one reason a partition (there
    were 22 lines, one a pool size), each the training planner's: what does not fit, and how
    many GPUs would hold the model state."""
    plan = plan_rl(design(lambda t: t.replace("vocab = 128256", "vocab = 1e12")))
    reasons = plan.result.reasons
    assert plan.status == "infeasible" and len(reasons) == 2, reasons
    for reason, partition in zip(reasons, ("h100", "a100")):
        assert f"GPUs of {partition}, the largest pool tried there" in reason, reason
        assert "holding the model state takes at least" in reason, reason
