"""A stated `graph_batch` is the engine's CUDA-graph ceiling: on vLLM V1, whose piecewise and
decode graphs share one capture ceiling (max_cudagraph_capture_size, in tokens), it bounds both.
It had been left beside the profile's graph_tokens = 512, so `graph_batch = 64` or `0` changed
no plan of a decode batch under 512 tokens."""

from __future__ import annotations

from gclc.model.serve.engines import profile


def test_a_stated_ceiling_bounds_v1s_piecewise_graphs_too():
    v1 = profile("vllm_v1")
    assert v1.engine().graphed(decoding=100, tokens=100)                  # the profile's 512
    assert not v1.engine(graph_batch=64).graphed(decoding=100, tokens=100)
    assert v1.engine(graph_batch=64).graphed(decoding=64, tokens=64)
    assert not v1.engine(graph_batch=0).graphed(decoding=4, tokens=4)      # no graphs: every iteration eager
    assert not v1.engine(graph_batch=64).graphed(decoding=8, tokens=200)   # a mixed iteration past the ceiling


def test_an_engine_without_piecewise_graphs_is_as_before():
    sglang = profile("sglang")
    assert sglang.engine(graph_batch=64).graph_tokens == 0
    assert sglang.engine(graph_batch=64).graphed(decoding=64, tokens=64)
    assert not sglang.engine(graph_batch=64).graphed(decoding=100, tokens=100)
