"""TensorRT-LLM's MoE communication (model/serve/engines.py [trtep]) as the serve model prices it and
the check admits it: no tokens move without attention data parallelism (every GPU holds every token,
the TP all-reduce sums the experts); with it the PyTorch backend all-gathers and reduce-scatters by
default, or runs an all-to-all or DeepEP where pinned. Its TensorRT engines run no attention data
parallelism, so a `dispatcher` pinned on them is refused where it is written."""

from pathlib import Path

import attrs
import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.schema import TRT_ENGINES
from gclc.model.serve import moe
from gclc.model.serve.engines import PROFILES, profile
from gclc.model.serve.inference import ServeConfig, replica
from gclc.model.job import placement
from gclc.model.shape import ModelShape
from gclc.solver.serve.plan import serve_entity
from gclc.solver.serve.space import configs
from gclc.testing.edit import edit_source
from gclc.views.serve_placement import group_tiers

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "deepseek_v3_serve.gcl"
ENTITY = serve_entity(check_file(str(EXAMPLE)).design)
_, PARTITION = placement(ENTITY)
MOE = ModelShape.from_entity(ENTITY.get("model"))


def test_the_checks_trtllm_facts_are_the_profiles():
    """compiler/schema.py names TensorRT-LLM's TensorRT-engine profiles apart from model/serve/engines.py
    (the compiler imports no model): its profiles without PyTorch's eager kernels, the others' family."""
    trtllm = {n for n, p in PROFILES.items() if p.family == "trtllm"}
    assert set(TRT_ENGINES) == {n for n in trtllm if "eager_op_s" not in PROFILES[n].knobs}
    assert set(TRT_ENGINES) < trtllm


def test_trtllm_gathers_every_groups_tokens_by_default_as_vllms_allgather_does():
    """With attention DP (each GPU its own group: tp 1), TensorRT-LLM 1.0 all-gathers every group's tokens
    and reduce-scatters the outputs unless MNNVL or DeepEP is on ([trtep]): the price of vLLM's allgather
    backend on the same replica, not an all-to-all."""
    trt = profile("trtllm_pytorch").engine()
    assert trt.dispatcher == "allgather"
    config = ServeConfig(1, 1, "fp8", ep=4)   # (at ep = top_k = 8 the two move the same bytes)
    gathered = replica(MOE, config, PARTITION, trt)._expert_exchange(512.0)
    vllm = replica(MOE, config, PARTITION, attrs.evolve(profile("vllm_v1").engine(), moe_path="tp_sharded"))
    assert gathered == pytest.approx(vllm._expert_exchange(512.0), rel=1e-12) and gathered > 0
    all_to_all = replica(MOE, config, PARTITION, attrs.evolve(trt, dispatcher="alltoall"))._expert_exchange(512.0)
    assert all_to_all != pytest.approx(gathered, rel=1e-3)   # the two exchanges are priced apart


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep", "allgather"])
def test_one_attention_group_moves_no_tokens_on_trtllm(dispatcher):
    """Without attention DP TensorRT-LLM builds no MoE communication, even with whole experts spread over
    the TP GPUs; the same replica on an engine that dispatches within a group (SGLang's grouped path with
    an all-to-all) moves tokens: the negative control."""
    for name in (n for n, p in PROFILES.items() if p.family == "trtllm"):
        engine = attrs.evolve(profile(name).engine(), moe_path="grouped", dispatcher=dispatcher)
        r = replica(MOE, ServeConfig(8, 1, "fp8", ep=1), PARTITION, engine)
        assert moe.expert_layout("grouped", 8, 1)[1] == 8
        assert r._expert_exchange(4096.0) == 0.0
        assert any("no exchange" in what for _, what, _ in group_tiers(r))
    other = attrs.evolve(profile("sglang").engine(), moe_path="grouped", dispatcher="alltoall")
    assert replica(MOE, ServeConfig(8, 1, "fp8", ep=1), PARTITION, other)._expert_exchange(4096.0) > 0


def _with_engine(tmp_path, fields: dict[str, str]) -> tuple[Path, str]:
    source = tmp_path / EXAMPLE.name
    source.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    text, _ = edit_source(source.read_text(encoding="utf-8"), str(source), {},
                          {f"chat.engine.{k}": v for k, v in fields.items()})
    source.write_text(text, encoding="utf-8")
    return source, text


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize("fields, accepted", [
    ({"profile": "trtllm_0_12", "dispatcher": "allgather"}, False),
    ({"profile": "trtllm_0_9", "dispatcher": "alltoall"}, False),
    ({"profile": "trtllm_0_12", "dispatcher": "deepep"}, False),
    ({"profile": "trtllm_0_12"}, True),
    ({"profile": "trtllm_pytorch", "dispatcher": "alltoall"}, True),
    ({"profile": "trtllm_pytorch", "moe_path": "grouped", "dispatcher": "allgather"}, True),
    ({"profile": "sglang", "dispatcher": "alltoall"}, True),   # another engine's all-to-all: untouched
])
def test_a_dispatcher_trtllm_cannot_run_is_refused_where_it_is_written(tmp_path, fields, accepted):
    source, text = _with_engine(tmp_path, fields)
    result = check_file(str(source))
    refused = [d for d in result.diagnostics if d.is_error]
    if accepted:
        assert not refused, [d.summary for d in refused]
        return
    assert len(refused) == 1 and refused[0].code == "pin-meaningless"
    where = refused[0].subject
    assert where.path == str(source) and where.line == _line(text, f"dispatcher = {fields['dispatcher']}")
    line = text.splitlines()[where.line - 1]
    assert where.column == len(line) - len(line.lstrip()) + 1    # the field as written
    assert "run no attention data parallelism" in refused[0].summary
    assert "remove `dispatcher`" in refused[0].notes[0] and "profile = trtllm_pytorch" in refused[0].notes[0]


@pytest.mark.parametrize("name", [*TRT_ENGINES, "trtllm_pytorch", "vllm_v1"])
def test_the_search_plans_only_the_layouts_each_engine_runs(name):
    """The search (solver/serve/space.py configs) offers TensorRT-LLM's TensorRT engines no expert
    parallelism (no attention DP: docs/engines.md), its PyTorch backend expert parallelism only with
    attention TP 1 (each GPU its own attention group), and other engines (vLLM) both at once."""
    found = {(c.tp, c.ep) for c in configs(MOE, PARTITION, 64, "fp8", ENTITY, None, name)}
    assert any(tp > 1 for tp, _ in found) and any(ep == 1 for _, ep in found)
    if name in TRT_ENGINES:
        assert {ep for _, ep in found} == {1}
    elif name == "trtllm_pytorch":
        assert any(ep > 1 for _, ep in found) and not any(tp > 1 and ep > 1 for tp, ep in found)
    else:
        assert any(tp > 1 and ep > 1 for tp, ep in found)


@pytest.mark.parametrize("profile_name, pins, refused_field", [
    ("trtllm_0_12", {"ep": "2"}, "ep"),
    ("trtllm_0_9", {"tp": "4", "ep": "2"}, "ep"),
    ("trtllm_pytorch", {"tp": "2", "ep": "4"}, "tp"),
    ("trtllm_pytorch", {"tp": "1", "ep": "8"}, None),
    ("trtllm_0_12", {"tp": "8", "ep": "1"}, None),
    ("sglang", {"tp": "2", "ep": "4"}, None),     # SGLang's attention TP beside its DP groups: untouched
])
def test_a_layout_trtllm_cannot_run_is_refused_where_it_is_written(tmp_path, profile_name, pins, refused_field):
    source = tmp_path / EXAMPLE.name
    text, _ = edit_source(EXAMPLE.read_text(encoding="utf-8"), str(source), {},
                          {"chat.engine.profile": profile_name, **{f"chat.parallelism.{k}": v for k, v in pins.items()}})
    source.write_text(text, encoding="utf-8")
    refused = [d for d in check_file(str(source)).diagnostics if d.is_error and d.code == "parallelism"]
    if refused_field is None:
        assert not refused, [d.summary for d in refused]
        return
    assert len(refused) == 1
    where = refused[0].subject
    assert where.path == str(source) and where.line == _line(text, f"{refused_field} = {pins[refused_field]}")
    line = text.splitlines()[where.line - 1]
    assert line[where.column - 1:].split(" =")[0].endswith(refused_field)   # the field as written (dotted or not)
    assert "attention" in refused[0].summary and refused[0].notes[0].startswith("help:")
