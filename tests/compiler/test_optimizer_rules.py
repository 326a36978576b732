"""Located errors for optimizer precisions no stack of the job can hold (compiler/rules/optimizer.py):
Megatron's precision-aware optimizer off stack, without the distributed optimizer, or stated off
beside a narrower dtype; fp8 moments anywhere Transformer Engine's FusedAdam does not run."""

from pathlib import Path

import pytest

from gclc.compiler.driver import check_text

PATH = Path(__file__).parent.parent / "data" / "dense_variants.gcl"
DESIGN = PATH.read_text()
PINS = "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }"
ZERO1 = "parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }"
ZERO0 = "parallelism { tp = 8 pp = 1 dp = 4 zero = 0 }"


def job(fields: str, stack: str = "megatron_core", pins: str = ZERO1) -> str:
    return DESIGN.replace("software  = fsdp", f"software  = {stack}\n  {fields}").replace(PINS, pins)


def errors(text: str):
    return [d for d in check_text(text, str(PATH)).diagnostics if d.is_error]


def where(text: str, needle: str) -> tuple[int, int]:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


@pytest.mark.parametrize("fields, stack, pins", [
    ("precision_aware_optimizer = true", "megatron_core", ZERO1),
    ("precision_aware_optimizer = true  master_weights = fp16  optimizer_state = fp8", "nemo", ZERO1),
    ("optimizer_state = fp8", "megatron", "parallelism { tp = 1 pp = 1 dp = 32 zero = 3 }"),
    ("optimizer_state = bf16  master_weights = none", "nemo", ZERO1),       # NeMo 1.0's Apex Adam
    ("optimizer_state = bf16  precision_aware_optimizer = false", "nemo", ZERO1),
    ("optimizer_state = bf16", "fsdp", ZERO0),      # AdamW at a bf16-stored model's dtype
    ("optimizer_state = bf16", "deepspeed", ZERO1),  # bf16_optimizer_states
    ("optimizer_state = bf16  second_moment = fp32", "maxtext", ZERO1),   # optax's mu_dtype: the first moment only
    ("optimizer_state = bf16  second_moment = fp8", "megatron_core", ZERO1),
    ("precision_aware_optimizer = false", "fsdp", ZERO1),
    ("precision_aware_optimizer = false", "nemo", ZERO0),
    ("optimizer_state = bf16  master_weights = none", "nemo", "parallelism { tp = 8 pp = 1 dp = 4 }"),  # not pinned
])
def test_what_a_stack_runs_is_accepted(fields, stack, pins):
    assert errors(job(fields, stack, pins)) == []


@pytest.mark.parametrize("fields, stack, pins, needle, words", [
    ("precision_aware_optimizer = true", "fsdp", ZERO1, "precision_aware_optimizer", "`fsdp` does not run it"),
    ("precision_aware_optimizer = true", "deepspeed", ZERO1, "precision_aware_optimizer", "`deepspeed` does not run"),
    ("optimizer_state = fp8", "deepspeed", ZERO1, "optimizer_state", "only Transformer Engine's FusedAdam"),
    ("optimizer_state = fp8", "maxtext", ZERO1, "optimizer_state", "only Transformer Engine's FusedAdam"),
    ("optimizer_state = bf16  second_moment = fp8", "fsdp", ZERO1, "second_moment", "only Transformer Engine's FusedAdam"),
    ("second_moment = bf16  precision_aware_optimizer = false", "megatron_core", ZERO1, "second_moment", "states it off"),
    ("optimizer_state = bf16  precision_aware_optimizer = false", "megatron_core", ZERO1, "optimizer_state",
     "states it off"),
    ("main_grads = bf16  precision_aware_optimizer = false", "megatron", ZERO1, "main_grads", "states it off"),
    ("optimizer_state = fp8  precision_aware_optimizer = false", "nemo", ZERO1, "optimizer_state", "states it off"),
    ("precision_aware_optimizer = true", "megatron_core", ZERO0, "precision_aware_optimizer", "pins ZeRO 0"),
    ("optimizer_state = bf16", "megatron_core", ZERO0, "optimizer_state", "which a narrower state needs"),
    ("precision_aware_optimizer = true  master_weights = bf16", "nemo", ZERO1, "master_weights", "fp32 or fp16"),
    ("master_weights = none", "megatron_core", ZERO1, "master_weights", "--main-params-dtype"),
    # NeMo 1.0 narrows only in Apex's distributed_fused_adam (its `optim.dtype`; FusedAdam takes no dtype)
    ("optimizer_state = bf16  master_weights = none", "nemo", ZERO0, "optimizer_state", "only in a distributed"),
    ("main_grads = bf16", "nemo", ZERO0, "main_grads", "pins ZeRO 0"),
    ("optimizer_state = bf16  precision_aware_optimizer = false", "nemo", ZERO0, "optimizer_state",
     "only in a distributed"),
])
def test_what_no_stack_of_the_job_runs_is_a_located_error(fields, stack, pins, needle, words):
    text = job(fields, stack, pins)
    found = errors(text)
    assert len(found) == 1, [e.message for e in found]
    error = found[0]
    assert error.code == "pin-meaningless" and words in error.summary
    assert (error.subject.line, error.subject.column) == where(text, needle)
    assert any(n.startswith("help:") for n in error.notes)


def test_an_rl_training_pool_is_checked_without_pins_too():
    rl = (Path(__file__).parent.parent / "data" / "rl_small.gcl")
    text = rl.read_text().replace("  generate {", "  train { software = fsdp  precision_aware_optimizer = true }\n"
                                  "  generate {", 1)
    found = [d for d in check_text(text, str(rl)).diagnostics if d.is_error]
    assert [e.code for e in found] == ["pin-meaningless"] and "`fsdp` does not run it" in found[0].summary
    assert found[0].subject.line == where(text, "precision_aware_optimizer")[0]
    clean = rl.read_text().replace("  generate {", "  train { precision_aware_optimizer = false }\n  generate {", 1)
    assert [d for d in check_text(clean, str(rl)).diagnostics if d.is_error] == []


def test_a_misspelt_value_is_refused_with_the_choices():
    text = job("precision_aware_optimizer = yes")
    found = errors(text)
    assert found and found[0].subject.line == where(text, "precision_aware_optimizer")[0]
