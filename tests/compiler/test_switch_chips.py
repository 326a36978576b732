"""A scale-up domain's switch chips and their reduction rate (node and supernode `switches`,
a switch's `chips` and `reduction`) reach the IR's tier, and what nothing would read is a
located error."""

from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower

DESIGN = """
chip C {{ hbm {{ capacity = 80 GB  bandwidth = 2 TB/s }}  peak {{ bf16 = 400 TFLOPS }}  power {{ tdp = 500 W }} }}
switch S {{ radix = 64  port_speed = 25 GB/s  {reduces} }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s  latency = 1 us  switch = S }}
node N {{ gpus = 8 x C  {node} }}
cluster K {{ units = 2 x N }}
"""


def _check(reduces: str, node: str):
    return check_text(DESIGN.format(reduces=reduces, node=node), "chips.gcl")


def test_a_nodes_switches_give_its_tier_their_chips_and_rate():
    result = _check("in_network_reduction = true  chips = 2  reduction = 300 GFLOPS", "scaleup = Up  switches = 3 x S")
    assert result.ok, [str(d) for d in result.diagnostics]
    tier = lower(result.design).partitions[0].tiers[0]
    assert (tier.switch_chips, tier.switch_reduction, tier.reduction_rate) == (6, 300e9, 6 * 300e9)
    bare = _check("in_network_reduction = true", "scaleup = Up")
    assert lower(bare.design).partitions[0].tiers[0].reduction_rate == float("inf")   # not stated: not bounded


def test_a_rate_on_a_switch_that_does_not_reduce_and_switches_without_a_fabric_are_located_errors():
    text = DESIGN.format(reduces="reduction = 300 GFLOPS", node="switches = 2 x S")
    errors = [d for d in check_text(text, "chips.gcl").diagnostics if d.code == "switch-reduction"]
    assert len(errors) == 2
    lines = text.splitlines()
    spots = {(e.subject.line, e.subject.column) for e in errors}
    assert spots == {(3, lines[2].index("reduction") + 1), (5, lines[4].index("switches") + 1)}
    assert all(e.notes and e.notes[-1].startswith("help:") for e in errors)
