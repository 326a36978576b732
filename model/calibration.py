"""How far to trust a prediction: error bands from the calibration residuals.

`benchmarks/accuracy.py --json` over the 196 published runs in benchmarks/runs
(2026-11-30, after benchmarks/calibrate.py) gives the ratio measured / predicted
tokens/s per accelerator; its 10th and 90th percentiles bound 80 % of the runs.
"""

from __future__ import annotations

BAND_CONFIDENCE = 0.8
THROUGHPUT_RATIO = (0.89, 1.12)   # measured / predicted tokens/s: 10th and 90th percentiles


def throughput_band(tokens_per_s: float) -> tuple[float, float]:
    low, high = THROUGHPUT_RATIO
    return tokens_per_s * low, tokens_per_s * high


def time_band(seconds: float) -> tuple[float, float]:
    """Step time moves inversely to throughput."""
    low, high = THROUGHPUT_RATIO
    return seconds / high, seconds / low


def error_band(step_time: float, tokens_per_s: float, mfu: float) -> dict[str, tuple[float, float]]:
    low, high = THROUGHPUT_RATIO
    return {"step_time_s": time_band(step_time), "tokens_per_s": throughput_band(tokens_per_s),
            "mfu": (mfu * low, mfu * high)}


# Serving: measured / predicted output tokens/s over the 76 published throughput rows of
# benchmarks/serve_accuracy.py (2026-12-01; TensorRT-LLM v0.6.1 and v1.0 tables): its 10th
# and 90th percentiles (it over-predicts 8-way tensor-parallel 405B decoding most).
SERVE_THROUGHPUT_RATIO = (0.77, 1.10)
