"""`gclc export --to dynamo` and `--to trtllm`, the parts no engine needs to check: what Dynamo
cannot launch and TensorRT-LLM's refusal. Dynamo's own parsers read the launches in
test_export_vllm.py (its vLLM worker and frontend) and test_export_sglang.py (its SGLang
worker), inside the engines' one process each."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclc.compiler.driver import check_file, check_text
from gclc.views.export import ExportError, export
from gclc.views.export.dynamo import ROUTERS
from gclc.compiler.schema import SERVE_ROUTERS

ROOT = Path(__file__).resolve().parents[2]
DENSE = ROOT / "tests" / "data" / "serve_cost.gcl"   # Llama 3.1 8B on 2 DGX H100, planned for vllm_v1


def _design(text: str):
    result = check_text(text, str(DENSE))
    assert result.design is not None, result.diagnostics
    return result.design


def test_every_router_the_plan_can_use_has_a_dynamo_router_mode():
    assert set(ROUTERS) == set(SERVE_ROUTERS)


def test_a_plan_made_for_tensorrt_llm_is_refused_with_the_reason():
    trt = _design(DENSE.read_text().replace("output = 200", "output = 200\n  engine { profile = trtllm_pytorch }"))
    with pytest.raises(ExportError, match="made for TensorRT-LLM .*no TensorRT-LLM code installs here"):
        export("dynamo", trt)


def test_trtllm_export_is_refused_with_the_reason_and_writes_nothing(tmp_path, capsys):
    """TensorRT-LLM's code cannot be installed here (PyPI holds only wheel_stub packages), so
    no unchecked launch is written; the CLI says why and leaves the directory empty."""
    from gclc.cli.main import main

    with pytest.raises(ExportError, match="wheel_stub"):
        export("trtllm", _design(DENSE.read_text()))
    out = tmp_path / "out"
    assert main(["export", str(DENSE), "--to", "trtllm", "-o", str(out)]) == 1
    assert "cannot export to trtllm: TensorRT-LLM settings are not exported" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_dynamo_needs_a_serve_job():
    train = check_file(str(ROOT / "examples" / "a100_cluster.gcl"), []).design
    with pytest.raises(ExportError, match="describe a serve job, and the design has no `serve` job"):
        export("dynamo", train)
