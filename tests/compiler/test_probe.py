"""`gclc probe` on this machine's CPU (PyTorch's CPU build, torch==2.13.0 in the dev extras):
the CSV it writes is the kernel CSV the reader reads back, rows, identity and collectives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gclc.cli.main import main
from gclc.compiler.measure import probe
from gclc.compiler.measure.read import read_paths
from gclc.compiler.measure.records import CollectiveRun, KernelRun

torch = pytest.importorskip("torch", reason="PyTorch installs with the dev extras (.ci/setup); without it no probe")


def test_a_quick_cpu_probe_reads_back_as_kernel_rows(tmp_path, capsys):
    out = tmp_path / "machine.csv"
    assert main(["probe", "-o", str(out), "--quick", "--no-collectives"]) == 0
    found, problems, _ = read_paths([str(out)])
    assert not problems
    (run,) = found
    assert isinstance(run, KernelRun)
    assert run.about("gpu").startswith("cpu (") and run.about("torch") == torch.__version__
    gemms = [(p.precision, p.m, p.n, p.k) for p in run.points if p.kind == "gemm"]
    assert gemms == [(pr, m, n, k) for pr in ("fp32", "bf16") for m, n, k in probe.QUICK["gemms"]]
    (attention,) = [p for p in run.points if p.kind == "attention"]
    assert (attention.batch, attention.heads, attention.seq, attention.head_dim, attention.causal) == (1, 2, 128, 32, True)
    (copy,) = [p for p in run.points if p.kind == "hbm_copy"]
    assert copy.nbytes == probe.QUICK["copy"]
    assert all(p.seconds > 0 and p.rate > 0 for p in run.points)


def test_collectives_over_torch_distributed_read_back_as_runs(tmp_path):
    """One gloo rank in this process: the collective rows' format (more ranks run under torchrun)."""
    distributed = torch.distributed
    distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        text = probe.run(quick=True, collectives=True)
    finally:
        distributed.destroy_process_group()
    path = tmp_path / "machine.csv"
    path.write_text(text)
    found, problems, _ = read_paths([str(path)])
    assert not problems
    runs = [m for m in found if isinstance(m, CollectiveRun)]
    assert [r.op for r in runs] == ["all_reduce", "all_gather", "reduce_scatter"]
    for run in runs:
        assert (run.ranks, run.nodes) == (1, 1) and [p.size for p in run.points] == list(probe.QUICK["collective"])


def test_without_pytorch_the_probe_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)   # `import torch` raises ImportError
    assert main(["probe", "-o", str(tmp_path / "m.csv"), "--quick"]) == 1
    assert "pip install 'gclc[probe]'" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()


def test_the_probe_runs_as_a_plain_script_where_gclc_is_not_installed(tmp_path):
    """benchmarks/probe_gpu.sh runs compiler/measure/probe.py with only PyTorch: no gclc import."""
    import subprocess

    script = probe.__file__
    # as `python probe.py` runs it (its folder first on the path), with `import gclc` failing
    folder = str(Path(script).parent)
    done = subprocess.run([sys.executable, "-c", f"import sys, runpy; sys.path.insert(0, {folder!r}); "
                           "sys.argv = ['probe.py', '-o', 'out.csv', '--quick', '--no-collectives']; "
                           f"sys.modules['gclc'] = None; runpy.run_path({script!r}, run_name='__main__')"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    text = (tmp_path / "out.csv").read_text()
    assert text.startswith("# gclc kernels v1\n") and "\ngemm,fp32,128,128,128," in text


@pytest.mark.parametrize("value", ["²", "1_000", "x", "9" * 5000])
def test_a_world_size_that_is_no_count_is_an_error_that_names_it(tmp_path, capsys, monkeypatch, value):
    """torchrun's WORLD_SIZE read as a count with the plain-number rule (ASCII digits only):
    anything else is exit 1 naming the variable, never exit 70, and no CSV is written. STUB:
    the kernel timings are skipped (they come before the collectives and are tested above)."""
    monkeypatch.setenv("WORLD_SIZE", value)
    for name, rows in (("_gemm_rows", []), ("_attention_rows", []), ("_copy_row", {})):
        monkeypatch.setattr(probe, name, lambda *args, rows=rows: rows)
    assert main(["probe", "-o", str(tmp_path / "m.csv"), "--quick"]) == 1
    assert "WORLD_SIZE" in capsys.readouterr().err and not (tmp_path / "m.csv").exists()
