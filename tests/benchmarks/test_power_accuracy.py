"""benchmarks/power_accuracy.py (issue 28, power as measured): its rows carry their sources, its
prediction is gclc's own node draw with the GPUs at the row's power, the one constant it fits is
the one compiler/host_load.py ships, and its summary states the cross-validated error of
system power and of energy per token (serving runs predicted from their configuration, never
fitted), each within the issue's 10 %, with a band."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gclc.compiler import host_load

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_power_accuracy", ROOT / "benchmarks" / "power_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_measurement_names_its_source_and_where_it_was_taken():
    rows = _bench().rows()
    assert rows and len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source"] and r["source_locator"] and r["measured_at"] and r["source_group"], r["id"]
        assert 1e3 < float(r["measured_w"]) < 2e4
        assert r["gpu_w"] == "idle" or 0 < float(r["gpu_w"]) <= 1200
    assert len({r["source_group"] for r in rows if r["kind"] != "idle"}) >= 2   # something to leave out


def test_every_serving_run_names_its_source_its_configuration_and_its_throughput():
    import csv

    with (ROOT / "benchmarks" / "data" / "power_serving.csv").open(newline="") as f:
        runs = list(csv.DictReader(f))
    assert runs and len({r["id"] for r in runs}) == len(runs)
    for r in runs:
        assert r["source"] and r["source_locator"] and r["measured_at"] and r["notes"], r["id"]
        assert "v4.0" not in r["source"] and "v4.1" not in r["source"]     # the independent check stays out
        assert 1e3 < float(r["measured_w"]) < 2e4 and float(r["tokens_per_s"]) > 0
        assert r["scenario"] in ("Offline", "Server") and int(r["tp"]) * int(r["pp"]) in (1, 2, 4, 8)


def test_the_shipped_constant_is_the_fit_and_the_cross_validated_error_is_within_ten_percent(capsys):
    bench = _bench()
    loaded = [bench.terms(r) + (float(r["measured_w"]),) for r in bench.rows() if r["kind"] != "idle"]
    assert abs(bench.fit(loaded) - host_load.OVERHEAD_BUSY) < 0.005
    # the first row (a DGX H100 with its GPUs at 700 W): above half and below its 10.2 kW rating
    a, c, _ = loaded[0]
    assert 0.5 * 10.2e3 < a + host_load.OVERHEAD_BUSY * c < 10.2e3     # below the DGX H100's 10.2 kW rating
    assert bench.main([]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("power accuracy: ") and "leave-one-source-out" in last and "one constant fitted" in last
    assert "s CPU /" in last
    median = float(last.split("system power median |error| ")[1].split("%")[0])
    assert median <= 10.0, last
    energy = float(last.split("energy per token")[1].split("median |error| ")[1].split("%")[0])
    assert energy <= 10.0, last
    assert "band ±" in last
