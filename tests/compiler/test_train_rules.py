"""Located errors for sharding, recompute, offload and attention pins that cannot mean
what they say (compiler/rules/train.py)."""

from pathlib import Path

import pytest

from gclc.compiler.driver import check_text

DESIGN = (Path(__file__).parent.parent / "data" / "dense_variants.gcl").read_text()
PINS = "parallelism { tp = 1 pp = 1 zero = 3 shard = shard recompute = full recompute_every = 2 offload = offload }"


def diagnose(text: str):
    result = check_text(text, str(Path(__file__).parent.parent / "data" / "dense_variants.gcl"))
    return [d for d in result.diagnostics if d.is_error], text


def one_error(pins: str | None = None, model: str | None = None, replace: tuple[str, str] | None = None):
    text = DESIGN.replace(PINS, pins) if pins else DESIGN
    if model:
        text = text.replace("window = window", model)
    if replace:
        text = text.replace(*replace)
    errors, text = diagnose(text)
    assert len(errors) == 1, [e.message for e in errors]
    return errors[0], text


def column_of(text: str, needle: str) -> tuple[int, int]:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line and not line.startswith("param"):
            return number, line.index(needle) + 1
    raise AssertionError(needle)


def test_the_design_as_written_is_clean():
    errors, _ = diagnose(DESIGN)
    assert errors == []


@pytest.mark.parametrize("pins, at, words", [
    ("parallelism { zero = 0 shard = 8 }", "shard = 8", "nothing to shard"),
    ("parallelism { dp = 4 zero = 3 shard = 8 }", "shard = 8", "do not tile"),
    ("parallelism { recompute = full recompute_modules = [mlp] }", "recompute_modules", "selective"),
    ("parallelism { recompute_modules = [mlp] }", "recompute_modules", "does not pin"),
    ("parallelism { recompute = selective recompute_modules = [mlp, mlp] }", "recompute_modules", "twice"),
    ("parallelism { recompute = selective recompute_modules = [op_level, norm] }", "recompute_modules",
     "combines with no other"),
    ("parallelism { recompute = none recompute_every = 2 }", "recompute_every", "recomputes nothing"),
    ("parallelism { recompute = full recompute_every = 40 }", "recompute_every", "exceeds"),
])
def test_a_meaningless_pin_is_an_error_at_the_pin(pins, at, words):
    error, text = one_error(pins)
    assert words in error.summary
    assert (error.subject.line, error.subject.column) == column_of(text, at)


def test_a_bad_module_name_lists_the_modules():
    error, _ = one_error("parallelism { recompute = selective recompute_modules = [attention] }")
    assert "core_attention" in "\n".join([error.summary, *error.notes])


def test_offload_needs_the_nodes_host_link():
    bare = "node Bare { gpus = 8 x H100_SXM  nics = 8 x ConnectX7  scaleup = NVLink4 }\n"
    text = DESIGN.replace("cluster Pod {", bare + "cluster Pod {").replace("nodes x DGX_H100", "nodes x Bare")
    errors, text = diagnose(text)
    assert len(errors) == 1 and "declares no `host_link`" in errors[0].summary
    assert (errors[0].subject.line, errors[0].subject.column) == column_of(text, "offload = offload")
    assert diagnose(text.replace("nodes x Bare", "nodes x Bare { host_link = 64 GB/s }"))[0] == []


@pytest.mark.parametrize("pins, words", [
    ("parallelism { offload = 50% search = [offload] }", "both pinned and listed"),
    ("parallelism { search = [shard, shard] }", "twice"),
    ("parallelism { recompute = full search = [recompute_modules] }", "selective recompute"),
    ("parallelism { recompute = none search = [recompute_every] }", "selective or full"),
    ("parallelism { zero = 0 search = [shard] }", "nothing to shard"),
])
def test_a_search_that_cannot_apply_is_an_error_at_the_search(pins, words):
    # the design's params named `shard` and `offload` would stand for their values in the list
    unnamed = DESIGN.replace("param shard", "param shard_size").replace("param offload", "param offload_share")
    errors, text = diagnose(unnamed.replace(PINS, pins))
    assert len(errors) == 1, [e.message for e in errors]
    error = errors[0]
    assert words in error.summary
    assert (error.subject.line, error.subject.column) == column_of(text, "search = [")


def test_searched_offload_needs_the_nodes_host_link():
    bare = "node Bare { gpus = 8 x H100_SXM  nics = 8 x ConnectX7  scaleup = NVLink4 }\n"
    text = (DESIGN.replace("cluster Pod {", bare + "cluster Pod {").replace("nodes x DGX_H100", "nodes x Bare")
            .replace(PINS, "parallelism { search = [offload, shard] }")
            .replace("param shard", "param shard_size").replace("param offload", "param offload_share"))
    errors, text = diagnose(text)
    assert len(errors) == 1 and "declares no `host_link`" in errors[0].summary
    assert (errors[0].subject.line, errors[0].subject.column) == column_of(text, "search = [")
    assert diagnose(text.replace("nodes x Bare", "nodes x Bare { host_link = 64 GB/s }"))[0] == []


def test_a_global_layer_interval_needs_a_window():
    error, text = one_error(model="global_every = 2")
    assert "without a `window`" in error.summary
    assert (error.subject.line, error.subject.column) == column_of(text, "global_every = 2")


def test_serving_a_windowed_model_is_accepted():
    """Sliding-window serving is modelled (model/serve/kv.py); tests/model/serve/test_window.py checks it."""
    serve = ('\nserve chat {\n  model = Mistral7B\n  on = Pod\n  prompt = 512\n  output = 128\n  batch = 8\n}\n')
    assert diagnose(DESIGN + serve)[0] == []


@pytest.mark.parametrize("field, value, listed", [
    ("optimizer_state", "fp4", "`fp32`, `bf16`, `fp16`, `fp8`"),
    ("optimizer_state", "none", "`fp32`, `bf16`, `fp16`, `fp8`"),   # the moments cannot be dropped
    ("master_weights", "fp8", "`fp32`, `bf16`, `fp16`, `none`"),
    ("main_grads", "fp16", "`fp32`, `bf16`"),    # Megatron's --main-grads-dtype choices
    ("main_grads", "none", "`fp32`, `bf16`"),
])
def test_an_optimizer_state_precision_gclc_cannot_store_is_located_with_the_choices(field, value, listed):
    error, text = one_error(replace=("  software  = fsdp", f"  software  = fsdp\n  {field} = {value}"))
    assert f"`{value}` is not a valid `{field}`" in error.summary
    assert listed in "\n".join(error.notes)
    line, column = column_of(text, f"{field} = {value}")
    assert (error.subject.line, error.subject.column) == (line, column + len(f"{field} = "))  # at the value


def test_the_optimizer_state_precisions_reach_the_job():
    from gclc.model.job import pinned_config, train_job

    path = str(Path(__file__).parent.parent / "data" / "dense_variants.gcl")
    text = DESIGN.replace("  software  = fsdp", "  software  = fsdp\n  optimizer_state = bf16\n  master_weights = none\n"
                                                 "  main_grads = bf16")
    result = check_text(text, path)
    config = pinned_config(train_job(result.design))
    assert (config.optimizer_state, config.master_weights, config.main_grads) == ("bf16", "none", "bf16")
    default = pinned_config(train_job(check_text(DESIGN, path).design))
    assert (default.optimizer_state, default.master_weights, default.main_grads) == ("fp32", "fp32", "fp32")


@pytest.mark.parametrize("stack, refused", [("megatron", "no switch in `megatron`"),
                                            ("deepspeed", "does not pin `recompute = full`"),
                                            ("deepspeed_2022", "does not pin `recompute = full`")])
def test_a_stated_offload_needs_a_stack_that_offloads(stack, refused):
    # Megatron-LM before Megatron-Core 0.5 has no --cpu-offloading; DeepSpeed's cpu_checkpointing moves only the
    # inputs of checkpointed layers: the design's offload with selective recompute runs on neither
    text = DESIGN.replace("software  = fsdp", f"software  = {stack}").replace("recompute = full", "recompute = selective")
    errors, text = diagnose(text)
    assert len(errors) == 1, [e.message for e in errors]
    error = errors[0]
    assert refused in error.summary
    assert (error.subject.line, error.subject.column) == column_of(text, "offload = offload")
    assert error.labels[0].span.line == column_of(text, f"software  = {stack}")[0]
    said = "\n".join([error.summary, *error.notes])
    assert "megatron_core" in said and "nemo" in said and "maxtext" in said    # where it runs
    assert diagnose(text.replace(" offload = offload", ""))[0] == []   # no offload, no error


# What each stack's switch runs beside: Megatron-Core (megatron_core, nemo) at pp 1 without recompute and short of
# every layer (its TransformerConfig.__post_init__), DeepSpeed every checkpointed layer of a full recompute.
ALONE = "parallelism { tp = 1 pp = 1 zero = 1 recompute = none offload = offload }"
RUNS = {"megatron_core": ALONE, "nemo": ALONE, "maxtext": None, "fsdp": None, "fsdp_compiled": None,
        "deepspeed": "parallelism { tp = 1 pp = 1 zero = 1 recompute = full offload = 100% }"}


@pytest.mark.parametrize("stack", list(RUNS))
def test_an_offload_on_a_stack_with_its_switch_is_clean(stack):
    # negative control: the design (full recompute on the stacks that offload beside it) on each stack that runs it
    text = DESIGN.replace("software  = fsdp", f"software  = {stack}").replace(PINS, RUNS[stack] or PINS)
    text = text.replace("zero = 3 shard = shard", "zero = 3")
    assert [e.summary for e in diagnose(text)[0]] == []


@pytest.mark.parametrize("stack", ["megatron_core", "nemo"])
@pytest.mark.parametrize("pins, at, refused", [
    ("parallelism { tp = 1 pp = 2 zero = 1 recompute = none offload = offload }", "pp = 2", "without a pipeline"),
    ("parallelism { tp = 1 pp = 1 zero = 1 recompute = full offload = offload }", "recompute = full",
     "without recompute"),
    ("parallelism { tp = 1 pp = 1 zero = 1 recompute = selective offload = offload }", "recompute = selective",
     "without recompute"),
    ("parallelism { tp = 1 pp = 1 zero = 1 recompute = none offload = 100% }", None, "at least one layer"),
    ("parallelism { tp = 1 pp = 2 zero = 1 search = [offload] }", "pp = 2", "without a pipeline"),
    ("parallelism { tp = 1 pp = 1 zero = 1 recompute = full search = [offload] }", "recompute = full",
     "without recompute")])
def test_megatron_core_offloads_only_at_pp_1_without_recompute(stack, pins, at, refused):
    """Megatron-Core's TransformerConfig raises on these (tests/views/test_export_megatron.py runs it)."""
    replace = ("param offload", "param offload_share") if "search" in pins else None
    error, text = _on(stack, pins, replace)
    assert refused in error.summary
    where = "search = [" if "search" in pins else ("offload = 100%" if "100%" in pins else "offload = offload")
    assert (error.subject.line, error.subject.column) == column_of(text, where)
    if at:
        assert any(label.span.line == column_of(text, at)[0] and at in label.message for label in error.labels)


def _on(stack: str, pins: str, replace):
    text = DESIGN.replace("software  = fsdp", f"software  = {stack}").replace(PINS, pins)
    if replace:
        text = text.replace(*replace)
    errors, text = diagnose(text)
    assert len(errors) == 1, [e.summary for e in errors]
    return errors[0], text


def test_deepspeed_offloads_every_checkpointed_layer_or_none():
    error, text = _on("deepspeed", "parallelism { tp = 1 pp = 1 zero = 1 recompute = full offload = offload }", None)
    assert "one switch" in error.summary            # 50 %: cpu_checkpointing has no share
    assert (error.subject.line, error.subject.column) == column_of(text, "offload = offload")


def test_a_searched_offload_on_megatron_is_refused_at_the_search():
    text = (DESIGN.replace("software  = fsdp", "software  = megatron").replace(PINS, "parallelism { search = [offload] }")
            .replace("param offload", "param offload_share"))
    errors, text = diagnose(text)
    assert len(errors) == 1 and "no switch in `megatron`" in errors[0].summary
    assert (errors[0].subject.line, errors[0].subject.column) == column_of(text, "search = [")
