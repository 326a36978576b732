"""Empirical-Bayes prior strengths: how far a constant truly varies from one system to
another, read from published runs of other systems.

Each system's runs, predicted with the pooled (published) fit, miss by residuals r_i
(log predicted / measured) whose slope in the constant's log value is g_i. A runs-only fit of
the system moves the constant by d = -sum(g r) / sum(g^2), known to v = noise^2 / sum(g^2);
the spread of d across systems beyond what their own v explains is the constant's between-system
spread tau (DerSimonian and Laird, Controlled Clinical Trials 7:177, 1986, their moment
estimator). The noise is the runs' scatter around their own system's d (pooled within-system
variance). A fit that weighs a run's residual at the fit's noise takes the prior width
tau x fit noise / noise: then the posterior of a constant is the normal-normal one, its runs'
d pulled toward the prior by v / (v + tau^2) (Efron and Morris, JASA 70:311, 1975).
Measured as a variant of benchmarks/calibrate_own.py (--shrinkage), not shipped:
docs/calibration.md."""

from __future__ import annotations

import math

from ...dsl.records import frozen


@frozen
class Runs:
    """One system's runs as they inform one constant: residuals and slopes."""

    residuals: tuple[float, ...]
    slopes: tuple[float, ...]

    @property
    def information(self) -> float:
        return sum(g * g for g in self.slopes)

    @property
    def moved(self) -> float:
        """The runs-only fit's move of the constant (log), linearised."""
        return -sum(g * r for g, r in zip(self.slopes, self.residuals)) / self.information


def informative(systems: list[Runs], least: float = 1e-6) -> list[Runs]:
    return [s for s in systems if s.information > least]


def within_noise(systems: list[Runs]) -> float | None:
    """The runs' deviation around their own system's runs-only fit (one degree of freedom per
    system spent on it); None where no system has two runs."""
    found = informative(systems)
    dof = sum(len(s.residuals) - 1 for s in found)
    if dof < 1:
        return None
    squares = sum((r + g * s.moved) ** 2 for s in found for g, r in zip(s.slopes, s.residuals))
    return math.sqrt(squares / dof)


def between_spread(systems: list[Runs], noise: float) -> float | None:
    """tau: DerSimonian-Laird's moment estimate of the constant's spread across systems
    (log), from each system's runs-only move and its variance noise^2 / information; None
    with fewer than two informative systems."""
    found = informative(systems)
    if len(found) < 2:
        return None
    weights = [s.information / noise ** 2 for s in found]
    moves = [s.moved for s in found]
    total = sum(weights)
    mean = sum(w * d for w, d in zip(weights, moves)) / total
    q = sum(w * (d - mean) ** 2 for w, d in zip(weights, moves))
    scale = total - sum(w * w for w in weights) / total
    return math.sqrt(max(0.0, (q - (len(found) - 1)) / scale)) if scale > 0 else None



def predictive_spread(systems: list[Runs], noise: float, tau: float) -> float | None:
    """The spread of a new system's constant about the systems' pooled value: tau and the
    pooled value's own standard error, 1 / sum of 1 / (v + tau^2) (a chip with two published
    systems knows its pooled value far less well than one with six); None without an
    informative system."""
    found = informative(systems)
    if not found:
        return None
    precision = sum(1 / (noise ** 2 / s.information + tau ** 2) for s in found)
    return math.sqrt(tau ** 2 + 1 / precision)
