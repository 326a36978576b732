"""Mixed-precision checkpoints in the serving model (ServeConfig.wide_share): a share of the
weights kept at bf16 beside fp8 ones (ModelOpt AutoQuantize's "effective bits") stores two
bytes per weight and runs its GEMMs at the bf16 rate; the two parts' times add."""

from pathlib import Path

import attrs
import pytest
from hypothesis import example, given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.compute import gemm_rate
from gclc.model.serve.inference import ServeConfig, mixed_gemm_rate, replica, weight_bytes
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

ROOT = Path(__file__).resolve().parents[3]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
_, PARTITION = placement(ENTITY)
MOE = ModelShape.from_entity(ENTITY.get("model"))
CHIP = PARTITION.node.accelerator


def test_weight_bytes_of_a_mix_by_hand():
    """8.75 effective bits over fp8: 9.375 % of the weights at two bytes, the rest at one."""
    share = (8.75 - 8) / (16 - 8)
    assert weight_bytes("fp8", share) == pytest.approx(8.75 / 8)
    assert weight_bytes("fp8") == 1.0 and weight_bytes("fp8", 1.0) == weight_bytes("bf16") == 2.0


def test_mixed_gemm_rate_adds_the_two_parts_times():
    """A FLOP of the mix takes (1 - s) / fp8 rate + s / bf16 rate seconds."""
    share, shape = 0.25, (4096, 7168, 7168)
    mixed = mixed_gemm_rate(CHIP, ServeConfig(1, 1, "fp8", wide_share=share), *shape)
    expected = 1 / ((1 - share) / gemm_rate(CHIP, "fp8", *shape) + share / gemm_rate(CHIP, "bf16", *shape))
    assert mixed == pytest.approx(expected, rel=1e-12)
    assert mixed_gemm_rate(CHIP, ServeConfig(1, 1, "fp8"), *shape) == gemm_rate(CHIP, "fp8", *shape)


def test_the_replica_holds_the_wider_weights():
    narrow = replica(MOE, ServeConfig(8, 1, "fp8"), PARTITION)
    mixed = replica(MOE, ServeConfig(8, 1, "fp8", wide_share=0.5), PARTITION)
    assert mixed.weights == pytest.approx(1.5 * narrow.weights)


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ValueError):
        ServeConfig(1, 1, "fp8", wide_share=share)


@settings(max_examples=scaled_examples(12), deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(1, 8192), st.integers(0, 2_000_000))
@example(0.0, 1.0, 1, 0)
def test_more_bf16_weights_never_make_an_iteration_faster(low, high, decoding, cached):
    """Law: bf16 stores more bytes and runs no faster than fp8 on this chip, so a larger bf16
    share never shortens an iteration (decode or prefill)."""
    low, high = sorted((low, high))
    base = ServeConfig(8, 1, "fp8")
    slow = replica(MOE, attrs.evolve(base, wide_share=high), PARTITION)
    fast = replica(MOE, attrs.evolve(base, wide_share=low), PARTITION)
    assert slow.iteration(decoding, cached) >= fast.iteration(decoding, cached)
    assert slow.iteration(0, 0, decoding, decoding * decoding / 2) >= fast.iteration(0, 0, decoding,
                                                                                      decoding * decoding / 2)


def test_a_dense_share_widens_only_the_non_expert_weights():
    """dense_wide_share: the experts stay narrow, the rest holds its share at two bytes."""
    narrow = replica(MOE, ServeConfig(1, 1, "fp8", ep=8), PARTITION)
    mixed = replica(MOE, ServeConfig(1, 1, "fp8", ep=8, dense_wide_share=0.5), PARTITION)
    assert mixed.expert_weights == narrow.expert_weights
    assert mixed.dense_weights == pytest.approx(1.5 * narrow.dense_weights)
    assert ServeConfig(1, 1, "fp8", wide_share=0.2, dense_wide_share=0.1).dense_share == 0.2


@settings(max_examples=scaled_examples(12), deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(1, 8192), st.integers(0, 2_000_000))
@example(0.0, 1.0, 1, 0)
def test_more_bf16_dense_weights_never_make_an_iteration_faster(low, high, decoding, cached):
    """Law: as for the whole-model share, a larger bf16 share of the non-expert weights never
    shortens an iteration (decode or prefill) of an expert-parallel replica."""
    low, high = sorted((low, high))
    base = ServeConfig(1, 1, "fp8", ep=8)
    slow = replica(MOE, attrs.evolve(base, dense_wide_share=high), PARTITION)
    fast = replica(MOE, attrs.evolve(base, dense_wide_share=low), PARTITION)
    assert slow.iteration(decoding, cached) >= fast.iteration(decoding, cached)
    assert slow.iteration(0, 0, decoding, decoding * decoding / 2) >= fast.iteration(0, 0, decoding,
                                                                                      decoding * decoding / 2)


def test_a_serve_jobs_checkpoint_block_reaches_every_replica_it_weighs():
    """`checkpoint { wide_share, dense_wide_share }` is the design's statement of the shares: every
    configuration the planner weighs carries them, and the plan's text and JSON state them."""
    from gclc.compiler.driver import check_text
    from gclc.solver.serve.space import configs
    from gclc.views.serve import weights_text
    text = (ROOT / "examples" / "deepseek_v3_serve.gcl").read_text().replace(
        "  precision", "  checkpoint { wide_share = 5%  dense_wide_share = 40% }\n  precision", 1)
    entity = serve_entity(check_text(text, str(ROOT / "examples" / "mixed_case.gcl")).design)
    weighed = list(configs(MOE, PARTITION, 64, "fp8", entity))
    assert weighed and {(c.wide_share, c.dense_wide_share) for c in weighed} == {(0.05, 0.4)}
    assert weights_text(weighed[0]) == "fp8 weights (5% bf16, 40% of the non-expert bf16)"
    assert weights_text(ServeConfig(1, 1, "fp8")) == "fp8 weights"
