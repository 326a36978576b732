"""What to measure next to narrow the band most: one more end-to-end run (the band's scale
shrinks with each), and the constants the design's job is most sensitive to that nothing
measured yet, each with the measurement that pins it."""

from __future__ import annotations

import math


from ...dsl.numbers import percent
from ...model.calibration import BAND_SCALE, QUANTILES, own_scale
from ...model.train.step import estimate
from .calibrate import Calibration
from .params import applied, chip_param, fabric_params, gemm_key
from ...dsl.records import frozen

STEP = 1.10   # a constant moved by 10 % to read the job's sensitivity to it


@frozen
class Advice:
    what: str          # the measurement to make
    why: str           # what it would pin, and how much it matters
    effect: float      # the throughput change a one-spread error of the constant makes (share)


def half_width_of(scale: float) -> float:
    return (math.exp(QUANTILES[1] * scale) - math.exp(QUANTILES[0] * scale)) / 2


def advice(calibration: Calibration, job, cfg) -> tuple[Advice, ...]:
    """Measurements that would narrow the band, most useful first. `job` and `cfg`: the
    design's train job and the configuration to read sensitivities at (None: no job)."""
    out = [_more_runs(calibration)]
    if job is not None and cfg is not None:
        out += sorted(_unmeasured(calibration, job, cfg), key=lambda a: -a.effect)[:3]
    return tuple(a for a in out if a is not None)


def _more_runs(calibration: Calibration) -> Advice:
    band = calibration.band
    if band is None and calibration.serve_band is not None:
        serve = calibration.serve_band
        return Advice("another serving benchmark of the job at another request rate or concurrency",
                      f"the serving band (±{percent(serve.half_width)}) comes from {serve.runs} run"
                      f"{'s' if serve.runs != 1 else ''}; each one more pins the engine's host time and the "
                      "chip's decode and prefill rates apart", 0.0)
    if band is None:
        now = half_width_of(BAND_SCALE)
        return Advice("a few training steps of the job (a Megatron-LM, torchtitan or NeMo log)",
                      f"the band comes from end-to-end runs only; without one it stays the shipped ±{percent(now)}", now)
    residuals = band.scaled
    mean_square = sum(r * r for r in residuals) / len(residuals)
    now = half_width_of(own_scale(residuals))
    then = half_width_of(own_scale(residuals + [math.sqrt(mean_square)]))
    what = "one more training run like yours (another layout or GPU count of the job)"
    if then < now:
        return Advice(what, f"the band would go from ±{percent(now)} to about ±{percent(then)}", now - then)
    # the runs' held-out errors are wider than the shipped band: more runs settle how wide, not narrower
    return Advice(what, f"your runs' held-out errors are wider than the shipped band (±{percent(half_width_of(BAND_SCALE))}); "
                        f"more runs would settle the band near ±{percent(then)}; first see why the model misses them", 0.0)


def _unmeasured(calibration: Calibration, job, cfg) -> list[Advice]:
    """The job's constants no measurement informed, by how much a one-spread error of each
    moves its predicted throughput."""
    partition = calibration.partition
    chip = partition.node.accelerator
    informed = {param.key for param, _, _ in calibration.moved()}
    candidates = [chip_param(chip, gemm_key(cfg.precision)), chip_param(chip, "attention"), chip_param(chip, "hbm")]
    for fabric in dict.fromkeys(t.fabric for t in partition.tiers):
        candidates += list(fabric_params(partition, fabric))
    base = estimate(job.shape, cfg, applied(partition, calibration.values)).tokens_per_s
    out = []
    for param in candidates:
        if param.key in informed:
            continue
        moved = param.clamp(calibration.values.get(param.key, param.prior) * STEP)
        trial = estimate(job.shape, cfg, applied(partition, {**calibration.values, param.key: moved})).tokens_per_s
        if moved == calibration.values.get(param.key, param.prior) or trial == base:
            continue
        sensitivity = math.log(trial / base) / math.log(STEP)
        effect = abs(sensitivity) * param.spread
        if effect >= 0.005:
            out.append(Advice(_measurement(param.key, cfg.precision), f"{param.label} is not measured; "
                              f"an error of its prior's spread moves the job's throughput by {percent(effect)}", effect))
    return out


def _measurement(key: tuple[str, str, str], precision: str) -> str:
    kind, name, what = key
    if kind == "fabric":
        return (f"nccl-tests (all_reduce_perf, all_gather_perf) over the hosts `{name}` joins, 8 B to 8 GiB"
                if what == "latency" else f"nccl-tests all_reduce_perf over the hosts `{name}` joins, 256 MiB to 8 GiB")
    if what == "attention":
        return "`gclc probe` attention rows, or training runs at two sequence lengths"
    if what == "hbm":
        return "`gclc probe` HBM copy rows"
    return f"`gclc probe` GEMM rows in {precision}"


def calibrate_design(design, measurements: list, job: str | None = None, model_offsets: bool = False):
    """(the calibration of `design` on `measurements`, what to measure next): what
    `gclc calibrate` prints (`model_offsets`: each model's runs take their own offset)."""
    from ...model.job import pinned_config
    from .calibrate import calibrate, design_partition

    calibration = calibrate(design, measurements, job, model_offsets)
    found, _, _ = design_partition(design, job)
    return calibration, advice(calibration, found, pinned_config(found) if found is not None else None)
