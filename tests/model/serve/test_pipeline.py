"""Pipeline parallelism in serving: a request's first token waits for its prompt to pass
every stage in turn (pipeline fill), each decode step passes them all again, and each
stage-to-stage hop is charged on the tier it actually crosses. Checked against a hand
calculation; laws: more stages never lower a lone request's TTFT."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.serve.inference import EXACT_CHUNKS, Engine, ServeConfig, first_token_time, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.testing import load_profile
from gclc.testing.profiles import scaled_examples

load_profile()

ROOT = Path(__file__).resolve().parents[3]
ENTITY = serve_entity(check_file(str(ROOT / "examples" / "deepseek_v3_serve.gcl")).design)
_, PARTITION = placement(ENTITY)      # 32 DGX H100: NVLink4 inside 8-GPU nodes, NDR between
MOE = ModelShape.from_entity(ENTITY.get("model"))
DENSE = ModelShape.from_entity(check_file(str(ROOT / "examples" / "dgx_h100_superpod.gcl")).design["Llama3_405B"])
NVLINK, NDR = PARTITION.tiers


def hop(nbytes: float, tier) -> float:
    """By hand: bytes over the tier's per-direction rate at its efficiency, plus its latency."""
    return nbytes / (tier.bandwidth * tier.efficiency) + tier.latency


def test_tiers_are_what_the_example_says():
    assert (NVLINK.group_gpus, NVLINK.bandwidth, NDR.bandwidth) == (8, 450e9, 50e9)  # DGX H100: 900 GB/s bidir NVLink, 400 Gb/s NICs


def test_a_lone_prompt_fills_the_pipeline_by_hand():
    """tp 1, ep 4, pp 4: stages of 4 GPUs, two per node. Hops 0->1 and 2->3 stay on NVLink,
    1->2 leaves the node (ranks 4-7 to 8-11), and the sampled token returns over NDR."""
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=4, pp=4), PARTITION, Engine(chunk=4096))
    assert [t.name for t in r.pp_hops] == [NVLINK.name, NDR.name, NVLINK.name] and r.pp_return is NDR
    prompt = 1000
    stage, _ = r.stage_time(prompt, 0, prompt * prompt / 2)   # one stage's work on the whole prompt
    activations = prompt * 7168 * 2                           # hidden 7168, bf16
    expected = 4 * stage + 2 * hop(activations, NVLINK) + hop(activations, NDR) + hop(prompt * 4, NDR)
    assert first_token_time(r, prompt) == pytest.approx(expected, rel=1e-12)


def test_a_decode_step_passes_every_stage_by_hand():
    r = replica(MOE, ServeConfig(1, 1, "fp8", ep=4, pp=4), PARTITION, Engine())
    cached = 3000
    stage, _ = r.stage_time(1, cached, 0)
    expected = 4 * stage + 2 * hop(7168 * 2, NVLINK) + hop(7168 * 2, NDR) + hop(4, NDR)
    assert r.iteration(1, cached) == pytest.approx(expected, rel=1e-12)


def test_a_lone_prompt_is_not_split_into_micro_batches():
    """Micro-batches are whole sequences: one prompt keeps all its tokens together, so pp
    stages cost it pp stage-times (more than the pipelined steady state of pp prompts)."""
    r = replica(DENSE, ServeConfig(8, 4, "fp8", pp=4), PARTITION, Engine(chunk=8192))
    one = r.iteration(0, 0, 2048, 2048 * 1024, prefilling=1)
    four = r.iteration(0, 0, 4 * 2048, 4 * 2048 * 1024, prefilling=4)
    assert one > four / 4 * 1.5   # a lone prompt cannot use the other stages while it waits


@settings(max_examples=scaled_examples(8), deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(64, 8192))
def test_more_stages_never_lower_ttft_at_fixed_stage_compute(pp, per_stage, prompt):
    """Each stage holds `per_stage` layers of the same width: a deeper pipeline only adds
    stages (and hops) to a lone request's path."""
    def ttft(stages):
        shape = attrs.evolve(DENSE, layers=per_stage * stages)
        r = replica(shape, ServeConfig(8, 1, "fp8", pp=stages), PARTITION, Engine(chunk=8192))
        return first_token_time(r, prompt)
    assert ttft(pp + 1) >= ttft(pp)


@settings(max_examples=scaled_examples(8), deadline=None)
@given(st.sampled_from([2, 3, 6, 7]), st.integers(64, 8192))
def test_splitting_a_model_into_stages_never_lowers_its_ttft(pp, prompt):
    """The same 126-layer model on 8 x pp GPUs: every stage's work is 1/pp of the whole, but a
    lone prompt visits the stages one after another, so its TTFT does not fall."""
    def ttft(stages):
        return first_token_time(replica(DENSE, ServeConfig(8, 1, "fp8", pp=stages), PARTITION, Engine(chunk=8192)),
                                prompt)
    assert ttft(pp) >= ttft(1) * (1 - 1e-9)


def faster_fabric(factor: float):
    """The partition with its scale-out tier `factor` times faster (NVLink unchanged)."""
    return attrs.evolve(PARTITION, tiers=(NVLINK, attrs.evolve(NDR, bandwidth=NDR.bandwidth * factor)))


@settings(max_examples=scaled_examples(8), deadline=None)
@given(st.floats(1.0, 8.0), st.integers(1, 512), st.integers(64, 8192))
def test_a_faster_fabric_never_slows_a_pipeline_that_crosses_it(factor, decoding, prompt):
    """DeepSeek-V3 on two nodes (pp 2 x ep 8): the stage hop crosses NDR; more bandwidth there
    never lengthens a step or a first token."""
    cfg = ServeConfig(1, decoding, "fp8", ep=8, pp=2)
    slow, fast = (replica(MOE, cfg, p, Engine()) for p in (PARTITION, faster_fabric(factor)))
    assert [t.name for t in slow.pp_hops] == [NDR.name]
    assert fast.iteration(decoding, decoding * 2000.0) <= slow.iteration(decoding, decoding * 2000.0)
    assert first_token_time(fast, prompt) <= first_token_time(slow, prompt)


def chunk_by_chunk(r, prompt: float) -> float:
    """By hand: every chunk of the prefill timed after the tokens before it."""
    todo, done, time = prompt, 0.0, 0.0
    while todo > 0:
        chunk = min(todo, r.engine.chunk)
        time += r.iteration(0, 0, chunk, r.kv.pairs(done, chunk))
        todo, done = todo - chunk, done + chunk
    return time


@settings(max_examples=scaled_examples(8), deadline=None)
@given(st.sampled_from([1, 7, 64, 512]), st.integers(EXACT_CHUNKS + 1, 40 * EXACT_CHUNKS), st.booleans())
def test_a_long_prefill_timed_in_runs_matches_chunk_by_chunk(chunk, chunks, moe):
    """Beyond EXACT_CHUNKS chunks the prefill is timed in runs of equal chunks at their middle:
    within a part per million of timing each chunk (issue 12: a 100M-token prompt hung `plan`)."""
    shape, config = (MOE, ServeConfig(1, 1, "fp8", ep=8)) if moe else (DENSE, ServeConfig(8, 1, "fp8"))
    r = replica(shape, config, PARTITION, Engine(chunk=chunk))
    prompt = chunks * chunk + chunk // 2
    assert first_token_time(r, prompt) == pytest.approx(chunk_by_chunk(r, prompt), rel=1e-6)


def test_a_huge_prefill_costs_a_bounded_number_of_iterations(monkeypatch):
    r = replica(DENSE, ServeConfig(8, 1, "fp8"), PARTITION, Engine(chunk=1))
    calls = []
    timed = type(r).iteration
    monkeypatch.setattr(type(r), "iteration", lambda *args: calls.append(args) or timed(*args))
    assert first_token_time(r, 1e8) > first_token_time(r, 1e7) > 0
    assert len(calls) <= 2 * (EXACT_CHUNKS + 2)
