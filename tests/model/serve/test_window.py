"""Serving models with sliding-window attention (Mistral 7B, Gemma 2/3, GPT-OSS): a windowed
layer keeps at most `window` keys per sequence, and its prefill and decode attention see at
most that many; global layers keep everything (model/serve/kv.py). Hand calculations first, then
laws, then a plan end to end."""

from pathlib import Path

import attrs
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.solver.serve.sim import Pool, simulate
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

DATA = Path(__file__).parent.parent.parent / "data" / "dense_variants.gcl"
SERVE = "\nserve chat {\n  model = Mistral7B\n  on = Pod\n  prompt = 6000\n  output = 500\n  batch = 64\n}\n"
DESIGN = check_text(DATA.read_text() + SERVE, str(DATA)).design
ENTITY = serve_entity(DESIGN, "chat")
_, PARTITION = placement(ENTITY)
MISTRAL = ModelShape.from_entity(ENTITY.get("model"))      # 32 layers, 8 KV heads of 128, window 4096
GLOBAL = attrs.evolve(MISTRAL, window=0)
# a Gemma-2/3-like pattern: every 6th layer global, the rest windowed (1,024 keys)
MIXED = attrs.evolve(MISTRAL, layers=12, window=1024, global_every=6)


def _replica(shape, tp=1, batch=1):
    return replica(shape, ServeConfig(tp, batch, "bf16"), PARTITION)


def test_the_shape_is_mistrals():
    assert (MISTRAL.layers, MISTRAL.kv_heads, MISTRAL.head_dim, MISTRAL.window) == (32, 8, 128, 4096)
    assert MISTRAL.local_layers == 32 and MIXED.local_layers == 10


def test_a_long_sequence_holds_the_window_in_every_windowed_layer():
    """By hand: bf16 K and V of 8 heads of 128 are 4,096 bytes per token and layer; a sequence
    of 10,000 tokens holds 4,096 of them in each of the 32 windowed layers, plus half a page."""
    r = _replica(MISTRAL)
    held = r.memory(1, 10_000, 0) - r.memory(0, 10_000, 0)
    assert held == (4096 + 16 / 2) * 32 * 4096
    g = _replica(GLOBAL)
    assert g.memory(1, 10_000, 0) - g.memory(0, 10_000, 0) == (10_000 + 8) * 32 * 4096


def test_tensor_parallelism_splits_the_windowed_cache_by_kv_heads():
    r = _replica(MISTRAL, tp=4)
    assert r.memory(1, 10_000, 0) - r.memory(0, 10_000, 0) == (4096 + 8) * 32 * 4096 / 4


def test_a_mixed_pattern_holds_all_tokens_only_in_its_global_layers():
    """By hand: 12 layers, 2 global (6th and 12th), 10 windowed at 1,024: a 5,000-token
    sequence holds (2 x 5,000 + 10 x 1,024) / 12 layer-mean tokens."""
    kv = _replica(MIXED).kv
    assert kv.effective(5000) == (2 * 5000 + 10 * 1024) / 12
    assert kv.effective(1000) == 1000          # inside the window every layer holds all
    assert kv.tokens_held(5000, 0) == (2 * 5000 + 10 * 1024) / 12 + 8


def test_prefill_attention_pairs_by_hand():
    """A 3,000-token prompt: a global layer sees sum p = 3,000^2 / 2 pairs; a 1,000-key window
    sees 1,000^2 / 2 over its first 1,000 positions and 1,000 for each of the other 2,000."""
    windowed = attrs.evolve(MISTRAL, window=1000)
    assert _replica(windowed).kv.pairs(0, 3000) == 1000 ** 2 / 2 + 1000 * 2000
    assert _replica(GLOBAL).kv.pairs(0, 3000) == 3000 ** 2 / 2
    # a chunk after 2,500 cached tokens sees the window only
    assert _replica(windowed).kv.pairs(2500, 500) == 1000 * 500
    # the mixed pattern averages its layers
    mixed = _replica(MIXED).kv
    assert mixed.pairs(0, 3000) == (2 * 3000 ** 2 / 2 + 10 * (1024 ** 2 / 2 + 1024 * (3000 - 1024))) / 12


def test_a_long_context_decodes_faster_and_a_short_one_the_same():
    """Decode reads the cache: past the window the windowed model reads less; inside it the same."""
    w, g = _replica(MISTRAL, batch=64), _replica(GLOBAL, batch=64)
    long_kv, short_kv = 64 * 16_000, 64 * 2_000
    assert w.iteration(64, long_kv) < g.iteration(64, long_kv)
    assert w.iteration(64, short_kv) == g.iteration(64, short_kv)


@settings(max_examples=scaled_examples(10), deadline=None)
@given(st.integers(256, 8192), st.integers(256, 8192), st.integers(1, 32), st.integers(1, 40_000))
def test_a_smaller_window_never_holds_or_reads_more(small, large, every, length):
    """Laws: shrinking a window never raises the cache, the decode step or the prefill; a
    window at least the sequence's length changes nothing."""
    small, large = min(small, large), max(small, large)
    a = _replica(attrs.evolve(MISTRAL, window=small, global_every=every if every > 1 else 0), batch=8)
    b = _replica(attrs.evolve(MISTRAL, window=large, global_every=every if every > 1 else 0), batch=8)
    assert a.kv.tokens_held(length, 0) <= b.kv.tokens_held(length, 0) + 1e-9
    assert a.iteration(8, 8 * length) <= b.iteration(8, 8 * length) * (1 + 1e-12)
    assert a.kv.pairs(0, length) <= b.kv.pairs(0, length) + 1e-6
    wide = _replica(attrs.evolve(MISTRAL, window=length), batch=8)
    assert wide.kv.tokens_held(length, 0) == _replica(GLOBAL).kv.tokens_held(length, 0)
    assert wide.kv.pairs(0, length) == _replica(GLOBAL).kv.pairs(0, length)


def test_the_window_lets_more_long_sequences_run_at_once():
    """With the same HBM, long prompts fit a bigger batch when the windowed layers free pages:
    the simulation with the windowed cache makes more tokens per second."""
    requests = tuple(Request(0.0, 20_000, 200) for _ in range(64))
    w, g = _replica(MISTRAL, batch=64), _replica(GLOBAL, batch=64)
    limit = 0.9 * w.hbm
    assert w.kv_capacity_tokens(limit) == g.kv_capacity_tokens(limit)   # capacity in layer-mean tokens
    fast = simulate(requests, Pool(w, 1, 64, w.kv_capacity_tokens(limit)))
    slow = simulate(requests, Pool(g, 1, 64, g.kv_capacity_tokens(limit)))
    assert fast.tokens_per_s > slow.tokens_per_s


def test_a_windowed_model_is_planned():
    plan = plan_serve(ENTITY)
    assert plan.decode is not None and plan.best.fits
    unwindowed = check_text(DATA.read_text().replace("window = window", "") + SERVE, str(DATA)).design
    reference = plan_serve(serve_entity(unwindowed, "chat"))
    assert plan.best.memory < reference.best.memory   # 6,500-token sequences: the window holds 4,096


def test_the_least_read_by_hand():
    """MIXED: 2 of 12 layers global. Sequences holding 12,000 tokens in all read at least the
    global layers' share, 12,000 x 2 / 12 = 2,000 layer-mean tokens; without a window, all."""
    assert _replica(MIXED).kv.least_total(12_000) == 2_000
    assert _replica(GLOBAL).kv.least_total(12_000) == 12_000


@given(st.lists(st.floats(min_value=0, max_value=200_000), min_size=1, max_size=20),
       st.sampled_from([MISTRAL, MIXED, GLOBAL]))
def test_the_least_read_is_below_every_split_of_the_tokens(lengths, shape):
    """Whatever the sequences' lengths, their exact layer-mean read is at least least_total of
    their sum: what the TPOT floor (solver/serve/bound.py) may count on from mean lengths."""
    kv = _replica(shape).kv
    assert kv.least_total(sum(lengths)) <= sum(kv.effective(n) for n in lengths) * (1 + 1e-12) + 1e-9
