"""Hypothesis profiles for properties of designs: `ci` (the default; derandomized, so a
CI run never fails at random) and `deep` (many examples, for a search before a release)."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings as hsettings



GENERATED_PATH = "generated.gcl"

# ================================================================= profiles

PROFILE_ENV = "GCLC_HYPOTHESIS"
PROFILES: dict[str, dict[str, Any]] = {
    # ci is derandomized (a fixed seed, no example database): the same examples on every run,
    # so CI never fails at random; deep searches afresh and keeps what it finds.
    "ci": {"max_examples": 60, "deadline": None, "suppress_health_check": [HealthCheck.too_slow],
           "derandomize": True, "database": None},
    "deep": {"max_examples": 2000, "deadline": None, "suppress_health_check": [HealthCheck.too_slow]},
}


def register_profiles() -> None:
    """Register the `ci` (fast) and `deep` (many examples) hypothesis profiles."""
    for name, values in PROFILES.items():
        hsettings.register_profile(name, **values)


def load_profile(name: str | None = None) -> str:
    """Register the profiles and load `name`, else `$GCLC_HYPOTHESIS`, else `ci`; returns it."""
    register_profiles()
    chosen = name or os.environ.get(PROFILE_ENV) or "ci"
    if chosen not in PROFILES:
        raise ValueError(f"unknown hypothesis profile {chosen!r} (set {PROFILE_ENV} to one of {', '.join(PROFILES)})")
    hsettings.load_profile(chosen)
    return chosen


def scaled_examples(examples: int) -> int:
    """A test's own example count, `examples` under the ci profile and proportionally more under deep
    (GCLC_HYPOTHESIS=deep): a count written in `@settings` overrides the profile, so a deep run would
    otherwise search such a law no further than CI does."""
    from hypothesis import settings as current
    ci = PROFILES["ci"]["max_examples"]
    return max(examples, examples * current.default.max_examples // ci)


# ================================================================= values to strategies
