"""Checking `rl` jobs: a full job checks clean, and each way of writing one the planner could not
plan is a located error (the line and the field it points at)."""

from __future__ import annotations

import pytest

from gclc.compiler.driver import check_text

HEAD = """\
import "std/nvidia"
import "std/network"
cluster Lab {
  scaleout = NDR_FatTree
  partition h100 { units = 2 x DGX_H100 }
  partition a100 { units = 2 x DGX_A100 }
}
cluster Other { units = 1 x DGX_H100  scaleout = NDR_FatTree }
model M {
  arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 128256  seq = 8192
}
"""

JOB = """rl r {
  model = M  reference = M  on = [Lab.h100, Lab.a100]
  prompts = 16  samples = 8  prompt = 256  response = lognormal(mean = 300, sigma = 0.8)
  max_response = 1024  minibatches = 2  epochs = 1  staleness = 1  algorithm = grpo
  %s
}
"""


def check(extra: str):
    return check_text(HEAD + JOB % extra, "rl.gcl")


def errors(result) -> list[tuple[str, int, int, str]]:
    return [(d.code, d.subject.line - HEAD.count("\n"), d.subject.column, d.summary)
            for d in result.diagnostics if d.is_error]


def test_a_full_job_checks_clean():
    result = check("""placement = disaggregated  steps = 100  minimize = time
  generate { on = Lab.a100  gpus = 8  precision = bf16  parallelism { tp = 2 }
             engine { max_batch = 256  chunk = 4096  kv_precision = fp8  prefix_share = 50%  memory = 80% } }
  train { on = Lab.h100  gpus = 16  software = megatron  precision = bf16  parallelism { tp = 2  recompute = full } }
  subject to { memory <= 90%  power <= 100 kW  gpus <= 32 }""")
    assert not result.diagnostics, [d.summary for d in result.diagnostics]


@pytest.mark.parametrize("extra, code, line, words", [
    ("critic = M", "rl-job", 5, "GRPO has no value model"),
    ("generate { on = Lab.a100 }  train { on = Lab.h100 }  placement = colocated", "rl-job", 5,
     "colocated pools share their GPUs"),
    ("generate { on = Other }", "rl-job", 5, "not among the partitions"),
    ("minimize = time", "rl-job", 5, "needs the run's `steps`"),
    ("minimize = cost", "rl-job", 5, "needs the cluster's `economics`"),
    ("generate { parallelism { tp = 3 } }", "shape", 5, "tp = 3 does not divide"),
    ("generate { precision = fp4 }", "unsupported-precision", 5, "does not run fp4"),
    ("subject to { time <= 3 h }", "bad-constraint", 5, "cannot constrain `time`"),
    ("subject to { ttft <= 3 s }", "bad-constraint", 5, "cannot constrain `ttft`"),
    ("generate { gpus = 8 }  train { gpus = 16 }  placement = colocated", "rl-job", 5, "colocated pools share"),
    ("old_logprobs = false", "rl-job", 5, "takes 2 optimizer steps (1 epoch x 2 mini-batches)"),
])
def test_bad_jobs_are_located_errors(extra, code, line, words):
    found = errors(check(extra))
    assert any(c == code and ln == line and words in summary for c, ln, _, summary in found), found


def test_the_algorithm_and_the_batch_are_checked_where_they_are_written():
    text = JOB.replace("algorithm = grpo", "algorithm = ppo").replace("minibatches = 2", "minibatches = 3")
    found = errors(check_text(HEAD + text % "", "rl.gcl"))
    assert ("rl-job", 4, 68, "PPO trains a value model beside the policy: the job names no `critic`") in found, found
    assert any(c == "rl-job" and ln == 4 and "128 samples a step" in s and "3 mini-batches" in s
               for c, ln, _, s in found), found
    grpo = JOB.replace("samples = 8", "samples = 1").replace("minibatches = 2", "minibatches = 1")
    found = errors(check_text(HEAD + grpo % "", "rl.gcl"))
    assert any(c == "rl-job" and ln == 3 and "`samples = 1`" in s for c, ln, _, s in found), found


def test_skipping_the_old_log_probabilities_needs_one_optimizer_step():
    one = JOB.replace("minibatches = 2", "minibatches = 1")
    assert not errors(check_text(HEAD + one % "old_logprobs = false", "rl.gcl"))
    assert not errors(check("old_logprobs = true"))


def test_pools_run_on_one_cluster_and_one_partition_each():
    found = errors(check_text(HEAD + JOB.replace("on = [Lab.h100, Lab.a100]", "on = [Lab.h100, Other]") % "",
                              "rl.gcl"))
    assert any(c == "rl-job" and "run on one cluster" in s for c, _, _, s in found), found
    found = errors(check("generate { on = Lab }"))
    assert any(c == "rl-job" and "runs on one partition" in s for c, _, _, s in found), found


def test_unknown_fields_and_required_fields_are_located():
    found = errors(check("generate { mode = disaggregated }"))
    assert any(c == "unknown-field" and "`mode`" in s for c, _, _, s in found), found
    found = errors(check_text(HEAD + "rl r { model = M  on = Lab  prompts = 4 }\n", "rl.gcl"))
    assert ("missing-field", 1, 4, "rl `r` needs `prompt` and `response`") in found, found
