"""Shared test settings: the hypothesis profiles of `gclc.testing` (`GCLC_HYPOTHESIS=deep`
for many examples)."""

from gclc.testing import load_profile

load_profile()
