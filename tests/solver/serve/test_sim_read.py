"""The simulator's decode reads the KV cache sequence by sequence (issue #19): with
sliding-window layers each sequence reads min(length, window) in a windowed layer and all of
it in a global one, as its occupancy is counted, not the mean length's read (an upper bound
by Jensen). Models without windows read exactly what they did."""

from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_text
from gclc.compiler.serve_trace import Request
from gclc.model.serve.inference import Replica, ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.solver.serve.sim import Pool, simulate

DATA = Path(__file__).parent.parent.parent / "data" / "dense_variants.gcl"
SERVE = "\nserve chat {\n  model = Mistral7B\n  on = Pod\n  prompt = 6000\n  output = 500\n  batch = 64\n}\n"
ENTITY = serve_entity(check_text(DATA.read_text() + SERVE, str(DATA)).design, "chat")
_, PARTITION = placement(ENTITY)
MISTRAL = ModelShape.from_entity(ENTITY.get("model"))
MIXED = attrs.evolve(MISTRAL, layers=12, window=1024, global_every=6)   # 2 global layers, 10 windowed at 1,024
GLOBAL = attrs.evolve(MISTRAL, window=0)


def _decode_reads(monkeypatch, shape, requests):
    """The real simulation, observed: the (decoding, kv_tokens, layer_mean) of each decode-only
    iteration (a spy that calls the real Replica.iteration, not a stand-in)."""
    seen, real = [], Replica.iteration

    def spy(self, decoding, kv_tokens, prefill=0.0, pairs=0.0, prefilling=None, layer_mean=False):
        if decoding and not prefill:
            seen.append((decoding, kv_tokens, layer_mean))
        return real(self, decoding, kv_tokens, prefill, pairs, prefilling, layer_mean)

    monkeypatch.setattr(Replica, "iteration", spy)
    r = replica(shape, ServeConfig(1, 8, "bf16"), PARTITION)
    simulate(tuple(requests), Pool(r, 1, 8, 1e12))
    return seen


def test_two_sequences_of_different_lengths_read_their_own_windows(monkeypatch):
    """By hand: prompts of 5,000 and 500 tokens decode together; the first iteration starts
    with the first arrival alone, so the long one is a token ahead. With m tokens out of the
    short one, the long one reads (2 (5,000 + m + 1) + 10 x 1,024) / 12 layer-mean tokens,
    the short one (inside the window) 500 + m. At the mean length (2,750.5 + m, past the
    window) the read would be 2 (2 (2,750.5 + m) + 10,240) / 12, more."""
    seen = _decode_reads(monkeypatch, MIXED, [Request(0.0, 5000, 300), Request(0.0, 500, 300)])
    both = [(kv, exact) for n, kv, exact in seen if n == 2]
    assert len(both) >= 200 and all(exact for _, exact in both)
    base, per_token = (2 * 5001 + 10 * 1024) / 12 + 500, 1 + 2 / 12
    outs = [(kv - base) / per_token for kv, _ in both]
    assert outs == pytest.approx(list(range(1, len(both) + 1)), abs=1e-6)   # m = 1, 2, 3, ...
    for m, (kv, _) in enumerate(both, start=1):
        assert kv < 2 * (2 * (2750.5 + m) + 10 * 1024) / 12                  # below the mean length's read


def test_equal_lengths_read_what_the_mean_length_reads():
    """Jensen's bound is exact for equal lengths: 4 sequences of 3,000 tokens, read as totals
    or as layer-mean tokens summed sequence by sequence, take the same time."""
    r = replica(MIXED, ServeConfig(1, 8, "bf16"), PARTITION)
    assert r.iteration(4, 4 * 3000.0) == r.iteration(4, 4 * r.kv.effective(3000.0), layer_mean=True)


def test_without_windows_the_read_is_the_tokens_cached(monkeypatch):
    seen = _decode_reads(monkeypatch, GLOBAL, [Request(0.0, 5000, 50), Request(0.0, 500, 50)])
    both = [kv for n, kv, _ in seen if n == 2]
    assert both and both == [5501 + 2 * m for m in range(1, len(both) + 1)]   # the long one a token ahead
