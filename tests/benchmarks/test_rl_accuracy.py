"""benchmarks/rl_accuracy.py: every published row names its source and parses into a design the
planner evaluates as pinned; the drawn responses average the published length; the calibrated
figure predicts each model with factors fitted on the others, never on itself."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.optimize import minimize

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import rl_accuracy  # noqa: E402


def test_every_row_has_a_source_and_a_step_time():
    rows = rl_accuracy.rows()
    assert len(rows) >= 40
    for r in rows:
        assert r["source"] and ("github.com" in r["locator"] or "performance-summary.md" in r["locator"]), r["id"]
        assert float(r["step_s"]) > 0 and int(r["gen_gpus"]) + (0 if r["staleness"] == "0" else int(r["train_gpus"])) \
            <= int(r["gpus"])


def test_the_drawn_responses_average_the_published_length():
    row = rl_accuracy.rows()[2]                       # NeMo-RL 0.4, Llama 3.1 8B on 16 H100
    mean = rl_accuracy.response_mean(row, rl_accuracy.SIGMA)
    from gclc.compiler.driver import check_text
    from gclc.solver.rl.rollout import mean_length, rollout
    design = check_text(rl_accuracy.design(row, rl_accuracy.SIGMA), str(BENCHMARKS / "designs" / "rl_row.gcl")).design
    assert mean > 0 and mean_length(rollout(design["run"])) == pytest.approx(float(row["avg_seq"]), rel=0.01)


def test_a_row_is_predicted_from_its_pinned_design():
    row = rl_accuracy.rows()[0]                       # the v0.3 blog's 8B row, with its phases
    out = rl_accuracy.predict(row)
    assert isinstance(out["error"], float) and out["placement"] == "colocated" and out["staleness"] == 0
    assert set(out["measured_phases"]) == {"generate", "train", "logprobs", "refit"}
    assert out["predicted_s"] == pytest.approx(sum(out["shipped_phases"][k] for k in ("generate", "score", "train",
                                                                                       "sync", "offload")))
    assert out["physics_s"] == pytest.approx(sum(out["phases"][k] for k in ("generate", "score", "train", "sync",
                                                                            "offload")))


def test_the_shipped_step_is_the_physics_at_the_shipped_constants():
    """One answer: the benchmark's calibrated form at model/rl/stacks.py's constants gives the step the
    planner ships, so refitting those constants without a row predicts what shipping them would."""
    from gclc.model.rl.stacks import NEMO_RL
    constants = (NEMO_RL.engine_host_s * 1e3, NEMO_RL.training, NEMO_RL.sync, NEMO_RL.host_copies)
    for index in (0, 3):                              # a colocated and a split row
        out = rl_accuracy.predict(rl_accuracy.rows()[index])
        assert out["predicted_s"] > out["physics_s"]
        assert rl_accuracy.scaled(out, constants, rl_accuracy.ITERATION) == pytest.approx(out["predicted_s"], rel=1e-9)


def test_calibration_holds_each_group_out():
    fake = [{"model": m, "measured_s": 10.0 * k, "placement": "colocated", "staleness": 0, "iterations": (900.0, 300.0),
             "phases": {"generate": 4.0 * k, "stream": 4.0 * k, "score": 1.0 * k, "train": 2.0 * k, "sync": 0.5,
                        "offload": 0.5}} for m, k in (("a", 1), ("b", 2), ("c", 3))]
    held, rows = rl_accuracy.calibrated(fake)
    for r in rows:   # each row's factors come from the other models' rows only
        others = [x for x in fake if x["model"] != r["model"]]
        assert r["factors"] == pytest.approx(rl_accuracy.fit(others), rel=1e-6)
    assert held >= 0


def _rows_at(constants, noise=(0.0,) * 6):
    """Rows whose measured step is the calibrated form at `constants`, times e^noise."""
    out = []
    for k, (placement, lag, iterations) in enumerate((("colocated", 0, (900.0, 300.0)), ("disaggregated", 1, (4000.0, 2500.0)),
                                                      ("colocated", 0, (20000.0, 9000.0)), ("disaggregated", 0, (600.0, 100.0)),
                                                      ("colocated", 0, (3000.0, 1000.0)), ("disaggregated", 1, (12000.0, 300.0)))):
        row = {"model": str(k), "placement": placement, "staleness": lag, "iterations": iterations,
               "phases": {"generate": 40.0 + 7 * k, "stream": 20.0, "score": 5.0 + k, "train": 10.0 + 3 * k,
                          "sync": 1.0 + 2 * (k % 3), "offload": 2.0 + 4 * (k % 2)}}
        out.append(row | {"measured_s": rl_accuracy.scaled(row, constants, rl_accuracy.ITERATION) * math.exp(noise[k])})
    return out


def test_the_fit_finds_the_least_squares_minimum():
    """The fit is the minimum of its stated loss: it recovers constants that make every row exact (from unit
    factors far off), and on noisy rows no start of a dense search finds a lower loss within its bounds."""
    truth = (0.4, 1.5, 2.0, 1.3)
    assert rl_accuracy.fit(_rows_at(truth)) == pytest.approx(truth, rel=1e-4)
    rows = _rows_at(truth, (0.1, -0.05, 0.08, -0.12, 0.02, 0.06))

    def loss(f):
        return sum(math.log(rl_accuracy.scaled(r, f, rl_accuracy.ITERATION) / r["measured_s"]) ** 2 for r in rows)

    fitted = loss(rl_accuracy.fit(rows))
    bounds = [rl_accuracy.HOST_MS] + [tuple(map(math.log, rl_accuracy.FACTORS))] * 3
    for host, *factors in itertools.product((0.0, 0.75, 1.5), (0.5, 2.0), (0.5, 3.0), (0.5, 2.0)):
        other = minimize(lambda v: loss((v[0], *map(math.exp, v[1:]))), [host, *map(math.log, factors)],
                         method="Powell", bounds=bounds, options={"xtol": 1e-7, "ftol": 1e-12})
        assert fitted <= other.fun + 1e-7


def test_the_fit_keeps_the_host_time_within_what_ray_can_spend():
    """Weakly identified, the engine's host time stays within HOST_MS however much the rows would want."""
    fitted = rl_accuracy.fit(_rows_at((5.0, 1.5, 2.0, 1.3)))
    assert rl_accuracy.HOST_MS[0] <= fitted[0] <= rl_accuracy.HOST_MS[1] == 1.5
    assert all(rl_accuracy.FACTORS[0] <= f <= rl_accuracy.FACTORS[1] for f in fitted[1:])


def test_the_script_ends_with_its_summary_line():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "rl_accuracy.py"), "--rows", "3"], capture_output=True,
                          text=True, timeout=300)
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0 and last.startswith("rl step time: n=3 of 3 rows, median |error|"), done.stderr
    assert "CPU" in last and "wall" in last


def test_the_stack_overhead_is_seconds_every_step_waits_through():
    """The calibration's overhead adds the same seconds to a colocated, a synchronous and an
    asynchronous step (both pools wait through it), and the factors scale their phases."""
    for placement, lag in (("colocated", 0), ("disaggregated", 0), ("disaggregated", 1)):
        row = {"placement": placement, "staleness": lag,
               "phases": {"generate": 40.0, "stream": 20.0, "score": 5.0, "train": 10.0, "sync": 1.0, "offload": 2.0}}
        base = rl_accuracy.scaled(row, (1.0, 1.0, 0.0, 1.0), "overhead")
        assert rl_accuracy.scaled(row, (1.0, 1.0, 7.5, 1.0), "overhead") == pytest.approx(base + 7.5)
        assert rl_accuracy.scaled(row, (2.0, 1.0, 0.0, 1.0), "overhead") > base
        assert rl_accuracy.scaled(row, (1.0, 1.0, 3.0, 1.0), "moves") > base   # the shipped form: a factor on the sync


def test_the_sync_and_the_host_copies_have_factors_of_their_own():
    """The weight sync and the host copies are scaled apart (a split step's sync must not carry the
    factor colocated steps' host copies want): each factor moves its own phase's seconds only."""
    row = {"placement": "colocated", "staleness": 0,
           "phases": {"generate": 40.0, "stream": 20.0, "score": 5.0, "train": 10.0, "sync": 1.0, "offload": 2.0}}
    base = rl_accuracy.scaled(row, (1.0, 1.0, 1.0, 1.0), "moves")
    assert base == pytest.approx(58.0)
    assert rl_accuracy.scaled(row, (1.0, 1.0, 3.0, 1.0), "moves") == pytest.approx(base + 2.0)   # sync x3
    assert rl_accuracy.scaled(row, (1.0, 1.0, 1.0, 3.0), "moves") == pytest.approx(base + 4.0)   # host copies x3
    assert rl_accuracy.scaled(row, (1.0, 1.0, 5.0, 3.0), "overhead") == pytest.approx(base + 5.0 + 4.0)


def test_each_row_names_the_release_it_ran():
    """A row of NeMo-RL v0.3 or v0.4 states `stack = nemo_rl_0_4` (before pull 1404), a later one the
    current stack; v0.4's split rows then copy the optimizer state out and back, v0.5's do not."""
    rows = {r["id"]: r for r in rl_accuracy.rows()}
    assert "stack = nemo_rl_0_4" in rl_accuracy.design(rows["NeMoRL-0.4-H100-Llama31_8B-1off-16"], rl_accuracy.SIGMA)
    assert "stack = nemo_rl\n" in rl_accuracy.design(rows["NeMoRL-0.5-H100-Llama31_8B-1off-16"], rl_accuracy.SIGMA)
    old = rl_accuracy.predict(rows["NeMoRL-0.4-H100-Llama31_8B-1off-16"])
    new = rl_accuracy.predict(rows | {"x": rows["NeMoRL-0.4-H100-Llama31_8B-1off-16"] | {"source": "NeMoRL-0.5"}}["x"])
    assert old["phases"]["offload"] > new["phases"]["offload"] + 1.0


def test_the_nested_calibration_chooses_each_folds_form_without_the_held_out_rows():
    """Each held-out group is predicted with the form its fold's own held-out median prefers
    and the factors fitted on the fold (neither reads the held-out rows)."""
    fake = [{"model": m, "measured_s": 10.0 * k + j, "placement": "colocated" if j else "disaggregated",
             "staleness": j % 2, "iterations": (1000.0 * k, 400.0 * k), "phases": {"generate": 4.0 * k, "stream": 2.0 * k, "score": 1.0 * k,
                                            "train": 2.0 * k, "sync": 0.5 * j + 0.1, "offload": 0.5}}
            for m, k in (("a", 1), ("b", 2), ("c", 3)) for j in (0, 1)]
    _, rows = rl_accuracy.nested(fake)
    for r in rows:
        fold = [x for x in fake if x["model"] != r["model"]]
        form = min(rl_accuracy.FORMS, key=lambda f: rl_accuracy.calibrated(fold, f)[0])
        assert r["form"] == form and r["factors"] == pytest.approx(rl_accuracy.fit(fold, form), rel=1e-6)
    assert len(rows) == len(fake)


def test_each_rows_engine_settings_are_its_recipes():
    """Where a release's recipe sets the engine apart from the defaults (vllm_kwargs max_num_seqs,
    gpu_memory_utilization), the row's design carries it; a row without one gets vLLM's default."""
    rows = {r["id"]: r for r in rl_accuracy.rows()}
    fp8 = rl_accuracy.design(rows["NeMoRL-0.6-H100-DeepSeekV3-1off-512-fp8"], rl_accuracy.SIGMA)
    assert "max_batch = 32 " in fp8 and "memory = 80%" in fp8
    gb200 = rl_accuracy.design(rows["NeMoRL-0.6-GB200-DeepSeekV3-on-128"], rl_accuracy.SIGMA)
    assert f"max_batch = {rl_accuracy.MAX_SEQS} " in gb200 and "memory = 30%" in gb200
    assert all(r["recipe_note"].startswith("recipe ") for r in rows.values() if r["recipe_note"])
    mtp = rl_accuracy.design(rows["NeMoRL-0.7-H100-DeepSeekV3-on-256"], rl_accuracy.SIGMA)
    assert "speculative { tokens = 1  acceptance = 85% }" in mtp and "graph_batch" not in mtp
    graphs = rl_accuracy.design(rows["NeMoRL-0.7-GB200-Qwen3_235B_A22B-on-64"], rl_accuracy.SIGMA)
    assert "graph_batch = 64" in graphs and "speculative" not in graphs
    assert "speculative" not in fp8 and "graph_batch" not in gb200   # v0.6's recipes set neither


def test_the_newest_release_is_predicted_from_the_older_rows_alone():
    """The out-of-sample figure's factors and form come from the older releases' rows: changing
    what the newest rows measured moves their errors, never the calibration."""
    def fake(scale):
        return [{"source": s, "model": "m", "measured_s": (10.0 + k) * (scale if s == rl_accuracy.NEWEST else 1),
                 "error": -0.3, "placement": "colocated", "staleness": 0, "iterations": (500.0 + 50 * k, 100.0),
                 "phases": {"generate": 4.0 + k, "stream": 3.0, "score": 1.0, "train": 2.0, "sync": 0.5, "offload": 0.5}}
                for s in ("NeMoRL-0.5", "NeMoRL-0.6", rl_accuracy.NEWEST) for k in (0, 1, 2)]
    new, shipped, held, form = rl_accuracy.out_of_sample(fake(1.0))
    old = [r for r in fake(1.0) if r["source"] != rl_accuracy.NEWEST]
    factors = rl_accuracy.fit(old, form)
    expected = sorted(abs(rl_accuracy.scaled(r, factors, form) / r["measured_s"] - 1) for r in new)[1]
    assert len(new) == 3 and shipped == pytest.approx(0.3) and held == pytest.approx(expected)
    assert rl_accuracy.out_of_sample(fake(2.0))[2] != pytest.approx(held)


def test_the_iteration_form_adds_host_time_per_engine_iteration():
    """Generation pays the given milliseconds once per engine iteration: the slowest sample's where the
    batch's latency sets the step (synchronous, and one step off where it outlasts training: the
    collector's permits, model/rl/step.py) or the fed engine's where its throughput does (two steps off
    here), never a share of the GPU time."""
    for placement, lag, used in (("colocated", 0, 4000.0), ("disaggregated", 1, 4000.0), ("disaggregated", 2, 900.0)):
        row = {"placement": placement, "staleness": lag, "iterations": (4000.0, 900.0),
               "phases": {"generate": 40.0, "stream": 30.0, "score": 5.0, "train": 10.0, "sync": 1.0, "offload": 2.0}}
        base = rl_accuracy.scaled(row, (0.0, 1.0, 1.0, 1.0), rl_accuracy.ITERATION)
        assert rl_accuracy.scaled(row, (2.0, 1.0, 1.0, 1.0), rl_accuracy.ITERATION) == pytest.approx(base + 2e-3 * used)


def test_the_physics_is_the_calibrated_form_at_unit_factors():
    """The cross-validation scales the physics alone (`phases`, the model without its stack's calibration):
    at unit factors (no overhead, no host time) each form gives the physics' step time exactly, so no default
    differs between what is refitted and what ships (the shipped constants: the test above)."""
    rows = {r["id"]: r for r in rl_accuracy.rows()}
    for name in ("NeMoRL-0.3-H100-Llama31_8B-on-8", "NeMoRL-0.4-H100-Llama31_8B-1off-16"):
        out = rl_accuracy.predict(rows[name])
        assert rl_accuracy.scaled(out, (1.0, 1.0, 1.0, 1.0), "moves") == pytest.approx(out["physics_s"], rel=1e-12)
        assert rl_accuracy.scaled(out, (1.0, 1.0, 0.0, 1.0), "overhead") == pytest.approx(out["physics_s"], rel=1e-12)
        assert rl_accuracy.scaled(out, (0.0, 1.0, 1.0, 1.0), rl_accuracy.ITERATION) == pytest.approx(out["physics_s"],
                                                                                                    rel=1e-12)
        assert rl_accuracy.scaled(out, (1.0, 1.3, 1.0, 1.0), "moves") > out["physics_s"]   # scoring and training


def test_held_out_by_system_inside_a_release_fits_on_that_release_alone():
    """Each system's rows of a release are predicted with factors fitted on the other system's rows of
    the same release only; a release with one system's rows is not predicted."""
    fake = [{"source": src, "system": sysn, "model": f"m{k}", "measured_s": (10.0 + 3 * k) * (1.4 if sysn == "GB200" else 1.0)
             * (1.2 if src == "v1" else 1.0), "error": -0.2, "placement": "colocated" if k % 2 else "disaggregated",
             "staleness": k % 2, "iterations": (800.0 + 100 * k, 200.0),
             "phases": {"generate": 4.0 + k, "stream": 3.0, "score": 1.0 + k / 2, "train": 2.0, "sync": 0.5, "offload": 0.5}}
            for src in ("v1", "v2") for sysn in ("H100", "GB200") for k in range(5)]
    fake += [dict(fake[0], source="v3")]
    pooled, each = rl_accuracy.within_release(fake)
    assert set(each) == {"v1", "v2"} and all(n == 10 for _, n in each.values()) and pooled >= 0
    _, rows = rl_accuracy.nested([r for r in fake if r["source"] == "v1"], "system")
    for r in rows:
        fold = [x for x in fake if x["source"] == "v1" and x["system"] != r["system"]]
        assert r["factors"] == pytest.approx(rl_accuracy.fit(fold, r["form"]), rel=1e-6)


def test_the_apart_sync_reproduces_nemo_rls_measured_deepseek_v3_refit():
    """NeMo-RL's checkpoint-engine guide measured its NCCL refit of DeepSeek-V3 (Megatron TP1 PP16 EP16 on
    32 DGX H100 nodes into TP-32 vLLM engines, whole tensors broadcast): 14.21 s. The model's per-tensor cost
    is that measurement less its bytes on NCCL's ring, so the same refit on the H100 split rows' layout
    (the same training layout and engines) prices close to it; one GPU's link alone would take over 27 s."""
    row = next(r for r in rl_accuracy.rows() if r["id"] == "NeMoRL-0.7-H100-DeepSeekV3-1off-512")
    sync = rl_accuracy.predict(row)["phases"]["sync"]
    assert sync == pytest.approx(14.21, rel=0.05)
    assert sync < 671e9 * 2 / 49e9
