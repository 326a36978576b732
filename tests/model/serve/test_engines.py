"""Serving engines as named, sourced profiles (model/serve/engines.py): every knob a profile
sets names its source, releases of a family do not overlap, a job names its engine and may
override any knob, the plan states the engine and its release (text, JSON, report headline:
tests/views/test_report.py), and the host physics obeys its laws (host time never speeds an
iteration up; overlapping never slows one; an iteration issued kernel by kernel takes at least
their host time)."""

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.compiler.schema import SERVING_ENGINES
from gclc.model import compute
from gclc.model.job import placement
from gclc.model.serve import engines
from gclc.model.serve.engines import IDEAL, PROFILES, Engine, profile, profile_for
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.solver.serve.space import engine_of
from gclc.views.serve import serve_json, serve_text
from gclc.testing.model_texts import chat_serve
from gclc.testing.profiles import scaled_examples

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = (ROOT / "tests" / "data" / "serve_cost.gcl").read_text().split("serve chat")[0]
PATH = str(ROOT / "tests" / "data" / "serve_engines.gcl")


def entity(engine: str = "", cluster: str = CLUSTER):
    text = cluster + chat_serve(engine)
    result = check_text(text, PATH)
    assert result.design is not None, [str(d) for d in result.diagnostics]
    return serve_entity(result.design)


def test_every_knob_a_profile_sets_names_its_source():
    for p in PROFILES.values():
        if p.name == "ideal":
            continue
        assert set(p.knobs) <= set(p.sources), (p.name, set(p.knobs) - set(p.sources))
        assert all(p.sources[k] for k in p.knobs)
        assert set(p.small_gpu) <= set(p.knobs)
        Engine(**p.knobs)   # every knob is one the engine has


def test_the_language_and_the_model_name_the_same_engines():
    assert tuple(PROFILES) == SERVING_ENGINES


def test_eager_op_time_is_the_shared_estimate():
    assert all(p.knobs.get("eager_op_s", compute.EAGER_OP_S) == compute.EAGER_OP_S for p in PROFILES.values())


@pytest.mark.parametrize("family", sorted({p.family for p in PROFILES.values()} - {"ideal"}))
def test_the_releases_of_a_family_follow_one_another(family):
    eras = sorted((p for p in PROFILES.values() if p.family == family), key=lambda p: p.first)
    for before, after in zip(eras, eras[1:]):
        assert before.last is not None and before.last < after.first
    assert eras[-1].last is None    # the family's current engine
    for era in eras:
        assert profile_for(family, era.first) is era


def test_a_date_no_release_covers_is_refused_with_the_spans():
    with pytest.raises(KeyError, match="vllm_0_2: 2023-06"):
        profile_for("vllm", "2022-01")


def test_a_job_names_its_engine_and_overrides_its_knobs():
    _, partition = placement(entity())
    assert engine_of(entity(), partition).name == "vllm_v1"     # the default
    assert engine_of(entity("engine = sglang"), partition) == profile("sglang").engine(
        partition.node.accelerator.hbm_capacity, partition.node.accelerator.name)
    e = engine_of(entity("engine { profile = sglang  max_batch = 64  mixed = true  host_step = 1 ms  "
                         "preemption = swap  frontend = 5 ms }"), partition)
    assert (e.name, e.max_seqs, e.mixed, e.step_s, e.preemption, e.frontend_s) == ("sglang", 64, True, 1e-3, "swap",
                                                                                 5e-3)
    assert e.seq_s == profile("sglang").knobs["seq_s"]      # what the job does not state stays the profile's


def test_vllm_v1_batches_less_on_an_a100_as_its_defaults_do():
    h100 = profile("vllm_v1").engine(80 * (1 << 30), "H100_SXM")
    a100 = profile("vllm_v1").engine(80 * (1 << 30), "A100_SXM4_80GB")
    assert (h100.chunk, h100.max_seqs) == (8192, 1024) and (a100.chunk, a100.max_seqs) == (2048, 256)


def test_the_plan_states_its_engine_and_release_and_every_knob_it_ran():
    plan = plan_serve(entity("engine { profile = trtllm_pytorch  max_batch = 64 }"))
    text, data = serve_text(plan), serve_json(plan)
    assert "engine     trtllm_pytorch (TensorRT-LLM 0.19 and later" in text
    e = plan.decode.replica.engine
    assert data["engine"]["name"] == "trtllm_pytorch" and data["engine"]["max_num_seqs"] == 64 == e.max_seqs
    assert data["engine"]["host_overlapped"] is True and data["engine"]["preemption"] == "reserve"
    assert plan.decode.replica.config.batch <= 64      # the engine's running sequences cap the batch searched


def test_an_engine_written_both_ways_is_a_located_error():
    text = CLUSTER + """
serve chat {
  model = Llama8B
  on = Box
  prompt = 1000
  output = 200
  engine = sglang
  engine { chunk = 4096 }
}
"""
    errors = [d for d in check_text(text, PATH).diagnostics if d.is_error]
    assert errors and errors[0].code == "duplicate-field"


_, PARTITION = placement(entity())
SHAPE = ModelShape.from_entity(entity().get("model"))


@settings(max_examples=scaled_examples(40), deadline=None)
@given(st.sampled_from(sorted(PROFILES)), st.integers(0, 600), st.integers(0, 4000), st.sampled_from([1, 2, 4]))
def test_host_time_never_speeds_an_iteration_and_overlap_never_slows_one(name, decoding, prefill, tp):
    if decoding + prefill == 0:
        return
    e = profile(name).engine(PARTITION.node.accelerator.hbm_capacity, PARTITION.node.accelerator.name)
    cfg = ServeConfig(tp, 512, "fp8")
    ideal = replica(SHAPE, cfg, PARTITION, attrs.evolve(IDEAL, layer_kernels=e.layer_kernels, moe_path=e.moe_path))
    real = replica(SHAPE, cfg, PARTITION, e)
    args = (decoding, decoding * 1500.0, float(prefill), prefill * prefill / 2)
    base, t = ideal.iteration(*args), real.iteration(*args)
    assert t >= base * (1 - 1e-12)
    over = replica(SHAPE, cfg, PARTITION, attrs.evolve(e, overlap=True)).iteration(*args)
    under = replica(SHAPE, cfg, PARTITION, attrs.evolve(e, overlap=False)).iteration(*args)
    assert over <= under * (1 + 1e-12)
    tokens = decoding + prefill
    if not e.graphed(decoding, tokens):
        assert t >= real._kernels(tokens) * e.eager_op_s * (1 - 1e-12)


@pytest.mark.parametrize("pp", [1, 2])
def test_sglang_overlaps_the_host_only_without_pipeline_stages(pp):
    # SGLang turns its overlap scheduler off under pipeline parallelism ([sglpp]): a staged
    # replica pays the host's work on top of the GPU's, a single-stage one hides it
    e = profile("sglang").engine()
    gpu, work = 0.010, e.step_s + e.seq_s * 64
    expected = gpu + work if pp > 1 else max(gpu, work)
    assert e.host(64, 64, 0, gpu, pp) == pytest.approx(expected) and e.overlaps(pp) == (pp == 1)


def test_a_cuda_graph_spares_the_host_its_launches():
    e = profile("vllm_v0").engine()
    assert e.graphed(64, 64) and not e.graphed(300, 300)     # decode batches up to 256 are graphed
    assert not e.graphed(4, 500)                              # an iteration with prompts is not
    assert profile("vllm_v1").engine().graphed(4, 500)       # V1's piecewise graphs take up to 512 tokens


def test_a_graphed_decode_batch_runs_padded_to_the_graph_captured_for_it():
    """[v0pad] / [sglpad]: vLLM V0 and SGLang 0.3 replay the graph of the next size captured (1, 2, 4, then
    multiples of 8), its padding rows computed and all-reduced; an iteration with a prompt is not padded."""
    e = profile("vllm_0_6").engine()
    assert [e.padded(d, d) for d in (1, 2, 3, 4, 5, 17, 24, 25)] == [1, 2, 4, 4, 8, 24, 24, 32]
    assert e.padded(4, 500) == 500 and profile("sglang_0_3").engine().padded(150, 150) == 152
    assert profile("vllm_v1").engine().padded(17, 17) == 17        # not modeled past V0 and SGLang 0.3


@settings(max_examples=scaled_examples(40), deadline=None)
@given(st.sampled_from(["vllm_0_6", "sglang_0_3"]), st.integers(1, 256), st.integers(1, 256), st.sampled_from([1, 4]))
def test_padding_never_speeds_a_step_and_a_larger_batch_never_runs_fewer_rows(name, a, b, tp):
    """Law: a padded graphed step runs at least its own rows, never fewer for a larger batch, and never
    takes less time than the same step unpadded."""
    low, high = sorted((a, b))
    e = profile(name).engine()
    assert low <= e.padded(low, low) <= e.padded(high, high)
    r = replica(SHAPE, ServeConfig(tp, 256, "fp8"), PARTITION, e)
    plain = replica(SHAPE, ServeConfig(tp, 256, "fp8"), PARTITION, attrs.evolve(e, graph_pad=0))
    assert r.iteration(low, low * 500.0) >= plain.iteration(low, low * 500.0)


def test_the_engines_module_states_its_sources():
    for tag in ("[v1args]", "[v0sched]", "[v060]", "[moe2542]", "[sgl04]", "[sglpp]", "[sglargs]", "[trtifb]", "[llama]"):
        assert tag in engines.__doc__


def test_each_pipeline_micro_batch_is_padded_to_its_own_graph(monkeypatch):
    """[v0pad]: vLLM V0's virtual engines each replay the graph captured for their own batch: 20
    sequences on 4 stages are micro-batches of 5, each padded to 8 (32 rows), not 20 padded to 24
    and split (6 a micro-batch)."""
    e = profile("vllm_0_6").engine()
    r = replica(SHAPE, ServeConfig(1, 256, "fp8", pp=4), PARTITION, e)
    rows = []
    original = type(r)._stage
    monkeypatch.setattr(type(r), "_stage", lambda self, tokens, *rest: rows.append(tokens) or original(self, tokens, *rest))
    r.iteration(20, 20 * 500.0)
    assert rows == [8]
