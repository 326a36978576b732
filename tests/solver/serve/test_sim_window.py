"""The simulator's KV cache with sliding-window layers, by hand: a sequence's layer-mean
occupancy grows a token a step until its length reaches the window; past it the windowed
layers stay flat and only the global ones grow (model/serve/kv.py `effective`)."""

from pathlib import Path

import attrs
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.solver.serve.sim import Pool, simulate
from gclc.testing.profiles import scaled_examples

DATA = Path(__file__).parent.parent.parent / "data" / "dense_variants.gcl"
SERVE = "\nserve chat {\n  model = Mistral7B\n  on = Pod\n  prompt = 6000\n  output = 500\n  batch = 64\n}\n"
ENTITY = serve_entity(check_text(DATA.read_text() + SERVE, str(DATA)).design, "chat")
_, PARTITION = placement(ENTITY)
MISTRAL = ModelShape.from_entity(ENTITY.get("model"))        # 32 layers, every one windowed at 4,096
MIXED = attrs.evolve(MISTRAL, layers=12, window=1024, global_every=6)   # 2 global layers, 10 windowed
GLOBAL = attrs.evolve(MISTRAL, window=0)
HALF_PAGE = 16 / 2                                            # vLLM's 16-token pages, half wasted on average


def run(shape, requests, kv_tokens=1e12, batch=8):
    r = replica(shape, ServeConfig(1, batch, "bf16"), PARTITION)
    return simulate(tuple(requests), Pool(r, 1, batch, kv_tokens))


def test_the_shapes():
    assert (MISTRAL.layers, MISTRAL.local_layers, MISTRAL.window) == (32, 32, 4096)
    assert (MIXED.layers, MIXED.local_layers, MIXED.window) == (12, 10, 1024)


def test_a_sequence_stops_growing_at_the_window_when_every_layer_is_windowed():
    """3,000 prompt + 2,000 output tokens: every layer keeps the last 4,096, so the cache
    peaks at 4,096 + 8 tokens (it grew a token a step only up to the window), not 5,008."""
    out = run(MISTRAL, [Request(0.0, 3000, 2000)])
    assert out.peak_kv_tokens == 4096 + HALF_PAGE
    assert run(GLOBAL, [Request(0.0, 3000, 2000)]).peak_kv_tokens == 5000 + HALF_PAGE


def test_global_layers_keep_growing_past_the_window():
    """12 layers, 2 global: a 500 + 1,500-token sequence ends holding 2,000 tokens in 2 layers
    and 1,024 in 10: (2 x 2,000 + 10 x 1,024) / 12 = 1,186.67 layer-mean tokens, plus 8."""
    out = run(MIXED, [Request(0.0, 500, 1500)])
    assert abs(out.peak_kv_tokens - ((2 * 2000 + 10 * 1024) / 12 + HALF_PAGE)) < 1e-9
    # below the window it grows a token a step in every layer: 500 + 400 tokens, all held
    assert run(MIXED, [Request(0.0, 500, 400)]).peak_kv_tokens == 900 + HALF_PAGE


def test_a_prompt_past_the_window_grows_only_in_global_layers():
    """A 5,000-token prompt already fills the 1,024-token windows: each output token adds
    2/12 of a layer-mean token. 300 tokens out: (2 x 5,300 + 10 x 1,024) / 12."""
    out = run(MIXED, [Request(0.0, 5000, 300)])
    assert abs(out.peak_kv_tokens - ((2 * 5300 + 10 * 1024) / 12 + HALF_PAGE)) < 1e-9


def test_two_sequences_fit_a_cache_of_exactly_their_windows():
    """Two 3,000 + 2,000-token sequences in lockstep hold 2 x 4,104 tokens at most: a cache of
    8,208 serves them without preempting; one token less preempts (the old upper bound of
    prompt plus output in every layer, 2 x 5,008, would have preempted both times)."""
    pair = [Request(0.0, 3000, 2000), Request(0.0, 3000, 2000)]
    assert run(MISTRAL, pair, kv_tokens=2 * (4096 + HALF_PAGE)).preemptions == 0
    assert run(MISTRAL, pair, kv_tokens=2 * (4096 + HALF_PAGE) - 1).preemptions > 0


@settings(max_examples=scaled_examples(20), deadline=None)
@given(st.integers(1, 6000), st.integers(2, 3000), st.sampled_from([256, 1024, 4096]), st.sampled_from([0, 2, 3, 6]))
def test_a_lone_sequence_peaks_at_what_it_holds_at_its_end(prompt, output, window, every):
    """Whatever the pattern, the simulated peak is the cache model's size of the finished
    sequence (model/serve/kv.py `tokens_held`): exact, neither the window's bound nor the prompt's."""
    shape = attrs.evolve(MISTRAL, layers=12, window=window, global_every=every)
    r = replica(shape, ServeConfig(1, 8, "bf16"), PARTITION)
    out = simulate((Request(0.0, prompt, output),), Pool(r, 1, 8, 1e12))
    assert abs(out.peak_kv_tokens - r.kv.tokens_held(prompt, output)) < 1e-6 * max(1.0, out.peak_kv_tokens)
