"""benchmarks/accuracy_plot.py draws the two accuracy figures of docs/model.md from the
benchmarks' JSON: both SVGs come out, the same JSON gives the same bytes (the committed
figures can be regenerated), and the summary counts what it drew."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import accuracy_plot  # noqa: E402


def _inputs(tmp_path: Path) -> tuple[str, str]:
    cv = [{"run_id": f"r{i}", "group": "g", "measured": m, "predicted": p, "error": p / m - 1, "flags": [],
           "in_band": abs(p / m - 1) < 0.15} for i, (m, p) in enumerate([(1000, 1050), (2000, 1700), (500, 520)])]
    never = [{"run_id": "v1", "measured": 3000.0, "predicted": 3300.0, "error": 0.1, "band": [2900.0, 3600.0],
              "in_band": True},
             {"run_id": "v2", "measured": 800.0, "predicted": 1100.0, "error": 0.375, "band": [1000.0, 1200.0],
              "in_band": False},
             {"run_id": "v3", "measured": 900.0, "predicted": None, "error": None, "band": None, "in_band": False}]
    accuracy, validation = tmp_path / "accuracy.json", tmp_path / "validation.json"
    accuracy.write_text(json.dumps({"runs": [], "cross_validated": {"runs": cv}}))
    validation.write_text(json.dumps({"runs": never}))
    return str(accuracy), str(validation)


def test_the_figures_are_drawn_the_same_each_time(tmp_path, capsys):
    accuracy, validation = _inputs(tmp_path)
    drawn = []
    for out in (tmp_path / "a", tmp_path / "b"):
        assert accuracy_plot.main([accuracy, validation, "-o", str(out)]) == 0
        drawn.append({name: (out / name).read_bytes() for name in ("accuracy_cv.svg", "validation.svg")})
    assert drawn[0] == drawn[1]
    assert b"<svg" in drawn[0]["validation.svg"] and b"Never fitted: 2 runs" in drawn[0]["validation.svg"]
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert "cv n=3 median=5.0% band80=67%" in summary and "never fitted n=2 median=23.8% band80=50%" in summary


def test_an_accuracy_run_without_cross_validation_draws_nothing(tmp_path):
    accuracy, validation = _inputs(tmp_path)
    Path(accuracy).write_text(json.dumps({"runs": [], "cross_validated": {}}))
    assert accuracy_plot.main([accuracy, validation, "-o", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out" / "accuracy_cv.svg").exists()
