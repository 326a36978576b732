"""Leave-one-group-out cross-validation of the calibrated model, and what makes each
prediction uncertain.

For each source group of runs (the `group` column: a paper, a framework release, a
vendor table) the physics is refitted (calibrate.fit) on all other groups and the
held-out group is predicted with that fit: the errors are those of a design nobody has
measured, from a source the model has not seen. Each prediction carries the flags that
make it uncertain relative to the runs it was fitted on (model/calibration.py's reasons).
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import multiprocessing
from dataclasses import dataclass

import calibrate
from calibrate import Case

from gclc.compiler.formats import family
from gclc.model.calibration import power_capped, reasons


@dataclass(frozen=True)
class Prediction:
    case: Case
    predicted: float             # tokens/s per accelerator
    flags: tuple[str, ...]       # model/calibration.py reason keys
    fitted: tuple = ()           # the fold's fit, sorted ((chip, key), value) pairs ("" chip: global)

    @property
    def error(self) -> float:
        """Signed error, predicted / measured - 1."""
        return self.predicted / self.case.measured - 1

    @property
    def residual(self) -> float:
        """log(measured / predicted): the quantity the bands bound."""
        return math.log(self.case.measured / self.predicted)


def flags(case: Case, fitted_on: list[Case], params: dict) -> tuple[str, ...]:
    """Why a prediction of `case` from a fit on `fitted_on` (giving `params`) is uncertain:
    model/calibration.py's reasons, against the fold's tables instead of the shipped ones."""
    calibrated, largest = calibrate.tables(fitted_on, params)
    why = reasons(case.chip, case.cfg.precision, case.job.shape.is_moe, case.cfg.cp, case.cfg.gpus,
                  case.job.entity.get("software") is not None, calibrated, largest, stack=case.cfg.stack,
                  stack_runs=stack_runs(fitted_on), power_capped=power_capped(case.job.partition.node.accelerator))
    return tuple(r.key for r in why)


def stack_runs(cases) -> dict[str, int]:
    """model/calibration.py's STACK_RUNS for a fit on `cases`: runs per software stack."""
    return dict(sorted(collections.Counter(c.cfg.stack for c in cases).items()))


def predict_group(held_out: list[Case], fitted_on: list[Case], params: dict) -> list[Prediction]:
    calibrate.apply_globals(params)
    return [Prediction(c, calibrate.predict(c, params), flags(c, fitted_on, params)) for c in held_out]


def leave_one_group_out(cases: list[Case], rounds: int = 3, workers: int = 1) -> list[Prediction]:
    """Predictions of every case from a fit, from the same starting point, on the other
    groups' cases only: nothing of the held-out group reaches its predictions. Folds run
    in `workers` forked processes (each sets the model's globals for its own fit)."""
    global _CASES, _ROUNDS
    _CASES, _ROUNDS = cases, rounds
    names = groups(cases)
    if workers > 1 and len(names) > 1:
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            folds = list(pool.map(_fold, names))
    else:
        folds = [_fold(g) for g in names]
    by_id = {c.run_id: c for c in cases}
    return [Prediction(by_id[run_id], predicted, fl, fitted) for rows, fitted in folds for run_id, predicted, fl in rows]


_CASES: list[Case] = []
_ROUNDS = 3


def _fold(group: str) -> tuple[list[tuple[str, float, tuple[str, ...]]], tuple]:
    """The held-out group's (run, prediction, flags) rows and the fit they came from."""
    train = [c for c in _CASES if c.group != group]
    params = calibrate.fit(train, rounds=_ROUNDS)
    held_out = predict_group([c for c in _CASES if c.group == group], train, params)
    return [(p.case.run_id, p.predicted, p.flags) for p in held_out], tuple(sorted(params.items()))


def refits(predictions: list[Prediction]) -> list[str]:
    """One line per held-out group: the global constants its fold refitted and those of the
    group's chips, so a group that moves without a change to its own physics shows which
    constant the other groups pulled (shipped values: calibrate.py's report)."""
    out = ["Refitted constants per held-out group (global; the group's chips):"]
    for group, preds in split(predictions, lambda p: (p.case.group,)).items():
        chips = sorted({p.case.chip for p in preds})
        fitted = dict(preds[0].fitted)
        shown = [f"{key} {value:g}" for (chip, key), value in fitted.items() if not chip]
        shown += [f"{chip} {key} {value:g}" for (chip, key), value in fitted.items() if chip in chips]
        out.append(f"  {group[:36]:36} " + ", ".join(shown))
    return out


def in_sample(cases: list[Case], params: dict) -> list[Prediction]:
    return predict_group(cases, cases, params)


def groups(cases: list[Case]) -> list[str]:
    return list(dict.fromkeys(c.group for c in cases))


# ---------------------------------------------------------------- reports


def conditions(case: Case) -> tuple[str, ...]:
    """The conditions the accuracy tables split on."""
    cfg = case.cfg   # precision by family: a per-tensor `fp8_e4m3` run is an fp8 run
    return ("MoE" if case.job.shape.is_moe else "dense", f"precision {family(cfg.precision)}", f"chip {case.chip}",
            "CP > 1" if cfg.cp > 1 else "CP = 1", "PP > 1" if cfg.pp > 1 else "PP = 1",
            "FSDP (ZeRO-3)" if cfg.zero >= 3 else "no FSDP")


def stats(errors: list[float]) -> dict:
    """|error| median, p90, max, within 10 % / 25 %, and the mean signed error."""
    absolute = sorted(abs(e) for e in errors)
    if not absolute:
        return {"n": 0}
    return {"n": len(absolute), "median": percentile(absolute, 0.5), "p90": percentile(absolute, 0.9),
            "max": absolute[-1], "within_10pct": sum(e <= 0.10 for e in absolute),
            "within_25pct": sum(e <= 0.25 for e in absolute), "bias": sum(errors) / len(errors)}


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method)."""
    s = sorted(values)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def split(predictions: list[Prediction], key) -> dict[str, list[Prediction]]:
    out: dict[str, list[Prediction]] = {}
    for p in predictions:
        for k in key(p):
            out.setdefault(k, []).append(p)
    return out


def table(title: str, rows: dict[str, list[Prediction]], in_sample: dict[str, float],
          covered: dict[str, bool]) -> list[str]:
    """One line per row: cross-validated figures, band coverage, the in-sample median."""
    out = [title, f"  {'':36} {'n':>4} {'median':>7} {'p90':>7} {'max':>7} {'<10%':>5} {'<25%':>5} {'bias':>7}"
                  f" {'band80':>7} | {'in-sample median':>16}"]
    for name, preds in rows.items():
        s = stats([p.error for p in preds])
        inside = [covered[p.case.run_id] for p in preds]
        ins = stats([in_sample[p.case.run_id] for p in preds if p.case.run_id in in_sample])
        out.append(f"  {name[:36]:36} {s['n']:>4} {s['median']:>7.1%} {s['p90']:>7.1%} {s['max']:>7.1%} "
                   f"{s['within_10pct']:>5} {s['within_25pct']:>5} {s['bias']:>+7.1%} "
                   f"{sum(inside) / len(inside):>7.0%} | {ins.get('median', math.nan):>16.1%}")
    return out
