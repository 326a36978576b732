"""A stated `graph_batch` is the engine's CUDA-graph ceiling: on vLLM V1, whose piecewise and
decode graphs share one capture ceiling (max_cudagraph_capture_size, in tokens), it bounds both.
It had been left beside the profile's graph_tokens = 512, so `graph_batch = 64` or `0` changed
no plan of a decode batch under 512 tokens."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from gclc.model.serve.engines import profile
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()


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


@settings(max_examples=scaled_examples(30), deadline=None)
@given(st.integers(1, 1200), st.integers(0, 4), st.sampled_from([None, 64, 256, 512]))
def test_vllm_v1_counts_a_decode_steps_draft_tokens_and_sglang_its_sequences(batch, draft, ceiling):
    """vLLM V1's capture ceiling counts tokens, a decode step of B sequences with k draft tokens being
    B (1 + k) of them (vllm/config/vllm.py `uniform_decode_query_len`, model/serve/engines.py
    [v1graphs]): graphed exactly when B (1 + k) is within it, so a longer draft never graphs a step a
    shorter one leaves eager. SGLang captures batch sizes in requests (0.5.23 sglang/srt/model_executor/
    runner/base_cuda_graph_runner.py `get_batch_sizes_to_capture`: "model input token count = bs x" the
    request's width): a step is graphed by its sequences, whatever its draft."""
    knobs = {"graph_batch": ceiling} if ceiling is not None else {}
    v1 = profile("vllm_v1").engine(draft=draft, acceptance=0.5 if draft else 0.0, **knobs)
    tokens = batch * (1 + draft)
    assert v1.graphed(batch, tokens) == (tokens <= v1.graph_tokens)
    if draft:
        shorter = profile("vllm_v1").engine(draft=draft - 1, acceptance=0.5 if draft > 1 else 0.0, **knobs)
        assert shorter.graphed(batch, batch * draft) or not v1.graphed(batch, tokens)
    sglang = profile("sglang").engine(draft=draft, acceptance=0.5 if draft else 0.0, **knobs)
    assert sglang.graphed(batch, tokens) == (batch <= sglang.graph_batch)


def test_a_speculative_decode_step_past_v1s_ceiling_in_tokens_runs_eager():
    """By hand: MTP with one draft token, 300 sequences decode 600 tokens a step: past vLLM's 512, so
    the step is issued kernel by kernel (it had been graphed: 300 sequences are within 512)."""
    mtp = profile("vllm_v1").engine(draft=1, acceptance=0.8)
    assert mtp.graphed(256, 512) and not mtp.graphed(300, 600)
