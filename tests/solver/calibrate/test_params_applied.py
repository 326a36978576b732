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
