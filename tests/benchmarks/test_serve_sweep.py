"""benchmarks/serve_sweep.py as a user runs it: a rate sweep of a planned serve job prints one
row per offered rate and a last summary line that names the latency knee (where the goodput
falls below 90 % of the offered rate), past the rate the plan was made for."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Llama 3.1 8B on 2 DGX H100 (tests/data/serve_cost.gcl) at 20 requests/s
JOB = """
serve chat {
  model = Llama8B
  on = Box
  precision = fp8
  prompt = uniform(low = 500, high = 1500)
  output = exponential(mean = 150)
  rate = 20 req/s
  slo { ttft.p99 <= 500 ms  tpot.p99 <= 30 ms }
}
"""


def sweep(path: Path) -> list[str]:
    spec = importlib.util.spec_from_file_location("serve_sweep", ROOT / "benchmarks" / "serve_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, argv = io.StringIO(), sys.argv
    sys.argv = ["serve_sweep.py", str(path)]
    try:
        with contextlib.redirect_stdout(out):
            module.main()
    finally:
        sys.argv = argv
    return out.getvalue().splitlines()


def test_the_rate_sweep_prints_its_table_and_the_knee(tmp_path):
    path = tmp_path / "chat.gcl"
    path.write_text((ROOT / "tests" / "data" / "serve_cost.gcl").read_text().split("serve chat")[0] + JOB)
    lines = sweep(path)
    assert lines[0].startswith("chat: ") and "planned for 20 requests/s" in lines[0]
    assert lines[1].split()[:3] == ["rate", "TTFT", "P50"]
    rows = [[float(x.rstrip("m").replace(",", "")) for x in line.split()] for line in lines[2:-1]]
    assert [r[0] for r in rows] == [5, 10, 15, 20, 25, 30, 40, 60]   # 0.25x to 3x the planned rate
    knee = re.fullmatch(r"serve sweep: 8 rates simulated in [\d.]+ s; goodput falls below 90 % of the offered "
                        r"rate at ([\d,.]+) requests/s", lines[-1])
    assert knee and float(knee.group(1)) > 20                        # the plan carries its own rate
    at_plan, top = rows[3], rows[-1]
    assert at_plan[6] >= 0.9 * 20 and at_plan[2] <= 0.5             # goodput and TTFT P99 within the SLO
    assert top[2] > 5 * at_plan[2]                                   # past the knee the tail explodes
