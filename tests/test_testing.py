"""`gclc.testing`: the strategies generate valid specs that shrink well, the helpers compile
and plan any source, failures print the minimal `.gcl`, and `designs(like=...)` varies a
user's own design."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings, strategies as st

from gclc import testing as gt
from gclc.model.job import Job
from gclc.dsl.units import Quantity
from gclc.dsl import parse
from gclc.testing import ChipSpec, ClusterSpec, GclText, GeneratedDesign, ModelSpec, TrainSpec, check, chips, clusters, compile_design, designs, fabrics, graph_of, job_of, models, nodes, plan_of, sources, train_jobs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples" / "dgx_h100_superpod.gcl")
TRAIN = str(ROOT / "tests" / "data" / "train.gcl")
few = settings(max_examples=15)


def clean(spec) -> None:
    """The spec's text checks with no diagnostic at all."""
    result = check(spec)
    assert result.diagnostics == (), (spec.text, [d.message for d in result.diagnostics])


# ================================================================= profiles


def test_profiles_follow_the_environment_variable(monkeypatch):
    chosen = os.environ.get(gt.PROFILE_ENV, "ci")  # what conftest loaded, restored below
    try:
        monkeypatch.delenv(gt.PROFILE_ENV, raising=False)
        assert gt.load_profile() == "ci"
        assert settings.default.max_examples == gt.PROFILES["ci"]["max_examples"]
        monkeypatch.setenv(gt.PROFILE_ENV, "deep")
        assert gt.load_profile() == "deep"
        assert settings.default.max_examples == gt.PROFILES["deep"]["max_examples"]
        assert gt.load_profile("ci") == "ci"
        with pytest.raises(ValueError, match="GCLC_HYPOTHESIS"):
            gt.load_profile("nightly")
    finally:
        settings.load_profile(chosen)


# ================================================================= strategies


@few
@given(chips())
def test_chips_check_clean(chip):
    clean(chip)
    assert chip.idle_w < chip.tdp_w


@few
@given(fabrics(role="scaleout"), fabrics(role="scaleup"))
def test_fabrics_check_clean(out, up):
    clean(out)
    clean(up)
    assert up.kind == "nvlink" and out.kind in ("infiniband", "ethernet")


@few
@given(nodes())
def test_nodes_check_clean(node):
    clean(node)
    assert (node.scaleup is None) == (node.gpus == 1)


@few
@given(clusters(heterogeneous=None, max_gpus=24))
def test_clusters_check_clean_and_stay_small(cluster):
    clean(cluster)
    assert cluster.gpus <= 24
    assert graph_of(cluster).gpus == cluster.gpus


@few
@given(clusters(heterogeneous=True))
def test_heterogeneous_clusters_have_partitions_of_different_nodes(cluster):
    graph = graph_of(cluster)
    assert len(graph.partitions) == len(cluster.partitions) >= 2
    assert len({p.node.name for p in graph.partitions}) == len(graph.partitions)


@few
@given(models(arch="dense"), models(arch="moe"))
def test_models_are_dense_or_moe_and_check_clean(dense, moe):
    clean(dense)
    clean(moe)
    assert dense.experts is None and moe.experts is not None
    assert moe.experts.top_k <= moe.experts.routed and moe.experts.dense_layers < moe.layers


@few
@given(train_jobs(heterogeneous=None, pins=True))
def test_train_jobs_are_whole_designs(job):
    clean(job)
    assert isinstance(job_of(job), Job)


@few
@given(designs(heterogeneous=None, params=True, budget=True))
def test_designs_check_clean_and_plan(d):
    assert d.diagnostics == ()
    assert d.graph.gpus == d.spec.cluster.gpus
    assert d.job.gpus <= d.spec.target.gpus
    assert d.plan().status in ("optimal", "evaluated", "infeasible")
    assert d.plan() is d.plan()  # computed once


@few
@given(sources())
def test_sources_are_gcl_text(text):
    assert isinstance(text, GclText) and isinstance(text, str)
    parse(text)
    assert repr(text).startswith("GclText('''\n")


@few
@given(chips(hbm_gb=80, tdp_w=range(300, 401), bf16_tflops=[100, 200], fp8=False, bf16_efficiency=st.just(None)))
def test_fields_take_values_ranges_lists_and_strategies(chip):
    assert chip.hbm_gb == 80 and 300 <= chip.tdp_w <= 400 and chip.bf16_tflops in (100, 200)
    assert chip.fp8_tflops is None and chip.bf16_efficiency is None


@few
@given(designs(max_gpus=4, batch=(1, 4), arch="moe", heterogeneous=False, cluster={"node": {"gpus": 2}}))
def test_designs_pass_options_through(d):
    assert d.spec.cluster.gpus <= 4 and 1 <= d.spec.batch <= 4 and d.spec.model.experts is not None
    assert all(p.node.gpus == 2 for p in d.spec.cluster.partitions)


def test_unknown_fields_are_refused():
    with pytest.raises(TypeError, match="hbm_tb"):
        chips(hbm_tb=1)
    with pytest.raises(TypeError, match="vary"):
        designs(vary={"x": 1})


def test_examples_shrink_to_minimal_specs():
    quick = settings(database=None, max_examples=100, suppress_health_check=list(HealthCheck))
    model = find(models(), lambda m: m.layers >= 3, settings=quick)
    assert model == ModelSpec(layers=3, heads=1, head_dim=16, kv_heads=1, ffn=128, vocab=128, seq=128, mlp="swiglu")
    cluster = find(clusters(max_gpus=4), lambda c: c.gpus >= 2, settings=quick)
    assert cluster.gpus == 2 and not cluster.heterogeneous


def test_failures_print_the_minimal_gcl_file():
    @settings(database=None, max_examples=30, phases=[Phase.generate, Phase.shrink])
    @given(designs(job=False))
    def inner(d):
        assert d.spec.gpus < 3  # (no compiling: shrinking runs the test hundreds of times)

    with pytest.raises(AssertionError) as caught:
        inner()
    report = "\n".join(getattr(caught.value, "__notes__", []))
    assert "GeneratedDesign('''" in report and "cluster Cluster0 {" in report
    assert "partition p1" not in report and "x Node1" not in report  # shrunk to one partition


# ================================================================= the generated design object


def test_generated_design_is_lazy_and_complete():
    d = GeneratedDesign.from_spec(TrainSpec())
    assert d.text == TrainSpec().text and d.spec == TrainSpec()
    assert "result" not in vars(d)
    assert d.graph.gpus == 8
    assert d.job.batch == 8
    plan = d.plan()
    assert plan.best is not None and plan.best.config.gpus <= 8
    assert repr(d).startswith("GeneratedDesign('''\n# generated.gcl\nchip Chip0 {")


def test_with_fields_and_with_params_edit_the_text():
    d = GeneratedDesign.from_spec(TrainSpec(cluster=ClusterSpec(units_param=True)))
    faster = d.with_fields({"Chip0.peak.bf16": lambda old: f"({old}) * 2", "Chip0.power.tdp": 800,
                            "Node0.overhead": "1 kW"})
    acc = faster.graph.partitions[0].node.accelerator
    assert acc.peak_of("bf16") == 2 * 989e12 and acc.tdp == 800
    assert faster.graph.partitions[0].node.overhead == 1000  # inherited-or-absent fields are added
    assert "bf16 = 989 TFLOPS * 2" in faster.text or "bf16 = (989 TFLOPS) * 2" in faster.text
    more = d.with_params({"units": 3})
    assert "param units = 3" in more.text and more.graph.gpus == 24
    with pytest.raises(KeyError):
        d.with_params({"racks": 2})
    with pytest.raises(KeyError):
        d.with_fields({"NoSuchChip.power.tdp": 1})


# ================================================================= helpers


def test_helpers_take_paths_texts_specs_and_settings():
    design = compile_design(TRAIN, nodes=1)
    assert graph_of(TRAIN, nodes=2).gpus == 16
    assert job_of(TRAIN, nodes=1).gpus == 8
    assert plan_of(TRAIN, nodes=1).best is not None
    assert compile_design(Path(TRAIN), nodes=1) == design
    text = ChipSpec().text
    assert compile_design(text)["Chip0"].get("hbm.capacity") == Quantity.of(80, "GB")
    assert plan_of(TrainSpec(), "energy").objective == "energy"


def test_compile_design_shows_the_diagnostics_and_the_text():
    bad = "chip A {\n  hbm { capacity = 80 GB  bandwdith = 3 TB/s }\n  peak { bf16 = 1 PFLOPS }\n  power { tdp = 700 W }\n}\n"
    with pytest.raises(AssertionError) as caught:
        compile_design(bad)
    message = str(caught.value)
    assert "error[unknown-field]" in message and "did you mean `bandwidth`" in message
    assert "--- source ---" in message and "bandwdith" in message
    assert check(bad).design is None


def test_strict_compilation_refuses_warnings():
    warned = ModelSpec().text.replace("seq      = 1024", "seq      = 1024\n  params   = 1 B")
    assert compile_design(warned) is not None
    with pytest.raises(AssertionError, match="params-mismatch"):
        compile_design(warned, strict=True)


# ================================================================= varying a user's design


@few
@given(designs(like=EXAMPLE, vary={"sus": range(1, 3), "facility_pue": (1.1, 1.5)}))
def test_like_varies_params_in_the_text(d):
    assert d.path == EXAMPLE
    sus = int(next(line for line in d.text.splitlines() if line.startswith("param sus")).split()[3])
    assert d.graph.gpus == (32 * sus - 1) * 8
    assert 1.1 <= d.graph.pue <= 1.5


@few
@given(designs(like=EXAMPLE, vary={"H100_SXM.power.tdp": (500, 700), "SuperPOD_NDR.latency": ("1 us", "3 us")}))
def test_like_varies_fields_of_imported_and_own_parts(d):
    acc = d.graph.partitions[0].node.accelerator
    assert acc.name == "H100_SXM_varied" and 500 <= acc.tdp <= 700
    assert "chip H100_SXM_varied extends H100_SXM" in d.text and "DGX_H100_varied" in d.text  # by `x` or a param
    assert Quantity.of(1, "us") <= d.design["SuperPOD_NDR"].get("latency") <= Quantity.of(3, "us")
    assert d.result.ok


def test_like_refuses_unknown_names():
    with pytest.raises(KeyError, match="sus"):
        designs(like=EXAMPLE, vary={"suss": range(1, 3)})
    with pytest.raises(KeyError, match="H100_SXMM"):
        designs(like=EXAMPLE, vary={"H100_SXMM.power.tdp": (500, 700)})
    with pytest.raises(KeyError, match="does not use"):
        designs(like=EXAMPLE, vary={"GB200.power.tdp": (500, 700)})  # B200 is in the sweep block
