"""The serve plans' bands (model/calibration.py SERVE_THROUGHPUT_RATIO and SERVE_LATENCY_RATIO) are what the serving
benchmark measured: the 10th and 90th percentiles of measured / predicted over its throughput rows, its TTFT rows and
its TPOT rows, held out by model (benchmarks/data/serve_residuals.csv, written by
`benchmarks/serve_accuracy.py --residuals`), and a plan's text and JSON state exactly that band
around their own figures."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from gclc.compiler.driver import check_file
from gclc.model.calibration import BAND_CONFIDENCE, SERVE_LATENCY_RATIO, SERVE_THROUGHPUT_RATIO
from gclc.model.serve import inference
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.views.serve import latency_figures, serve_json, serve_text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import serve_accuracy  # noqa: E402

RESIDUALS = ROOT / "benchmarks" / "data" / "serve_residuals.csv"


def _rows() -> list[dict]:
    with RESIDUALS.open() as f:
        return [r | {"measured": float(r["measured"]), "predicted": float(r["predicted"])} for r in csv.DictReader(f)]


@pytest.mark.parametrize("quantity", ["ttft", "tpot"])
def test_the_latency_band_is_the_benchmarks_held_out_deciles(quantity):
    low, high, count = serve_accuracy.ratio_band(_rows(), quantity)
    assert count >= 10
    assert SERVE_LATENCY_RATIO[quantity] == (round(low, 2), round(high, 2))


def test_the_throughput_band_is_the_benchmarks_held_out_deciles():
    low, high, count = serve_accuracy.ratio_band(_rows(), "throughput")
    assert count >= 50
    assert SERVE_THROUGHPUT_RATIO == (round(low, 2), round(high, 2))


def test_the_residuals_come_from_the_model_as_it_is():
    """The unloaded TTFT rows (TensorRT-LLM v0.5, batch 1) predicted again, each at the p it was
    held out with, give the stored predictions: the file is not stale."""
    design = check_file(str(serve_accuracy.DESIGN)).design
    stored = [r for r in _rows() if r["source"] == "TRT05L"]
    assert len(stored) == 16
    by_key = {(r.model, r.cluster, r.isl): r for r in serve_accuracy._rows() if r.source == "TRT05L"}
    shipped = inference.ROOFLINE_P
    try:
        for r in stored:
            inference.ROOFLINE_P = float(r["p"])
            again = serve_accuracy.predict(by_key[r["model"], r["cluster"], int(r["isl"])], design)
            assert again == pytest.approx(r["predicted"], rel=1e-9)
    finally:
        inference.ROOFLINE_P = shipped


def test_a_plan_states_the_band_around_its_own_latencies():
    plan = plan_serve(serve_entity(check_file(str(ROOT / "examples" / "custom_dsa.gcl")).design))
    band = serve_json(plan)["error_band"]
    figures = latency_figures(plan)
    assert figures and band["confidence"] == BAND_CONFIDENCE
    for key, value in figures.items():
        low, high = SERVE_LATENCY_RATIO[key.split("_")[0]]
        assert band[key] == pytest.approx([value * low, value * high])
    line = next(x for x in serve_text(plan).splitlines() if x.lstrip().startswith("band"))
    for name, quantity in (("TTFT", "ttft"), ("TPOT", "tpot")):
        low, high = SERVE_LATENCY_RATIO[quantity]
        assert f"{name} x{low:.2f} to x{high:.2f}" in line


@pytest.mark.parametrize("quantity", ["throughput", "ttft", "tpot"])
def test_each_band_holds_between_75_and_85_percent_of_its_rows(quantity):
    """An 80 % band: the rows left out at each end are the nearest count to a tenth, so the band
    holds 75-85 % of the held-out rows (29 TTFT rows: 3 out at each end, 79 %; 2 would be 86 %)."""
    low, high, count = serve_accuracy.ratio_band(_rows(), quantity)
    ratios = [r["measured"] / r["predicted"] for r in _rows() if r["metric"].startswith(serve_accuracy.QUANTITIES[quantity])]
    assert 0.75 <= sum(low <= x <= high for x in ratios) / count <= 0.85
