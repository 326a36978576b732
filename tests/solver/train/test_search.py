"""The exact search (solver/train/search.py) against the exhaustive enumerator (solver/train/enumerate.py)
on random small designs: same optimum, exact runners-up, every configuration accounted for,
pins respected; and infeasible jobs answered with a reason that points at the source."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.compiler.schema import offload_refusal
from gclc.model.job import train_job
from gclc.solver.train import enumerate as enumerator
from gclc.solver.train.plan import plan
from gclc.solver.train.least_memory import least_memory
from gclc.solver.train.search import search
from gclc.solver.power.program import without_power_limit

_spec = importlib.util.spec_from_file_location("solver_designs", Path(__file__).parents[1] / "_designs.py")
designs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(designs)

# the search is exact whatever the clock grid: a coarse one keeps the enumerator quick (tests/solver/conftest.py)
pytestmark = pytest.mark.usefixtures("coarse_clock_steps")

ROOT = Path(__file__).parent.parent.parent.parent
EXAMPLES = max(20, settings.default.max_examples * 2 // 3)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


def check_against_enumerator(job, objective: str, top: int = 2):
    result = search(job, objective, top)
    configs = list(enumerator.configurations(job, objective))
    assert result.configurations == len(configs) == enumerator.space_size(job, objective)
    assert result.evaluated + result.pruned == result.configurations
    ranked = enumerator.ranked(job, objective)
    if not ranked:
        assert result.best is None and result.status in ("infeasible", "empty")
        assert result.status == ("empty" if not configs else "infeasible")
        return result, ranked
    assert result.best is not None and result.status == "optimal"
    # The optimum: equal objective values (ties allowed), so never worse than any configuration.
    assert close(result.value, ranked[0][0]), (result.best.config, ranked[0][1].config)
    assert close(enumerator.objective_value(job, objective, result.best), ranked[0][0])
    assert enumerator.admissible(job, enumerator.limits(job), result.best)
    # The runners-up are the next best layouts' values, in order (each layout at its best rank order).
    expected = [v for v, _ in enumerator.distinct(ranked)[1 : 1 + top]]
    assert len(result.runner_values) == len(expected)
    assert all(close(a, b) for a, b in zip(result.runner_values, expected))
    return result, ranked


@settings(max_examples=EXAMPLES, deadline=None)
@given(designs.designs(variants=None), st.sampled_from(enumerator.OBJECTIVES))
def test_search_finds_the_enumerators_optimum(p, objective):
    job = designs.job(p)
    result, ranked = check_against_enumerator(job, objective)
    # Pinned values are respected by every configuration of the space and by the answer.
    for cfg in [e.config for _, e in ranked] + ([result.best.config] if result.best else []):
        for key, value in job.pinned.items():
            if key in ("tp", "pp", "dp", "cp", "ep", "vp", "microbatch", "zero"):
                assert getattr(cfg, key) == int(value)
            elif key == "recompute":
                assert cfg.recompute == value
            elif key == "sp":
                assert cfg.sp == bool(value)
            elif key == "schedule" and value == "gpipe":
                assert cfg.vp == 1


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None)
@given(designs.designs(variants=None, search=True, max_gpus=8), st.sampled_from(enumerator.OBJECTIVES))
def test_search_over_the_choices_a_job_asks_to_search(p, objective):
    """`parallelism { search = [...] }`: the shard group, recompute modules and interval and
    the offloaded share join the space; the search's optimum is still the enumerator's, and
    every configuration takes a searched choice's value from its grid."""
    assume("search" in p["pins"])     # every choice pinned: nothing left to search
    job = designs.job(p)
    result, ranked = check_against_enumerator(job, objective)
    asked = enumerator.searched(job)
    assert asked and asked <= set(enumerator.SEARCHABLE)
    grids = {"offload": set(enumerator.OFFLOAD_SHARES), "recompute_every": set(enumerator.RECOMPUTE_EVERY)}
    for cfg in [e.config for _, e in ranked]:
        for name in asked & set(grids):
            assert getattr(cfg, name) in grids[name]
        if "shard" in asked and cfg.shard:
            assert cfg.shard < cfg.dp * cfg.cp and (cfg.dp * cfg.cp) % cfg.shard == 0 and cfg.zero >= 1
        if cfg.recompute_modules:
            assert cfg.recompute == "selective"
        if cfg.offload:    # only where the stack's switch runs it (Megatron-Core: pp 1, no recompute)
            assert offload_refusal(cfg.stack, cfg.offload, cfg.pp, cfg.recompute) is None, cfg


def test_a_searched_choice_is_searched_and_a_free_one_is_not():
    base = {"hbm": 24, "up": 300, "inr": "false", "per_node": 4, "layers": 4, "hidden": 512, "heads": 8,
            "kv_heads": 8, "ffn": 2048, "vocab": 8000, "seq": 1024, "mlp": "gelu", "batch": 16, "precision": "bf16",
            "stack": "megatron_core", "nodes": 1, "node_extra": {"host_link": "64 GB/s"}}
    plain = designs.job(base)
    asked = designs.job({**base, "pins": {"search": "[shard, offload]"}})
    assert enumerator.searched(plain) == frozenset() and enumerator.searched(asked) == {"shard", "offload"}
    values = {(c.shard, c.offload) for c in enumerator.configurations(asked)}
    assert {c.offload for c in enumerator.configurations(plain)} == {0.0}
    # Megatron-Core keeps a layer's activations on the GPU (cpu_offloading_num_layers < num_layers): not 100 %
    assert {o for _, o in values} == set(enumerator.OFFLOAD_SHARES) - {1.0} and {s for s, _ in values} == {0, 2}
    offloading = [c for c in enumerator.configurations(asked) if c.offload]
    assert offloading and all(c.pp == 1 and c.recompute == "none" for c in offloading)   # its TransformerConfig's limits
    assert any(c.pp > 1 for c in enumerator.configurations(asked)) and \
        any(c.recompute != "none" for c in enumerator.configurations(asked))   # control: searched without offload
    assert enumerator.space_size(asked) > enumerator.space_size(plain)
    check_against_enumerator(asked, "throughput")


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(designs.designs(pins=False, limits=False, moe=True))
def test_search_on_moe_designs(p):
    check_against_enumerator(designs.job(p), "throughput", top=3)


@pytest.mark.parametrize("path", ["examples/a100_cluster.gcl", "examples/dgx_h100_superpod.gcl",
                                  "examples/mi300x_roce.gcl"])
def test_search_on_examples(path):
    # At full clock: the superpod's power limit would multiply its 200,000 configurations by
    # the clock steps; the joint space is enumerated on small designs (tests/solver/power).
    job = without_power_limit(train_job(check_file(str(ROOT / path)).design))
    check_against_enumerator(job, "throughput", top=3)


def test_search_on_the_test_pod():
    job = train_job(check_file(str(ROOT / "tests" / "data" / "train.gcl"), {"nodes": "2"}).design)
    for objective in enumerator.objectives(job):    # the pod has no `economics`: no cost
        check_against_enumerator(job, objective, top=3)


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(designs.designs(limits=False))
def test_least_memory_is_the_enumerators(p):
    job = designs.job(p)
    smallest = least_memory(job)
    configs = list(enumerator.configurations(job))
    if not configs:
        assert smallest is None
        return
    from gclc.model.train.memory import memory

    assert close(smallest.memory.total, min(memory(job.shape, c).total for c in configs))


# ----------------------------------------------------------------- infeasible


def _base(**changes):
    p = {"hbm": 80, "up": 300, "inr": "true", "per_node": 8, "nodes": 1, "layers": 8, "hidden": 4096, "heads": 32,
         "kv_heads": 8, "ffn": 16384, "vocab": 32000, "seq": 4096, "mlp": "swiglu", "batch": 64,
         "precision": "bf16", "stack": "megatron_core"}
    p.update(changes)
    return p


def _write(tmp_path, p) -> str:
    path = tmp_path / "job.gcl"
    path.write_text(designs.text(p))
    return str(path)


def test_memory_infeasible_names_the_chip_capacity_and_the_shortfall(tmp_path):
    p = _base(hbm=8, layers=48, hidden=8192, heads=64, ffn=32768)
    path = _write(tmp_path, p)
    job = train_job(check_file(path).design)
    chosen = plan(job)
    assert chosen.status == "infeasible" and chosen.best is None
    reason = chosen.infeasibility
    assert reason.constraint == "memory" and reason.needs > reason.limit == 8e9
    assert str(reason.span).startswith(f"{path}:2:")       # the chip's `hbm { capacity = ... }` line
    assert "has 8 GB" in reason.message and "short by" in reason.message
    # The numbers are the least memory any configuration needs.
    assert math.isclose(reason.needs, min(e.memory.total for e in enumerator.evaluate_all(job)))


def test_memory_limit_from_subject_to_binds(tmp_path):
    p = _base(limits=["memory <= 2%"])     # 1.6 GB: the CUDA context and NCCL buffers alone nearly fill it
    path = _write(tmp_path, p)
    job = train_job(check_file(path).design)
    chosen = plan(job)
    reason = chosen.infeasibility
    assert reason.constraint == "memory" and reason.limit == pytest.approx(1.6e9)
    assert str(reason.span).startswith(path)
    line = Path(path).read_text().splitlines()[reason.span.line - 1]
    assert "memory <= 2%" in line


def test_power_limit_infeasible(tmp_path):
    p = _base(limits=["power <= 150 W"])   # below one GPU at its lowest clock with its share of the node (at load)
    job = train_job(check_file(_write(tmp_path, p)).design)
    reason = plan(job).infeasibility
    assert reason.constraint == "power" and reason.needs > reason.limit
    assert "power <= 150 W" in Path(reason.span.path).read_text().splitlines()[reason.span.line - 1]


def test_pins_that_leave_no_configuration(tmp_path):
    p = _base(pins={"tp": 8, "pp": 4})
    path = _write(tmp_path, p)
    job = train_job(check_file(path).design)
    result = search(job)
    assert result.status == "empty" and result.configurations == 0
    reason = plan(job).infeasibility
    assert reason.constraint == "space" and "32" in reason.message
    assert "tp = 8" in Path(path).read_text().splitlines()[reason.span.line - 1]


def test_cli_exits_3_with_the_reason(tmp_path, capsys):
    path = _write(tmp_path, _base(hbm=8, layers=48, hidden=8192, heads=64, ffn=32768))
    assert main(["plan", path]) == 3
    err = capsys.readouterr().err
    assert err.startswith("gclc: infeasible: `T` needs") and f"{path}:2:" in err
    assert main(["plan", "--json", path]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "infeasible" and out["infeasible"]["constraint"] == "memory"
    assert out["infeasible"]["location"].startswith(path) and out["solver"]["status"] == "infeasible"


def test_plan_json_keys(tmp_path, capsys):
    path = _write(tmp_path, _base(nodes=2, layers=4, hidden=1024, heads=8, ffn=4096, kv_heads=8))
    assert main(["plan", "--json", path]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "tokens_per_s", "mfu", "parallelism", "power_w", "binding", "runners_up",
                "placement", "solver"):
        assert key in out
    assert set(out["solver"]) >= {"status", "configurations", "pruned", "proof", "evaluated"}
    assert "seconds" not in out["solver"]  # wall-clock time only with --timings (repeatable output)
    assert out["solver"]["evaluated"] + out["solver"]["pruned"] == out["solver"]["configurations"]
    assert out["solver"]["proof"].endswith("gap 0")
    placement = out["placement"]
    assert placement["order"][0] == "tp"
    for dim in ("tp", "cp", "dp", "pp", "ep"):
        entry = placement[dim]
        assert entry["size"] == out["parallelism"][dim]
        assert len(entry["tiers"]) == len(entry["peers"]) and math.prod(entry["peers"]) >= entry["size"]
        assert (entry["size"] == 1) == (entry["tiers"] == [])
    assert placement["tp"]["stride"] == 1
    assert out["binding"] and all(isinstance(b, str) for b in out["binding"])


def test_a_searched_offload_on_deepspeed_tries_every_checkpointed_layer_or_none():
    # DeepSpeed's cpu_checkpointing is one switch (compiler/schema.py offload_refusal): 25 % and 50 % are not searched
    base = {"hbm": 24, "up": 300, "inr": "false", "per_node": 4, "layers": 4, "hidden": 512, "heads": 8,
            "kv_heads": 8, "ffn": 2048, "vocab": 8000, "seq": 1024, "mlp": "gelu", "batch": 16, "precision": "bf16",
            "stack": "deepspeed", "nodes": 1, "node_extra": {"host_link": "64 GB/s"},
            "pins": {"recompute": "full", "search": "[offload]"}}
    assert {c.offload for c in enumerator.configurations(designs.job(base))} == {0.0, 1.0}
