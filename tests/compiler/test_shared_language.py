"""The language of shared clusters: every new field is checked (type, range, relations)
with a located error; `maximize = goodput` changes the plan."""

from __future__ import annotations

import pytest

from gclc.compiler.driver import check_text
from gclc.model.job import train_job
from gclc.solver.train.plan import plan

BASE = """\
chip C {
  hbm   { capacity = 80 GB  bandwidth = 3 TB/s }
  peak  { bf16 = 900 TFLOPS }
  power { tdp = 700 W  idle = 90 W }
  mtbf  = MTBF
}
fabric Up { kind = nvlink  topology = switched  bandwidth = 450 GB/s  latency = 1 us }
fabric Out {
  kind      = infiniband
  topology  = fat_tree(tiers = 3, radix = 64)
  bandwidth = 400 Gb/s
  latency   = 1 us
}
node Box { gpus = 8 x C  scaleup = Up  storage = 1 GB/s  mttr = 4 h  mtbf = 50000 h }
cluster K {
  scaleout = Out
  partition a { units = 2048 x Box }
  partition b { units = 16 x Box }
}
model M { arch = dense  layers = 32  hidden = 4096  heads = 32  ffn = 14336  vocab = 128256  seq = 4096 }
train t {
  model    = M
  on       = K.a
  batch    = 4096
  EXTRA
}
"""


def design(extra: str = "", mtbf: str = "86300 h") -> str:
    return BASE.replace("EXTRA", extra).replace("MTBF", mtbf)


def codes_of(text: str) -> list[tuple[str, int]]:
    result = check_text(text, "t.gcl")
    return [(d.code, d.subject.line) for d in result.diagnostics if d.is_error]


def test_the_shared_fields_check_clean():
    extra = ("priority = high  submit = 2 h  steps = 1000  min_gpus = 64  gpus = 512  prefer = K.a  gang = true\n"
             "  checkpoint { size = 200 GB  bandwidth = 50 GB/s  restart = 10 min  interval = 30 min }")
    assert codes_of(design(extra)) == []
    assert codes_of(design("priority = 7")) == []


@pytest.mark.parametrize("extra, code", [
    ("priority = urgent", "bad-choice"),
    ("priority = 0", "out-of-range"),
    ("priority = 2.5", "not-integer"),
    ("submit = -1 h", "out-of-range"),
    ("submit = 2 GB", "wrong-dimension"),
    ("duration = 0 s", "out-of-range"),
    ("steps = 10  tokens = 1 B", "shape"),
    ("min_gpus = 64  gpus = 32", "order"),
    ("prefer = K.b", "shape"),
    ("gang = 1", "wrong-type"),
    ("checkpoint { size = 10 GB/s }", "wrong-dimension"),
    ("checkpoint { sise = 10 GB }", "unknown-field"),
])
def test_bad_shared_fields_are_located_errors(extra, code):
    found = codes_of(design(extra))
    assert found and found[0][0] == code and found[0][1] >= 21   # on the job's lines, not elsewhere


def test_bad_mtbf_and_workload_rows_are_located():
    assert codes_of(design(mtbf="-5 h"))[0] == ("out-of-range", 5)
    rows = design() + 'workload w { on = K  job r { duration = 2 h  gpus = 0 } }\n'
    assert codes_of(rows)[0][0] == "out-of-range"
    empty = design() + "workload w { on = K }\n"
    assert codes_of(empty)[0][0] == "trace-row"


def test_goodput_where_it_would_be_ignored_is_an_error():
    split = design("maximize = goodput").replace("on       = K.a", "on       = [K.a, K.b]")
    assert codes_of(split) == [("shape", 25)]
    serve = design() + "serve s { model = M  on = K.b  prompt = 1024  output = 256  maximize = goodput }\n"
    assert codes_of(serve)[0][0] == "bad-choice"  # a serve plan maximizes throughput or minimizes energy


def _plan(objective: str, mtbf: str):
    result = check_text(design("maximize = goodput", mtbf), "t.gcl")
    assert result.ok, result.diagnostics
    return plan(train_job(result.design), objective, 0)


def test_goodput_objective_chooses_fewer_gpus_when_failures_are_frequent():
    by_throughput, by_goodput = _plan("throughput", "2000 h"), _plan("goodput", "2000 h")
    assert by_goodput.best.config.gpus < by_throughput.best.config.gpus
    good = lambda p: p.best.tokens_per_s * p.goodput.efficiency  # noqa: E731
    assert good(by_goodput) > good(by_throughput)
    assert by_goodput.goodput.efficiency <= 1 and good(by_goodput) <= by_goodput.best.tokens_per_s


def test_goodput_falls_as_mtbf_falls():
    reliable, flaky = _plan("throughput", "86300 h"), _plan("throughput", "2000 h")
    assert reliable.best.config == flaky.best.config
    assert flaky.goodput.efficiency < reliable.goodput.efficiency <= 1


@pytest.mark.parametrize("name", ["dense", "moe"])
def test_a_keyword_field_reads_its_keyword_beside_a_declaration_of_that_name(name):
    # a job named `dense` made `arch = dense` "not an architecture, the train `dense`"
    text = BASE.replace("MTBF", "10000 h").replace("train t {", f"train {name} {{").replace("EXTRA", "")
    result = check_text(text, "t.gcl")
    assert result.ok, result.diagnostics
    assert train_job(result.design).shape.is_moe is False
    # a word that is no choice is still told as one
    broken = check_text(text.replace("arch = dense", "arch = densex"), "t.gcl")
    assert [d.code for d in broken.diagnostics if d.is_error] == ["bad-choice"]
