"""Serving runs measured at the wall, for benchmarks/power_accuracy.py: gclc's system power and
energy per output token of a published inference run against the run's own.

The rows are benchmarks/data/power_serving.csv (MLPerf Inference v5.1 power results; the
v4.0/v4.1 rounds are kept out as the independent check), each with its source. gclc predicts
each from the run's model, node and configuration alone, as a serve plan does:

- the GPUs' draw: the replica's full-batch estimate computes for its `busy` share and streams
  weights and cache for the rest (model/power.py serving_activity), an Offline run at
  capacity; a Server run computes for the work its scheduled rate brings and streams while a
  replica holds a request (solver/serve/screen.py pool_share);
- the host parts at the load those GPUs put on them (compiler/host_load.py), on one std node
  without a scale-out fabric (the runs are one node);
- the throughput: Offline, the replicas' analytic full-batch estimate (what the serve search
  screens by; the simulator would cost tens of seconds of CPU per run at MLPerf's queue
  lengths); Server, the scheduled rate's tokens where that capacity carries it, else the capacity.

Energy per token is the predicted power over the predicted tokens per second, against the
measured mean power over the measured tokens per second. Nothing here is fitted on these rows.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "power_serving.csv"
DESIGN = HERE / "designs" / "serving_models.gcl"
CLUSTER = "B200_Box"      # the serving design's 8 x B200 node: its partition sizes the replicas


def rows() -> list[dict]:
    with DATA.open(newline="") as f:
        return list(csv.DictReader(f))


@functools.lru_cache(maxsize=1)
def _design():
    from gclc.compiler.driver import check_file

    result = check_file(str(DESIGN))
    if result.design is None or not result.ok:
        raise SystemExit(f"{DESIGN}: does not check: {result.diagnostics}")
    return result.design


def _mlperf_row(row: dict):
    import serve_mlperf as sm

    tokens, samples = float(row["tokens_per_s"]), float(row["samples_per_s"])
    sm.ISL.setdefault(row["model"], int(row["isl"]))    # the row's own estimate where the module has none
    return sm.MLPerfRow("MLPerf51", row["model"], CLUSTER, 8, row["precision"], int(row["tp"]), 1, int(row["batch"]),
                        "Offline", samples, tokens, "tok_s", tokens, row["source_locator"])


def gpu_watts_and_tokens(row: dict) -> tuple[float, float]:
    """(W per GPU as the plan charges them, predicted output tokens per second of the node)."""
    import serve_mlperf as sm
    from gclc.model.serve.inference import ServeConfig, estimate, replica
    from gclc.model.shape import ModelShape
    from gclc.model.power import gpu_watts_of
    from gclc.solver.serve.screen import Side, pools_power

    design, probe = _design(), _mlperf_row(row)
    base = sm._replica(probe, design, probe.batch)
    cfg = ServeConfig(int(row["tp"]), int(row["batch"]), row["precision"], pp=int(row["pp"]),
                      kv_precision=base.config.kv_precision)
    r = replica(ModelShape.from_entity(design[row["model"]]), cfg, base.partition, base.engine)
    isl, osl = probe.isl, probe.osl
    e = estimate(r, isl, osl)
    side = Side(r, e, 8 // r.gpus)
    offline = row["scenario"] == "Offline"
    rate = None if offline else float(row["samples_per_s"])
    graph = _plain_graph()
    watts = pools_power(graph, graph.partitions[0], [side], rate)
    per_gpu = gpu_watts_of(graph, graph.partitions[0], 8, watts)
    full = side.count * e.tokens_per_s       # the node's modeled full-batch capacity
    tokens = full if offline else min(float(row["samples_per_s"]) * osl, full)
    return per_gpu, tokens


@functools.lru_cache(maxsize=1)
def _plain_graph():
    import power_accuracy

    return power_accuracy._graph("DGX_B200")
