"""The engine knobs a serve plan is costed with reach vLLM's launch or refuse it, never dropped
(one answer: the plan and the launch describe one engine). An audit found `preemption = swap`
and `mixed = false` planned and then exported as a launch that recomputes and mixes, and the
host overlap left to vLLM 0.33.0's default (async scheduling on) while the vllm_v1 profile
costs it off. Needs no vLLM: tests/views/test_export_vllm.py runs the flags through vLLM's
own parser where it is installed."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower_cluster
from gclc.model.serve.engines import profile
from gclc.model.serve.inference import ServeConfig
from gclc.views.export import ExportError
from gclc.views.export.vllm import check, replica_arguments

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "examples" / "chat_serve_features.gcl"
ONE = ServeConfig(tp=1, batch=64, precision="fp8", kv_precision="fp8")
STAGES = ServeConfig(tp=1, batch=64, precision="fp8", kv_precision="fp8", pp=2)


@pytest.fixture(scope="module")
def chip():
    design = check_file(str(CHAT)).design
    return lower_cluster(design["ChatBox"]).partitions[0].node.accelerator


def _flags(config, engine) -> dict:
    return dict(replica_arguments("M", config, engine, 8192, 0.9, "serving"))


def test_swap_reserve_and_prompts_alone_are_refused(chip):
    v1 = profile("vllm_v1").engine()
    check(ONE, v1, chip, False)
    for policy in ("swap", "reserve"):
        with pytest.raises(ExportError, match=f"preempts requests by `{policy}`.*recomputes"):
            check(ONE, attrs.evolve(v1, preemption=policy), chip, False)
    with pytest.raises(ExportError, match="runs waiting prompts alone"):
        check(ONE, attrs.evolve(v1, mixed=False), chip, False)


def test_the_host_overlap_is_the_async_scheduling_switch(chip):
    v1 = profile("vllm_v1").engine()
    assert _flags(ONE, v1)["--async-scheduling"] is False            # the profile costs no overlap
    assert _flags(ONE, attrs.evolve(v1, overlap=True))["--async-scheduling"] is True
    assert _flags(STAGES, v1)["--async-scheduling"] is False
    with pytest.raises(ExportError, match="refuses async scheduling with pipeline parallelism"):
        check(STAGES, attrs.evolve(v1, overlap=True), chip, False)


def test_the_cli_refuses_a_swapping_plan(tmp_path, capsys):
    text = CHAT.read_text().replace("    speculative { tokens = 3  acceptance = 70% }\n", "")
    assert "preemption   = swap" in text
    design = tmp_path / "chat.gcl"
    design.write_text(text)
    assert main(["export", str(design), "--to", "vllm", "-o", str(tmp_path / "out")]) == 1
    assert "preempts requests by `swap`" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    design.write_text(text.replace("preemption   = swap", "preemption   = recompute"))
    assert main(["export", str(design), "--to", "vllm", "-o", str(tmp_path / "out")]) == 0
    assert "--no-async-scheduling" in (tmp_path / "out" / "vllm.args").read_text()


def test_a_stated_graph_ceiling_reaches_the_launch(chip):
    """The plan's ceiling in tokens is written even where it is the profile's (vLLM's default moves with
    max_num_seqs, the draft tokens and the chip); a ceiling counted in sequences is refused."""
    v1 = profile("vllm_v1").engine()
    assert _flags(ONE, v1)["--max-cudagraph-capture-size"] == v1.graph_tokens and "--enforce-eager" not in _flags(ONE, v1)
    with pytest.raises(ExportError, match="counts its CUDA-graph ceiling in tokens"):
        _flags(ONE, attrs.evolve(v1, graph_tokens=0))
    assert _flags(ONE, profile("vllm_v1").engine(graph_batch=64))["--max-cudagraph-capture-size"] == 64
    assert _flags(ONE, profile("vllm_v1").engine(graph_batch=0))["--enforce-eager"] is True


def test_sglang_refuses_what_it_would_drop(tmp_path):
    """The SGLang export had dropped `preemption = swap` and a stated `graph_batch` the same way."""
    from gclc.compiler.driver import check_file
    from gclc.views.export import export

    text = (ROOT / "examples" / "deepseek_v3_serve.gcl").read_text()
    marker = "    profile      = sglang  # SGLang 0.4+, as the replication below served it\n"
    assert marker in text
    for extra, why in (("    preemption = swap\n", "preempts requests by `swap`"),
                       ("    graph_batch = 64\n", "writes no capture ceiling")):
        design = tmp_path / "s.gcl"
        design.write_text(text.replace(marker, marker + extra))
        with pytest.raises(ExportError, match=why):
            export("sglang", check_file(str(design)).design)


def test_deepep_is_refused_where_the_experts_are_tp_sharded(chip):
    """DeepEP sends tokens between GPUs holding whole experts: a replica of one attention group shards
    them over TP on the vllm_v1 profile (no --enable-expert-parallel), so `dispatcher = deepep` is refused."""
    deepep = profile("vllm_v1").engine(dispatcher="deepep")
    with pytest.raises(ExportError, match="dispatches tokens with DeepEP"):
        check(ServeConfig(tp=8, batch=64, precision="fp8", kv_precision="fp8"), deepep, chip, False, experts=True)
    check(ServeConfig(tp=1, batch=64, precision="fp8", kv_precision="fp8", ep=8), deepep, chip, False, experts=True)
    words = dict(replica_arguments("M", ServeConfig(tp=1, batch=64, precision="fp8", kv_precision="fp8", ep=8),
                                   deepep, 8192, 0.9, "serving", experts=True))
    assert words["--all2all-backend"] == "deepep_high_throughput" and words["--enforce-eager"] is True
