"""`cli/` parses arguments and picks exit codes; the sentences it prints about a design come
from `views/` (and the degradation's own parser from the model). These tests pin the exact
wording the commands printed before the sentences moved out of `cli/` (a golden on purpose:
the move must leave every byte of what a user reads as it was), end to end where a command
reaches it cheaply, and each moved sentence builder where it does not."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from gclc.model.network.degrade import PARTS, Degradation, parse
from gclc.testing import load_profile
from gclc.views import selection
from gclc.views.schedule import progress_line
from gclc.views.sweep.report import progress_line as sweep_progress_line

load_profile()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_degrade_part_outside_the_list_is_a_usage_error_naming_the_parts(cli):
    code, out = cli(["degrade", str(EXAMPLES / "dgx_h100_superpod.gcl"), "bogus=1"])
    assert code == 2
    assert out == "gclc: `bogus=1`: write PART=SHARE with PART one of nic, link, spine, gpu (`nic=down`, `gpu=80%`)\n"


@given(st.sampled_from(PARTS), st.integers(0, 100))
def test_parse_reads_back_a_part_at_a_percentage(part, pct):
    assert parse(f" {part} = {pct}% ") == Degradation(part, pct / 100)


def test_export_to_a_partition_the_cluster_lacks_names_its_partitions(cli, tmp_path):
    code, out = cli(["export", str(EXAMPLES / "shared_cluster.gcl"), "--to", "slurm",
                     "--cluster", "Shared.b200", "-o", str(tmp_path / "out")])
    assert code == 2
    assert "gclc: cluster `Shared` has no partition `b200`; its partitions: h100, a100" in out


def test_std_names_the_kinds_and_the_nearest_part(cli):
    code, out = cli(["std", "list", "--kind", "gizmo"])
    assert code == 2 and out.startswith("gclc std list: no parts of kind `gizmo`; the library has chip, ")
    code, out = cli(["std", "show", "H100_SX"])
    assert code == 1 and out == "gclc std: the standard library has no part `H100_SX`; did you mean `H100_SXM`?\n"


def test_cluster_selection_sentences():
    assert selection.no_cluster("a.gcl") == "a.gcl declares no cluster (nor does anything it imports)"
    assert (selection.unknown_cluster("chat", "a.gcl", "serve job", ["Box"])
            == "no cluster `chat` in a.gcl (`chat` is a serve job); the design has: Box")
    assert selection.unknown_cluster("X", "a.gcl", None, []) == "no cluster `X` in a.gcl; the design declares none"
    assert (selection.on_another_cluster("j", "A", "B")
            == "`j` runs on `A`, not on the cluster drawn (`B`); draw it with --cluster A")


@pytest.mark.parametrize("done, line", [
    (0, "  simulating [........................................] 0/2,000 jobs"),
    (1000, "  simulating [####################....................] 1,000/2,000 jobs"),
    (2000, "  simulating [########################################] 2,000/2,000 jobs")])
def test_schedule_progress_bar(done, line):
    assert progress_line(done, 2000) == line


def test_sweep_progress_line_counts_and_eta():
    assert sweep_progress_line(SimpleNamespace(done=3, total=10, infeasible=1, eta=None)) == "  3/10 points  1 infeasible   "
    assert (sweep_progress_line(SimpleNamespace(done=3, total=10, infeasible=1, eta=125.9))
            == "  3/10 points  1 infeasible  ETA 2m05s   ")
