"""The NCCL version an nccl-tests run names is the one its calibration prices it on: Blackwell's
NVLS all-reduce runs on 32 channels up to NCCL 2.26 and 24 from 2.27 (model/network/nccl.py
nvls_channels), so a table from NCCL 2.25 fitted as if it ran 24 would move the fabric's constants
to explain what the channel count did."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.measure.records import CollectivePoint, CollectiveRun
from gclc.dsl.source import Span
from gclc.model import collectives, comms
from gclc.model.ranks import rank_partition
from gclc.solver.calibrate.calibrate import calibrate, design_partition
from gclc.solver.calibrate.observe import collective_notes, collective_observations

ROOT = Path(__file__).resolve().parents[3]
SIZES = tuple(2 ** e for e in range(20, 32))   # 1 MiB to 2 GiB


@pytest.fixture(scope="module")
def b200():
    design = check_file(str(ROOT / "tests" / "data" / "calibrate" / "dgx_b200.gcl")).design
    partition = design_partition(design, None)[1]
    return design, partition, comms.place(8, 1, rank_partition(partition, 8).tiers)


def table(stages, nccl: str, measured_on: str) -> CollectiveRun:
    """An 8-GPU all-reduce sweep as NCCL `measured_on` would time it on the design's constants
    (SYNTHETIC: the model's own times, so that only the version differs), read as naming `nccl`."""
    points = tuple(CollectivePoint(n, n // 4, "float", "sum", collectives.all_reduce(n, stages, nccl=measured_on),
                                   1.0, 1.0, None, Span("b200.txt", i + 10, 1, i + 10, 2)) for i, n in enumerate(SIZES))
    return CollectiveRun("all_reduce", 8, 1, ("NVIDIA B200",), points, Span("b200.txt", 3, 1, 3, 2), nccl)


def test_a_blackwell_nvls_table_of_nccl_2_25_is_priced_on_its_32_channels(b200):
    design, partition, stages = b200
    option = tuple(getattr(stages, "options", (stages,))[0])
    assert collectives.communicator(option).nvls_channels == 24
    assert collectives.communicator(option, "2.25.1").nvls_channels == 32
    found, skipped = collective_observations(table(stages, "2.25.1", "2.25.1"), partition)
    assert not skipped
    old = [obs.predict(partition) for obs in found]
    new = [collectives.all_reduce(n, stages) for n in SIZES]
    assert old == [collectives.all_reduce(n, stages, nccl="2.25.1") for n in SIZES]
    # where the channels bind (tens of MiB: NVLS's loops against a ring) 32 channels are faster by
    # more than the collective noise the fit allows; where NVLS runs at the port's rate, the same
    # rate: the versions differ by a constant within a chunk regime (the pipeline's fill on a
    # channel, nccl.nvls_fill_seconds; 256 MiB to 1 GiB run one chunk size on both)
    apart = [n for n, a, b in zip(SIZES, old, new) if abs(math.log(a / b)) > 0.10]
    assert apart and max(apart) < 2 ** 28
    fill = [a - b for n, a, b in zip(SIZES, old, new) if 2 ** 28 <= n <= 2 ** 30]
    assert len(fill) == 3 and fill[0] > 0 and fill == pytest.approx([fill[0]] * 3, rel=1e-9)


def test_the_version_decides_what_the_fit_moves(b200):
    """The 2.25 table calibrated as 2.25 is met by the design's constants (every row within
    rounding, nothing assumed); the same table with its version line lost is priced on the newest
    NCCL's 24 channels, rows miss by over 10 %, and the report says what it assumed."""
    design, partition, stages = b200
    named = calibrate(design, [table(stages, "2.25.1", "2.25.1")])
    assert max(abs(row.before) for row in named.rows) < 1e-9 and not named.notes
    unnamed = calibrate(design, [table(stages, "", "2.25.1")])
    assert max(abs(row.before) for row in unnamed.rows) > math.log(1.10)
    (note,) = unnamed.notes
    assert "names no NCCL version" in note and "24 NVLS channels on blackwell, where NCCL up to 2.26 opens 32" in note
    # a table the newest NCCL made and that says so is met as well, and a Hopper's assumes nothing
    newest = calibrate(design, [table(stages, "2.28.7", "")])
    assert max(abs(row.before) for row in newest.rows) < 1e-9
    # sizes where NVLS runs at the port's rate price alike in every version: nothing assumed
    large = table(stages, "", "2.25.1")
    large = attrs.evolve(large, points=tuple(p for p in large.points if p.size >= 2 ** 28))
    assert collective_notes(large, partition) == []


def test_a_hopper_table_without_a_version_assumes_nothing(b200):
    """Hopper opens 16 NVLS channels in every version: nothing to say where the output names none."""
    design = check_file(str(ROOT / "tests" / "data" / "calibrate" / "h100_pod.gcl")).design
    partition = design_partition(design, None)[1]
    stages = comms.place(8, 1, rank_partition(partition, 8).tiers)
    assert collectives.communicator(tuple(getattr(stages, "options", (stages,))[0])).nvls
    assert collective_notes(table(stages, "", ""), partition) == []
