"""Which published runs calibrate a chip is read off its physics, not its name (model/calibration.py
`calibrated_as`): a chip is calibrated as the std chip C when it is C or extends C and changes none of
C's physics; one that changes a field of it (HBM bandwidth, a peak, the TDP, an efficiency) gets an
uncalibrated chip's band, with the changed fields named; a price, a source, the data sheet's HBM figure
change nothing the band bounds."""

from __future__ import annotations

import json

import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.lower import accelerator
from gclc.compiler.std_chips import std_chip
from gclc.model import calibration
from gclc.model.calibration import calibrated_as
from gclc.solver.jobs import plan_design
from gclc.views.plan_json import outcome_json

DESIGN = """import "std/nvidia"
import "std/network"

chip MyB200 extends B200 {%s}
node MyDGX_B200 extends DGX_B200 { gpus = %s }

cluster Pod {
  units    = 2 x MyDGX_B200
  scaleout = NDR_FatTree
}

model M { arch = dense  layers = 8  hidden = 2048  heads = 16  ffn = 8192  vocab = 32000  seq = 4096 }

train job {
  model     = M
  on        = Pod
  batch     = 64
  precision = fp8
  software  = megatron_core
}
"""
KNOWN = sorted(set(calibration.CALIBRATED) | set(calibration.SAME_SILICON) | set(calibration.LARGEST_RUN))


def _plan(chip_body: str = "", gpus: str = "8 x MyB200") -> dict:
    design = check_text(DESIGN % (chip_body, gpus), "chip.gcl").design
    assert not [d for d in check_text(DESIGN % (chip_body, gpus), "chip.gcl").diagnostics if d.severity == "error"]
    return outcome_json(plan_design(design))


def _chip(text: str, name: str):
    result = check_text('import "std/nvidia"\nimport "std/google"\n' + text, "chip.gcl")
    return accelerator(result.design[name])


@pytest.mark.parametrize("name", KNOWN)
def test_every_calibrated_std_chip_and_a_chip_renaming_it_is_calibrated_as_itself(name):
    assert calibrated_as(std_chip(name)) == (name, ())
    assert calibrated_as(_chip(f"chip Mine extends {name} {{}}\nchip Ours extends Mine {{}}", "Ours")) == (name, ())


def test_a_chip_near_no_published_run_is_its_own_and_a_changed_one_names_its_nearest():
    assert calibrated_as(std_chip("MI300X")) == ("MI300X", ())   # no published run: reasons says so
    mine = _chip('chip Mine extends H100_SXM { vendor = "Acme" }', "Mine")
    assert calibrated_as(mine) == ("H100_SXM", ("vendor",))   # the nearest known chip, and what changed


def test_a_sibling_part_that_changes_its_parent_is_calibrated_as_itself():
    # std GB200 extends B200 with its own HBM and power: calibrated as GB200 (its own published runs);
    # a chip that extends GB200 and changes its bandwidth is calibrated as neither
    assert calibrated_as(std_chip("GB200")) == ("GB200", ())
    mine = _chip("chip Mine extends GB200 { hbm { bandwidth = 7.7 TB/s } }", "Mine")
    assert calibrated_as(mine) == ("GB200", ("hbm_bandwidth",))


def test_a_renamed_chip_with_one_physics_field_changed_gets_the_uncalibrated_band_naming_it():
    parent, changed = _plan(), _plan(" hbm { bandwidth = 7.7 TB/s } ")
    reasons = changed["error_band"]["reasons"]
    assert reasons[0] == {"reason": "chip", "factor": calibration.FACTORS["chip"],
                          "text": "MyB200 extends B200 but changes hbm_bandwidth: band as an uncalibrated chip",
                          "half_width": pytest.approx(calibration.half_width((calibration.Reason("chip", ""),)))}
    assert not [r for r in parent["error_band"]["reasons"] if r["reason"] == "chip"]
    low, high = (changed["error_band"]["tokens_per_s"][i] / changed["tokens_per_s"] for i in (0, 1))
    parent_low, parent_high = (parent["error_band"]["tokens_per_s"][i] / parent["tokens_per_s"] for i in (0, 1))
    assert low < parent_low and high > parent_high   # wider on both sides, by the chip factor
    assert (high - low) / (parent_high - parent_low) == pytest.approx(calibration.FACTORS["chip"], rel=0.05)


@pytest.mark.parametrize("body, named", [(" peak { fp8 = 4000 TFLOPS } ", "peak.fp8"),
                                         (" power { tdp = 900 W } ", "tdp"),
                                         (" efficiency { fp8 = 45% } ", "efficiency.fp8"),
                                         (" clock = 1.9 GHz ", "clock")])
def test_each_physics_field_counts(body, named):
    text = _plan(body)["error_band"]["reasons"][0]["text"]
    assert text == f"MyB200 extends B200 but changes {named}: band as an uncalibrated chip"


def test_a_std_part_overridden_in_place_is_not_calibrated_by_its_name():
    # `8 x B200 { ... }` keeps the name B200 but not its physics
    text = _plan("", "8 x B200 { hbm { bandwidth = 7.7 TB/s } }")["error_band"]["reasons"][0]["text"]
    assert text == "B200 changes the std part's hbm_bandwidth: band as an uncalibrated chip"


def test_a_chip_changing_only_what_is_not_physics_keeps_its_parents_band_and_step():
    parent = _plan()
    other = _plan(' price = 20 kUSD  source = "our invoice"  process = "TSMC 4NP"  mtbf = 50000 h '
                  ' hbm { nominal = 192 GB } ')
    assert other["error_band"] == parent["error_band"]
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "power_w", "parallelism"):
        assert other[key] == parent[key]


def test_a_power_cap_is_the_operators_setting_with_its_own_reason():
    capped = _plan(" power { cap = 800 W } ")["error_band"]["reasons"]
    assert [r["reason"] for r in capped if r["reason"] in ("chip", "power_cap")] == ["power_cap"]
    assert any(r["text"].startswith("MyB200 computes below its full clock") for r in capped)


def test_a_calibrated_clusters_chip_asks_of_its_parent_without_its_fitted_efficiencies():
    # `gclc calibrate -o` writes `chip B200_tag extends B200 { efficiency { ... } }`: the operator's
    # band covers the fitted efficiencies; whether the published fit calibrated B200 at a precision
    # the operator's runs did not run is asked of the rest of B200's physics
    tagged = _chip("chip B200_tag extends B200 { efficiency { bf16 = 60% } }", "B200_tag")
    assert calibrated_as(tagged) == ("B200", ("efficiency.bf16",))
    assert calibrated_as(tagged, ignoring=frozenset({"efficiency"})) == ("B200", ())
    assert json.dumps(calibrated_as(_chip("chip B200_tag extends B200 { efficiency { bf16 = 60% } "
                                          "hbm { bandwidth = 7 TB/s } }", "B200_tag"),
                                    ignoring=frozenset({"efficiency"}))) == '["B200", ["hbm_bandwidth"]]'


def test_a_data_sheet_under_a_parents_name_names_four_changes_and_counts_the_rest():
    why = calibration.reasons("H100_SXM", "bf16", False, 1, 8192, True, shown="H20",
                              changed=("peak.bf16", "peak.fp8", "hbm_capacity", "hbm_bandwidth", "tdp", "cores"))
    assert why[0].text == ("H20 extends H100_SXM but changes peak.bf16, peak.fp8, hbm_capacity, hbm_bandwidth "
                           "and 2 more: band as an uncalibrated chip")
    # no precision, sibling or scale reason (8,192 GPUs, beyond H100_SXM's largest run) from H100_SXM's runs
    assert [r.key for r in why] == ["chip"]
    assert [r.key for r in calibration.reasons("H100_SXM", "bf16", False, 1, 8192, True)] == ["scale"]


def test_each_std_chip_lowered_on_demand_is_the_one_the_whole_library_lowers():
    # std_chip reads a chip's library off the files' text (compiler/std_chips.py): the parser's chips, no more
    # and no fewer, each the same accelerator as when every std file is checked together
    from gclc.compiler.std_chips import chip_libraries, std_chips

    every = std_chips()
    assert sorted(chip_libraries()) == sorted(every)
    for name, chip in every.items():
        assert std_chip(name) == chip, name
    assert std_chip("NotAStdChip") is None
