"""Shared test settings: hypothesis profiles (`GCLC_HYPOTHESIS=deep` for many examples)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("GCLC_HYPOTHESIS", "ci"))
