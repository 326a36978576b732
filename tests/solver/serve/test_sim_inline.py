"""Quiet decode steps run inline (solver/serve/sim.py `decode_on`): a run with them is the run
that takes one event per step, to the last bit, whatever the engine, the cache, the arrivals
and the lengths; and most steps of a long decode do run inline (the speed it exists for)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import Engine, ServeConfig, replica
from gclc.solver.serve import sim as sim_module
from gclc.solver.serve.sim import simulate
from gclc.testing.serve_sim import PARTITION, SHAPE, pool as make_pool

engines = st.builds(
    Engine, block=st.sampled_from([16, 64]), chunk=st.sampled_from([256, 2048]), mixed=st.booleans(),
    scheduler_steps=st.sampled_from([1, 4]), preemption=st.sampled_from(["recompute", "swap", "reserve"]),
    draft=st.sampled_from([0, 3]), acceptance=st.sampled_from([0.7, 1.0]), eager_op_s=st.sampled_from([0.0, 5e-6]),
    step_s=st.sampled_from([0.0, 2e-3]), overlap=st.booleans(), graph_batch=st.sampled_from([0, 8]),
    graph_pad=st.sampled_from([0, 8]),     prefix_share=st.sampled_from([0.0, 0.2]))
requests = st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(1, 3000), st.integers(1, 600)), min_size=1, max_size=40)


def _stepwise(*args, **kwargs):
    """The run with one event per step: `decode_on` runs no step inline."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_module._Simulation, "decode_on", lambda self, server, now, time, decoding: (now, time))
        return simulate(*args, **kwargs)


@settings(deadline=None)
@given(engines, st.sampled_from([4, 64]), st.sampled_from([0.002, 0.01, 1.0]), st.integers(1, 3), requests,
       st.booleans(), st.sampled_from([None, "go on", "stop"]), st.sampled_from([0, 1, 2]))
def test_inline_steps_run_as_the_events_would(engine, batch, cache, count, drawn, at_once, stop, prefillers):
    demand = tuple(sorted((Request(0.0 if at_once else t, p, o) for t, p, o in drawn), key=lambda q: q.arrival))
    pool = make_pool(engine, batch, cache, count)
    # disaggregated: a prefill pool hands each prompt's cache over after a transfer
    prefill = make_pool(engine, batch, 1.0, prefillers) if prefillers else None
    transfer = (lambda prompt: 1e-6 * prompt) if prefillers else None
    # a run that may stop: tight bounds, so that some break while requests wait or decode
    slo = {"ttft.p99": 0.02, "tpot.p90": 0.004} if stop else None
    ask = None if stop is None else (lambda missed: stop == "stop")
    assert simulate(demand, pool, prefill, transfer, slo=slo, warmup_s=0.0, stop=ask) == \
        _stepwise(demand, pool, prefill, transfer, slo=slo, warmup_s=0.0, stop=ask)


def test_a_long_decode_runs_mostly_inline():
    demand = tuple(Request(0.0, 512, 2000) for _ in range(8))
    pool = make_pool(Engine(), 64, 1.0, 1)
    steps = []
    original = sim_module._Simulation.push
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_module._Simulation, "push", lambda self, *a: steps.append(a) or original(self, *a))
        inline = simulate(demand, pool, warmup_s=0.0)
    assert inline == _stepwise(demand, pool, warmup_s=0.0)
    assert 0 < len(steps) < 100       # 2,000 decode steps, a handful of events


def test_a_disaggregated_run_decodes_inline_between_handoffs():
    """A prefill pool hands sequences to the decoders at its own events: a decoder's steps run
    inline only up to the next of them, and once the last is handed over, to the end."""
    demand = tuple(Request(0.0, 512, 2000) for _ in range(4))
    pool, prefill = make_pool(Engine(), 64, 1.0, 1), make_pool(Engine(), 64, 1.0, 1)
    steps = []
    original = sim_module._Simulation.push
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_module._Simulation, "push", lambda self, *a: steps.append(a) or original(self, *a))
        inline = simulate(demand, pool, prefill, lambda prompt: 1e-3, warmup_s=0.0)
    assert inline == _stepwise(demand, pool, prefill, lambda prompt: 1e-3, warmup_s=0.0)
    assert 0 < len(steps) < 100


def test_the_decode_step_closure_is_the_iteration():
    for engine in (Engine(), Engine(draft=3, acceptance=0.7, eager_op_s=5e-6, step_s=1e-3, overlap=False)):
        r = replica(SHAPE, attrs.evolve(ServeConfig(1, 64, "fp8"), pp=1), PARTITION, engine)
        for decoding in (1, 7, 64):
            seconds = r.decode_steps(decoding)
            for kv in (0.0, 1.5, 12345.0, 3e6):
                assert seconds(kv) == r.iteration(decoding, kv, 0, 0, 0, layer_mean=True)


# the same chip with a stated L2 bandwidth: a cache read partly from L2 (model/cache.py two_level)
L2 = attrs.evolve(PARTITION, node=attrs.evolve(PARTITION.node, accelerator=attrs.evolve(
    PARTITION.node.accelerator, l2_bandwidth=12e12)))


@settings(deadline=None)
@given(engines, st.sampled_from([PARTITION, L2]), st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 4)]),
       st.integers(1, 300), st.lists(st.floats(0.0, 1e7), min_size=1, max_size=5))
def test_the_decode_step_closure_is_the_iteration_for_every_engine(engine, partition, layout, decoding, reads):
    """`Replica.decode_steps` unfolds the iteration's cost; each step's time is the iteration's to the last bit."""
    tp, pp = layout
    r = replica(SHAPE, attrs.evolve(ServeConfig(tp, 64, "fp8"), pp=pp), partition, engine)
    assert (r._terms()[-1] is not None) == (partition is L2)      # both of the cache read's forms are met
    seconds = r.decode_steps(decoding)
    for kv in reads:
        assert seconds(kv) == r.iteration(decoding, kv, 0, 0, 0, layer_mean=True)
