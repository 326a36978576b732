"""The fit's shrinkage law: a constant's fit lies between its prior and its runs' own fit, and
more of the same runs never move it away from theirs (Huber's loss and the prior's penalty are
both convex in the log value). The empirical-Bayes prior widths tried with this fit were not
shipped: docs/calibration.md."""

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


def _run(share: float, offset: float) -> Observation:
    """A training-like run whose log(predicted / measured) is offset + share x log(value / prior)."""
    return Observation("train", f"{share}:{offset}", "run", 1.0, "tokens/s", (KEY,), predict=None, partition=None,
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

