"""The optimizer's precisions in plans: a job that narrows any (optimizer_state, master_weights,
main_grads) gets an `optimizer` line in the text and an `optimizer` object in the JSON, which
views/plan.schema.json describes; a job that states none keeps its plan as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from gclc.cli.main import main
from gclc.compiler.schema import MAIN_GRADS, MASTER_WEIGHTS, OPTIMIZER_STATES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "views" / "plan.schema.json").read_text(encoding="utf-8"))


def design(tmp_path: Path, fields: str) -> Path:
    """tests/data/train.gcl with `fields` added to its job."""
    shutil.copy(ROOT / "tests" / "data" / "pod.gcl", tmp_path / "pod.gcl")
    text = (ROOT / "tests" / "data" / "train.gcl").read_text(encoding="utf-8")
    path = tmp_path / "job.gcl"
    path.write_text(text.replace("precision = bf16\n}", f"precision = bf16\n  {fields}\n}}"), encoding="utf-8")
    return path


def planned(capsys, path: Path) -> tuple[dict, str]:
    assert main(["plan", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(["plan", str(path)]) == 0
    return data, capsys.readouterr().out


def test_the_schema_names_the_choices_the_language_accepts():
    fields = SCHEMA["properties"]["optimizer"]["properties"]
    assert tuple(fields["optimizer_state"]["enum"]) == OPTIMIZER_STATES
    assert tuple(fields["master_weights"]["enum"]) == MASTER_WEIGHTS
    assert tuple(fields["main_grads"]["enum"]) == MAIN_GRADS


@pytest.mark.parametrize("fields, moments, master, grads", [
    ("optimizer_state = bf16  main_grads = bf16", "bf16", "fp32", "bf16"),
    ("master_weights = none  software = nemo", "fp32", "none", "fp32"),   # NeMo 1.0's Apex Adam: no master
    # Megatron's precision-aware optimizer stated with fp32 dtypes: only the master narrows, to remainders
    ("precision_aware_optimizer = true", "fp32", "fp32", "fp32"),
])
def test_a_job_that_narrows_a_precision_shows_them_all(tmp_path, capsys, fields, moments, master, grads):
    data, text = planned(capsys, design(tmp_path, fields))
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    state = data["optimizer"]
    assert (state["optimizer_state"], state["master_weights"], state["main_grads"]) == (moments, master, grads)
    # Megatron-Core (the default stack) and NeMo keep an fp32 master as remainders under ZeRO 1-2 only
    assert state["master_remainders"] == (master == "fp32" and data["parallelism"]["zero"] in (1, 2))
    moment_bytes = {"fp32": 4, "bf16": 2}[moments]
    master_bytes = 2 if state["master_remainders"] else {"fp32": 4, "none": 0}[master]
    assert state["state_bytes_per_param"] == 2 * moment_bytes + master_bytes
    assert state["grad_bytes_per_param"] == 2        # Megatron-Core reduces bf16 gradients either way
    line = next(x for x in text.splitlines() if x.startswith("  optimizer "))
    assert f"moments {moments}," in line and f"main gradients {grads} " in line
    assert ("no master weights" in line) == (master == "none")
    assert ("16-bit remainders" in line) == state["master_remainders"]
    assert f"({state['state_bytes_per_param']:g} B of optimizer state per parameter, not 12; 2 B per gradient)" in line


def test_a_job_that_states_no_precision_has_no_optimizer_line_nor_key(tmp_path, capsys):
    data, text = planned(capsys, design(tmp_path, "software = megatron_core"))
    assert "optimizer" not in data
    assert not any(x.startswith("  optimizer ") for x in text.splitlines())


def test_a_master_megatron_core_cannot_hold_is_a_located_error(tmp_path, capsys):
    """Megatron-Core's --main-params-dtype is fp32 or fp16: `none` (Apex's, NeMo 1.0) on its stack is refused
    where it is written, not planned."""
    path = design(tmp_path, "master_weights = none")
    assert main(["plan", str(path)]) == 1
    out = capsys.readouterr()
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if "master_weights" in x)
    assert f"job.gcl:{line}:" in out.out + out.err and "--main-params-dtype" in out.out + out.err


def test_a_second_moment_stated_apart_shows_on_both(tmp_path, capsys):
    """Megatron's --exp-avg-dtype bf16 with --exp-avg-sq-dtype fp32: 2 + 4 bytes of moments, the master as
    remainders; the plan names the second moment apart."""
    data, text = planned(capsys, design(tmp_path, "optimizer_state = bf16  second_moment = fp32"))
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    state = data["optimizer"]
    assert (state["optimizer_state"], state["second_moment"]) == ("bf16", "fp32")
    assert state["state_bytes_per_param"] == 2 + 4 + (2 if state["master_remainders"] else 4)
    line = next(x for x in text.splitlines() if x.startswith("  optimizer "))
    assert "moments bf16 (second fp32)," in line


def on_node(tmp_path: Path, node: str) -> Path:
    """tests/data/dense_variants.gcl (Mistral 7B on std nodes) on `node`, in fp8 on Megatron-Core with its
    precision-aware optimizer stated at fp32 dtypes and the distributed optimizer (ZeRO 1) pinned."""
    text = (ROOT / "tests" / "data" / "dense_variants.gcl").read_text(encoding="utf-8")
    pins = "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }"
    text = text.replace("x DGX_H100", f"x {node}").replace("precision = bf16", "precision = fp8").replace(
        "software  = fsdp", "software  = megatron_core\n  precision_aware_optimizer = true").replace(
        pins, "parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }")
    path = tmp_path / f"{node}.gcl"
    path.write_text(text, encoding="utf-8")
    return path


def test_fp8_on_blackwell_keeps_the_whole_fp32_master_and_on_hopper_its_remainders(tmp_path, capsys):
    """Blackwell runs `fp8` as MX block scaling (compiler/formats.py; the Megatron export writes --fp8-recipe
    mxfp8), under which Megatron-Core keeps a whole fp32 master (use_precision_aware_optimizer_no_fp8_or_ds_fp8
    false): 12 B of state per parameter; Hopper's delayed scaling leaves it to FusedAdam as remainders, 10 B.
    The same layout on both, so the optimizer's memory differs by exactly that ratio."""
    blackwell, text = planned(capsys, on_node(tmp_path, "DGX_B200"))
    hopper, _ = planned(capsys, on_node(tmp_path, "DGX_H100"))
    for data in (blackwell, hopper):
        jsonschema.Draft202012Validator(SCHEMA).validate(data)
        assert data["parallelism"]["zero"] == 1 and data["parallelism"]["dp"] == 32
    assert not blackwell["optimizer"]["master_remainders"] and blackwell["optimizer"]["state_bytes_per_param"] == 12
    assert hopper["optimizer"]["master_remainders"] and hopper["optimizer"]["state_bytes_per_param"] == 10
    held = [data["memory_breakdown_bytes"]["optimizer"] for data in (blackwell, hopper)]
    assert held[0] == pytest.approx(held[1] * 12 / 10, rel=1e-12)
    line = next(x for x in text.splitlines() if x.startswith("  optimizer "))
    assert "16-bit remainders" not in line
    assert "(12 B of optimizer state per parameter; " in line, "12 B is mixed-precision Adam's: no 'not 12'"


def test_a_configuration_states_no_second_moment_key_unless_the_job_does():
    """A heterogeneous plan's partitions carry each configuration's fields (config_json): a second
    moment the job does not state keeps the plan's keys, one it states is there."""
    import attrs

    from gclc.model.config import TrainConfig
    from gclc.views.plan_json import config_json

    plain = TrainConfig(batch=1, seq=1, precision="bf16", stack="megatron_core")
    assert "second_moment" not in config_json(plain)
    assert config_json(attrs.evolve(plain, second_moment="bf16"))["second_moment"] == "bf16"


def test_nemo_with_the_flag_stated_off_narrows_without_remainders_and_no_megatron_export(tmp_path, capsys):
    """`precision_aware_optimizer = false` beside bf16 moments on nemo is NeMo 1.0's Apex
    DistributedFusedAdam: the moments narrow, the fp32 master stays whole (no Transformer Engine
    remainders: 2 + 2 + 4 B), the plan says so, and the Megatron export, whose arguments can only
    state Megatron-Core's precision-aware optimizer, refuses it instead of writing the flag."""
    text = (ROOT / "tests" / "data" / "dense_variants.gcl").read_text(encoding="utf-8")
    pins = "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }"
    path = tmp_path / "apex.gcl"
    path.write_text(text.replace("software  = fsdp", "software  = nemo\n  optimizer_state = bf16\n"
                                 "  precision_aware_optimizer = false").replace(pins, "parallelism { tp = 1 pp = 1 dp = 32 zero = 1 }"),
                    encoding="utf-8")
    data, text = planned(capsys, path)
    state = data["optimizer"]
    assert (state["optimizer_state"], state["master_remainders"], state["state_bytes_per_param"]) == ("bf16", False, 8)
    assert "precision_aware_optimizer" not in data["parallelism"]
    assert "(8 B of optimizer state per parameter, not 12; " in text
    assert main(["export", str(path), "--to", "megatron", "-o", str(tmp_path / "out")]) != 0
    assert "states precision_aware_optimizer = false with optimizer_state = bf16" in capsys.readouterr().err
