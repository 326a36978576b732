"""benchmarks/calibrate_own.py: the held-back part of each group is predicted by a fit that
never saw it. Checked on the nccl-tests curves (quick); the training groups' figures are the
benchmark's own run (docs/calibration.md)."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import calibrate_own  # noqa: E402


def test_every_other_size_of_a_published_curve_predicts_the_others_better_than_the_design():
    rows = calibrate_own.curve_rows()
    assert {r["curve"] for r in rows} == set(calibrate_own.CURVES)
    held = [r for r in rows if r["curve"] == "a3mega_h100_2node_all_reduce.txt"]
    assert len(held) == 15          # 31 sizes: 16 calibrate, 15 held back
    before = statistics.median(abs(r["before"]) for r in rows)
    after = statistics.median(abs(r["after"]) for r in rows)
    assert after < before / 2


def test_a_third_of_each_system_is_yours_and_the_rest_held_back():
    cases = [type("Case", (), {"run_id": f"r{i}", "group": "g", "chip": "c"})() for i in range(7)]
    (found,) = calibrate_own.systems(cases).values()
    yours = found[::calibrate_own.YOURS_EVERY]
    assert [c.run_id for c in yours] == ["r0", "r3", "r6"]
    assert not calibrate_own.systems(cases[:3])      # too few to hold any back


def test_each_published_serving_group_has_a_run_to_calibrate_on_and_runs_to_predict():
    """benchmarks/calibrate_serve.py: every engine-and-system group of the published tables has
    the operator's run (median TTFT and TPOT at 4 requests/s) and held-back figures at another
    rate and offline, none of them the calibrating run's."""
    import calibrate_serve

    groups = calibrate_serve.groups()
    assert len(groups) == 4
    for rows in groups.values():
        yours = {r.metric for r in rows if r.rate == calibrate_serve.YOURS_RATE}
        held = [r for r in rows if r.rate != calibrate_serve.YOURS_RATE]
        assert yours == {"ttft_p50_s", "tpot_p50_s"}
        assert {r.rate for r in held} == {8, None} and len(held) == 3


def test_a_published_serving_table_calibrates_on_every_third_run_in_its_order():
    """benchmarks/calibrate_serve.py: TensorRT-LLM 1.0's offline table, each model and system a
    group of ten ISL/OSL runs in the table's order; the first, fourth, seventh and tenth calibrate
    (a short-prompt, a long-output, a prefill-heavy and a long-context run), the six others are
    predicted."""
    import calibrate_serve

    groups = calibrate_serve.table_groups()
    assert len(groups) == 6
    for rows in groups.values():
        assert len(rows) == 10
        yours = rows[::calibrate_serve.YOURS_EVERY]
        assert [(r.isl, r.osl) for r in yours] == [(128, 128), (500, 2000), (2048, 128), (20000, 2000)]


def test_the_prior_weight_is_read_from_the_calibrating_runs_alone():
    """benchmarks/calibrate_own.py `prior_weight_coverage`: each calibrating run's held-out
    residual against the band the system's other calibrating runs give. Residuals spread as the
    shipped band's deviation are covered ~80 % at any weight; residuals a quarter as wide are
    covered more the more the (wider) shipped scale weighs, and the fitted weight is then the least."""
    import random

    from gclc.model.calibration import BAND_SCALE, SIGMA_PER_SCALE

    rng = random.Random(7)
    shipped = [[rng.gauss(0, BAND_SCALE * SIGMA_PER_SCALE) for _ in range(4)] for _ in range(400)]
    for k in (0.5, 2, 6):
        assert 0.72 < calibrate_own.prior_weight_coverage(shipped, k) < 0.88
    narrow = [[r / 4 for r in residuals] for residuals in shipped]
    assert calibrate_own.prior_weight_coverage(narrow, 6) > calibrate_own.prior_weight_coverage(narrow, 0) + 0.1
    assert calibrate_own.fitted_prior_runs(narrow) == min(calibrate_own.PRIOR_WEIGHTS)


def test_a_curve_whose_calibrating_sizes_are_all_flagged_keeps_the_designs_figures():
    """A calibrating size no fabric setting explains is flagged, not fitted: where every one of
    a curve's is (the Bitdeer two-host all-reduce was, before the model priced NCCL's NVLS tree),
    its held-back sizes are predicted as before; elsewhere the count is printed. The published
    curves are all explained now."""
    rows = calibrate_own.curve_rows()
    for name in calibrate_own.CURVES:
        found = [r for r in rows if r["curve"] == name]
        assert 0 <= found[0]["yours_outliers"] <= found[0]["yours"]
        if found[0]["yours_outliers"] == found[0]["yours"]:
            assert all(r["after"] == r["before"] for r in found)
    bitdeer = [r for r in rows if r["curve"] == "bitdeer_h100_2node_all_reduce.txt"]
    assert bitdeer[0]["yours_outliers"] == 0 and max(abs(r["after"]) for r in bitdeer) < 0.10


def _case(precision="bf16", moe=False, gpus=8, seq=4096, layers=32, hidden=4096):
    from types import SimpleNamespace

    return SimpleNamespace(cfg=SimpleNamespace(precision=precision, gpus=gpus, seq=seq),
                           job=SimpleNamespace(shape=SimpleNamespace(is_moe=moe, layers=layers, hidden=hidden)))


def test_a_held_back_run_is_counted_by_what_none_of_your_runs_ran():
    """calibrate_own.unseen reads the configurations only: each term is named where no
    calibrating run had it, none where one did."""
    yours = [_case(gpus=8, seq=2048), _case(gpus=64, seq=8192, layers=80, hidden=8192)]
    assert calibrate_own.unseen(_case(gpus=64, seq=4096), yours) == ()
    assert calibrate_own.unseen(_case(precision="fp8"), yours) == ("precision",)
    assert calibrate_own.unseen(_case(moe=True), yours) == ("moe",)
    assert calibrate_own.unseen(_case(gpus=128), yours) == ("gpus",)
    assert calibrate_own.unseen(_case(seq=1024), yours) == ("seq",)
    assert calibrate_own.unseen(_case(layers=48, hidden=7168), yours) == ("model",)
    assert set(calibrate_own.unseen(_case("fp8", True, 1024, 65536, 61, 7168), yours)) == set(calibrate_own.UNSEEN)


def test_a_constants_share_of_a_step_is_how_far_the_prediction_moves_with_it():
    """--detail's share: a prediction that scales as value^s has share s, whatever the offset."""
    from gclc.dsl.source import no_span
    from gclc.solver.calibrate.observe import Observation

    key = ("chip", "X", "bf16")
    for s, offset in ((0.0, 0.1), (0.37, -0.2), (1.0, 0.0)):
        obs = Observation("train", "g", "run", 1.0, "tokens/s", (key,), predict=None, partition=None, span=no_span(),
                          predict_values=lambda v, s=s, offset=offset: math.exp(offset + s * math.log(v[key] / 0.5)))
        assert calibrate_own.step_share(obs, {key: 0.6}, key) == pytest.approx(s, abs=1e-9)


def test_each_system_fits_its_own_nodes_step_overhead():
    """The default path: a published run's node is named for its system, so that gclc calibrate
    (solver/calibrate/step_overhead.py) fits one per-step host time per system from its runs alone."""
    from gclc.solver.calibrate.step_overhead import informed, key

    cases = calibrate_own.published.load(calibrate_own.HERE / "runs",
                                         calibrate_own.HERE / "data" / "public_runs_measured.csv")
    params: dict = {}   # the shipped constants: the test reads names and keys, not figures
    two = [c for c in cases if c.group == cases[0].group and c.chip == cases[0].chip][:2]
    other = next(c for c in cases if (c.group, c.chip) != (two[0].group, two[0].chip))
    found = [calibrate_own.observation(c, params) for c in two + [other]]
    assert found[0].partition.node.name == found[1].partition.node.name == f"{two[0].group}|{two[0].chip}"
    assert found[2].partition.node.name != found[0].partition.node.name
    # a system's lone run never informs a per-step time; each fitted key is its own system's
    for obs in informed(found):
        overhead = [k for k in obs.informs if k[0] == "node"]
        assert overhead in ([], [key(obs.partition.node.name)])
    assert not any(k[0] == "node" for k in informed(found)[2].informs)


def test_the_three_splits_make_each_run_of_a_system_yours_once():
    """calibrate_own.split_of: across the YOURS_EVERY splits a system's every run calibrates
    exactly once and is held back on the others; split 0 is the default's first, fourth, ... runs."""
    for n in (calibrate_own.MIN_RUNS, 7, 11):
        cases = [f"r{i}" for i in range(n)]
        seen = []
        for split in range(calibrate_own.YOURS_EVERY):
            yours, held = calibrate_own.split_of(cases, split)
            assert sorted(yours + held) == sorted(cases) and not set(yours) & set(held)
            seen += yours
        assert sorted(seen) == sorted(cases)
        assert calibrate_own.split_of(cases, 0)[0] == cases[::calibrate_own.YOURS_EVERY]


def test_all_splits_summary_is_each_splits_figures_and_their_mean():
    """--splits all: each split's median |error| and band coverage read from its own rows, the
    last line their mean (a change is judged on the mean, not on one split)."""
    def row(before, after, inside, moe=False):
        return {"before": before, "after": after, "inside_after": inside, "moe": moe}

    by_split = {0: [row(0.05, 0.02, True), row(-0.07, -0.04, True), row(0.1, 0.09, False, moe=True)],
                1: [row(0.03, 0.01, True), row(0.02, -0.03, False)],
                2: [row(-0.2, 0.05, True)]}
    summary = calibrate_own.splits_summary(by_split)
    assert summary["splits"][0]["after"] == pytest.approx(0.04)
    assert summary["splits"][1]["after"] == pytest.approx(0.02)
    assert summary["splits"][0]["band"] == pytest.approx(2 / 3)
    assert summary["splits"][0]["moe"] == pytest.approx(0.09)
    for key in ("before", "after", "band", "dense"):
        assert summary["mean"][key] == pytest.approx(statistics.mean(f[key] for f in summary["splits"].values()))
    assert [f["n"] for f in summary["splits"].values()] == [3, 2, 1]
