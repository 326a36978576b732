"""Fixtures of the solver tests."""

import pytest

from gclc.model import dvfs


@pytest.fixture(scope="module")
def coarse_clock_steps():
    """Clock steps of 50 % (full and half clock) rather than the planner's 5 %: for the tests of
    the search's exactness against the enumerator, which hold whatever the grid, so that a
    power-limited or energy job's space of configurations x clock steps stays small enough to
    enumerate. The planner's own grid is checked against the enumerator in
    tests/solver/power/test_operating.py."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dvfs, "CLOCK_STEP", 0.5)
        yield
