"""The RL stack's calibration (model/rl/stacks.py `Calibration`, applied by solver/rl/pools.py `calibrated`)
keeps the step model's laws: the calibrated stream never exceeds the calibrated makespan; a longer phase
never shortens the calibrated step; asynchronous is never slower than synchronous at the same phases; the
shipped constants only ever add time to the physics; the objective (step time, energy, cost) never falls as
generation takes longer, the rl search's premise."""

from __future__ import annotations

import functools
from pathlib import Path

import attrs
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.rl.stacks import NEMO_RL, STACKS, Calibration
from gclc.model.rl.step import COLOCATED, DISAGGREGATED, Phases, compose
from gclc.solver.rl.plan import plan_rl
from gclc.solver.rl.pools import calibrated, evaluate
from gclc.testing import load_profile

load_profile()

seconds = st.floats(0, 1e4, allow_nan=False, allow_infinity=False)
iterations = st.tuples(st.floats(0, 1e5), st.floats(0, 1e5))
constants = st.builds(Calibration, st.floats(0, 1e-2), st.floats(1, 4), st.floats(1, 4), st.floats(1, 4))
FIELDS = ("generate", "stream", "score", "train", "sync", "offload")


@st.composite
def phase_sets(draw):
    generate = draw(seconds)
    return Phases(generate, draw(st.floats(0, 1)) * generate, draw(seconds), draw(seconds), draw(seconds),
                  draw(seconds))


@given(phase_sets(), iterations, constants)
def test_the_calibrated_stream_never_exceeds_the_calibrated_makespan(p, its, c):
    q = calibrated(p, its, c)
    assert q.stream <= q.generate
    assert all(getattr(q, f) >= getattr(p, f) for f in FIELDS if f != "stream")   # constants >= 1 add time


@given(phase_sets(), iterations, constants, st.sampled_from(FIELDS), st.floats(0, 1e3),
       st.sampled_from(((COLOCATED, 0), (DISAGGREGATED, 0), (DISAGGREGATED, 1), (DISAGGREGATED, 3))))
def test_a_longer_phase_never_shortens_the_calibrated_step(p, its, c, field, more, mode):
    longer = attrs.evolve(p, **{field: getattr(p, field) + more})
    if longer.stream > longer.generate:   # a stream is never over its makespan (solver/rl/generation.py)
        longer = attrs.evolve(longer, generate=longer.stream)
    before = compose(calibrated(p, its, c), *mode).step_time
    after = compose(calibrated(longer, its, c), *mode).step_time
    assert after >= before * (1 - 1e-12)


@given(phase_sets(), iterations, constants, st.integers(1, 8))
def test_asynchronous_is_never_slower_than_synchronous_calibrated(p, its, c, k):
    q = calibrated(p, its, c)
    assert compose(q, DISAGGREGATED, k).step_time <= compose(q, DISAGGREGATED, 0).step_time * (1 + 1e-12)


def test_every_nemo_rl_release_ships_the_fitted_constants_and_they_only_add_time():
    """The constants are ESTIMATEs fitted on benchmarks/data/rl_runs.csv (every NeMo-RL release's rows); each
    adds time to its phase, none removes any (a calibration below the physics would say the hardware runs
    faster than its data sheet)."""
    assert all(s.calibration == NEMO_RL for s in STACKS.values())
    assert NEMO_RL.engine_host_s > 0 and min(NEMO_RL.training, NEMO_RL.sync, NEMO_RL.host_copies) >= 1
    p = Phases(100.0, 60.0, 10.0, 20.0, 5.0, 8.0)
    q = calibrated(p, (4000.0, 900.0), NEMO_RL)
    assert q.generate == p.generate + NEMO_RL.engine_host_s * 4000 and q.train == 20.0 * NEMO_RL.training
    assert calibrated(p, (4000.0, 900.0), Calibration()) == p   # no calibration: the physics


SMALL = (Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl").read_text()
PLACED = {"disaggregated": lambda t: t, "colocated": lambda t: t.replace("staleness    = 1", "placement = colocated"),
          "synchronous": lambda t: t.replace("staleness    = 1", "staleness    = 0")}


@functools.cache
def _planned(variant: str):
    """The small design's planned job and its best point (the stack's shipped calibration applied), on a
    cluster with economics so that a step has a cost."""
    priced = SMALL.replace("scaleout = NDR_FatTree",
                           "scaleout = NDR_FatTree\n  economics { years = 5  energy_price = 0.08 USD/kWh }")   # ASSUMPTION
    result = check_text(PLACED[variant](priced), "rl.gcl")
    assert result.design is not None, [d.summary for d in result.diagnostics]
    plan = plan_rl(result.design["grpo"], top=0)
    assert plan.best is not None and plan.best.cost is not None and plan.job.stack.calibration == NEMO_RL
    return plan.job, plan.best


@given(st.sampled_from(tuple(PLACED)), st.sampled_from(("throughput", "energy", "cost")),
       st.one_of(st.just(NEMO_RL), constants), st.floats(0, 1e3), st.floats(0, 1), st.floats(0, 1))
def test_the_objective_never_falls_as_generation_takes_longer_calibrated(variant, objective, c, more, share, low):
    """The rl search's premise (solver/rl/search.py module docstring and `_advance`: a point's value at
    lower bounds of the makespan and the stream is at most its value): with the stack's calibration
    applied by `evaluate`, a longer makespan or stream, at the run's own engine iterations, never lowers
    the step time, the energy or the cost of a step."""
    job, best = _planned(variant)
    job = attrs.evolve(job, objective=objective, stack=attrs.evolve(job.stack, calibration=c))
    g = best.generation
    makespan, stream = low * g.makespan, low * g.stream          # a lower bound of each, as `least` gives
    longer = makespan + more
    later = min(longer, stream + share * (longer - stream))      # the stream grows too, never past its makespan

    def value(m, s):
        return evaluate(job, best.placement, best.staleness, g, best.train, makespan=m, stream=s).value(objective)

    before, after = value(makespan, stream), value(longer, later)
    assert after >= before * (1 - 1e-12)
