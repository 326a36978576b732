"""The fit's shrinkage law: a constant's fit lies between its prior and its runs' own fit, and
more of the same runs never move it away from theirs: under Huber's loss (kernel rows, collectives,
serving figures) whatever the runs, the loss and the prior's penalty both convex in the log value;
under a training run's Student-t loss (observe.TAILS) where the runs agree on the value, each
run's loss then falling toward it. Runs that disagree can leave a Student-t fit two valleys, one
per side: it still never leaves the span of the prior and the runs' own values. The
empirical-Bayes prior widths tried with this fit were not shipped: docs/calibration.md."""

from __future__ import annotations

import math

from hypothesis import given, strategies as st

from gclc.dsl.source import no_span
from gclc.solver.calibrate.fit import fit
from gclc.solver.calibrate.observe import Observation
from gclc.solver.calibrate.params import Param
from gclc.testing import load_profile

load_profile()

KEY = ("chip", "X", "bf16")
PRIOR = 0.5


def _run(share: float, offset: float, kind: str = "kernel") -> Observation:
    """A run of `kind` whose log(predicted / measured) is offset + share x log(value / prior)."""
    return Observation(kind, f"{share}:{offset}", "run", 1.0, "tokens/s", (KEY,), predict=None, partition=None,
                       span=no_span(), end_to_end=True,
                       predict_values=lambda v: math.exp(offset + share * math.log(v[KEY] / PRIOR)))


def _fitted(runs: list[Observation], spread: float) -> float:
    return math.log(fit({KEY: Param(KEY, PRIOR, spread, 0.02, 1.0)}, runs)[KEY] / PRIOR)


runs_st = st.lists(st.tuples(st.floats(0.05, 1.0), st.floats(-0.3, 0.3)), min_size=1, max_size=4)


@given(runs_st, st.floats(0.005, 0.5), st.integers(2, 4))
def test_the_fit_lies_between_the_prior_and_the_runs_and_more_runs_move_it_toward_theirs(runs, spread, copies):
    once = [_run(s, o) for s, o in runs]
    alone = _fitted(once, 1e6)                  # the runs' own fit (no prior to speak of)
    shrunk = _fitted(once, spread)
    tol = 1e-5
    assert min(0.0, alone) - tol <= shrunk <= max(0.0, alone) + tol
    more = _fitted([_run(s, o) for s, o in runs for _ in range(copies)], spread)
    assert abs(more - alone) <= abs(shrunk - alone) + tol


@given(st.lists(st.floats(0.05, 1.0), min_size=1, max_size=4), st.floats(-1.5, 0.6), st.floats(0.005, 0.5),
       st.integers(2, 4))
def test_runs_that_agree_shrink_a_student_t_fit_the_same_way(shares, value, spread, copies):
    """Training runs (Student-t loss) whose own values are one, log(value / prior) = `value`."""
    once = [_run(s, -s * value, "train") for s in shares]
    shrunk = _fitted(once, spread)
    tol = 1e-4
    assert min(0.0, value) - tol <= shrunk <= max(0.0, value) + tol
    more = _fitted([_run(s, -s * value, "train") for s in shares for _ in range(copies)], spread)
    assert abs(more - value) <= abs(shrunk - value) + tol


@given(runs_st, st.floats(0.005, 0.5))
def test_a_student_t_fit_never_leaves_the_span_of_the_prior_and_the_runs(runs, spread):
    """Training runs that disagree: the fit lies between the prior and the farthest run's own
    value on each side (beyond them every loss and the penalty rise)."""
    low, high = math.log(0.02 / PRIOR), math.log(1.0 / PRIOR)
    own = [min(high, max(low, -o / s)) for s, o in runs]
    fitted = _fitted([_run(s, o, "train") for s, o in runs], spread)
    assert min(0.0, *own) - 1e-5 <= fitted <= max(0.0, *own) + 1e-5

