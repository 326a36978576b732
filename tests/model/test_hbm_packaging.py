"""`hbm.packaging` is physics (issue 35 item 5): HBM stacked on the logic die (`stacked`, 3D) sends its bits
through a hybrid bond instead of the 2.5D interposer's PHYs (compiler/hbm.py, sourced there), so it costs less
energy per bit, which the power model charges on the traffic a memory-bound phase streams, and each kernel's
exposed HBM round trip is shorter by the crossing it no longer makes. Every std chip is 2.5D: its figures are
the published ones, untouched. An unknown packaging, or a stack without a generation to lower, is a located
error."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler import hbm
from gclc.compiler.driver import check_text
from gclc.compiler.lower import lower
from gclc.model.compute import KERNEL_OVERHEAD_S, kernel_overhead, op_time
from gclc.model.ops import Op
from gclc.model.power import WAITING_ACTIVITY, busy_of, gpu_power, memory_activity
from gclc.model.train.step import Breakdown
from gclc.testing import load_profile

load_profile()

DESIGN = 'import "std/nvidia"\n{chip}cluster One {{\n  units = 1 x {node}\n}}\n'
STACKED = 'chip Stacked extends H100_SXM {{\n  hbm {{ {fields} }}\n}}\nnode Box extends DGX_H100 {{ gpus = 8 x Stacked }}\n'


def _lowered(chip: str = "", node: str = "DGX_H100"):
    result = check_text(DESIGN.format(chip=chip, node=node), path="<hbm>")
    assert result.ok, result.diagnostics
    return lower(result.design).partitions[0]


H100_PARTITION = _lowered()
H100 = H100_PARTITION.node.accelerator
STACKED_PARTITION = _lowered(STACKED.format(fields="packaging = stacked"), "Box")


def _errors(fields: str):
    text = DESIGN.format(chip=STACKED.format(fields=fields), node="Box")
    result = check_text(text, path="stacked.gcl")
    return [d for d in result.diagnostics if d.is_error], text


def test_every_std_chip_is_an_interposer_part_at_its_published_figure():
    from gclc.compiler.driver import check_text as check
    result = check('import "std/nvidia"\nimport "std/amd"\n', path="<std>")
    assert result.ok
    chips = [e for e in result.design.of_kind("chip")]
    assert chips
    from gclc.compiler.lower import accelerator
    for entity in chips:
        chip = accelerator(entity)
        assert chip.hbm_packaging == "interposer"
        if chip.hbm_type is not None:   # the generation's figure exactly, no arithmetic on it
            assert chip.hbm_joules_per_byte == hbm.PJ_PER_BIT[chip.hbm_type.strip().lower()] * 8e-12
        assert kernel_overhead(chip) == KERNEL_OVERHEAD_S


def test_a_stacked_chip_inherits_its_generation_and_lowers_its_link():
    chip = STACKED_PARTITION.node.accelerator
    assert chip.hbm_type == H100.hbm_type and chip.hbm_packaging == "stacked"
    saved = (hbm.LINK_PJ_PER_BIT["interposer"] - hbm.LINK_PJ_PER_BIT["stacked"]) * 8e-12
    assert abs(H100.hbm_joules_per_byte - chip.hbm_joules_per_byte - saved) < 1e-24
    assert kernel_overhead(chip) == KERNEL_OVERHEAD_S - 2e-9


def test_a_stacked_chips_memory_bound_phase_draws_less_power():
    """The optimizer step streams HBM: at the same breakdown the stacked part's busy share and watts are lower;
    a step that only computes draws the same on both."""
    chip = STACKED_PARTITION.node.accelerator
    assert WAITING_ACTIVITY < memory_activity(chip) < memory_activity(H100)
    streaming = Breakdown(compute=0.3, recompute=0.0, tp=0.1, cp=0.0, ep=0.0, pp=0.0, bubble=0.0, dp=0.0, optimizer=0.6)
    busy_stacked, busy_2_5d = busy_of(streaming, 1.0, chip), busy_of(streaming, 1.0, H100)
    assert busy_stacked < busy_2_5d
    assert gpu_power(STACKED_PARTITION, busy_stacked) < gpu_power(H100_PARTITION, busy_2_5d)
    computing = attrs.evolve(streaming, optimizer=0.0)
    assert busy_of(computing, 1.0, chip) == busy_of(computing, 1.0, H100)


def test_an_unknown_packaging_is_refused_where_it_is_written():
    errors, text = _errors("packaging = chiplet")
    assert errors and errors[0].code == "bad-choice"
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "packaging" in t)
    assert errors[0].subject.line == line
    assert "stacked" in " ".join([errors[0].summary, *errors[0].notes])


def test_a_stack_without_a_generation_is_refused_where_it_is_written():
    chip = 'chip Bare {\n  vendor = "NVIDIA"\n  peak { bf16 = 989 TFLOPS }\n  power { tdp = 700 W  idle = 70 W }\n' \
           '  hbm { capacity = 80 GB  bandwidth = 3.35 TB/s  packaging = stacked }\n}\n' \
           'node Box extends DGX_H100 { gpus = 8 x Bare }\n'
    text = DESIGN.format(chip=chip, node="Box")
    errors = [d for d in check_text(text, path="bare.gcl").diagnostics if d.is_error]
    assert [e.code for e in errors] == ["missing-field"] and "`hbm.type`" in errors[0].summary
    assert errors[0].subject.line == next(i for i, t in enumerate(text.splitlines(), 1) if "packaging" in t)
    interposer = text.replace("packaging = stacked", "packaging = interposer")
    assert [d for d in check_text(interposer, path="bare.gcl").diagnostics if d.is_error] == []


ops = st.builds(
    lambda kind, m, n, k, nbytes, count: Op("x", kind, flops=2.0 * m * n * k if kind != "elementwise" else 0.0,
                                            bytes=nbytes, m=m if kind == "gemm" else 0, n=n, k=k, count=count),
    st.sampled_from(["gemm", "elementwise"]), st.integers(1, 8192), st.integers(1, 8192), st.integers(1, 8192),
    st.floats(0.0, 1e10), st.integers(1, 64))


@given(ops, st.sampled_from(hbm.NAMES))
def test_a_stacked_part_is_never_slower_nor_draws_more_per_bit(op, generation):
    """A law: the same chip with its HBM stacked on it runs every kernel no slower, and moves every bit for
    less energy, whatever its generation."""
    flat = attrs.evolve(H100, hbm_type=generation)
    stacked = attrs.evolve(flat, hbm_packaging="stacked")
    assert op_time(op, stacked, "bf16") <= op_time(op, flat, "bf16")
    assert stacked.hbm_joules_per_byte < flat.hbm_joules_per_byte
    assert memory_activity(stacked) <= memory_activity(flat)
    from gclc.model.power import streaming_activity
    assert streaming_activity(stacked) <= streaming_activity(flat)


def test_a_stacked_chip_streams_decode_for_less_power():
    """Serving's memory-bound steps draw STREAMING_ACTIVITY, measured on a 2.5D part; a stacked part draws
    that less the interposer energy its sustained HBM traffic no longer spends; a 2.5D part, or a stack with
    no generation to lower, keeps the measurement."""
    from gclc.model.compute import hbm_rate
    from gclc.model import dvfs
    from gclc.model.power import STREAMING_ACTIVITY, serving_activity, streaming_activity

    chip = STACKED_PARTITION.node.accelerator
    saved_w = hbm_rate(chip) * (H100.hbm_joules_per_byte - chip.hbm_joules_per_byte)
    assert 5 < saved_w < 20     # ~3 TB/s x 0.25 pJ/bit: a few watts of a 700 W part
    expected = STREAMING_ACTIVITY - saved_w / (dvfs.draw(chip) - chip.idle)
    assert abs(streaming_activity(chip) - expected) < 1e-12
    assert streaming_activity(H100) == STREAMING_ACTIVITY
    assert streaming_activity(attrs.evolve(chip, hbm_type=None)) == STREAMING_ACTIVITY
    for busy in (0.0, 0.3, 1.0):
        assert serving_activity(busy, chip) <= serving_activity(busy, H100) == serving_activity(busy)
    assert serving_activity(0.2, chip) < serving_activity(0.2, H100)


BOARD = 'chip Board {{\n  vendor = "NVIDIA"\n  peak {{ bf16 = 362 TFLOPS  fp8 = 733 TFLOPS }}\n  power {{ tdp = 350 W }}\n' \
        '  hbm {{ capacity = 48 GB  bandwidth = 864 GB/s  type = "{kind}"  {packaging} }}\n}}\n' \
        'node Box extends DGX_H100 {{ gpus = 8 x Board }}\n'


@pytest.mark.parametrize("kind", hbm.BOARD)
@pytest.mark.parametrize("packaging", hbm.PACKAGINGS)
def test_a_packaging_on_board_memory_is_refused_where_it_is_written(kind, packaging):
    # review: a GDDR part took `stacked`, so the model lowered its energy by an interposer link it never
    # had and credited board memory a 2 ns round trip it never crossed; `interposer` as wrong a claim
    text = DESIGN.format(chip=BOARD.format(kind=kind, packaging=f"packaging = {packaging}"), node="Box")
    errors = [d for d in check_text(text, path="board.gcl").diagnostics if d.is_error]
    assert [e.code for e in errors] == ["bad-choice"] and f"`{packaging}`" in errors[0].summary
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "packaging" in t)
    assert (errors[0].subject.line, errors[0].subject.column) == (line, text.splitlines()[line - 1].index("packaging") + 1)
    assert "help: remove `packaging`" in errors[0].notes[-1]
    clean = DESIGN.format(chip=BOARD.format(kind=kind, packaging=""), node="Box")
    assert [d for d in check_text(clean, path="board.gcl").diagnostics if d.is_error] == []


@pytest.mark.parametrize("kind", hbm.BOARD)
def test_board_memory_takes_no_packaging_term(kind):
    """GDDR's figure as published and the full kernel tail, whatever packaging the record carries."""
    board = attrs.evolve(H100, hbm_type=kind)
    for packaging in hbm.PACKAGINGS:
        chip = attrs.evolve(board, hbm_packaging=packaging)
        assert chip.hbm_joules_per_byte == hbm.PJ_PER_BIT[kind.lower()] * 8e-12
        assert kernel_overhead(chip) == KERNEL_OVERHEAD_S
        from gclc.model.power import STREAMING_ACTIVITY, streaming_activity
        assert streaming_activity(chip) == STREAMING_ACTIVITY
