"""Checking serve jobs: demand, percentile SLOs, engine options, traces and precisions,
each error located at the text that causes it."""

from __future__ import annotations

import pytest

from gclc.compiler.design import Construct
from gclc.compiler.driver import check_file, check_text
from gclc.dsl.units import Quantity
from gclc.solver.serve.demand import demand_of, mean_length

HEAD = """\
import "std/nvidia"
import "std/network"
cluster C { units = 2 x DGX_H100  scaleout = NDR_FatTree }
cluster A { units = 2 x DGX_A100  scaleout = HDR_FatTree }
model M {
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
  ffn = 14336  vocab = 128256  seq = 8192
}
"""


def check(body: str, path: str = "serve.gcl"):
    return check_text(HEAD + body, path)


def errors(result) -> list[tuple[str, int, str]]:
    return [(d.code, d.subject.line - HEAD.count("\n"), d.summary) for d in result.diagnostics if d.is_error]


def test_a_full_demand_checks_clean():
    result = check("""serve s {
  model = M  on = C  precision = fp8
  prompt = lognormal(mean = 2000, sigma = 0.6)
  output = uniform(low = 100, high = 900)
  rate = 40 req/s
  engine {
    mode = auto  max_batch = 256  chunk = 4096  kv_precision = fp8  kv_block = 32  prefix_share = 25%
    speculative { tokens = 3  acceptance = 70% }
  }
  slo { ttft.p99 <= 2 s  tpot.p90 <= 50 ms  e2e.p50 <= 30 s }
  subject to { power <= 1 MW }
}
""")
    assert result.ok, [d.summary for d in result.diagnostics]
    job = result.design["s"]
    assert job.get("rate") == Quantity.of(40, "req/s") and float(job.get("rate")) == 40
    assert isinstance(job.get("prompt"), Construct) and mean_length(job.get("prompt")) == 2000
    assert mean_length(job.get("output")) == 500
    demand = demand_of(job, 400)
    lengths = [q.output for q in demand.requests]
    assert min(lengths) >= 100 and max(lengths) <= 900
    assert 380 < sum(q.prompt for q in demand.requests) / 400 / 5 < 420  # mean ~2000
    gaps = demand.duration / 399
    assert 1 / 40 * 0.8 < gaps < 1 / 40 * 1.2  # Poisson arrivals at 40 per second


def test_a_misspelled_percentile_gets_a_suggestion():
    result = check("serve s { model = M  on = C  prompt = 10  output = 10  rate = 1 req/s\n  slo { ttft.p98 <= 2 s } }\n")
    [(code, line, summary)] = errors(result)
    assert code == "bad-constraint" and line == 2 and "ttft.p98" in summary
    assert any("ttft.p99" in n or "ttft.p90" in n for n in result.diagnostics[0].notes)


def test_a_percentile_needs_a_demand():
    result = check("serve s { model = M  on = C  prompt = 10  output = 10\n  slo { ttft.p99 <= 2 s } }\n")
    [(code, line, summary)] = errors(result)
    assert code == "serve-demand" and line == 2 and "measured under a load" in summary


def test_lengths_or_a_trace_are_required():
    [(code, line, summary)] = errors(check("serve s { model = M  on = C  output = 10 }\n"))
    assert code == "serve-demand" and line == 1 and "`prompt`" in summary


def test_a_bad_distribution_is_located():
    result = check("serve s { model = M  on = C\n  prompt = gamma(mean = 3)  output = 10 }\n")
    [(code, line, summary)] = errors(result)
    assert code == "unknown-constructor" and line == 2
    result = check("serve s { model = M  on = C\n  prompt = lognormal(mean = 3)  output = 10 }\n")
    assert errors(result)[0][:2] == ("missing-argument", 2)


def test_fp8_on_a_chip_without_fp8_is_refused():
    result = check("serve s { model = M  on = A  prompt = 10  output = 10\n  precision = fp8 }\n")
    [(code, line, summary)] = errors(result)
    assert code == "unsupported-precision" and line == 2 and "A100" in summary
    result = check("serve s { model = M  on = A  prompt = 10  output = 10\n  engine { kv_precision = fp4 } }\n")
    assert errors(result)[0][:2] == ("unsupported-precision", 2)


def test_rate_must_be_a_rate():
    [(code, line, _)] = errors(check("serve s { model = M  on = C  prompt = 10  output = 10\n  rate = 40 GB }\n"))
    assert (code, line) == ("wrong-dimension", 2)


def test_simulated_requests_are_bounded_like_a_trace():
    """Found by the fuzz: `requests = 100000000` made `plan` simulate 1e8 requests (a hang)."""
    assert check("serve s { model = M  on = C  prompt = 10  output = 10\n  requests = 100000 }\n").ok
    [(code, line, summary)] = errors(check("serve s { model = M  on = C  prompt = 10  output = 10\n"
                                           "  requests = 100001 }\n"))
    assert (code, line) == ("out-of-range", 2) and "<= 100,000" in summary


@pytest.mark.parametrize("rows, line, why", [
    ("arrival_s,prompt,output\n0,100,10\n0.5,abc,3\n", 3, "`abc` is not a number"),
    ("when,prompt,output\n0,100,10\n", 1, "header"),
    ("arrival_s,prompt,output\n1,100,10\n0.5,100,3\n", 3, "back in time"),
    ("arrival_s,prompt,output\n", 1, "no requests"),
])
def test_a_bad_trace_is_an_error_at_its_line_in_the_trace(tmp_path, rows, line, why):
    (tmp_path / "t.csv").write_text(rows)
    design = tmp_path / "d.gcl"
    design.write_text(HEAD + 'serve s { model = M  on = C\n  trace = "t.csv" }\n')
    result = check_file(str(design))
    [problem] = [d for d in result.diagnostics if d.is_error]
    assert problem.code == "trace-row" and why in problem.summary
    assert (problem.subject.path, problem.subject.line) == (str(tmp_path / "t.csv"), line)


def test_a_trace_outside_the_design_folder_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("arrival_s,prompt,output\n0,100,10\n")
    (tmp_path / "sub").mkdir()
    design = tmp_path / "sub" / "d.gcl"
    design.write_text(HEAD + 'serve s { model = M  on = C\n  trace = "../t.csv" }\n')
    [(code, line, summary)] = errors(check_file(str(design)))
    assert code == "trace-path" and line == 2 and "folder" in summary


def test_a_trace_gives_the_demand(tmp_path):
    (tmp_path / "t.csv").write_text("# chat sample\narrival_s,prompt,output\n0,100,10\n0.5,200,30\n1.0,300,20\n")
    design = tmp_path / "d.gcl"
    design.write_text(HEAD + 'serve s { model = M  on = C  trace = "t.csv"\n  slo { ttft.p99 <= 1 s } }\n')
    result = check_file(str(design))
    assert result.ok, [d.summary for d in result.diagnostics]
    demand = demand_of(result.design["s"])
    assert demand.rate == pytest.approx(2.0) and demand.prompt == 200 and demand.output == 20
    both = tmp_path / "both.gcl"
    both.write_text(HEAD + 'serve s { model = M  on = C  trace = "t.csv"\n  rate = 3 req/s }\n')
    [(code, line, summary)] = errors(check_file(str(both)))
    assert code == "serve-demand" and line == 2 and "both state the demand" in summary


@pytest.mark.parametrize("text, code", [
    ("parallelism { dp = 2 }", "unknown-field"),            # replicas are the planner's; tp/ep/pp pin a replica
    ("subject to { time <= 1 h }", "bad-constraint"),        # only power, memory and gpus bind a serve plan
    ("maximize = goodput", "bad-choice"),                    # goodput is what the demand's SLOs already ask
    ("minimize = cost", "bad-choice"),
])
def test_what_a_serve_plan_would_ignore_is_refused(text, code):
    result = check(f"serve s {{ model = M  on = C  prompt = 10  output = 10\n  {text} }}\n")
    assert [(c, line) for c, line, _ in errors(result)] == [(code, 2)]


@pytest.mark.parametrize("engine, line", [
    ("engine { speculative { tokens = 99999  acceptance = 70% } }", 3),
    ("engine { chunk = 512  speculative { tokens = 512  acceptance = 70% } }", 3),
])
def test_more_drafts_than_one_iteration_verifies_are_refused_where_written(engine, line):
    result = check(f"""serve s {{
  model = M  on = C  prompt = 2000  output = 200  rate = 4 req/s
  {engine}
}}""")
    assert [(code, at) for code, at, _ in errors(result)] == [("out-of-range", line)]
    assert "speculative.tokens" in errors(result)[0][2]


def test_drafts_that_fit_the_stated_budget_check_clean():
    result = check("""serve s {
  model = M  on = C  prompt = 2000  output = 200  rate = 4 req/s
  engine { chunk = 512  speculative { tokens = 511  acceptance = 70% } }
}""")
    assert errors(result) == []


def test_the_least_token_budget_is_every_profiles_least():
    """The bound used when no `chunk` is stated is the smallest any engine profile gives."""
    from gclc.compiler.rules.serve import LEAST_TOKEN_BUDGET
    from gclc.model.serve.engines import PROFILES
    chunks = [engine.chunk for p in PROFILES.values() for engine in (p.engine(), p.engine(40e9, "A100"))]
    assert min(chunks) == LEAST_TOKEN_BUDGET


def test_a_checkpoints_bf16_share_needs_narrow_weights():
    result = check("""serve s {
  model = M  on = C  prompt = 2000  output = 200  precision = bf16
  checkpoint { wide_share = 10% }
}""")
    assert [(code, at) for code, at, _ in errors(result)] == [("pin-meaningless", 3)]


def test_a_dense_share_on_a_dense_model_is_refused_and_the_whole_share_is_not():
    result = check("""serve s {
  model = M  on = C  prompt = 2000  output = 200  precision = fp8
  checkpoint { dense_wide_share = 10% }
}""")
    assert [(code, at) for code, at, _ in errors(result)] == [("pin-meaningless", 3)]
    assert "no routed experts" in errors(result)[0][2]
    clean = check("""serve s {
  model = M  on = C  prompt = 2000  output = 200  precision = fp8
  checkpoint { wide_share = 9.4% }
}""")
    assert errors(clean) == []


def test_more_gpus_than_the_target_promises_no_smaller_plan_for_a_serve_job():
    """`gpus` on a serve job is the count its plan uses, exactly: the warning had said "so it is
    planned on 16" while `gclc plan` then found no plan (solver/serve/space.py); a train job is
    planned on what there is."""
    serve = check("serve s {\n  model = M  on = C  precision = fp8  gpus = 1000\n  prompt = 1000  output = 200\n}\n")
    (w,) = [d for d in serve.diagnostics if d.code == "too-many-gpus"]
    assert w.summary == ("the job asks 1,000 GPUs; its target has 16, and a serve job's `gpus` is the count its "
                         "plan uses, exactly: no plan can")
    train = check("train t {\n  model = M  on = C  batch = 64  gpus = 1000\n}\n")
    (w,) = [d for d in train.diagnostics if d.code == "too-many-gpus"]
    assert w.summary == "the job asks 1,000 GPUs; its target has 16, so it is planned on 16"


@pytest.mark.parametrize("rate, requests, refused", [("1e-15 req/s", None, True), ("1e-6 req/s", 400, True),
                                                      ("2e-6 req/s", 400, False), ("1e-6 req/s", 300, False)])
def test_a_rate_too_light_to_simulate_is_refused_at_the_rate(rate, requests, refused):
    """At 1e-15 req/s the simulated arrivals reached ~1e17 s, where a float second has no bits
    left for a decode step: `gclc plan` printed a TTFT and TPOT of 0 s. Ten years of arrivals is
    the bound, as for a schedule's submit times (the simulator's clock keeps ~60 ns there)."""
    count = f"  requests = {requests}\n" if requests else ""
    result = check(f"serve s {{\n  model = M  on = C  precision = fp8\n  prompt = 1000  output = 200\n"
                   f"  rate = {rate}\n{count}}}\n")
    found = [e for e in errors(result) if e[0] == "out-of-range"]
    assert bool(found) == refused
    if refused:
        assert found[0][1] == 4 and found[0][2].startswith("`rate` must be at least")


def test_a_trace_arrival_past_ten_years_is_refused_at_its_cell(tmp_path):
    (tmp_path / "t.csv").write_text("arrival_s,prompt,output\n0,100,10\n1e18,100,10\n")
    result = check('serve s {\n  model = M  on = C  precision = fp8\n  trace = "t.csv"\n}\n', str(tmp_path / "s.gcl"))
    (e,) = [d for d in result.diagnostics if d.is_error]
    assert (e.code, e.subject.line, e.subject.column) == ("trace-row", 3, 1)
    assert "at most 315,576,000" in e.summary
