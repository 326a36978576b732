"""The shared parts of the serving benchmarks (benchmarks/serve_common.py) and the
cross-validation of benchmarks/serve_accuracy.py: a held-out group is predicted with the p the
other groups chose, never with its own."""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.solver.serve.sim import Outcome
from gclc.testing import load_profile

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import serve_accuracy  # noqa: E402
import serve_common  # noqa: E402
import serve_mlperf  # noqa: E402

load_profile()


@given(st.floats(1.0, 5000.0), st.integers(0, 2**32 - 1))
def test_spread_output_lengths_stay_between_one_and_twice_the_mean(osl, seed):
    rng = random.Random(seed)
    mean = max(1, round(osl))
    for _ in range(20):
        assert 1 <= serve_common.output_length(rng, osl, True) <= 2 * mean - 1
    assert serve_common.output_length(rng, osl, False) == mean


def test_spread_output_lengths_keep_the_mean():
    """Uniform on 1 .. 2 x 290 - 1: mean 290; 40,000 draws land within 1 % of it."""
    lengths = [r.output for r in serve_common.queued(40_000, 294, 290, vary=True)]
    assert abs(statistics.fmean(lengths) - 290) < 0.01 * 290
    assert min(lengths) >= 1 and max(lengths) <= 579


def test_poisson_arrivals_by_hand():
    """Gaps exponential at the rate: 20,000 arrivals at 75 req/s span about 20,000 / 75 s; the
    same seed gives the same requests."""
    requests = serve_common.poisson_arrivals(75.0, 20_000, 294, 290)
    assert abs(requests[-1].arrival - 20_000 / 75) < 0.03 * 20_000 / 75
    assert all(a.arrival < b.arrival for a, b in zip(requests, requests[1:]))
    assert requests == serve_common.poisson_arrivals(75.0, 20_000, 294, 290)
    assert {r.output for r in requests} == {290}


def test_a_latency_row_reads_its_percentile():
    outcome = Outcome(ttft=(0.1, 0.2, 0.3, 0.4), tpot=(0.01, 0.02, 0.03, 0.04), e2e=(1, 2, 3, 4), met=4,
                      window=1.0, output_tokens=10.0, preemptions=0)
    assert serve_common.latency(outcome, "ttft_p50_s") == 0.2
    assert serve_common.latency(outcome, "tpot_p99_s") == 0.04


def _row(group: str, error: float) -> dict:
    return {"source": group, "model": group, "error": error, "metric": "tok_s"}


def test_a_held_out_group_gets_the_p_the_others_chose():
    """Group A alone would pick p = 1.5 (its error 0 there), the others pick p = 2: A is
    predicted at p = 2 and so carries its p = 2 error; B and C at the p that A and the other chose."""
    table = {1.5: [_row("A", 0.0), _row("B", 0.5), _row("C", 0.5)],
             2.0: [_row("A", 0.3), _row("B", 0.1), _row("C", 0.1)]}
    held, lines = serve_accuracy.cross_validate(table, "source")
    by_group = {r["source"]: r["error"] for r in held}
    assert by_group == {"A": 0.3, "B": 0.1, "C": 0.1}
    assert len(lines) == 3 and "p = 2" in lines[0]


def test_mixtral_runs_at_the_submitters_effective_bits():
    """effective_bits 8.75 over fp8 and bf16: 0.75 of the 8 extra bits, 9.375 % of the weights at bf16."""
    assert serve_mlperf.WIDE_SHARE == {"Mixtral_8x7B": 0.09375}


def test_in_flight_is_littles_law_on_the_log():
    """The H100 Llama 2 70B Server run: 75.10 scheduled samples/s over 4 replicas of tp 2, 21,605.79
    output tokens/s (287.7 per sample), TPOT P50 0.156 s: 75.10 / 4 x 287.7 x 0.156 = 843 decoding."""
    design = check_file(str(serve_accuracy.DESIGN)).design
    row = next(r for r in serve_mlperf.rows() if r.metric == "tpot_p50_s" and r.model == "Llama2_70B"
               and r.cluster == "H100_Box")
    line = serve_mlperf.in_flight_line(row, design, simulated=False)   # the count from the log, no simulation
    expected = 75.10 / 4 * (21605.79 / 75.10) * 0.156419276
    assert f"about {expected:,.0f} sequences" in line and "batch limit is 1024" in line


def test_deepseek_offline_rows_run_the_submissions_configuration():
    """NVIDIA's v5.1 DeepSeek-R1 Offline configs: max_batch_size 512 per attention-DP rank over 8
    ranks, max_num_tokens 4608, max_util (recompute), CUDA graphs up to 512 per rank; one replica
    of tp 1 x 8 attention groups; the Server rows of other models keep their own flags."""
    design = check_file(str(serve_accuracy.DESIGN)).design
    rows = [r for r in serve_mlperf.rows() if r.model == "DeepSeekR1"]
    assert {r.cluster for r in rows} == {"B200_Box", "GB200_Rack"}
    for row in rows:
        replica = serve_mlperf._replica(row, design, serve_mlperf._batch(row, design))
        assert (replica.config.tp, replica.config.ep, replica.config.batch) == (1, 8, 4096)
        engine = replica.engine
        assert (engine.chunk, engine.preemption, engine.graph_batch) == (4608, "recompute", 4096)
    offline = next(r for r in serve_mlperf.rows() if r.model == "Llama2_70B" and r.scenario == "Offline")
    assert serve_mlperf._replica(offline, design).engine.chunk != 4608


def test_deepseeks_nvfp4_checkpoint_keeps_its_attention_projections_wide_by_hand():
    """hf_quant_config.json's exclusions on DeepSeek-R1 (hidden 7168, 128 heads, q latent 1536, KV
    latent 512 + rotary 64, 61 layers, 58 MoE layers of 256 experts, vocabulary 129,280): fused_a
    7168 x (1536 + 512 + 64), q_b 1536 x 128 x 192, kv_b 512 x 128 x 256 per layer, embeddings and
    head 2 x 129,280 x 7168, gates 58 x 7168 x 256; over the weights outside the routed experts."""
    design = check_file(str(serve_accuracy.DESIGN)).design
    from gclc.model.shape import ModelShape
    shape = ModelShape.from_entity(design["DeepSeekR1"])
    wide = 61 * (7168 * 2112 + 1536 * 128 * 192 + 512 * 128 * 256) + 2 * 129280 * 7168 + 58 * 7168 * 256
    dense = shape.params - 256 * 3 * 7168 * 2048 * 58
    assert serve_mlperf.nvfp4_wide_share(shape) == wide / dense
    assert 0.3 < wide / dense < 0.4
