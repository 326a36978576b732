"""A replica memoizes the parts of an iteration's cost that depend on its new tokens alone
(the simulator asks for the same batch sizes step after step). The memo must be exact: an
iteration costs the same floats whatever was asked before it, and the memo stays bounded."""

from pathlib import Path

from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.serve import inference
from gclc.model.serve.inference import Engine, ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.testing import load_profile

load_profile()

ROOT = Path(__file__).resolve().parents[3]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
_, PARTITION = placement(ENTITY)
MOE = ModelShape.from_entity(ENTITY.get("model"))
CONFIGS = (ServeConfig(2, 256, "fp8", ep=8), ServeConfig(1, 64, "fp8", ep=8, pp=2), ServeConfig(8, 32, "bf16"))
STEPS = st.tuples(st.integers(0, 16), st.floats(0, 2e6), st.sampled_from([0.0, 0.25, 0.5, 17.5, 1000.0, 8192.0]))


@given(st.sampled_from(CONFIGS), st.lists(STEPS, min_size=1, max_size=12), STEPS)
def test_an_iteration_costs_the_same_whatever_came_before(config, before, step):
    warmed = replica(MOE, config, PARTITION, Engine(block=64))
    for decoding, kv, prefill in before:
        warmed.iteration(decoding, kv, prefill, prefill * prefill / 2)
    decoding, kv, prefill = step
    fresh = replica(MOE, config, PARTITION, Engine(block=64))
    args = (decoding, kv, prefill, prefill * prefill / 2)
    assert warmed.iteration(*args) == fresh.iteration(*args)          # the same float, not merely close
    assert warmed.stage_time(prefill + decoding, kv, 0.0) == fresh.stage_time(prefill + decoding, kv, 0.0)


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(inference, "MEMO_ENTRIES", 8)
    r = replica(MOE, CONFIGS[0], PARTITION)
    for tokens in range(1, 100):
        r.iteration(tokens, 1000.0 * tokens)
        assert len(r._memo) <= 8 + 1                                  # token counts and the attention terms
    assert r.iteration(5, 5000.0) == replica(MOE, CONFIGS[0], PARTITION).iteration(5, 5000.0)
