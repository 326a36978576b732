"""Reading an `rl` block: every field the language accepts reaches the job the planner
evaluates (its models, algorithm, pools, limits), and the training pool becomes a train job
with the pool's stack and pins and the memory the other models leave it."""

from __future__ import annotations

from pathlib import Path

from gclc.compiler.driver import check_file, check_text
from gclc.model.rl.job import rl_job, train_job

SMALL = Path(__file__).resolve().parents[2] / "data" / "rl_small.gcl"


def job_of(text: str):
    base = SMALL.read_text().replace("  generate { engine { max_batch = 64 } }\n", "").replace(
        "  subject to { memory <= 90% }\n", "")
    result = check_text(base.replace("rl grpo {", "rl grpo {\n" + text, 1), "rl.gcl")
    assert result.design is not None, [d.summary for d in result.diagnostics]
    return rl_job(result.design["grpo"])


def test_the_small_design_reads_as_written():
    job = rl_job(check_file(str(SMALL)).design["grpo"])
    assert (job.algorithm, job.prompts, job.samples, job.batch, job.minibatches, job.epochs) == ("grpo", 16, 8, 128, 2, 1)
    assert job.staleness == 1 and job.placement == "auto" and job.objective == "throughput"
    assert [p.name for p in job.partitions] == ["h100", "a100"]
    assert job.reference == job.policy and job.reward is None and job.critic is None
    assert job.memory == 0.9 and job.memory_share and job.gpus == 32
    h100 = job.partition("h100")
    assert job.memory_of(h100) == 0.9 * h100.node.accelerator.hbm_capacity


def test_pools_pins_and_limits_are_read():
    job = job_of("""  placement = disaggregated  epochs = 2  steps = 50
  generate { on = Lab.a100  gpus = 8  precision = fp16 }
  train { on = Lab.h100  gpus = 16  software = fsdp  optimizer_state = bf16  parallelism { tp = 2 } }
  subject to { power <= 50 kW  gpus < 30 }""")
    assert (job.placement, job.epochs, job.steps) == ("disaggregated", 2, 50)
    assert (job.generate.partition, job.generate.gpus, job.generate.precision) == ("a100", 8, "fp16")
    assert (job.train.partition, job.train.gpus) == ("h100", 16)
    assert job.power == 50e3 and job.gpus == 29
    t = train_job(job, job.partition("h100"), 16, 700, 60e9)
    assert (t.batch, t.seq, t.gpus, t.stack, t.optimizer_state, t.pinned) == (64, 700, 16, "fsdp", "bf16", {"tp": 2})
    from gclc.solver.train.limits import limits
    assert limits(t).memory == 60e9           # the bytes the pool leaves the policy


def test_the_stack_release_is_read_and_checked():
    """`stack` names the RL stack's release (model/rl/stacks.py); the default is the current one; a name
    the table lacks is a located error that lists the releases."""
    assert job_of("").stack.name == "nemo_rl"
    old = job_of("  stack = nemo_rl_0_4\n").stack
    assert old.name == "nemo_rl_0_4" and old.optimizer_out_apart
    base = SMALL.read_text().replace("rl grpo {", "rl grpo {\n  stack = nemo_rl_0_3", 1)
    result = check_text(base, "rl.gcl")
    errors = [d for d in result.diagnostics if d.is_error]
    assert result.design is None and len(errors) == 1
    error = errors[0]
    assert error.code == "bad-choice" and "`stack`" in error.summary
    assert error.subject.path == "rl.gcl" and base.splitlines()[error.subject.line - 1].strip() == "stack = nemo_rl_0_3"
    assert any("nemo_rl_0_4" in note for note in error.notes)
