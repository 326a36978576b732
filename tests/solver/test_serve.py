"""Serving model and planner: latency laws, SLOs respected, the best of the space chosen."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.inference import ServeConfig, estimate_serve, kv_bytes_per_token
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve import _configs, _limits, _violations, plan_serve, serve_entity

ROOT = Path(__file__).resolve().parents[2]
DESIGN = check_file(str(ROOT / "examples" / "custom_dsa.gcl")).design
ENTITY = serve_entity(DESIGN)
GRAPH, PARTITION = placement(ENTITY)
SHAPE = ModelShape.from_entity(ENTITY.get("model"))


def serve(tp=8, batch=16, partition=PARTITION, precision="fp8"):
    return estimate_serve(SHAPE, ServeConfig(tp, batch, precision), partition, 2048, 512)


def test_the_example_meets_its_slos():
    chosen = plan_serve(ENTITY)
    assert chosen.best is not None
    assert chosen.best.ttft <= 2.0 and chosen.best.tpot <= 0.050
    assert chosen.best.memory <= 0.85 * chosen.best.hbm
    assert chosen.replicas * chosen.best.gpus <= chosen.gpus


def test_the_plan_is_the_best_valid_configuration():
    chosen = plan_serve(ENTITY)
    limits = _limits(ENTITY)
    everything = [estimate_serve(SHAPE, cfg, PARTITION, 2048, 512)
                  for cfg in _configs(SHAPE, PARTITION, chosen.gpus, "fp8", ENTITY)]
    valid = [e for e in everything if not _violations(e, limits)]
    assert chosen.tokens_per_s == pytest.approx(max(e.tokens_per_s * (chosen.gpus // e.gpus) for e in valid))


@given(st.sampled_from([1, 2, 4, 8]), st.integers(0, 8))
def test_larger_batches_decode_slower_but_serve_more(tp, power):
    small, large = serve(tp, 2**power), serve(tp, 2 ** (power + 1))
    assert large.tpot >= small.tpot
    assert large.memory > small.memory
    assert large.tokens_per_s >= small.tokens_per_s * (1 - 1e-9)


@given(st.floats(1.0, 4.0), st.integers(0, 8))
def test_more_hbm_bandwidth_never_slows_decoding(factor, power):
    chip = PARTITION.node.accelerator
    faster = attrs.evolve(PARTITION, node=attrs.evolve(PARTITION.node, accelerator=attrs.evolve(
        chip, hbm_bandwidth=chip.hbm_bandwidth * factor)))
    assert serve(batch=2**power, partition=faster).tpot <= serve(batch=2**power).tpot * (1 + 1e-12)


def test_kv_cache_size_by_hand():
    # 126 layers x (K and V) x 8 KV heads / tp 8 x 128 dims x 1 byte (fp8)
    assert kv_bytes_per_token(SHAPE, ServeConfig(8, 1, "fp8")) == 126 * 2 * 1 * 128 * 1


def test_impossible_slo_is_infeasible_with_the_reason(tmp_path):
    text = (ROOT / "examples" / "custom_dsa.gcl").read_text().replace("tpot <= 50 ms", "tpot <= 1 ms")
    path = tmp_path / "strict.gcl"
    path.write_text(text)
    chosen = plan_serve(serve_entity(check_file(str(path)).design))
    assert chosen.best is None and any(b.startswith("tpot") for b in chosen.binding)
