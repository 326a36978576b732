"""Calibrating on your own runs, judged on the runs it did not see.

    .venv/bin/python benchmarks/calibrate_own.py [--workers 2] [--json] [--detail] [--offsets] [--model-spread] [--no-step-overhead]
                                                 [--split K | --splits all] [--rows FILE]

Each group of published training runs on one system (a vendor's table, a paper's scaling
series: the `group` column of benchmarks/data/public_runs_measured.csv, per chip, at least
MIN_RUNS runs) stands for an operator's cluster the shipped fit never saw: the physics is
refitted without the group (calibrate.fit, leave-one-group-out, as benchmarks/crossval.py
does). A third of the group's runs (every third, its run ids sorted as text: mb2602_10 comes
before mb2602_4; the rule is kept as it was first stated so that the figures stay comparable)
are "yours": gclc calibrates on
them (solver/calibrate/, the LOGO fit as the prior) and predicts the others, whose 80 % band
comes from your runs' held-out residuals (model/calibration.py own_band), each divided by the
widening of what its run had that the other runs had not (`unlike_widening`). Beside them, the
uncalibrated figures of the same held-back runs: the LOGO fit and its shipped band. The
held-back runs are also counted by what your runs never ran (`unseen`): a precision, MoE
layers, more GPUs than your largest run, a sequence length outside yours, another model; a
calibration can only transfer what its runs measured.

nccl-tests curves likewise: every other message size of a published run calibrates the
fabric, the other sizes are predicted (tests/data/measurements/nccl/, on the designs named in
CURVES).

Serving runs likewise (benchmarks/calibrate_serve.py): published `bench serve` tables of
SGLang and vLLM on A100 and H100, each engine and system a group; the run at 4 requests/s
calibrates the serving physics (the engine's host time per iteration, the chip's HBM and GEMM
efficiencies), the run at 8 requests/s and the offline run are predicted. And TensorRT-LLM 1.0's
offline table (three models on H100 and H200, ten ISL/OSL pairs each): every third run in the
table's order calibrates, the other six of each group are predicted.

`--offsets`: each model among a system's calibrating runs takes its own offset on the step time
(gclc calibrate --model-offsets), its prior width read in each fold from the fold's other systems
(solver/calibrate/model_spread.py), and a held-back run of a model the calibration ran carries its
offset; `--model-spread` prints that width read from every published system (params.MODEL_SPREAD).

`--splits all`: every split in one run (each fold's fit made once, judged on each split), each
split's summary line and a last line with the three figures and their mean: a change is judged on
all three, not on the split it was designed on.

Errors are predicted / measured - 1; the last line is a one-line summary. `--detail` lists each
held-back run that calibration made worse, with every constant its system's fit moved: the move,
and the constant's share of that run's predicted step (d log predicted / d log constant, at the
prior) beside its shares in the calibrating runs (a run moves by about the sum of share x move).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import multiprocessing
import resource
import statistics
import sys
import time
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import calibrate as published  # noqa: E402
import calibrate_serve  # noqa: E402
import crossval  # noqa: E402

from gclc.compiler.driver import check_file  # noqa: E402
from gclc.compiler.measure.read import read_paths  # noqa: E402
from gclc.dsl.source import no_span  # noqa: E402
from gclc.model.calibration import (BAND_CONFIDENCE, PRIOR_RUNS, Own, Reason, own_band, own_reasons,  # noqa: E402
                                   ratio_band)
from gclc.solver.calibrate.calibrate import calibrate_observations, design_partition  # noqa: E402
from gclc.solver.calibrate.fit import residual  # noqa: E402
from gclc.solver.calibrate.model_spread import between_model_spread  # noqa: E402
from gclc.solver.calibrate.observe import NOISE, collective_observations  # noqa: E402
from gclc.solver.calibrate.observe_train import architecture, train_observation  # noqa: E402

ROOT = HERE.parent
MIN_RUNS = 4        # a group with fewer leaves too little to hold back
YOURS_EVERY = 3     # every third run of a group is the operator's
NCCL = ROOT / "tests" / "data" / "measurements" / "nccl"
CURVES = {"bitdeer_h100_1node_all_reduce.txt": ROOT / "tests" / "data" / "calibrate" / "h100_pod.gcl",
          "bitdeer_h100_2node_all_reduce.txt": ROOT / "tests" / "data" / "calibrate" / "h100_pod.gcl",
          "a3mega_h100_2node_all_reduce.txt": HERE / "designs" / "a3_mega.gcl"}


def systems(cases: list) -> dict[tuple[str, str], list]:
    out: dict[tuple[str, str], list] = {}
    for case in sorted(cases, key=lambda c: c.run_id):
        out.setdefault((case.group, case.chip), []).append(case)
    return {k: v for k, v in out.items() if len(v) >= MIN_RUNS}


def unseen(case, yours: list) -> tuple[str, ...]:
    """What a held-back run has that none of the calibrating runs `yours` had: its precision,
    MoE layers, more GPUs than the largest, a sequence length outside theirs, another model
    (layers and width). Read from the configurations only, never from a measurement."""
    out = []
    if case.cfg.precision not in {c.cfg.precision for c in yours}:
        out.append("precision")
    if case.job.shape.is_moe and not any(c.job.shape.is_moe for c in yours):
        out.append("moe")
    if case.cfg.gpus > max(c.cfg.gpus for c in yours):
        out.append("gpus")
    if not min(c.cfg.seq for c in yours) <= case.cfg.seq <= max(c.cfg.seq for c in yours):
        out.append("seq")
    if (case.job.shape.layers, case.job.shape.hidden) not in {(c.job.shape.layers, c.job.shape.hidden) for c in yours}:
        out.append("model")
    return tuple(out)


UNSEEN = ("precision", "moe", "gpus", "seq", "model")


def observation(case, params):
    """A published run as an operator's training observation, on the partition of the fit `params`,
    its node named for its system (group and chip): gclc calibrate fits a node's per-step host time
    (`node { step_overhead }`, solver/calibrate/step_overhead.py) from that system's runs alone
    (unless `--no-step-overhead`)."""
    partition = published.calibrated_partition(case, params)
    partition = attrs.evolve(partition, node=attrs.evolve(partition.node, name=f"{case.group}|{case.chip}"))
    return train_observation(case.run_id, case.run_id, case.job.shape, case.cfg, case.measured, partition, no_span())


def split_of(cases: list, split: int) -> tuple[list, list]:
    """Yours (every YOURS_EVERY-th run from the `split`-th) and the held-back runs."""
    k = split if len(cases) > split else 0   # a system of fewer runs calibrates on its first
    return cases[k::YOURS_EVERY], [c for i, c in enumerate(cases) if i % YOURS_EVERY != k]


def judge_system(cases: list, others: list, params: dict, model_spread: float = 0.0, split: int = 0) -> list[dict]:
    """Calibrate on every YOURS_EVERY-th run from the `split`-th, each model among them with its
    offset (`model_spread` wide: read from the fold's other systems); one row per held-back run,
    before and after (a held-back run of a model yours ran carries its offset)."""
    published.apply_globals(params)
    yours, held = split_of(cases, split)
    result = calibrate_observations([observation(c, params) for c in yours], model_spread=model_spread,
                                    carry_offsets=True, step_overhead=_OVERHEAD)
    covered = result.coverage
    own = Own(result.band.runs, result.band.low, result.band.high, tuple(covered["precisions"]), covered["gpus"],
              covered["moe"], beyond=result.band.beyond) if result.band else None
    yours_obs = [observation(c, params) for c in yours]
    prior = {k: p.prior for k, p in result.params.items()}
    moved = {k: math.log(result.values[k] / prior[k]) for k in result.values
             if abs(math.log(result.values[k] / prior[k])) > 1e-3} if _DETAIL else {}
    rows = []
    for before in crossval.predict_group(held, others, params):
        case = before.case
        obs = observation(case, params)
        after = case.measured * math.exp(residual(obs, result.values))
        bare = case.measured * math.exp(residual(obs, {k: v for k, v in result.values.items() if k[0] != "model"}))
        low, high = ratio_band(tuple(Reason(k, "") for k in before.flags))
        fold_fitted = not {"chip", "precision"} & set(before.flags)   # the fold's fit calibrated this precision
        why = own_reasons(own, case.cfg.precision, case.job.shape.is_moe, case.cfg.gpus, fold_fitted) if own else ()
        seen = any(r.obs.model == obs.model for r in result.rows if r.obs.end_to_end and not r.outlier)
        if own and result.model_spread:
            why += (Reason("model", "its model's offset", fitted=result.model_widening(obs.model)),)
        own_low, own_high = own.ratio_band(why) if own else (low, high)
        rows.append({"run": case.run_id, "group": case.group, "chip": case.chip, "yours": len(yours),
                     "moe": case.job.shape.is_moe, "unseen": list(unseen(case, yours)),
                     "before": before.predicted / case.measured - 1, "after": after / case.measured - 1,
                     "after_without_offset": bare / case.measured - 1, "model_seen": seen,
                     "model_spread": model_spread,
                     "inside_before": low <= case.measured / before.predicted <= high,
                     "inside_after": own_low <= case.measured / after <= own_high,
                     "half_width_after": (own_high - own_low) / 2,
                     # each divided by what its run had that the others had not (as the band reads them)
                     "yours_residuals": [s / result.band.shrink for s in result.band.scaled] if result.band else [],
                     "yours_after": [r.after for r in result.rows if r.obs.end_to_end],
                     "yours_keys": len({k for r in result.rows for k in r.obs.informs if k[0] == "chip"}),
                     "moved": [{"constant": result.params[k].label, "move": m, "share": step_share(obs, prior, k),
                                "yours_shares": [step_share(o, prior, k) for o in yours_obs]} for k, m in moved.items()]})
    return rows


def step_share(obs, values: dict, key, step: float = 0.01) -> float:
    """d log(predicted) / d log(constant `key`) at `values`: the share of the prediction's time
    that scales with the constant."""
    up = {**values, key: values[key] * math.exp(step)}
    return (residual(obs, up) - residual(obs, values)) / step


_CASES: list = []
_OFFSETS = False   # --offsets: each model among the calibrating runs takes its own offset
_OVERHEAD = True   # unless --no-step-overhead: each system's node fits its per-step host time (step_overhead.py)
_DETAIL = False    # --detail: each row also carries the constants its system's fit moved
_SPLITS = (0,)     # --split / --splits all: which of every YOURS_EVERY runs of a system are the operator's


def _fold(group: str) -> dict[int, list[dict]]:
    """Every system of source `group`, from a fit without the group (made once), on each split."""
    others = [c for c in _CASES if c.group != group]
    params = published.fit(others)
    spread = fold_model_spread(others, params) if _OFFSETS else 0.0
    return {split: [row for (g, _), cases in systems(_CASES).items() if g == group
                    for row in judge_system(cases, others, params, spread, split)] for split in _SPLITS}


def fold_model_spread(cases: list, params: dict) -> float:
    """The prior width of a model's offset read from `cases` (a fold's training systems, never
    its held-out group) predicted by the fit `params` made on them (solver/calibrate/model_spread.py)."""
    rows = [(f"{p.case.group}|{p.case.chip}", architecture(p.case.job.shape), -p.residual)
            for p in crossval.predict_group(cases, cases, params)]
    return between_model_spread(rows, NOISE["train"])


def training_rows(workers: int) -> dict[int, list[dict]]:
    """The held-back rows of each split in _SPLITS."""
    global _CASES
    _CASES = published.load(HERE / "runs", HERE / "data" / "public_runs_measured.csv")
    groups = sorted({g for g, _ in systems(_CASES)})
    if workers > 1:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            folds = list(pool.map(_fold, groups))
    else:
        folds = [_fold(g) for g in groups]
    return {split: [row for fold in folds for row in fold[split]] for split in _SPLITS}


def curve_rows() -> list[dict]:
    """Each nccl-tests curve: every other size calibrates the fabric, the others are predicted."""
    rows = []
    for name, design_path in CURVES.items():
        design = check_file(str(design_path)).design
        _, partition, _ = design_partition(design, None)
        found, problems, _ = read_paths([str(NCCL / name)])
        (run,) = found
        obs, _ = collective_observations(run, partition)
        yours, held = obs[::2], obs[1::2]
        result = calibrate_observations(yours)
        prior = {k: p.prior for k, p in result.params.items()}
        # a calibrating size no setting of the fabric's constants explains is flagged, not fitted
        # (solver/calibrate/calibrate.py): where all are, the held-back sizes keep the design's figures
        flagged = sum(r.outlier for r in result.rows)
        for o in held:
            rows.append({"curve": name, "what": o.what, "before": math.exp(residual(o, prior)) - 1,
                         "after": math.exp(residual(o, result.values)) - 1, "yours": len(yours),
                         "yours_outliers": flagged})
    return rows


PRIOR_WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)   # PRIOR_RUNS values tried


def prior_weight_coverage(residual_sets: list[list[float]], prior_runs: float) -> float:
    """How often a calibrating run's held-out residual falls inside the band the other
    calibrating runs of its system give (model/calibration.py own_band with the shipped scale
    weighted as `prior_runs` runs): the calibrating runs alone say how much weight the shipped
    scale needs, without the held-back runs whose coverage is the figure to quote."""
    inside = []
    for residuals in residual_sets:
        for j, r in enumerate(residuals):
            low, high = own_band(residuals[:j] + residuals[j + 1:], prior_runs=prior_runs)
            inside.append(low <= math.exp(r) <= high)
    return share(inside)


def fitted_prior_runs(residual_sets: list[list[float]]) -> float:
    """The PRIOR_WEIGHTS value whose coverage on the calibrating runs is nearest 80 % (the
    fewest prior runs among ties: the operator's runs count most)."""
    return min(PRIOR_WEIGHTS, key=lambda k: abs(prior_weight_coverage(residual_sets, k) - BAND_CONFIDENCE))


def print_detail(rows: list[dict]) -> None:
    """Each held-back run calibration made worse: the constants moved, each one's share of the
    run's step and its shares in the calibrating runs."""
    print("held back and worse after calibration: constant move (its share of this run's step; in your runs)")
    for row in rows:
        if abs(row["after"]) <= abs(row["before"]):
            continue
        print(f"  {row['run']:24} {row['group'][:30] + ', ' + row['chip']:44} {row['before']:+6.1%} -> "
              f"{row['after']:+6.1%}  unlike: {', '.join(row['unseen']) or '-'}")
        for m in row["moved"]:
            yours = ", ".join(f"{s:.2f}" for s in m["yours_shares"])
            print(f"      {m['constant']:36} {math.expm1(m['move']):+6.1%}  ({m['share']:.2f}; {yours})")   # a log ratio


def cpu_seconds() -> float:
    """CPU time of this process and of its finished workers (the folds run in a process pool)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def median_abs(values: list[float]) -> float:
    return statistics.median(abs(v) for v in values) if values else math.nan


def share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


def summary_line(rows: list[dict], curves: list[dict], serving: list[dict], wall: float, cpu: float) -> str:
    """The one-line summary: held-back training runs, nccl-tests curves and serving figures."""
    widths = [r["half_width_after"] for r in rows]
    serve_widths = [r["half_width_after"] for r in serving]
    return (f"own calibration, held-back runs: n={len(rows)} in {len({(r['group'], r['chip']) for r in rows})} systems "
            f"median |err| {median_abs([r['before'] for r in rows]):.1%} uncalibrated -> "
            f"{median_abs([r['after'] for r in rows]):.1%} calibrated, band80 "
            f"{share([r['inside_before'] for r in rows]):.0%} -> {share([r['inside_after'] for r in rows]):.0%} "
            f"(median ±{statistics.median(widths):.1%}) | nccl curves held-back n={len(curves)} "
            f"{median_abs([r['before'] for r in curves]):.1%} -> {median_abs([r['after'] for r in curves]):.1%} "
            f"| serving held-back n={len(serving)} {median_abs([r['before'] for r in serving]):.1%} -> "
            f"{median_abs([r['after'] for r in serving]):.1%}, band80 {share([r['inside_before'] for r in serving]):.0%} -> "
            f"{share([r['inside_after'] for r in serving]):.0%} (median ±{statistics.median(serve_widths):.1%}) "
            f"| wall {time.perf_counter() - wall:.0f} s, CPU {cpu_seconds() - cpu:.0f} s")


def splits_summary(by_split: dict[int, list[dict]]) -> dict:
    """Each split's held-back median |error| (uncalibrated, calibrated), band coverage and the
    median |error| of its dense and MoE runs, and the mean over the splits of each."""
    figures = {split: {"before": median_abs([r["before"] for r in rows]),
                       "after": median_abs([r["after"] for r in rows]),
                       "band": share([r["inside_after"] for r in rows]),
                       "dense": median_abs([r["after"] for r in rows if not r["moe"]]),
                       "moe": median_abs([r["after"] for r in rows if r["moe"]]), "n": len(rows)}
               for split, rows in by_split.items()}
    mean = {k: statistics.mean(f[k] for f in figures.values()) for k in ("before", "after", "band", "dense", "moe")}
    return {"splits": figures, "mean": mean}


def print_splits(by_split: dict[int, list[dict]], curves: list[dict], serving: list[dict], as_json: bool,
                 wall: float, cpu: float) -> None:
    """--splits all: each split's summary line, then the splits' figures and their mean."""
    summary = splits_summary(by_split)
    if as_json:
        print(json.dumps({"training": {str(k): v for k, v in by_split.items()}, "curves": curves,
                          "serving": serving, "summary": summary}, indent=2))
        return
    for split, rows in by_split.items():
        print(f"split {split}: {summary_line(rows, curves, serving, wall, cpu)}")
    figures, mean = summary["splits"], summary["mean"]
    def each(key: str, fmt: str) -> str:
        return ", ".join(format(figures[k][key], fmt) for k in figures) + f" (mean {format(mean[key], fmt)})"
    print(f"splits {', '.join(map(str, figures))}, held-back median |err| uncalibrated {each('before', '.1%')}; "
          f"calibrated {each('after', '.1%')}; band80 {each('band', '.0%')}; dense {each('dense', '.1%')}; "
          f"MoE {each('moe', '.1%')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--offsets", action="store_true",
                        help="give each model among a system's calibrating runs its own offset (gclc calibrate "
                             "--model-offsets), its prior width read from the fold's other systems")
    parser.add_argument("--model-spread", action="store_true",
                        help="print the model offsets' prior width read from every published system (the shipped "
                             "MODEL_SPREAD) and stop")
    parser.add_argument("--no-step-overhead", dest="step_overhead", action="store_false",
                        help="leave each system's fixed per-step time at its design value (0 s) instead of fitting it")
    parser.add_argument("--split", type=int, default=0, choices=range(YOURS_EVERY),
                        help="which of each system's every-third runs are yours (0: the first, 3rd, ...; 1 and 2 "
                             "check a figure on splits it was not read from)")
    parser.add_argument("--splits", choices=("all",),
                        help="all: every split in one run, each split's summary line and their mean")
    parser.add_argument("--rows", type=Path, help="also write every held-back training row (JSON, by split) here")
    parser.add_argument("--detail", action="store_true",
                        help="list each held-back run calibration made worse, with the moved constants' shares")
    args = parser.parse_args(argv)
    global _DETAIL, _OFFSETS, _OVERHEAD, _SPLITS
    _DETAIL, _OFFSETS, _OVERHEAD = args.detail, args.offsets, args.step_overhead
    _SPLITS = tuple(range(YOURS_EVERY)) if args.splits else (args.split,)
    if args.model_spread:
        cases = published.load(HERE / "runs", HERE / "data" / "public_runs_measured.csv")
        print(f"model offsets' prior width from all {len(cases)} published runs: "
              f"{fold_model_spread(cases, published.fit(cases)):.4f}")
        return 0
    wall, cpu = time.perf_counter(), cpu_seconds()
    by_split, curves = training_rows(args.workers), curve_rows()
    serving_design = check_file(str(HERE / "designs" / "serving_models.gcl")).design
    serving = calibrate_serve.serving_rows(serving_design) + calibrate_serve.table_rows(serving_design)
    if args.rows:
        args.rows.write_text(json.dumps({str(k): v for k, v in by_split.items()}, indent=1))
    if args.splits:
        print_splits(by_split, curves, serving, args.json, wall, cpu)
        return 0
    (rows,) = by_split.values()
    if args.json:
        print(json.dumps({"training": rows, "curves": curves, "serving": serving}, indent=2))
    else:
        print(f"{'system (group, chip)':58} {'yours':>5} {'held':>4}  median |err| before -> after   "
              f"band80 before -> after")
        by_system: dict = {}
        for row in rows:
            by_system.setdefault((row["group"], row["chip"]), []).append(row)
        for (group, chip), found in by_system.items():
            print(f"{group[:44] + ', ' + chip:58} {found[0]['yours']:>5} {len(found):>4}  "
                  f"{median_abs([r['before'] for r in found]):>12.1%} -> {median_abs([r['after'] for r in found]):6.1%}   "
                  f"{share([r['inside_before'] for r in found]):>6.0%} -> {share([r['inside_after'] for r in found]):4.0%}")
        for name in CURVES:
            found = [r for r in curves if r["curve"] == name]
            print(f"{'nccl-tests ' + name:58} {found[0]['yours']:>5} {len(found):>4}  "
                  f"{median_abs([r['before'] for r in found]):>12.1%} -> {median_abs([r['after'] for r in found]):6.1%}   "
                  f"({found[0]['yours_outliers']} of your sizes flagged: no fabric setting explains them)")
        for name, kind in (("dense", False), ("MoE", True)):
            found = [r for r in rows if r["moe"] == kind]
            print(f"{name + ' held-back runs':58} {'':>5} {len(found):>4}  "
                  f"{median_abs([r['before'] for r in found]):>12.1%} -> {median_abs([r['after'] for r in found]):6.1%}   "
                  f"{share([r['inside_before'] for r in found]):>6.0%} -> {share([r['inside_after'] for r in found]):4.0%}")
        for term in UNSEEN + ("",):
            found = [r for r in rows if (term in r["unseen"] if term else not r["unseen"])]
            label = f"held back, {term} unlike any of yours" if term else "held back, like yours in all of these"
            print(f"{label:58} {'':>5} {len(found):>4}  "
                  f"{median_abs([r['before'] for r in found]):>12.1%} -> {median_abs([r['after'] for r in found]):6.1%}   "
                  f"{share([r['inside_before'] for r in found]):>6.0%} -> {share([r['inside_after'] for r in found]):4.0%}")
        found = [r for r in rows if r["model_seen"]] if _OFFSETS else []
        if found:
            print(f"{'held back, model among yours, its offset not carried':58} {'':>5} {len(found):>4}  "
                  f"{median_abs([r['before'] for r in found]):>12.1%} -> "
                  f"{median_abs([r['after_without_offset'] for r in found]):6.1%}")
        spreads = sorted({r["model_spread"] for r in rows}) if _OFFSETS else []
        if spreads:
            print(f"{'model offsets prior width (in-fold, by fold)':58} {spreads[0]:.1%} to {spreads[-1]:.1%}")
        for group in dict.fromkeys(r["group"] for r in serving):
            found = [r for r in serving if r["group"] == group]
            print(f"{'serving ' + group:58} {found[0]['yours']:>5} {len(found):>4}  "
                  f"{median_abs([r['before'] for r in found]):>12.1%} -> {median_abs([r['after'] for r in found]):6.1%}   "
                  f"{share([r['inside_before'] for r in found]):>6.0%} -> {share([r['inside_after'] for r in found]):4.0%}")
    if args.detail and not args.json:
        print_detail(rows)
    sets = list({(r["group"], r["chip"]): r["yours_residuals"] for r in rows if len(r["yours_residuals"]) > 1}.values())
    if not args.json:
        print(f"{'prior weight (PRIOR_RUNS) from the calibrating runs alone':58} "
              + ", ".join(f"{k:g}: {prior_weight_coverage(sets, k):.0%}" for k in PRIOR_WEIGHTS)
              + f"  -> {fitted_prior_runs(sets):g} (shipped {PRIOR_RUNS:g})")
    print(summary_line(rows, curves, serving, wall, cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
