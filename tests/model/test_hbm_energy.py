"""`hbm.type` is physics (issue 35): the HBM generation's energy per bit (compiler/hbm.py,
sourced there) is charged on the traffic an HBM-bound phase streams (model/power.py), so a
more efficient generation draws less while the optimizer streams its state; a generation the
compiler does not know is refused with a located error; an unstated one keeps the older
reading (the phase counts as computing)."""

from __future__ import annotations

import attrs
from hypothesis import given, strategies as st

from gclc.compiler import hbm
from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model import dvfs
from gclc.model.compute import hbm_rate
from gclc.model.power import WAITING_ACTIVITY, busy_of, memory_activity
from gclc.model.train.step import Breakdown
from gclc.testing import load_profile

load_profile()

DESIGN = 'import "std/nvidia"\n{chip}cluster One {{\n  units = 1 x {node}\n}}\n'


def _h100():
    result = check_text(DESIGN.format(chip="", node="DGX_H100"), path="<h100>")
    assert result.ok
    return lower(result.design).partitions[0].node.accelerator


H100 = _h100()


def test_an_unknown_generation_is_refused_where_it_is_written():
    chip = 'chip Odd extends H100_SXM {\n  hbm { type = "HBM5x" }\n}\nnode Box extends DGX_H100 { gpus = 8 x Odd }\n'
    result = check_text(DESIGN.format(chip=chip, node="Box"), path="odd.gcl")
    errors = [d for d in result.diagnostics if d.code == "bad-choice"]
    assert errors and not result.ok
    assert (errors[0].subject.path, errors[0].subject.line) == ("odd.gcl", 3)   # the `type` line
    assert "HBM3e" in " ".join(errors[0].notes)


def test_the_h100_streams_its_hbm3_at_the_traffic_times_energy_per_bit():
    # H100: HBM3 (dsl/std/nvidia.gcl); the traffic's watts at the sustained HBM rate
    watts = hbm_rate(H100) * 8 * hbm.PJ_PER_BIT["hbm3"] * 1e-12
    assert 30 < watts < 120   # tens of watts of a 700 W part, not its whole range
    expected = WAITING_ACTIVITY + watts / (dvfs.draw(H100) - H100.idle)
    assert abs(memory_activity(H100) - expected) < 1e-12


def test_an_unstated_generation_counts_the_optimizer_as_computing():
    chip = attrs.evolve(H100, hbm_type=None)
    b = Breakdown(compute=0.5, recompute=0.0, tp=0.1, cp=0.0, ep=0.0, pp=0.0, bubble=0.0, dp=0.0, optimizer=0.4)
    assert memory_activity(chip) == 1.0
    assert abs(busy_of(b, 1.0, chip) - 0.9) < 1e-12
    assert busy_of(b, 1.0, H100) < 0.9   # HBM3 stated: the optimizer draws less than computing


@given(st.sampled_from(hbm.TYPES), st.sampled_from(hbm.TYPES), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_less_energy_per_bit_never_draws_more(a, b, compute, optimizer):
    """A law: between two generations, the one with less energy per bit never draws more in the
    same step; every stated generation draws between the waiting floor and full activity."""
    first, second = attrs.evolve(H100, hbm_type=a), attrs.evolve(H100, hbm_type=b)
    if hbm.PJ_PER_BIT[a.lower()] > hbm.PJ_PER_BIT[b.lower()]:
        first, second = second, first
    step = Breakdown(compute=compute, recompute=0.0, tp=1.0, cp=0.0, ep=0.0, pp=0.0, bubble=0.0, dp=0.0, optimizer=optimizer)
    total = step.total
    assert busy_of(step, total, first) <= busy_of(step, total, second) + 1e-12
    for chip in (first, second):
        assert WAITING_ACTIVITY <= memory_activity(chip) <= 1.0


def test_newer_generations_cost_less_per_bit():
    energies = [hbm.PJ_PER_BIT[n.lower()] for n in hbm.NAMES]
    assert energies == sorted(energies, reverse=True)
    assert hbm.joules_per_byte("hbm3E") == hbm.joules_per_byte("HBM3e")   # the case the data sheets vary in
