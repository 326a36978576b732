"""The placement view's pipeline bands name the layers each stage holds: one run per stage,
or under an interleaved schedule (vp virtual stages per GPU, Megatron's convention) the
chunks at virtual stages s, s + pp, s + 2 pp, ...; an elided middle counts its stages with
the right plural."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, strategies as st

from gclc.compiler.driver import check_file
from gclc.model.job import train_job
from gclc.solver.train.plan import plan
from gclc.testing import load_profile
from gclc.views import render
from gclc.views.placement import MAX_BANDS, stage_layers, stage_runs

load_profile()

DESIGN = """
import "std/nvidia"
cluster C { units = 8 x DGX_H100  scaleout = NDR_FatTree }
model M { arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 32000  seq = 4096 }
train t { model = M  on = C  batch = 64  precision = bf16  parallelism { tp = 4  pp = PP  vp = VP } }
"""


@given(pp=st.integers(1, 16), vp=st.integers(1, 8), per_chunk=st.integers(1, 6), first=st.integers(0, 100))
def test_the_stages_chunks_hold_every_layer_once(pp, vp, per_chunk, first):
    total = pp * vp * per_chunk
    held = [layer for stage in range(pp) for a, b in stage_runs(first, total, pp, vp, stage)
            for layer in range(a, b + 1)]
    assert sorted(held) == list(range(first, first + total))
    # virtual stage v * pp + s: a stage's chunks are pp chunks apart
    for stage in range(pp):
        starts = [a for a, _ in stage_runs(first, total, pp, vp, stage)]
        assert starts == [first + (v * pp + stage) * per_chunk for v in range(vp)]


def test_stage_labels():
    assert stage_layers(0, 32, 4, 1, 1) == "layers 8–15"
    assert stage_layers(0, 32, 4, 2, 0) == "layers 0–3, 16–19 (2 chunks)"
    assert stage_layers(0, 32, 4, 4, 3) == "layers 6–7, 14–15, 22–23, … (4 chunks)"
    assert stage_layers(10, 8, 8, 1, 2) == "layers 12"


def _placement(tmp_path: Path, pp: int, vp: int) -> str:
    path = tmp_path / "pp.gcl"
    path.write_text(DESIGN.replace("PP", str(pp)).replace("VP", str(vp)))
    chosen = plan(train_job(check_file(str(path)).design))
    assert chosen.best is not None and (chosen.best.config.pp, chosen.best.config.vp) == (pp, vp)
    return render.placement(chosen).source


def test_an_interleaved_plan_names_each_stages_chunks_and_counts_the_elided_stage(tmp_path):
    source = _placement(tmp_path, 4, 2)
    assert MAX_BANDS == 3          # stages 0, 1 and 3 drawn, stage 2 elided
    assert "layers 0–3, 16–19 (2 chunks)" in source and "layers 12–15, 28–31 (2 chunks)" in source
    assert "⋮ 1 more pipeline stage, each" in source and "1 more pipeline stages" not in source
    plain = _placement(tmp_path, 8, 1)
    assert re.search(r"⋮ 5 more pipeline stages, each", plain) and "layers 28–31<" in plain


def test_the_legend_says_colours_repeat_only_when_they_do(tmp_path):
    """16 GPUs in 8 tensor groups and 8 replicas: every group its own colour, so no
    "colours repeat" note; 64 GPUs in 16 groups: the note."""
    few = _placement(tmp_path, 1, 1)            # tp 4, dp 16 on 64 GPUs: 16 fill groups > 12 colours
    assert "colours repeat every 12" in few
    path = tmp_path / "small.gcl"
    path.write_text(DESIGN.replace("8 x DGX_H100", "2 x DGX_H100").replace("PP", "1").replace("VP", "1")
                    .replace("batch = 64", "batch = 4"))
    chosen = plan(train_job(check_file(str(path)).design))
    cfg = chosen.best.config
    assert cfg.gpus // cfg.tp <= 12 and cfg.dp <= 12
    assert "colours repeat" not in render.placement(chosen).source


def test_a_one_gpu_serve_replica_reads_in_the_singular(tmp_path):
    from gclc.solver.serve.plan import plan_serve, serve_entity

    design = check_file(str(Path(__file__).resolve().parents[1] / "data" / "serve_cost.gcl")).design
    served = plan_serve(serve_entity(design))
    assert served.decode.replica.gpus == 1
    source = render.serve_placement(served).source
    assert f"= 1 GPU, batch {served.decode.replica.config.batch:,}" in source and "1 GPUs" not in source
    assert "· rank 0<" in source and "ranks 0–0" not in source
