"""`calibrate`: a design and the operator's measurements in, the refitted constants, every
measurement's prediction before and after, the outliers and the recomputed band out.

A measurement no physical setting of its constants explains (even alone, with each constant
free within its range) is flagged and left out of the fit. The band comes from the
end-to-end runs (training steps), each predicted by a fit made without it (leave-one-out) and
divided by the widening of what it had that the other runs had not (`unlike_widening`), with the
shipped band counted as PRIOR_RUNS runs (model/calibration.py `own_band`)."""

from __future__ import annotations

import math

import attrs

from ...compiler.design import Design
from ...compiler.ir import Partition
from ...compiler.measure.records import CollectiveRun, KernelRun, ServeRun, TrainRun
from ...model.calibration import (FACTORS, PRIOR_RUNS, SERVE_THROUGHPUT_RATIO, SIGMA_PER_SCALE, QUANTILES, own_band,
                                  own_scale, unlike_widening)
from ...model.job import JobError, job_from_entity, placement, train_job
from .fit import fit, residual, total
from .observe import NOISE, Observation, collective_notes, collective_observations, kernel_observations
from .observe_serve import serve_observations
from .observe_train import run_observation
from . import step_overhead as overhead
from .params import MODEL_SPREAD, Param, chip_param, fabric_params, model_param, serving_prior
from ...dsl.records import frozen

# Models among the training runs before each takes an offset (params.model_param): one model's
# runs alone cannot tell its miss from the cluster's (the split would be the priors' alone), and
# `gclc calibrate` reads the design's one model (each log's shape is checked against it), whose
# plans the written design is for.
MIN_MODELS = 2
OUTLIER = math.log(1.25)     # a residual beyond 25 % after the fit is examined
EXPLAINED = math.log(1.10)   # alone, within 10 %: a physical setting explains it
# Re-anchorings of the serving runs' figures (each: a simulation at the new anchor, and one per
# constant for its slopes), and the halvings of a step whose simulated objective is no lower.
SETTLE_ROUNDS = 8
HALVINGS = 4


@frozen
class Row:
    obs: Observation
    before: float                # log(predicted / measured) with the design's constants
    after: float                 # with the fitted ones
    held_out: float | None       # an end-to-end run predicted by a fit without it
    outlier: bool


@frozen
class Band:
    runs: int
    low: float                   # 80 % bounds on measured / predicted
    high: float
    residuals: tuple[float, ...]   # held-out log(measured / predicted), one per run
    # each held-out residual comes from a fit of one run fewer than the plans' (`held_out_shrink`):
    # the bounds are those of the residuals times this
    shrink: float = 1.0
    # the band's factor beyond the largest run's GPUs (`beyond_factor`); 0: no smaller run to
    # read it from (a plan beyond takes the shipped factor)
    beyond: float = 0.0
    # how much wider than a plan like the runs each held-out residual is expected to be: the
    # widening of what its run had that the other runs did not (`unlike_widening`); the bounds
    # are those of residual x shrink / widening (`scaled`)
    widening: tuple[float, ...] = ()

    @property
    def scaled(self) -> list[float]:
        """The held-out residuals as a plan like the runs would miss: brought to the plans' fit
        (`shrink`) and divided by their run's widening."""
        widening = self.widening or (1.0,) * len(self.residuals)
        return [r * self.shrink / w for r, w in zip(self.residuals, widening)]

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@frozen
class Calibration:
    partition_cluster: str       # the cluster the design's job runs on
    partition: Partition
    params: dict                 # key -> Param (prior and range)
    values: dict                 # key -> fitted value
    rows: tuple[Row, ...]
    band: Band | None
    serve_band: Band | None      # from the serving runs' held-out figures (throughput, TTFT, TPOT)
    skipped: tuple[str, ...]     # measurements read but not used, and why
    notes: tuple[str, ...]       # what was assumed
    # whether a plan of a model the runs ran carries its fitted offset (benchmarks predicting
    # held-back runs: True); `gclc calibrate` writes cluster constants only, so its plans carry
    # none and its band's held-out runs are predicted without theirs
    carry_offsets: bool = False
    # (key, deviation of its log value after the fit) of each node's fitted per-step host time
    # (step_overhead.py: fitted only where the fit is Z deviations from the design's value)
    spreads: tuple = ()
    # why each node with training runs keeps the design's per-step host time (also in `notes`)
    overhead_kept: tuple[str, ...] = ()

    def spread_of(self, key) -> float | None:
        """The deviation of a fitted per-step host time's log value (None: not one)."""
        return dict(self.spreads).get(key)

    def stated_overhead(self, node: str) -> float:
        """The per-step host time node `node` states in the design (0: none)."""
        return next((r.obs.partition.node.step_overhead for r in self.rows
                     if r.obs.partition is not None and r.obs.partition.node.name == node), 0.0)

    @property
    def coverage(self) -> dict:
        """What the end-to-end runs the band comes from covered: precisions, the largest GPU
        count, MoE."""
        runs = [r.obs.covers for r in self.rows if r.obs.covers and r.held_out is not None]
        return {"precisions": sorted({p for p, _, _ in runs}), "gpus": max((g for _, g, _ in runs), default=0),
                "moe": any(m for _, _, m in runs)}

    def moved(self) -> list[tuple[Param, float, tuple[str, ...]]]:
        """(constant, fitted value, the measurements that informed it) for each cluster constant
        fitted (a model's offset is no constant of the cluster's: `offsets`)."""
        return [m for m in self._fitted() if m[0].key[0] != "model"]

    def offsets(self) -> list[tuple[Param, float, tuple[str, ...]]]:
        """(a model's offset, its fitted factor on the step time, the runs it came from)."""
        return [m for m in self._fitted() if m[0].key[0] == "model"]

    def _fitted(self) -> list[tuple[Param, float, tuple[str, ...]]]:
        out = []
        for key, param in self.params.items():
            informed = tuple(dict.fromkeys(r.obs.group for r in self.rows if key in r.obs.informs and not r.outlier))
            if informed:
                out.append((param, self.values[key], informed))
        return out

    @property
    def model_spread(self) -> float:
        """The prior width of a model's offset in this fit (0: none fitted)."""
        return next((p.spread for k, p in self.params.items() if k[0] == "model"), 0.0)

    def model_widening(self, model: str) -> float:
        """How much wider than a plan whose model offset is known the band of a plan of `model` is:
        its offset's posterior variance from the runs of it (the prior's, for a model none ran),
        beside a run's noise (`model_widening`). 1 where no offset is fitted or plans carry none."""
        if not self.carry_offsets:
            return 1.0
        runs = sum(1 for r in self.rows if r.obs.model == model and r.obs.end_to_end and not r.outlier)
        return model_widening(offset_variance(runs, self.model_spread))


def design_partition(design: Design, job: str | None) -> tuple[object | None, Partition, str]:
    """The design's train job (None when it has none, or `job` names a serve job), the partition
    it runs on (else the serve job's, else the first cluster's) and its cluster's name."""
    serving = serve_job(design, job) if job is not None else None
    try:
        if serving is None:
            found = train_job(design, job)
            return found, found.partition, found.graph.name
    except JobError:
        if job is not None:
            raise
    serving = serving or serve_job(design, None)
    if serving is not None:
        graph, partition = placement(serving)
        return None, partition, graph.name
    from ...compiler.lower import lower_cluster

    clusters = design.of_kind("cluster")
    if not clusters:
        raise JobError("the design declares no cluster to calibrate")
    graph = lower_cluster(clusters[0])
    return None, graph.partitions[0], graph.name


def serve_job(design: Design, name: str | None):
    """The design's serve job a serving benchmark ran (`name`, else the root file's first)."""
    serves = [e for e in design.entities if e.kind == "serve" and (name is None or e.name == name)]
    return next((e for e in serves if e.span.path == design.root), serves[0] if serves else None)


def observations(measurements: list, job, partition: Partition, serve=None,
                 others: tuple = ()) -> tuple[list[Observation], list[str], list[str]]:
    """Every observation of `measurements`, what could not be used, and what was assumed
    (`serve`: the design's serve job, for serving benchmarks; a training log runs `job`, else the
    first of `others` whose model it states)."""
    found, skipped, notes = [], [], []
    for m in measurements:
        if isinstance(m, KernelRun):
            obs, why = kernel_observations(m, partition)
        elif isinstance(m, CollectiveRun):
            obs, why = collective_observations(m, partition)
            notes += collective_notes(m, partition) if obs else []
        elif isinstance(m, TrainRun):
            if job is None:
                obs, why = [], [f"{m.span}: the design has no train job to relate this log to"]
            else:
                one, why = run_observation(job, m)
                for other in others if one is None else ():
                    one, said = run_observation(other, m)
                    if one is not None:
                        why = said
                        break
                obs = [one] if one is not None else []
                notes += why if one is not None else []
                why = why if one is None else []
        elif isinstance(m, ServeRun):
            if serve is None:
                obs, why = [], [f"{m.span}: the design has no serve job to replay this serving benchmark on"]
            else:
                obs, why, said = serve_observations(m, serve, placement(serve)[1])
                notes += said
        found += obs
        skipped += why
    return found, skipped, notes


def parameters(found: list[Observation], model_spread: float = 0.0) -> dict:
    """Each informed constant's prior; a chip constant a serving run informs takes the serving
    prior's width (params.serving_prior), whatever else informs it; a model's offset is
    `model_spread` wide (0: no offsets fitted)."""
    params: dict = {}
    for obs in found:
        params.update({p.key: p for p in obs.priors if p.key not in params})
        for key in obs.informs:
            if key in params:
                continue
            if key[0] == "model":
                if model_spread > 0:
                    params[key] = model_param(key[1], model_spread)
            elif key[0] == "chip":
                params[key] = chip_param(obs.partition.node.accelerator, key[2])
            else:
                for p in fabric_params(obs.partition, key[1]):
                    params[p.key] = p
    served = {k for o in found if o.kind == "serve" for k in o.informs}
    return {k: serving_prior(p) if k in served else p for k, p in params.items()}


def calibrate(design: Design, measurements: list, job: str | None = None,
              model_offsets: bool = False) -> Calibration:
    """The calibration of the design's constants on `measurements`; `model_offsets`: the runs of
    each model (two or more models) take their own offset, MODEL_SPREAD wide (not the default:
    benchmarks/calibrate_own.py measured it worse on the published runs, docs/calibration.md)."""
    found_job, partition, cluster = design_partition(design, job)
    others = other_train_jobs(design, found_job, cluster) if job is None else ()
    found, skipped, notes = observations(measurements, found_job, partition, serve_job(design, job), others)
    return calibrate_observations(found, cluster, partition, tuple(skipped), tuple(notes),
                                  MODEL_SPREAD if model_offsets else 0.0)


def other_train_jobs(design: Design, first, cluster: str) -> tuple:
    """The design's train jobs on the calibrated cluster besides `first`: a training log whose
    stated model is not `first`'s is related to the first of these whose model it is (each model's
    runs then take their own offset: params.model_param)."""
    if first is None:
        return ()
    out = []
    for entity in design.entities:
        if entity.kind != "train" or entity is first.entity:
            continue
        try:
            found = job_from_entity(entity)
        except JobError:
            continue   # a job the model cannot evaluate relates no log
        if found.graph.name == cluster:
            out.append(found)
    return tuple(out)


def calibrate_observations(found: list[Observation], cluster: str = "", partition: Partition | None = None,
                           skipped: tuple[str, ...] = (), notes: tuple[str, ...] = (),
                           model_spread: float = 0.0, carry_offsets: bool = False,
                           step_overhead: bool = True) -> Calibration:
    """The fit, outliers and band of observations made already (benchmarks build them from
    published runs, with the prior width of a model's offset read from their own fold, and
    predict held-back runs of a model the runs ran with its offset: `carry_offsets`); each
    node's per-step host time is fitted where its runs can separate it (`step_overhead`,
    solver/calibrate/step_overhead.py), else it keeps the design's value."""
    spread = model_spread if len({o.model for o in found if o.kind == "train" and o.model}) >= MIN_MODELS else 0.0
    state, why, spreads = None, [], {}
    # before: the design as written, read before any fit anchors a serving replay elsewhere (a
    # replay is exact only at its anchor: read after the fit, it is a linear estimate from there)
    written = as_written(parameters(found, spread))
    _anchor(found, written)
    before = [residual(o, written) for o in found]   # by position: informed() evolves a run into a new one
    if step_overhead:
        found, why, state, spreads = _step_overhead(found, spread)
        notes = tuple(notes) + tuple(why)
    params, outliers, kept, values = state or _fit_found(found, spread)
    held = _held_out(params, kept, values, carry_offsets)
    # after: as the calibrated design predicts it (with no offset where its plans carry none)
    planned = values if carry_offsets else _bare(values)
    rows = tuple(Row(o, b, residual(o, planned), held.get(id(o)), id(o) in outliers) for o, b in zip(found, before))
    partition = partition if partition is not None else (found[0].partition if found else None)
    band = _band(rows, "train", params, carry_offsets)
    if band is not None:
        band = attrs.evolve(band, beyond=beyond_factor(params, kept, values, rows, band.shrink, band.widening,
                                                       carry_offsets))
    return Calibration(cluster, partition, params, values, rows, band, _band(rows, "serve", params), skipped, notes,
                       carry_offsets, tuple((overhead.key(n), w) for n, w in spreads.items()), tuple(why))


def as_written(params: dict) -> dict:
    """The design's constants as it states them: each prior, but a node's per-step host time left
    to the node (its `step_overhead`, 0 s where it states none; the fit's prior is 20 ms there)."""
    return {k: p.prior for k, p in params.items() if k[0] != "node"}


def _fit_found(found: list[Observation], model_spread: float) -> tuple[dict, set, list[Observation], dict]:
    """The constants `found` inform, the outliers, the observations kept and the fit of them."""
    params = parameters(found, model_spread)
    prior = {k: p.prior for k, p in params.items()}
    outliers = {id(o) for o in found if _unexplained(o, params, prior)}
    kept = [o for o in found if id(o) not in outliers]
    values = anchored_fit(params, kept, prior) if any(o.settle for o in kept) else fit(params, kept)
    return params, outliers, kept, values


def _step_overhead(found: list[Observation], model_spread: float) -> tuple[list[Observation], list[str], tuple | None,
                                                                          dict[str, float]]:
    """`found` with each node's training runs informing its per-step host time where they
    identify it (step_overhead.judge: runs of different work per GPU, and a fit at least Z posterior
    deviations from the design's value), why each other node keeps the design's value, the fit
    (`_fit_found`; None: to be made without any term) and each fitted node's log-width."""
    made: dict = {}

    def fit_nodes(nodes: set[str]) -> tuple:
        trial = overhead.informed(found, nodes)
        made["found"], made["state"] = trial, _fit_found(trial, model_spread)
        params, outliers, kept, values = made["state"]
        return params, kept, values

    nodes, state, seen = overhead.judge(overhead.candidates(found), fit_nodes)
    why = overhead.kept(found, seen)
    if state is None:
        return found, why, None, {}
    return made["found"], why, made["state"], {n: seen[n].width for n in sorted(nodes)}


def offset_variance(runs: int, spread: float, noise: float = NOISE["train"]) -> float:
    """The variance of a model's log offset after `runs` runs of it, each of deviation `noise`,
    against its prior of deviation `spread`: the normal posterior's (the prior's with none)."""
    return 1 / (runs / noise ** 2 + 1 / spread ** 2) if spread > 0 else 0.0


def model_widening(variance: float, noise: float = NOISE["train"]) -> float:
    """How much wider a prediction whose model offset is known to `variance` is than one whose
    offset is exact: a run's deviation given its constants and offset is `noise` (observe.NOISE,
    what the fit reads it as), so sqrt(noise^2 + variance) / noise. A held-out run's residual is
    divided by its own (its model's offset as the other runs knew it), a plan's band multiplied by
    its own, as `unlike_widening`'s factors are."""
    return math.sqrt(1 + variance / noise ** 2)


def _offset_widening(row: Row, others: list[Row], params: dict) -> float:
    """A held-out run's model widening: its offset as the other runs' fit knew it."""
    spread = params[("model", row.obs.model, "offset")].spread if ("model", row.obs.model, "offset") in params else 0.0
    return model_widening(offset_variance(sum(o.obs.model == row.obs.model for o in others), spread))


def anchored_fit(params: dict, kept: list[Observation], prior: dict) -> dict:
    """The fit of observations some of which (serving runs) are exact only at an anchor and
    linear in each constant's time term around it (observe_serve.Replay). Each round fits the
    linear figures, then simulates at the fit: the step is taken where the simulated objective
    is lower than at the anchor, else halved (in log) up to HALVINGS times, else the anchor is
    the fit. Why: an undamped re-anchoring oscillated (the median TTFT is jagged in the
    constants and the engine's host time is loosely held), so the fit was wherever the rounds
    stopped: a 0.3 % move of one prediction (the in-training attention share) moved the host
    time 2.7x. Each accepted step lowers the exact objective, so the fit is the best simulated
    point found, and the runs' rows are read at it exactly."""
    current = dict(prior)
    _anchor(kept, current)
    cost = total(params, kept, current)
    for _ in range(SETTLE_ROUNDS):
        step = fit(params, kept, start=current)
        for _ in range(HALVINGS + 1):
            _anchor(kept, step)
            tried = total(params, kept, step)
            if tried < cost:
                break
            step = {k: math.sqrt(current[k] * step[k]) for k in current}
        else:
            _anchor(kept, current)
            break
        moved = max(abs(math.log(step[k] / current[k])) for k in current)
        current, cost = step, tried
        if moved < 0.01:
            break
    return current


def _anchor(kept: list[Observation], values: dict) -> None:
    for o in kept:
        if o.settle:
            o.settle(values)


# The shipped serving band's scale (model/calibration.py SERVE_THROUGHPUT_RATIO, its 80 % bounds
# read as the shipped quantiles): the prior a serving band is pulled to with few runs.
SERVE_SCALE = math.log(SERVE_THROUGHPUT_RATIO[1] / SERVE_THROUGHPUT_RATIO[0]) / (QUANTILES[1] - QUANTILES[0])


def _held(rows: tuple[Row, ...], kind: str) -> list[Row]:
    """The held-out rows of `kind`, in order: the band's runs, and the rows `beyond_factor` pairs
    with the band's widening by position (so both must read them from here)."""
    return [r for r in rows if r.held_out is not None and r.obs.kind == kind]


def _band(rows: tuple[Row, ...], kind: str, params: dict, carry_offsets: bool = False) -> Band | None:
    """The 80 % band of the held-out end-to-end figures of `kind` (train or serve); with
    `carry_offsets`, each training run's residual also divided by its model offset's widening."""
    held = _held(rows, kind)
    if not held:
        return None
    runs = [-r.held_out for r in held]
    groups = len({r.obs.group for r in held})
    shrink, widening = 1.0, (1.0,) * len(held)
    if kind == "train":
        spreads = [params[k].spread for r in held for k in r.obs.informs if k[0] == "chip" and k in params]
        shrink = held_out_shrink(groups, NOISE["train"], max(spreads, default=0.0))
        widening = tuple(unlike_widening(r.obs.covers, [o.obs.covers for o in held if o.obs.group != r.obs.group])
                         * (_offset_widening(r, [o for o in held if o.obs.group != r.obs.group], params)
                            if carry_offsets else 1.0)
                         for r in held)
    band = Band(groups, 1.0, 1.0, tuple(runs), shrink, widening=widening)
    return attrs.evolve(band, **dict(zip(("low", "high"), own_band(band.scaled, SERVE_SCALE if kind == "serve" else None))))


def held_out_shrink(runs: int, noise: float, spread: float) -> float:
    """A plan is predicted by the fit of all `runs`; each held-out residual, by a fit of one
    fewer. For one constant of prior deviation `spread` fitted to runs of deviation `noise`,
    a prediction from m runs misses by sqrt(noise^2 + 1 / (m / noise^2 + 1 / spread^2)): the
    ratio of that at m = runs to m = runs - 1 brings the held-out residuals to the plans' fit
    (two runs: 0.90 at a training run's 5 % and a stated efficiency's 8.5 %; many: 1)."""
    if runs < 1 or spread <= 0:
        return 1.0
    def missed(m: int) -> float:
        return noise ** 2 + 1 / (m / noise ** 2 + 1 / spread ** 2)
    return math.sqrt(missed(runs) / missed(runs - 1))


def beyond_factor(params: dict, kept: list[Observation], values: dict, rows: tuple[Row, ...],
                  shrink: float = 1.0, widening: tuple[float, ...] = (), carry_offsets: bool = False) -> float:
    """How much wider the band is for a plan on more GPUs than the largest training run, read
    from the training runs alone: the runs at the largest GPU count are predicted by a fit
    without them (every smaller run and every kernel and collective kept), and the scale of
    those residuals (r / SIGMA_PER_SCALE, no prior) over the band's scale of the smaller runs'
    held-out residuals (`own_scale`, the shipped scale counted as PRIOR_RUNS runs; the largest
    runs' scale likewise counts the shipped `scale` factor as PRIOR_RUNS runs; both brought
    to the plans' fit by `shrink`, as the band's) is the factor, at least 1: the shipped band's
    way of fitting a reason's factor (benchmarks/bands.py: the scale of the residuals carrying
    it over the rest's), the step up to the largest run standing for the step beyond it.
    0 where no run is smaller than the largest (a plan beyond takes the shipped factor)."""
    runs = [o for o in kept if o.end_to_end and o.kind == "train" and o.covers]
    largest = max((o.covers[1] for o in runs), default=0)
    groups = {o.group for o in runs if o.covers[1] == largest}
    ids = {id(o) for o in runs}
    # the band's rows in its order (`_band`), each divided by its widening as the band's are
    held = _held(rows, "train")
    scale = dict(zip((id(r.obs) for r in held), widening or (1.0,) * len(held)))
    smaller = [r.held_out * shrink / scale[id(r.obs)] for r in held if id(r.obs) in ids and r.obs.group not in groups]
    if not smaller:
        return 0.0
    refit = _fold_fit(params, [o for o in kept if o.group not in groups], values)
    refit = refit if carry_offsets else _bare(refit)
    missed = [residual(o, refit) * shrink / SIGMA_PER_SCALE for o in runs if o.group in groups]
    # the shipped factor, on the operator's scale, counted as PRIOR_RUNS runs (as own_scale counts
    # the shipped scale): one largest run that happens to agree does not claim no doubt beyond it
    small = own_scale(smaller)
    prior = FACTORS["scale"] * small
    spread = math.sqrt((PRIOR_RUNS * prior ** 2 + sum(r * r for r in missed)) / (PRIOR_RUNS + len(missed)))
    return max(1.0, spread / small)


def _unexplained(obs: Observation, params: dict, prior: dict) -> bool:
    """Whether no setting of the observation's own constants within their ranges brings it
    within EXPLAINED, even fitted alone (no prior): an outlier, left out of the fit."""
    if abs(residual(obs, prior)) <= OUTLIER:
        return False
    # a model's offset is no physical setting: it stays at none here
    free = {k: attrs.evolve(params[k], spread=1e6) for k in obs.informs if k[0] != "model"}
    alone = fit(free, [obs], start=prior)
    return abs(residual(obs, alone)) > EXPLAINED


def _held_out(params: dict, kept: list[Observation], values: dict, carry_offsets: bool = False) -> dict[int, float]:
    """Each end-to-end observation's residual under a fit made without its run: with its model's
    offset as the other runs fitted it where plans carry offsets, else (plans of the written
    design) with none."""
    out = {}
    for group in dict.fromkeys(o.group for o in kept if o.end_to_end):
        others = [o for o in kept if o.group != group]
        refit = _fold_fit(params, others, values)
        for o in kept:
            if o.group == group and o.end_to_end:
                out[id(o)] = residual(o, refit if carry_offsets else _bare(refit))
    return out


def _fold_fit(params: dict, others: list[Observation], values: dict) -> dict:
    """The fit of a fold's runs, each node's per-step time judged as the whole fit judges it
    (step_overhead.judge, on the fold's runs: the shipped fit's outliers are already out of them),
    so a held-out residual measures the procedure shipped, not one that fits a term from a single
    run or one the shipped rule would keep."""
    terms = {k for k in params if k[0] == "node"}

    def fitted_with(nodes: set[str]) -> tuple[dict, dict]:
        """`params` and `values` without the terms of nodes not in `nodes` (left at the design's value)."""
        dropped = {k for k in terms if k[1] not in nodes}
        return ({k: p for k, p in params.items() if k not in dropped},
                {k: v for k, v in values.items() if k not in dropped})

    def fit_nodes(nodes: set[str]) -> tuple:
        chosen, start = fitted_with(nodes)
        return chosen, others, fit(chosen, others, start=start)

    candidates = {k[1] for k in terms if overhead.separable(overhead.runs_of(others, k[1]))}
    _, state, _ = overhead.judge(candidates, fit_nodes)
    if state is not None:
        return state[2]
    chosen, start = fitted_with(set())
    return fit(chosen, others, start=start)


def _bare(values: dict) -> dict:
    """`values` without any model's offset: a plan of the written design's."""
    return {k: v for k, v in values.items() if k[0] != "model"}
