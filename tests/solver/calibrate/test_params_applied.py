"""A fitted fabric efficiency lands on every tier of the fabric in proportion: the first tier
takes the value, a hashed ECMP spine keeps its share of it (the calibrated design lowers the
same way), so a fit never runs the spine faster than its hashed paths."""

from __future__ import annotations

import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.solver.calibrate.params import applied

DESIGN = """
import "std/nvidia"
fabric Roce { kind = ethernet  topology = fat_tree(tiers = 2, radix = 16)  bandwidth = 400 Gb/s  latency = 1 us }
cluster C { units = 4 x DGX_H100  scaleout = Roce }
"""


def test_a_fitted_fabric_efficiency_keeps_the_spines_hashed_share():
    result = check_text(DESIGN, "roce.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    partition = lower(result.design).partitions[0]
    before = [t.efficiency for t in partition.tiers if t.fabric == "Roce"]
    assert len(before) == 2 and before[1] < before[0]   # ECMP's collisions charged on the spine
    after = [t.efficiency for t in applied(partition, {("fabric", "Roce", "efficiency"): 0.5}).tiers
             if t.fabric == "Roce"]
    assert after[0] == pytest.approx(0.5)
    assert after[1] / after[0] == pytest.approx(before[1] / before[0], rel=1e-12)


def test_a_constants_prior_is_as_wide_as_the_uncalibrated_models_band():
    """A stated GEMM efficiency is known to the shipped band's deviation; one a serving run
    informs, to at least the shipped serving band's (its 80 % bounds read as a normal's); a
    wider prior (a vendor default's) and an engine's host time are left as they are."""
    import math

    import attrs

    from gclc.model.calibration import BAND_SCALE, SERVE_THROUGHPUT_RATIO, SIGMA_PER_SCALE
    from gclc.solver.calibrate.params import chip_param, engine_param, serving_prior

    result = check_text(DESIGN, "roce.gcl")
    chip = lower(result.design).partitions[0].node.accelerator
    stated = chip_param(chip, "bf16")
    assert chip.efficiency_of("bf16") is not None
    assert stated.spread == pytest.approx(BAND_SCALE * SIGMA_PER_SCALE)
    served = serving_prior(stated)
    low, high = SERVE_THROUGHPUT_RATIO
    assert served.spread == pytest.approx(math.log(high / low) / (2 * 1.2816)) and served.spread > stated.spread
    assert served.prior == stated.prior
    wide = attrs.evolve(stated, spread=0.3)
    assert serving_prior(wide).spread == 0.3
    engine = engine_param(("engine", "chat", "host_step"), 1e-4, 2e-5)
    assert serving_prior(engine) == engine
