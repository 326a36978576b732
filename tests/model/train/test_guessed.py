"""Bands that know what was guessed (model/train/guessed.py, model/calibration.py): a field the
design leaves to its stack's default, that the planner does not search, and whose other values
move the prediction by more than the band widens the band and is named; stated, it is not."""

import math

import pytest

from hypothesis import given, strategies as st

from gclc.compiler.driver import check_text
from gclc.model import calibration
from gclc.model.calibration import UNSTATED, Reason, half_width
from gclc.model.job import pinned_config, stated_fields, train_job
from gclc.model.train import guessed
from gclc.solver.train.plan import plan
from gclc.testing import load_profile

load_profile()

# A small fine-grained MoE over two DGX H100 nodes: its all-to-all crosses InfiniBand, so
# whether it overlaps another micro-batch's compute moves the step by tens of percent (at four
# sequences a micro-batch: at one, the overlap schedule's own host work, model/train/moe.py
# `overlap_ops`, takes back more than two thirds of what it gains and the move falls inside the
# MoE band; and at eight micro-batches a step: the overlap pairs one micro-batch's forward with
# another's backward, so a step of one micro-batch has nothing to overlap, model/train/moe.py
# `unpaired_share`).
DESIGN = """import "std/nvidia"
cluster Pod {
  units    = 2 x DGX_H100
  scaleout = NDR_FatTree
}
model M {
  arch = moe  layers = 8  hidden = 2048  heads = 16  ffn = 6144  vocab = 32000  seq = 4096
  experts { routed = 64  shared = 0  top_k = 8  ffn = 768 }
}
train job {
  model = M  on = Pod  batch = 512  precision = bf16  software = nemo
  parallelism { tp = 1 pp = 1 dp = 16 ep = 16 microbatch = 4 zero = 1 recompute = none PINS}
}
"""


def _job(pins=""):
    result = check_text(DESIGN.replace("PINS", pins), "guessed.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def test_an_unstated_overlap_that_moves_the_step_widens_the_band_and_is_named():
    loose, pinned = plan(_job()), plan(_job("ep_overlap = true "))
    named = [r for r in loose.band_reasons if r.key == UNSTATED]
    assert [r.text.split()[0] for r in named] == ["ep_overlap"]
    assert not [r for r in pinned.band_reasons if r.key == UNSTATED]
    # the alternative the band now allows is the stated run's own prediction
    low, high = loose.error_band["tokens_per_s"]
    assert low <= loose.best.tokens_per_s <= high
    assert high >= pinned.best.tokens_per_s
    assert half_width(loose.band_reasons) > half_width(pinned.band_reasons)


def test_a_field_that_moves_the_step_less_than_the_band_is_not_named():
    job = _job()
    cfg = pinned_config(job)
    moves = guessed.spreads(job.shape, cfg, job.partition, stated_fields(job))
    assert set(moves) == {"dp_overlap", "ep_overlap", "dispatcher"}   # no TP, no fp8: nothing else to guess
    named = {r.text.split()[0] for r in guessed.reasons(job.shape, cfg, job.partition, stated_fields(job))}
    allowed = math.log1p(half_width(()))
    assert named == {f for f, s in moves.items() if s > allowed}
    assert moves["dp_overlap"] <= allowed < moves["ep_overlap"]


@given(st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_an_unstated_fields_factor_grows_with_its_spread_from_one(a, b):
    fa, fb = Reason(UNSTATED, "x", a).factor, Reason(UNSTATED, "x", b).factor
    assert fa >= 1.0 and fb >= 1.0
    assert (fa <= fb) == (a <= b) or math.isclose(fa, fb)
    # the band it widens reaches the alternative's throughput below the prediction
    low, _ = calibration.ratio_band((Reason(UNSTATED, "x", a),))
    assert low <= math.exp(-a) + 1e-12


# A dense fp8 job on a chip whose HBM is set between what no recompute needs with fp8 weights
# alone and with the bf16 copy beside them.
FP8 = """
chip G {{ peak {{ bf16 = 1000 TFLOPS  fp8 = 2000 TFLOPS }} hbm {{ capacity = {hbm} GB  bandwidth = 3 TB/s }}
         power {{ tdp = 700 W }} formats = [bf16, fp8_e4m3, fp8_e5m2] }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
node Box {{ gpus = 8 x G  scaleup = Up {host} }}
cluster C {{ units = 1 x Box }}
model M {{ arch = dense  layers = {layers}  hidden = 4096  heads = 32  ffn = 16384  vocab = 32000  seq = 4096 }}
train t {{ model = M  on = C  batch = 16  precision = fp8  software = {software}
          parallelism {{ tp = 1  pp = {pp}  dp = {dp}  microbatch = 1  zero = 1 {vp} }} }}
"""


def _fp8_job(hbm=1000, layers=32, pp=1, dp=8, vp="", host="host_link = 64 GB/s", software="nemo"):
    result = check_text(FP8.format(hbm=hbm, layers=layers, pp=pp, dp=dp, vp=vp, host=host, software=software), "fp8.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def test_an_alternative_that_fits_beside_unstated_fp8_weights_widens_the_band():
    import attrs
    from gclc.model.train.step import estimate

    roomy = _fp8_job()
    cfg = pinned_config(roomy)
    bare = estimate(roomy.shape, cfg, roomy.partition).memory.total
    lean = estimate(roomy.shape, attrs.evolve(cfg, fp8_params=True), roomy.partition).memory.total
    assert lean < bare
    job = _fp8_job(hbm=(bare + lean) / 2 / 1e9)
    full = attrs.evolve(pinned_config(job), recompute="full")   # what the planner is left with
    none, lean_none = attrs.evolve(full, recompute="none"), attrs.evolve(full, recompute="none", fp8_params=True)
    assert estimate(job.shape, full, job.partition).fits
    assert not estimate(job.shape, none, job.partition).fits and estimate(job.shape, lean_none, job.partition).fits
    moves = guessed.spreads(job.shape, full, job.partition, stated_fields(job))
    expected = abs(math.log(estimate(job.shape, lean_none, job.partition).step_time
                            / estimate(job.shape, full, job.partition).step_time))
    assert moves["recompute"] == pytest.approx(expected, rel=1e-12) and expected > 0
    stated = guessed.spreads(job.shape, full, job.partition, stated_fields(job) | {"fp8_params"})
    assert stated["recompute"] < expected   # fp8 weights stated false: no run had them


def test_a_pinned_uneven_interleaved_pipeline_still_has_its_alternatives_weighed():
    job = _fp8_job(layers=30, pp=4, dp=2, vp="vp = 2  schedule = interleaved")   # 30 layers over 4 x 2 chunks
    cfg = pinned_config(job)
    assert job.shape.layers % (cfg.pp * cfg.vp) and cfg.vp == 2
    moves = guessed.spreads(job.shape, cfg, job.partition, stated_fields(job))
    assert moves["recompute"] > 0 and moves["dp_overlap"] > 0


def test_an_alternative_that_fits_beside_unstated_activation_offload_widens_the_band_upward():
    # GB200/GB300 recipes (benchmarks/runs/mb2509_2.gcl) offload activations to host memory
    # instead of recomputing them: a design that leaves offload out may have run so, faster
    # (over their Grace NVLink-C2C: at PCIe's 64 GB/s this job's copies outlast the recompute)
    import attrs
    from gclc.model.train.offload import OFFLOAD_SHARES
    from gclc.model.train.step import estimate

    c2c = "host_link = 450 GB/s"
    roomy = _fp8_job(host=c2c)
    shape, partition = roomy.shape, roomy.partition
    cfg = attrs.evolve(pinned_config(roomy), precision="bf16", mx_fp8=False)
    none = estimate(shape, attrs.evolve(cfg, recompute="none"), partition).memory.total
    half = estimate(shape, attrs.evolve(cfg, recompute="none", offload=0.5), partition).memory.total
    assert half < none
    job = _fp8_job(hbm=(none + half) / 2 / 1e9, host=c2c)
    full = attrs.evolve(pinned_config(job), precision="bf16", mx_fp8=False, recompute="full")
    assert not estimate(job.shape, attrs.evolve(full, recompute="none"), job.partition).fits
    first = next(attrs.evolve(full, recompute="none", offload=s) for s in OFFLOAD_SHARES[1:]
                 if estimate(job.shape, attrs.evolve(full, recompute="none", offload=s), job.partition).fits)
    expected = math.log(estimate(job.shape, full, job.partition).step_time
                        / estimate(job.shape, first, job.partition).step_time)
    slower, faster = guessed.sides(job.shape, full, job.partition, stated_fields(job))["recompute"]
    assert faster == pytest.approx(expected, rel=1e-12) and expected > 0
    # offload stated (pinned to none): no run of the design offloaded
    pinned = guessed.sides(job.shape, full, job.partition, stated_fields(job) | {"offload"})["recompute"]
    assert pinned[1] < faster


@pytest.mark.parametrize("host, software", [("", "nemo"), ("host_link = 64 GB/s", "fsdp")])
def test_an_unstated_offload_is_weighed_only_where_a_stated_one_could_run(host, software):
    # review: on a node without a host link the copy had no price (model/comms.py `host_rate` is
    # inf), so the offload saver made recompute's faster side free; and only Megatron-Core/NeMo
    # and MaxText recipes offload as a switch (compiler/schema.py OFFLOAD_STACKS)
    import attrs
    from gclc.model.train.step import estimate

    roomy = _fp8_job(host=host, software=software)
    cfg = attrs.evolve(pinned_config(roomy), precision="bf16", mx_fp8=False)
    none = estimate(roomy.shape, attrs.evolve(cfg, recompute="none"), roomy.partition).memory.total
    half = estimate(roomy.shape, attrs.evolve(cfg, recompute="none", offload=0.5), roomy.partition).memory.total
    job = _fp8_job(hbm=(none + half) / 2 / 1e9, host=host, software=software)
    full = attrs.evolve(pinned_config(job), precision="bf16", mx_fp8=False, recompute="full")
    assert not estimate(job.shape, attrs.evolve(full, recompute="none"), job.partition).fits
    stated = stated_fields(job)
    free = guessed.sides(job.shape, full, job.partition, stated)["recompute"]
    pinned = guessed.sides(job.shape, full, job.partition, stated | {"offload"})["recompute"]
    assert free == pinned   # offload never tried: the same alternatives as with it stated


def test_an_unstated_offload_is_weighed_only_beside_what_its_switch_runs_with():
    # review: Megatron-Core's TransformerConfig refuses CPU offloading beside a pipeline or a recompute
    # (compiler/schema.py offload_refusal): at pp 2 no NeMo run offloaded, so the offload saver cannot make
    # recompute's faster side (the control: the same job at pp 1,
    # test_an_alternative_that_fits_beside_unstated_activation_offload_widens_the_band_upward)
    import attrs
    from gclc.model.train.step import estimate

    c2c = "host_link = 450 GB/s"
    roomy = _fp8_job(host=c2c, pp=2, dp=4)
    cfg = attrs.evolve(pinned_config(roomy), precision="bf16", mx_fp8=False)
    none = estimate(roomy.shape, attrs.evolve(cfg, recompute="none"), roomy.partition).memory.total
    half = estimate(roomy.shape, attrs.evolve(cfg, recompute="none", offload=0.5), roomy.partition).memory.total
    job = _fp8_job(hbm=(none + half) / 2 / 1e9, host=c2c, pp=2, dp=4)
    full = attrs.evolve(pinned_config(job), precision="bf16", mx_fp8=False, recompute="full")
    assert not estimate(job.shape, attrs.evolve(full, recompute="none"), job.partition).fits
    assert estimate(job.shape, attrs.evolve(full, recompute="none", offload=0.5), job.partition).fits  # the model's
    stated = stated_fields(job)
    free = guessed.sides(job.shape, full, job.partition, stated)["recompute"]
    pinned = guessed.sides(job.shape, full, job.partition, stated | {"offload"})["recompute"]
    assert free == pinned   # offload never tried at pp 2


def test_the_plans_json_carries_each_guessed_fields_sides_as_its_schema_says():
    import json
    from pathlib import Path

    import jsonschema
    from gclc.views.plan_json import _error_band_json

    def reason_schema(node):   # the reasons' item schema: the object whose properties name `spread`
        if isinstance(node, dict):
            if "spread" in node.get("properties", {}):
                return node
            return next((s for v in node.values() if (s := reason_schema(v)) is not None), None)
        if isinstance(node, list):
            return next((s for v in node if (s := reason_schema(v)) is not None), None)
        return None

    schema = reason_schema(json.loads((Path(guessed.__file__).parents[2] / "views" / "plan.schema.json").read_text()))
    reasons = [r for r in _error_band_json(plan(_job()))["reasons"] if r["reason"] == UNSTATED]
    assert reasons
    for r in reasons:
        jsonschema.validate(r, schema)
        assert r["spread"] == max(r["slower"], r["faster"]) > 0


def test_an_unstated_stack_holds_the_doubt_of_the_overlaps_it_decides():
    # The `stack` factor was measured by predicting runs of other stacks with the default stack's
    # whole behaviour row, its overlaps with it: with the stack unstated, the overlaps' alternatives
    # are not weighed again (model/train/guessed.py STACK_FIELDS); stated, they are.
    stated = plan(_job())
    unstated = plan(train_job(check_text(DESIGN.replace("PINS", "").replace("software = nemo", ""),
                                         "guessed.gcl").design))
    keys = lambda p: [r.text.split()[0] if r.key == UNSTATED else r.key for r in p.band_reasons]  # noqa: E731
    assert "ep_overlap" in keys(stated) and "stack" not in keys(stated)
    overlaps = {"tp_overlap", "dp_overlap", "ep_overlap"}   # model/config.py STACKS columns
    assert guessed.STACK_FIELDS == overlaps
    assert "stack" in keys(unstated) and not set(keys(unstated)) & overlaps
    # the fields a stack does not decide are still weighed
    job, cfg = unstated.job, unstated.best.config
    left = guessed.sides(job.shape, cfg, job.partition, stated_fields(job), stack_stated=False)
    assert "dispatcher" in left and not set(left) & overlaps
    assert set(guessed.sides(job.shape, cfg, job.partition, stated_fields(job))) >= {"ep_overlap", "dispatcher"}


def test_no_alternative_is_one_megatron_core_refuses_beside_the_overlap():
    """The band's guessed alternatives are configurations the search could run: under the all-to-all overlap a
    Megatron stack has no pipeline without virtual stages and no full recompute (`gclc check` refuses both
    when pinned); another stack keeps them."""
    from gclc.model.config import TrainConfig
    from gclc.model.shape import ModelShape
    import attrs

    shape = ModelShape(hidden=1024, layers=8, heads=8, kv_heads=8, head_dim=128, ffn=4096, vocab=32000, seq=1024)
    base = TrainConfig(batch=64, seq=1024, pp=2, dp=4, ep=2, microbatch=1, stack="megatron_core", ep_overlap=True)
    assert guessed._valid(shape, attrs.evolve(base, vp=2), base)
    assert not guessed._valid(shape, base, base)                                       # pp 2, vp 1
    assert not guessed._valid(shape, attrs.evolve(base, vp=2, recompute="full"), base)
    assert guessed._valid(shape, attrs.evolve(base, stack="fsdp"), base)
    assert guessed._valid(shape, attrs.evolve(base, ep_overlap=False), base)
